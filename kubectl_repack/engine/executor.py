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
from planner.gcpause import paused_gc
from planner.model import opt_out

from kubectl_repack.api.run import (COND_COMPLETE, COND_FAILED, COND_PROGRESSING, EVICTION_ACCEPTED,
                                    EVICTION_INDIRECTLY_REMOVED, EVICTION_IN_PROGRESS, EVICTION_PENDING,
                                    EVICTION_REJECTED, PHASE_FAILED, PHASE_SUCCEEDED, PLACEMENT_NOMINATED,
                                    PLACEMENT_PLACED, PLACEMENT_TIMED_OUT, Eviction, Reason, Relocation, derive_phase, goal_resource,
                                    is_finished, relocations, set_condition)
from kubectl_repack.api.times import parse_time, rfc3339
from kubectl_repack.errors import ClusterAPIError, RepackError

from .evictions import (ACCEPTED, GONE, REJECTED, RESUME_DONE_ACCEPTED, RESUME_DONE_GONE, RESUME_EVICT, RETRY,
                        UNKNOWN, VICTIM_GONE, Backoff, classify_eviction, pdb_blocks, resume_action, settle_unknown,
                        victim_state)
from .outcome import Outcome, decide_outcome, initial_relocations, validate_records, verify
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


class _Cancelled(Exception):
    """Cancel or delete seen while an eviction was being retried: it is not issued again."""


# Event reasons (shown by `kubectl describe repackrun`): one per step the run takes.
EV_STARTED, EV_EVICTED, EV_EVICTION_BLOCKED = "Started", "Evicted", "EvictionBlocked"
EV_NOMINATED, EV_PLACED, EV_PLACEMENT_TIMED_OUT = "Nominated", "Placed", "PlacementTimedOut"
EV_COMPLETED, EV_FAILED, EV_CANCELLED = "Completed", "Failed", "Cancelled"
EV_LEFT_OUT = "PodsLeftOut"     # the plan was not allowed to move some pods (the creator may not evict there)


class RecordsChanged(RepackError):
    """A relocation record was replaced or removed under the executor during the run."""


def evicted_any(run: dict) -> bool:
    """Whether any victim of the run was (or may have been) evicted: starts the cooldown.
    InProgress counts: the call may have gone through."""
    return any(r.eviction.evicted or r.eviction.phase == EVICTION_IN_PROGRESS for r in relocations(run))


