"""The RepackRun status shape (API-3): the one place a plan and a run's steps become status.

The planner returns a plan; this module turns it into status: the finished DryRun evaluation
(`plan_status`), what an Execute persists before its first eviction (`plan_record`,
`initial_relocations`) and the status an Execute moves through (`mark_pending`, `mark_started`,
`mark_finished`). Conditions go through `run.set_condition`, so every reason is checked
(`check_reason`), and the phase is always `derive_phase` of them. Each `mark_*` edits the status
dict it is given (a read-modify-write step) and leaves every other field as it is.
"""
from __future__ import annotations

from typing import Optional

from .run import (COND_COMPLETE, COND_FAILED, COND_PROGRESSING, EVICTION_PENDING, PHASE_SUCCEEDED,
                  PLACEMENT_WAITING_FOR_REPLACEMENT, Eviction, Placement, Reason, Relocation, check_reason,
                  derive_phase, set_condition)


def plan_record(plan) -> dict:
    """status.plan of a planner.Plan: summary, moves by PodGroup, freed nodes."""
    record = {"summary": plan.summary()}
    moves = plan.moves_by_group()
    if moves:
        record["moves"] = moves
    if plan.freed_nodes:
        record["freedNodes"] = list(plan.freed_nodes)
    return record


def plan_status(plan, now: Optional[str] = None) -> dict:
    """The RepackRun status of a finished DryRun evaluation of `plan` (phase Succeeded)."""
    cond = {"type": COND_COMPLETE, "status": "True", "reason": check_reason(plan.outcome), "message": plan.message}
    if now:
        cond["lastTransitionTime"] = now
    st = {"phase": PHASE_SUCCEEDED, "conditions": [cond], "message": plan.message, "plan": plan_record(plan)}
    if now:
        st["startTime"] = now
        st["completionTime"] = now
    return st


def initial_relocations(plan) -> list:
    """One record per planned pod move, in eviction order (PodGroup by PodGroup), as status dicts."""
    groups: dict = {}
    for m in plan.moves:
        groups.setdefault((m.pod.namespace, m.pod.group_name), []).append(m)
    return [Relocation(namespace=ns, victim_pod_name=m.pod.name, pod_group_name=group, victim_pod_uid=m.pod.uid,
                       planned_node_name=m.to_node, eviction=Eviction(EVICTION_PENDING),
                       placement=Placement(PLACEMENT_WAITING_FOR_REPLACEMENT)).to_dict()
            for (ns, group), moves in groups.items() for m in moves]


def set_progressing(status: dict, cstatus: str, reason: str, message: str, now: str) -> None:
    """The Progressing condition (every status write of an Execute sets it)."""
    set_condition(status, COND_PROGRESSING, cstatus, reason, message, now)


def mark_pending(status: dict, reason: str, message: str, now: str) -> None:
    """An Execute waiting (for the execute Lease): Progressing False with why."""
    set_progressing(status, "False", reason, message, now)
    status["phase"] = derive_phase(status)
    status["message"] = message


def mark_started(status: dict, plan, now: str, deadline: str, left_out: str = "") -> None:
    """Persist the live plan and, when it recommends moves, every relocation record and the
    execution deadline (EXEC-3: before the first eviction); a plan that recommends nothing ends
    the run Complete with the plan's outcome. `left_out` is one line the run's message adds."""
    also = f"; {left_out}" if left_out else ""
    status["plan"] = plan_record(plan)
    status.setdefault("startTime", now)
    if plan.outcome != Reason.RECOMMENDED:
        msg = f"live re-plan: {plan.message}{also}; nothing was evicted"
        set_condition(status, COND_COMPLETE, "True", plan.outcome, msg, now)
        set_progressing(status, "False", plan.outcome, "nothing to execute", now)
        status["message"] = msg
        status["completionTime"] = now
    else:
        status["relocations"] = initial_relocations(plan)
        status["executionDeadline"] = deadline
        msg = (f"executing: {len(status['relocations'])} eviction(s) over "
               f"{len(plan.moves_by_group())} PodGroup(s) to free {', '.join(plan.freed_nodes)}{also}")
        set_progressing(status, "True", Reason.EXECUTING, msg, now)
        status["message"] = msg
    status["phase"] = derive_phase(status)


def mark_finished(status: dict, phase: str, reason: str, message: str, result: Optional[dict], now: str) -> None:
    """End an Execute: Complete (phase Succeeded) or Failed with `reason`, Progressing False, the
    result when there is one, and the completion time (kept if already set)."""
    done = COND_COMPLETE if phase == PHASE_SUCCEEDED else COND_FAILED
    set_condition(status, done, "True", reason, message, now)
    set_progressing(status, "False", reason, message, now)
    if result is not None:
        status["result"] = result
    status["phase"] = derive_phase(status)
    status["message"] = message
    status.setdefault("completionTime", now)
