"""Carrying out one Execute run from its persisted records; safe to re-run after a crash.

Status ownership (DESIGN "Two writers"): the executor writes plan, eviction records, result,
conditions, phase and times; the webhook's coordinator owns each record's placement. The executor
fills placement fields only where they are still empty (no webhook installed), and every write is
a read-modify-write function applied to the freshest object (RunWriter.update_status).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable, Optional

import planner

from kubectl_repack.api.run import (COND_COMPLETE, COND_FAILED, COND_PROGRESSING, EVICTION_ACCEPTED,
                                    EVICTION_INDIRECTLY_REMOVED, EVICTION_IN_PROGRESS, EVICTION_PENDING,
                                    EVICTION_REJECTED, PHASE_SUCCEEDED, PLACEMENT_PLACED, PLACEMENT_TIMED_OUT,
                                    Eviction, Reason, derive_phase, goal_resource, is_finished, relocations,
                                    set_condition)
from kubectl_repack.api.times import parse_time, rfc3339
from kubectl_repack.errors import RepackError

from .evictions import (ACCEPTED, GONE, REJECTED, RESUME_DONE_ACCEPTED, RESUME_DONE_GONE, RESUME_EVICT, RETRY,
                        Backoff, classify_eviction, pdb_blocks, resume_action)
from .outcome import Outcome, decide_outcome, initial_relocations, verify
from .ports import Clock, ClusterReader, EvictionResponse, Evictor, RunWriter
from .tracking import find_replacements


@dataclass
class Options:
    execution_timeout: dt.timedelta = dt.timedelta(minutes=10)
    eviction_retry_timeout: dt.timedelta = dt.timedelta(seconds=60)
    poll_interval: float = 1.0


@dataclass
class Progress:
    evicted: int = 0
    total: int = 0
    bound: int = 0
    rejected: int = 0


class LeaseLost(RepackError):
    """The execute Lease was lost while running: no further eviction may be issued."""


def evicted_any(run: dict) -> bool:
    """Whether any victim of the run was (or may have been) evicted: starts the cooldown.
    InProgress counts: the call may have gone through."""
    return any(r.eviction.evicted or r.eviction.phase == EVICTION_IN_PROGRESS for r in relocations(run))


class Executor:
    """Carries out one Execute RepackRun from its persisted records.

    `guard()` is asked before every Eviction call; a message back means stop (e.g. the Lease was
    lost), raising LeaseLost with the records as they are, to be continued by `--resume`.
    """

    def __init__(self, reader: ClusterReader, evictor: Evictor, runs: RunWriter, clock: Clock = None,
                 options: Options = None, on_progress: Callable[[Progress], None] = None,
                 guard: Callable[[], Optional[str]] = None):
        self.reader, self.evictor, self.runs = reader, evictor, runs
        self.clock = clock or Clock()
        self.options = options or Options()
        self.on_progress = on_progress or (lambda p: None)
        self.guard = guard or (lambda: None)

    # -- status writes (each a read-modify-write of only the fields apply owns) --
    def _update(self, name: str, mutate: Callable[[dict], None]) -> dict:
        return self.runs.update_status(name, mutate)

    def mark_pending(self, name: str, reason: str, message: str) -> dict:
        now = rfc3339(self.clock.now())

        def mutate(st):
            set_progressing(st, "False", reason, message, now)
            st["phase"] = derive_phase(st)
            st["message"] = message
        return self._update(name, mutate)

    def _set_eviction(self, name: str, index: int, phase: str, message: str = "") -> dict:
        def mutate(st):
            st["relocations"][index]["eviction"] = Eviction(phase, message).to_dict()
        return self._update(name, mutate)

    def _finish(self, name: str, outcome: Outcome) -> dict:
        now = rfc3339(self.clock.now())

        def mutate(st):
            done = COND_COMPLETE if outcome.phase == PHASE_SUCCEEDED else COND_FAILED
            set_condition(st, done, "True", outcome.reason, outcome.message, now)
            set_progressing(st, "False", outcome.reason, outcome.message, now)
            if outcome.result is not None:
                st["result"] = outcome.result
            st["phase"] = derive_phase(st)
            st["message"] = outcome.message
            st.setdefault("completionTime", now)
        return self._update(name, mutate)

    # -- planning --
    def plan_live(self, run: dict) -> "planner.Plan":
        """EXEC-1: always a fresh plan on live state."""
        spec = planner.RunSpec.from_spec(run["spec"])
        return planner.plan(planner.load_objects(self.reader.snapshot_objects()), spec)

    def start(self, name: str, plan: "planner.Plan") -> dict:
        """Persist the plan and every relocation record BEFORE the first eviction (EXEC-3); or end
        the run at once when the live plan recommends nothing."""
        now_t = self.clock.now()
        now = rfc3339(now_t)
        ps = plan.status(now)

        def mutate(st):
            st["plan"] = ps["plan"]
            st.setdefault("startTime", now)
            if plan.outcome != Reason.RECOMMENDED:
                set_condition(st, COND_COMPLETE, "True", plan.outcome,
                              f"live re-plan: {plan.message}; nothing was evicted", now)
                set_progressing(st, "False", plan.outcome, "nothing to execute", now)
                st["message"] = f"live re-plan: {plan.message}; nothing was evicted"
                st["completionTime"] = now
            else:
                st["relocations"] = initial_relocations(plan)
                st["executionDeadline"] = rfc3339(now_t + self.options.execution_timeout)
                msg = (f"executing: {len(st['relocations'])} eviction(s) over "
                       f"{len(plan.moves_by_group())} PodGroup(s) to free {', '.join(plan.freed_nodes)}")
                set_progressing(st, "True", Reason.EXECUTING, msg, now)
                st["message"] = msg
            st["phase"] = derive_phase(st)
        return self._update(name, mutate)

    # -- the main loop --
    def execute(self, name: str) -> dict:
        """Evict PodGroup by PodGroup, wait for the replacements, verify, finish. Returns the run."""
        run = self.runs.get(name)
        if is_finished(run):
            return run
        st = run.get("status") or {}
        deadline = parse_time(st.get("executionDeadline")) or (self.clock.now() + self.options.execution_timeout)
        run = self._evict_all(name, run, deadline)
        run, timed_out = self._track_placements(name, run, deadline)
        st = run.get("status") or {}
        ver = None
        if any(r.eviction.evicted for r in relocations(st)):
            ver = verify(self.reader.snapshot_objects(), goal_resource(run),
                         (st.get("plan") or {}).get("freedNodes") or [])
        return self._finish(name, decide_outcome(st, ver, timed_out))

    def _progress(self, run: dict) -> None:
        relocs = relocations(run)
        self.on_progress(Progress(evicted=sum(1 for r in relocs if r.eviction.evicted), total=len(relocs),
                                  bound=sum(1 for r in relocs if r.placement.placed),
                                  rejected=sum(1 for r in relocs if r.eviction.phase == EVICTION_REJECTED)))

    @staticmethod
    def _groups(relocs: list) -> list:
        """[((namespace, PodGroup), [record indices])] in record order."""
        groups: dict = {}
        for i, r in enumerate(relocs):
            groups.setdefault((r.namespace, r.pod_group_name), []).append(i)
        return list(groups.items())

    def _evict_all(self, name: str, run: dict, deadline: dt.datetime) -> dict:
        grace = ((run.get("spec") or {}).get("eviction") or {}).get("gracePeriodSeconds")
        for (ns, group), indices in self._groups(relocations(run)):
            # 1. resolve InProgress records left by a crash; collect what still needs evicting
            todo = []
            for i in indices:
                rec = relocations(run)[i]
                live = self.reader.get_pod(ns, rec.victim_pod_name)
                action, msg = resume_action(rec, live)
                if action in (RESUME_DONE_GONE, RESUME_DONE_ACCEPTED):
                    run = self._set_eviction(name, i, EVICTION_ACCEPTED, msg)
                elif action == RESUME_EVICT:
                    gone = live is None or (rec.victim_pod_uid and
                                            (live.get("metadata") or {}).get("uid") != rec.victim_pod_uid)
                    if gone and rec.eviction.phase == EVICTION_PENDING:
                        # Gone before we touched it: the plan no longer holds for this pod.
                        run = self._set_eviction(name, i, EVICTION_INDIRECTLY_REMOVED,
                                                 f"victim uid {rec.victim_pod_uid} was gone before its eviction")
                        continue
                    todo.append((i, live))
            self._progress(run)
            if not todo:
                continue
            # 2. PDB pre-check for the whole PodGroup, so a gang is not left half-moved
            pending = [live for i, live in todo if relocations(run)[i].eviction.phase == EVICTION_PENDING]
            if pending:
                blocks = pdb_blocks([live for live in pending if live], self.reader.list_pdbs(ns))
                if blocks:
                    msg = "; ".join(b.message() for b in blocks)
                    for i, _ in todo:
                        run = self._set_eviction(name, i, EVICTION_REJECTED, msg)
                    self._progress(run)
                    continue
            # 3. evict one by one; a rejection stops this PodGroup
            stop_msg = ""
            for i, _live in todo:
                rec = relocations(run)[i]
                if stop_msg:
                    run = self._set_eviction(name, i, EVICTION_REJECTED, stop_msg)
                    continue
                halt = self.guard()
                if halt:
                    raise LeaseLost(f"repackrun {name}: {halt}; continue with `kubectl repack apply --resume {name}`")
                if rec.eviction.phase != EVICTION_IN_PROGRESS:
                    run = self._set_eviction(name, i, EVICTION_IN_PROGRESS)
                verdict, msg = self._evict_with_retry(ns, rec.victim_pod_name, rec.victim_pod_uid, grace, deadline)
                if verdict == ACCEPTED:
                    run = self._set_eviction(name, i, EVICTION_ACCEPTED, msg)
                elif verdict == GONE:
                    run = self._set_eviction(name, i, EVICTION_INDIRECTLY_REMOVED, msg)
                else:
                    run = self._set_eviction(name, i, EVICTION_REJECTED, msg)
                    stop_msg = (f"not evicted: the PodGroup {ns}/{group} stopped moving after "
                                f"{rec.victim} was rejected ({msg})")
                self._progress(run)
        return run

    def _evict_with_retry(self, ns: str, pod: str, uid: str, grace, deadline: dt.datetime) -> tuple:
        retry_deadline = min(deadline, self.clock.now() + self.options.eviction_retry_timeout)
        backoff = Backoff()
        while True:
            verdict, msg = classify_eviction(EvictionResponse(*self.evictor.evict(ns, pod, uid, grace)))
            if verdict != RETRY:
                return verdict, msg
            delay = backoff.next_delay(self.clock.now(), retry_deadline)
            if delay is None:
                return REJECTED, f"{msg} (still blocked after retrying until {rfc3339(retry_deadline)})"
            self.clock.sleep(delay)

    def _track_placements(self, name: str, run: dict, deadline: dt.datetime) -> tuple:
        """Wait until every evicted victim's replacement is bound; record what we see where the
        coordinator has not (placement tracking without the webhook). Returns (run, timed_out)."""
        not_before = parse_time((run.get("status") or {}).get("startTime"))
        while True:
            relocs = relocations(run)
            waiting = [i for i, r in enumerate(relocs) if r.eviction.evicted and not r.placement.placed]
            self._progress(run)
            if not waiting:
                return run, False
            pods_by_ns = {ns: self.reader.list_pods(ns) for ns in sorted({relocs[i].namespace for i in waiting})}
            found = find_replacements(run, pods_by_ns, not_before)
            observed = {}
            for i in waiting:
                pl = relocs[i].placement
                pod, group = None, ""
                if pl.replacement_pod_name:      # the coordinator (or we) identified it
                    pod = next((p for p in pods_by_ns.get(relocs[i].namespace, ())
                                if p["metadata"]["name"] == pl.replacement_pod_name
                                and (not pl.replacement_pod_uid or p["metadata"].get("uid") == pl.replacement_pod_uid)),
                               None)
                elif i in found:
                    pod, group = found[i]
                if pod is not None and (pod.get("spec") or {}).get("nodeName"):
                    observed[i] = (pod, group)
            if observed:
                run = self._update(name, lambda st, observed=observed: record_placements(st, observed))
                continue
            if self.clock.now() >= deadline:
                def timeout(st, waiting=waiting):
                    for i in waiting:
                        pl = st["relocations"][i].setdefault("placement", {})
                        if pl.get("phase") != PLACEMENT_PLACED:
                            pl["phase"] = PLACEMENT_TIMED_OUT
                run = self._update(name, timeout)
                return run, True
            self.clock.sleep(self.options.poll_interval)
            run = self.runs.get(name)


def set_progressing(status: dict, cstatus: str, reason: str, message: str, now: str) -> None:
    """The Progressing condition (every status write of the executor sets it)."""
    set_condition(status, COND_PROGRESSING, cstatus, reason, message, now)


def record_placements(status: dict, observed: dict) -> None:
    """Record bound replacements {index: (pod, replacement PodGroup)} where the coordinator has not."""
    for i, (pod, group) in observed.items():
        rec = status["relocations"][i]
        pl = rec.setdefault("placement", {})
        if pl.get("phase") == PLACEMENT_PLACED or pl.get("actualNodeName"):
            continue  # the coordinator already recorded it
        if pl.get("replacementPodName") and pl["replacementPodName"] != pod["metadata"]["name"]:
            continue
        pl["replacementPodName"] = pod["metadata"]["name"]
        pl["replacementPodUID"] = pod["metadata"].get("uid", "")
        pl["actualNodeName"] = pod["spec"]["nodeName"]
        pl["phase"] = PLACEMENT_PLACED
        if group and not rec.get("replacementPodGroupName"):
            rec["replacementPodGroupName"] = group