class Executor:
    """Carries out one Execute RepackRun from its persisted records.

    `guard()` is asked before every Eviction call; a message back means stop (e.g. the Lease was
    lost), raising LeaseLost with the records as they are, to be continued by `--resume`.
    `cancelled(run)` is asked at the same points with the freshest run: a message back (cancel
    annotation, delete) means no further eviction; the evicted pods' replacements are still
    tracked, and the run ends Failed/Cancelled saying what was and was not moved.
    Before each eviction the write-ahead record (InProgress) is written first, and the last checks
    come after it, in this order: cancelled, vet, the victim read again (its owners' opt-out, see
    below), the execution deadline, and guard right before the call (a check that says stop puts
    the record back to Pending, saying why; an opt-out rejects it).
    `on_event(reason, message, warning)` hears every step (Events on the RepackRun).
    `vet(run, record)` is asked with the freshest run before the first eviction (record None) and
    before every eviction (the record about to be evicted): a (reason, message) back means this
    run may not evict any more (the in-cluster controller: records not sealed by it, a creator who
    lost the right to evict); nothing further is evicted, the evicted pods' replacements are still
    tracked, and the run ends Failed with that reason. `on_evicted(record, pod)` hears each accepted
    eviction, with the victim as read right before it (the controller's audit Events on the
    victim's PodGroup and owner).

    A workload may opt out after the plan was made (planner.model.opt_out: `repack.volcano.sh/
    do-not-disrupt: "true"` and its equivalents). Before a PodGroup's first eviction its victims as
    read then, and the PodGroup itself when `opted_out(namespace, PodGroup)` can tell (the
    controller reads the PodGroup and its workload; it returns what is annotated, or ''), are
    checked: an opt-out rejects every record of the PodGroup, none evicted (as a PDB that forbids
    it). Right before each eviction the victim is read once more: an opt-out rejects its record
    and stops its PodGroup, as a refused eviction does.
    """

    def __init__(self, reader: ClusterReader, evictor: Evictor, runs: RunWriter, clock: Clock = None,
                 options: Options = None, on_progress: Callable[[Progress], None] = None,
                 guard: Callable[[], Optional[str]] = None, cancelled: Callable[[dict], str] = None,
                 on_event: Callable[[str, str, bool], None] = None,
                 vet: Callable[[dict, Optional[Relocation]], Optional[tuple]] = None,
                 on_evicted: Callable[[Relocation, Optional[dict]], None] = None,
                 opted_out: Callable[[str, str], str] = None):
        self.reader, self.evictor, self.runs = reader, evictor, runs
        self.clock = clock or Clock()
        self.options = options or Options()
        self.on_progress = on_progress or (lambda p: None)
        self.guard = guard or (lambda: None)
        self.cancelled = cancelled or (lambda run: "")
        self.on_event = on_event or (lambda reason, message, warning: None)
        self.vet = vet or (lambda run, record: None)
        self.on_evicted = on_evicted or (lambda record, pod: None)
        self.opted_out = opted_out or (lambda namespace, pod_group: "")
        self._cancel = ""
        self._refused: Optional[tuple] = None   # (reason, message) from vet: no further eviction
        self._told: dict = {}   # record index -> last placement phase an event was sent for
        self._left_out = ""     # start()'s left_out: repeated in the run's final message

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

    def _set_eviction(self, name: str, index: int, phase: str, message: str = "",
                      victim: Optional[tuple] = None, only_from: Optional[str] = None) -> dict:
        """Set record `index`'s eviction; with `victim` (namespace, pod, uid), refuse (RepackError
        naming the record) when the stored record at that index is no longer that victim; with
        `only_from`, change nothing unless the stored record is still in that phase."""
        def mutate(st):
            records = st.get("relocations") or []
            if only_from is not None and (index >= len(records) or not isinstance(records[index], dict)
                                          or Relocation.from_dict(records[index]).eviction.phase != only_from):
                return
            if victim is not None:
                got = Relocation.from_dict(records[index]) if index < len(records) else None
                if got is None or (got.namespace, got.victim_pod_name, got.victim_pod_uid) != victim:
                    raise RecordsChanged(
                        f"repackrun {name}: status.relocations[{index}] is no longer {victim[0]}/{victim[1]} "
                        f"(uid {victim[2]}) but {got.victim + ' uid ' + got.victim_pod_uid if got else 'missing'}: "
                        "the records were edited during the run; stopping before any further eviction")
            records[index]["eviction"] = Eviction(phase, message).to_dict()
        return self._update(name, mutate)

    def fail(self, name: str, reason: str, message: str) -> dict:
        """End a run that must not (or cannot) start: Failed with `reason`, nothing evicted."""
        return self._finish(name, Outcome(PHASE_FAILED, reason, message))

    def _finish(self, name: str, outcome: Outcome) -> dict:
        if self._left_out and self._left_out not in outcome.message:   # what this run's plan could not move
            outcome = Outcome(outcome.phase, outcome.reason, f"{outcome.message}; {self._left_out}", outcome.result)
        now = rfc3339(self.clock.now())
        event = (EV_COMPLETED if outcome.phase == PHASE_SUCCEEDED
                 else EV_CANCELLED if outcome.reason == Reason.CANCELLED else EV_FAILED)
        self.on_event(event, f"{outcome.reason}: {outcome.message}", outcome.phase != PHASE_SUCCEEDED)

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
    def live_snapshot(self) -> "planner.ClusterSnapshot":
        """The planner's snapshot of live state, read now."""
        objects = self.reader.snapshot_objects()
        with paused_gc():  # many small immutable objects, no cycles: collector passes cost seconds
            return planner.load_objects(objects)

    def plan_live(self, run: dict, snapshot: Optional["planner.ClusterSnapshot"] = None,
                  not_evictable: Optional[dict] = None) -> "planner.Plan":
        """EXEC-1: always a fresh plan on live state (`snapshot`: one live_snapshot read just now).
        `not_evictable` ({namespace: why}) is the planner's: pods there are not moved."""
        spec = planner.RunSpec.from_spec(run["spec"])
        objects = self.reader.snapshot_objects() if snapshot is None else None
        with paused_gc():
            return planner.plan(snapshot if snapshot is not None else planner.load_objects(objects), spec,
                                not_evictable=not_evictable)

    def start(self, name: str, plan: "planner.Plan", left_out: str = "") -> dict:
        """Persist the plan and every relocation record BEFORE the first eviction (EXEC-3); or end
        the run at once when the live plan recommends nothing. `left_out` (one line: which pods
        the plan was not allowed to move, and why) goes into the run's message, an Event and the
        message the run ends with (when this executor ends it)."""
        now_t = self.clock.now()
        now = rfc3339(now_t)
        ps = plan.status(now)
        also = f"; {left_out}" if left_out else ""

        def mutate(st):
            st["plan"] = ps["plan"]
            st.setdefault("startTime", now)
            if plan.outcome != Reason.RECOMMENDED:
                msg = f"live re-plan: {plan.message}{also}; nothing was evicted"
                set_condition(st, COND_COMPLETE, "True", plan.outcome, msg, now)
                set_progressing(st, "False", plan.outcome, "nothing to execute", now)
                st["message"] = msg
                st["completionTime"] = now
            else:
                st["relocations"] = initial_relocations(plan)
                st["executionDeadline"] = rfc3339(now_t + self.options.execution_timeout)
                msg = (f"executing: {len(st['relocations'])} eviction(s) over "
                       f"{len(plan.moves_by_group())} PodGroup(s) to free {', '.join(plan.freed_nodes)}{also}")
                set_progressing(st, "True", Reason.EXECUTING, msg, now)
                st["message"] = msg
            st["phase"] = derive_phase(st)
        run = self._update(name, mutate)
        self._left_out = left_out
        if left_out:
            self.on_event(EV_LEFT_OUT, left_out, True)
        if plan.outcome == Reason.RECOMMENDED:
            self.on_event(EV_STARTED, (run.get("status") or {}).get("message", ""), False)
        else:
            self.on_event(EV_COMPLETED, f"{plan.outcome}: {(run.get('status') or {}).get('message', '')}", False)
        return run

    # -- the main loop --
    def execute(self, name: str) -> dict:
        """Evict PodGroup by PodGroup, wait for the replacements, verify, finish. Returns the run.

        The records are checked against status.plan.moves first (anyone who may write
        repackruns/status could have edited them): inconsistent records end the run Failed
        (RelocationRecordsInvalid, naming the record) before any eviction. Past
        status.executionDeadline no eviction starts: the run ends ExecutionDeadlineExceeded."""
        run = self.runs.get(name)
        if is_finished(run):
            return run
        st = run.get("status") or {}
        problems = validate_records(st)
        if problems:
            msg = (f"status.relocations of repackrun {name} do not match status.plan.moves, so nothing is evicted "
                   f"on their word: {'; '.join(problems[:5])}"
                   + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
            return self._finish(name, Outcome(PHASE_FAILED, Reason.INVALID_RECORDS, msg))
        refused = self.vet(run, None)
        if refused:
            # Records this executor may not act on are not tracked either: waiting for the
            # replacements of evictions somebody else made (or claims) would only hold this run
            # (and every run queued behind it) until its deadline.
            moved = [r.victim for r in relocations(st) if r.eviction.evicted or r.eviction.phase == EVICTION_IN_PROGRESS]
            done = ("nothing was evicted" if not moved else
                    f"nothing further was evicted (the records say {len(moved)} pod(s) were: {', '.join(moved[:5])})")
            return self._finish(name, Outcome(PHASE_FAILED, refused[0], f"{refused[1]}; {done}"))
        deadline = parse_time(st.get("executionDeadline")) or (self.clock.now() + self.options.execution_timeout)
        run, skipped = self._evict_all(name, run, deadline)
        run, timed_out = self._track_placements(name, run, deadline)
        st = run.get("status") or {}
        ver = None
        if any(r.eviction.evicted for r in relocations(st)):
            ver = verify(self.reader.snapshot_objects(), goal_resource(run),
                         (st.get("plan") or {}).get("freedNodes") or [])
        if self._refused:
            stopped = decide_outcome(st, ver, timed_out, cancelled=self._refused[1])
            return self._finish(name, Outcome(PHASE_FAILED, self._refused[0], stopped.message, stopped.result))
        return self._finish(name, decide_outcome(st, ver, timed_out, not_started=skipped, cancelled=self._cancel))

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

    def _evict_all(self, name: str, run: dict, deadline: dt.datetime) -> tuple:
        """Evict what is still to be evicted. Returns (run, indices of records whose eviction did
        not start because status.executionDeadline had passed)."""
        grace = ((run.get("spec") or {}).get("eviction") or {}).get("gracePeriodSeconds")
        not_started = []
        checked = relocations(run)   # as validated against the plan: whom we may evict
        for (ns, group), indices in self._groups(checked):
            # 1. resolve InProgress records left by a crash; collect what still needs evicting
            todo = []
            for i in indices:
                rec = relocations(run)[i]
                live = self.reader.get_pod(ns, rec.victim_pod_name)
                action, msg = resume_action(rec, live)
                if action in (RESUME_DONE_GONE, RESUME_DONE_ACCEPTED):
                    run = self._set_eviction(name, i, EVICTION_ACCEPTED, msg)
                elif action == RESUME_EVICT:
                    if rec.eviction.phase == EVICTION_PENDING and victim_state(rec.victim_pod_uid, live) == VICTIM_GONE:
                        # Gone before we touched it: the plan no longer holds for this pod.
                        run = self._set_eviction(name, i, EVICTION_INDIRECTLY_REMOVED,
                                                 f"victim uid {rec.victim_pod_uid} was gone before its eviction")
                        continue
                    todo.append((i, live))
            self._progress(run)
            if not todo:
                continue
            if not self._cancel:
                self._cancel = self.cancelled(self.runs.get(name))
            if self._cancel or self._refused:
                run = self._not_evicted(name, run, [i for i, _ in todo], self._cancel or self._refused[1])
                continue
            if self.clock.now() >= deadline:
                run = self._not_started(name, run, [i for i, _ in todo], deadline)
                not_started += [i for i, _ in todo]
                continue
            # 2. the workload's opt-out and the PDBs, checked for the whole PodGroup before any of
            #    it is evicted, so a gang is not left half-moved
            opted = self._opted_out_group(ns, group, [(checked[i], live) for i, live in todo])
            if opted:
                for i, live in todo:
                    own = victim_opt_out(checked[i], live)
                    run = self._set_eviction(name, i, EVICTION_REJECTED, opted if not own else
                                             dnd_message(f"pod {checked[i].victim} is annotated {own}"))
                self.on_event(EV_EVICTION_BLOCKED, f"PodGroup {ns}/{group} not moved: {opted}", True)
                self._progress(run)
                continue
            pending = [live for i, live in todo if relocations(run)[i].eviction.phase == EVICTION_PENDING]
            if pending:
                blocks = pdb_blocks([live for live in pending if live], self.reader.list_pdbs(ns))
                if blocks:
                    msg = "; ".join(b.message() for b in blocks)
                    for i, _ in todo:
                        run = self._set_eviction(name, i, EVICTION_REJECTED, msg)
                    self.on_event(EV_EVICTION_BLOCKED, f"PodGroup {ns}/{group} not moved: {msg}", True)
                    self._progress(run)
                    continue
            # 3. evict one by one; a rejection stops this PodGroup, and so does the deadline
            stop_msg = ""
            for pos, (i, _live) in enumerate(todo):
                rec = checked[i]
                if stop_msg:
                    run = self._set_eviction(name, i, EVICTION_REJECTED, stop_msg)
                    continue
                rest = [j for j, _ in todo[pos:]]
                if self.clock.now() >= deadline:
                    run = self._not_started(name, run, rest, deadline)
                    not_started += rest
                    break
                self._check_guard(name)    # no write-ahead on a Lease already lost
                victim = (rec.namespace, rec.victim_pod_name, rec.victim_pod_uid)
                # write-ahead, and the last look at the record: still the victim we are about to evict
                run = self._set_eviction(name, i, EVICTION_IN_PROGRESS, victim=victim)
                # The last checks come after the write-ahead (a write that may take a while), the
                # Lease last: what they see holds when the call is sent. A stop puts the record back.
                self._cancel = self.cancelled(run)    # the object as stored by the write-ahead
                if self._cancel:
                    run = self._not_evicted(name, run, rest, self._cancel)
                    break
                self._refused = self.vet(run, rec)
                if self._refused:
                    run = self._not_evicted(name, run, rest, self._refused[1])
                    break
                victim_now = self.reader.get_pod(ns, rec.victim_pod_name)   # its owners may have opted out
                if self.clock.now() >= deadline:
                    run = self._not_started(name, run, rest, deadline)
                    not_started += rest
                    break
                own = victim_opt_out(rec, victim_now)
                if own:
                    verdict, msg = REJECTED, dnd_message(f"pod {rec.victim} is annotated {own}")
                else:
                    halt = self.guard()
                    if halt:   # back to Pending unless someone else moved the record on meanwhile
                        self._set_eviction(name, i, EVICTION_PENDING, f"not evicted: {halt}",
                                           only_from=EVICTION_IN_PROGRESS)
                        raise self._lease_lost(name, halt)
                    try:
                        verdict, msg = self._evict_with_retry(name, rec, grace, deadline)
                    except _Cancelled:   # no attempt took effect so far: the victim still runs
                        run = self._not_evicted(name, run, rest, self._cancel)
                        break
                if verdict == ACCEPTED:
                    run = self._set_eviction(name, i, EVICTION_ACCEPTED, msg)
                    self.on_event(EV_EVICTED, f"evicted {rec.victim} (planned node {rec.planned_node_name})", False)
                    self.on_evicted(rec, victim_now)
                elif verdict == GONE:
                    run = self._set_eviction(name, i, EVICTION_INDIRECTLY_REMOVED, msg)
                else:
                    run = self._set_eviction(name, i, EVICTION_REJECTED, msg)
                    self.on_event(EV_EVICTION_BLOCKED, f"{rec.victim}: {msg}", True)
                    stop_msg = (f"not evicted: the PodGroup {ns}/{group} stopped moving after "
                                f"{rec.victim} was rejected ({msg})")
                self._progress(run)
        return run, not_started

    def _opted_out_group(self, ns: str, group: str, victims: list) -> str:
        """Why no pod of PodGroup ns/group may be evicted: it, its workload (as `opted_out` tells) or
        one of `victims` ([(record, pod as read now)]) opted out since the plan was made ('' when
        none did)."""
        what = self.opted_out(ns, group)
        if not what:
            for rec, live in victims:
                found = victim_opt_out(rec, live)
                if found:
                    what = f"pod {rec.victim} is annotated {found}"
                    break
        return f"{dnd_message(what)} (PodGroup {ns}/{group} is not moved)" if what else ""

    def _not_evicted(self, name: str, run: dict, indices: list, why: str) -> dict:
        """Records that will not be evicted because the run was cancelled: Pending, saying why."""
        for i in indices:
            run = self._set_eviction(name, i, EVICTION_PENDING, f"not evicted: {why}")
        self._progress(run)
        return run

    def _not_started(self, name: str, run: dict, indices: list, deadline: dt.datetime) -> dict:
        """Records whose eviction may no longer start: Pending, saying why (an InProgress record
        here has a running victim: its earlier call did not go through)."""
        msg = f"not evicted: status.executionDeadline {rfc3339(deadline)} passed before its eviction started"
        for i in indices:
            run = self._set_eviction(name, i, EVICTION_PENDING, msg)
        self._progress(run)
        return run

    def _check_guard(self, name: str) -> None:
        halt = self.guard()
        if halt:
            raise self._lease_lost(name, halt)

    @staticmethod
    def _lease_lost(name: str, halt: str) -> LeaseLost:
        return LeaseLost(f"repackrun {name}: {halt}; no further eviction was issued; "
                         f"continue with `kubectl repack apply --resume {name}`")

    def _evict_with_retry(self, name: str, rec: Relocation, grace, deadline: dt.datetime) -> tuple:
        """One eviction, retried with backoff while a PDB answers 429 or the outcome is unknown,
        until the retry timeout or the run's deadline; cancel and then the Lease guard are asked
        again before every retry.

        An unknown outcome (no answer, 500, 502, 503, 504) is settled by reading the victim: gone
        or terminating -> ACCEPTED; still running -> retried (the UID precondition makes a replayed
        call harmless to a replacement), Rejected once the retries run out. After an unknown
        outcome every later answer short of 201 is settled the same way (a 429 or 404 may be the
        earlier call's doing). A victim that cannot be read raises ClusterAPIError and leaves the
        record InProgress, for `--resume` to settle."""
        ns, pod, uid = rec.namespace, rec.victim_pod_name, rec.victim_pod_uid
        retry_deadline = min(deadline, self.clock.now() + self.options.eviction_retry_timeout)
        backoff = Backoff()
        unknown = ""   # why an earlier attempt's outcome is unknown
        while True:
            verdict, msg = classify_eviction(EvictionResponse(*self.evictor.evict(ns, pod, uid, grace)))
            if verdict == UNKNOWN:
                unknown = msg
            if unknown and verdict != ACCEPTED:
                settled, smsg = self._settle_unknown(name, rec, msg if verdict == UNKNOWN else
                                                     f"{unknown}, then {msg}")
                if settled == ACCEPTED:
                    return settled, smsg
                if verdict == UNKNOWN:
                    msg = smsg
            if verdict not in (RETRY, UNKNOWN):
                return verdict, msg
            delay = backoff.next_delay(self.clock.now(), retry_deadline)
            if delay is None:
                if verdict == UNKNOWN:
                    return REJECTED, f"{msg}, after retrying until {rfc3339(retry_deadline)}"
                return REJECTED, f"{msg} (still blocked after retrying until {rfc3339(retry_deadline)})"
            self.clock.sleep(delay)
            self._cancel = self.cancelled(self.runs.get(name))
            if self._cancel:
                if unknown:   # the last look before the record goes back to Pending
                    settled = self._settle_unknown(name, rec, unknown)
                    if settled[0] == ACCEPTED:
                        return settled
                raise _Cancelled(self._cancel)
            self._check_guard(name)

    def _settle_unknown(self, name: str, rec: Relocation, why: str) -> tuple:
        """settle_unknown on the victim as read now; ClusterAPIError when it cannot be read (the
        record stays InProgress: the run stops as after a crash, and `--resume` settles it)."""
        try:
            live = self.reader.get_pod(rec.namespace, rec.victim_pod_name)
        except ClusterAPIError as e:
            raise ClusterAPIError(
                f"repackrun {name}: {why} for {rec.victim}, and the pod cannot be read to settle it ({e}); "
                f"its record stays InProgress; continue with `kubectl repack apply --resume {name}`",
                e.status) from e
        return settle_unknown(rec.victim_pod_uid, live, why)

    def _track_placements(self, name: str, run: dict, deadline: dt.datetime) -> tuple:
        """Wait until every evicted victim's replacement is bound; record what we see where the
        coordinator has not (placement tracking without the webhook). Returns (run, timed_out)."""
        not_before = parse_time((run.get("status") or {}).get("startTime"))
        while True:
            relocs = relocations(run)
            waiting = [i for i, r in enumerate(relocs) if r.eviction.evicted and not r.placement.placed]
            self._progress(run)
            self._placement_events(relocs)
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
                self._placement_events(relocations(run))
                return run, True
            self.clock.sleep(self.options.poll_interval)
            run = self.runs.get(name)


    def _placement_events(self, relocs: list) -> None:
        """One event per record and placement phase reached (Nominated, Placed, TimedOut)."""
        for i, r in enumerate(relocs):
            phase = r.placement.phase
            if not r.eviction.evicted or self._told.get(i) == phase:
                continue
            pl = r.placement
            if phase == PLACEMENT_NOMINATED:
                self.on_event(EV_NOMINATED, f"{r.namespace}/{pl.replacement_pod_name} (replacing {r.victim_pod_name}) "
                                            f"nominated to {pl.selected_node_name}", False)
            elif phase == PLACEMENT_PLACED:
                self.on_event(EV_PLACED, f"{r.namespace}/{pl.replacement_pod_name} (replacing {r.victim_pod_name}) "
                                         f"bound to {pl.actual_node_name} (planned {r.planned_node_name})", False)
            elif phase == PLACEMENT_TIMED_OUT:
                self.on_event(EV_PLACEMENT_TIMED_OUT, f"replacement of {r.victim} not bound before the deadline", True)
            else:
                continue
            self._told[i] = phase


def victim_opt_out(rec: Relocation, live: Optional[dict]) -> str:
    """`key=value` of the opt-out (planner.model.opt_out) the victim carries as read (`live`), or ''
    (no pod, or a pod with another UID: not the victim)."""
    meta = (live or {}).get("metadata") or {}
    if live is None or (rec.victim_pod_uid and meta.get("uid") != rec.victim_pod_uid):
        return ""
    annotations = meta.get("annotations")
    if not isinstance(annotations, dict):
        return ""
    return opt_out({k: v for k, v in annotations.items() if isinstance(v, str)})


def dnd_message(what_is_annotated: str) -> str:
    """A record's eviction message when its workload opted out after the plan was made."""
    return f"do-not-disrupt: {what_is_annotated} since the plan was made; not evicted"


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
