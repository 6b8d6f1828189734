"""The RepackRun status shape (API-3): the one place a plan and a run's steps become status.

The planner returns a plan; this module turns it into status: the finished DryRun evaluation
(`plan_status`), what an Execute persists before its first eviction (`plan_record`,
`initial_relocations`) and the status an Execute moves through (`mark_pending`, `mark_started`,
`mark_finished`, `restore_finished`, `restore_evictions`) and what a run's creator may read of a plan (`scoped_plan`). Conditions go through `run.set_condition`, so every reason is checked
(`check_reason`), and the phase is always `derive_phase` of them. Each `mark_*` edits the status
dict it is given (a read-modify-write step) and leaves every other field as it is.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Collection, Optional

from .control import RUN_STATE_ANNOTATION, RunState
from .run import (COND_COMPLETE, COND_FAILED, COND_PROGRESSING, EVICTION_PENDING, PHASE_SUCCEEDED,
                  PLACEMENT_WAITING_FOR_REPLACEMENT, Eviction, Placement, Reason, Relocation, check_reason,
                  as_map, derive_phase, set_condition)


def plan_record(plan) -> dict:
    """status.plan of a planner.Plan: summary, moves by PodGroup, freed nodes."""
    record = {"summary": plan.summary()}
    moves = plan.moves_by_group()
    if moves:
        record["moves"] = moves
    if plan.freed_nodes:
        record["freedNodes"] = list(plan.freed_nodes)
    return record


def plan_status(plan, now: Optional[str] = None, left_out: str = "") -> dict:
    """The RepackRun status of a finished DryRun evaluation of `plan` (phase Succeeded); `left_out`
    is one line the message adds (what the plan was not allowed to move)."""
    message = f"{plan.message}; {left_out}" if left_out else plan.message
    cond = {"type": COND_COMPLETE, "status": "True", "reason": check_reason(plan.outcome), "message": message}
    if now:
        cond["lastTransitionTime"] = now
    st = {"phase": PHASE_SUCCEEDED, "conditions": [cond], "message": message, "plan": plan_record(plan)}
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


def restore_evictions(status: dict, phases) -> list:
    """Put back each record's eviction phase the run-state mark vouches for (`phases`, in record
    order; '' leaves a record as it is) where the status says another. Returns the indices put back."""
    records = status.get("relocations")
    restored = []
    for i, (record, phase) in enumerate(zip(records if isinstance(records, list) else (), phases)):
        if phase and isinstance(record, dict) and as_map(record.get("eviction")).get("phase") != phase:
            record["eviction"] = Eviction(phase, f"restored from annotation {RUN_STATE_ANNOTATION}").to_dict()
            restored.append(i)
    return restored


def restore_finished(status: dict, state: RunState, now: str) -> None:
    """Put back what the run-state mark (api.control) vouches for of a finished run whose status
    was rewritten since: its terminal condition and phase, and each record's eviction phase (when
    the records are still as many). The run stays finished (SEC-2)."""
    records = status.get("relocations")
    if isinstance(records, list) and len(records) == len(state.evictions):
        restore_evictions(status, state.evictions)
    status["conditions"] = [c for c in status.get("conditions") or ()
                            if isinstance(c, dict) and c.get("type") not in (COND_COMPLETE, COND_FAILED)]
    message = (f"the run ended {state.phase} ({state.reason}); its status was rewritten since and is restored from "
               f"annotation {RUN_STATE_ANNOTATION}: a finished run is never resumed")
    mark_finished(status, state.phase, state.reason, message, None, now)


# What a run's status may name (SEC-1): object keys ("pod ns/name") and namespaces, in the plan's
# words, of namespaces its creator was not found allowed to evict in are not shown.
_KEYED = re.compile(r"\b(pod|Pod|pods|PodGroup|PodGroups|Job|job|gang|workload|owner|PodDisruptionBudget|victim) "
                    r"'?([a-z0-9][-a-z0-9]*)/([^\s,;:()'\"]+)'?")
_NAMESPACE = re.compile(r"\b(namespaces?) '?([a-z0-9][-a-z0-9]*)'?")
HIDDEN = "<not shown>"


def redact(text: str, visible: Collection[str]) -> str:
    """`text` with every "<kind> ns/name" and "namespace ns" of a namespace not in `visible` shown
    as HIDDEN."""
    text = _KEYED.sub(lambda m: m.group(0) if m.group(2) in visible else f"{m.group(1)} {HIDDEN}", text)
    return _NAMESPACE.sub(lambda m: m.group(0) if m.group(2) in visible else f"{m.group(1)} {HIDDEN}", text)


def scoped_plan(plan, visible: Collection[str]):
    """`plan` as the run's creator may read it: its message names nothing of a namespace outside
    `visible` (where the creator may evict, and the namespaces the spec names). The moves are the
    creator's already: planner.plan's `not_evictable` pins every pod of the other namespaces."""
    return dataclasses.replace(plan, message=redact(plan.message, frozenset(visible)))
