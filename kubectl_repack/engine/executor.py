"""Carrying out one Execute run from its persisted records; safe to re-run after a crash.

Status ownership (DESIGN "Two writers"): the executor writes plan, eviction records, result,
conditions, phase and times; the webhook's coordinator owns each record's placement. The executor
fills placement fields only where they are still empty (no webhook installed: tracking's
PlacementTracker), and every write is a read-modify-write function applied to the freshest object
(RunWriter.update_status) whose status shape is api.status's. Runs are read through RunView: each
stored version's records are parsed once.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Callable, Optional

import planner
from planner.gcpause import paused_gc
from planner.model import pod_group_name

from kubectl_repack.api.run import (EVICTION_ACCEPTED, EVICTION_INDIRECTLY_REMOVED, EVICTION_IN_PROGRESS,
                                    EVICTION_PENDING, EVICTION_REJECTED, PHASE_FAILED, PHASE_SUCCEEDED, Eviction,
                                    Reason, Relocation, RunView, as_map)
from kubectl_repack.api import status as run_status
from kubectl_repack.api.control import (RUN_STATE_ANNOTATION, SETTLED_EVICTIONS, STATE_FINISHED, STATE_STARTED,
                                        BadStateMark, RunState, settled_outcomes)
from kubectl_repack.api.gates import PLACEMENT_LEASE
from kubectl_repack.api.times import micro_time, parse_time, rfc3339
from kubectl_repack.errors import ClusterAPIError, RepackError

from .evictions import (ACCEPTED, GONE, REJECTED, RESUME_DONE_ACCEPTED, RESUME_DONE_GONE, RESUME_EVICT, RETRY,
                        UNKNOWN, VICTIM_GONE, Backoff, classify_eviction, dnd_message, pdb_blocks, resume_action,
                        settle_unknown, victim_opt_out, victim_state)
from .outcome import (Outcome, decide_outcome, scoped_verification, taken_messages, target_result, validate_records,
                      verify)
from .ports import (EV_CANCELLED, EV_COMPLETED, EV_EVICTED, EV_EVICTION_BLOCKED, EV_FAILED, EV_LEFT_OUT, EV_NODE_TAKEN,
                    EV_STARTED, EV_TARGET_BOUND, EV_TARGET_CHANGED, EV_TARGET_NOT_BOUND, Clock, ClusterReader, EvictionResponse, Evictor, Progress, RunWriter)
from .tracking import PlacementTracker


@dataclass
class Options:
    execution_timeout: dt.timedelta = dt.timedelta(minutes=10)
    eviction_retry_timeout: dt.timedelta = dt.timedelta(seconds=60)
    poll_interval: float = 1.0
    # how long a targeted Execute waits, once its planned nodes are vacated, for its target to be
    # bound (RELIEF-3): the placement lease, the longest a replacement's hint is held too
    target_wait: dt.timedelta = PLACEMENT_LEASE


@dataclass(frozen=True)
class RunMark:
    """The run-state mark (api.control) as the executor sees it: `write(name, state)` stores what
    the run is about to become; `read(run)` what the stored run's mark vouches for (None: it
    carries none; BadStateMark: it does not verify). The plugin's runs carry none."""
    write: Callable[[str, RunState], None] = lambda name, state: None
    read: Callable[[dict], Optional[RunState]] = lambda run: None


EV_STATUS_RESTORED = "StatusRestored"


class LeaseLost(RepackError):
    """The execute Lease was lost while running: no further eviction may be issued."""


class _Cancelled(Exception):
    """Cancel or delete seen while an eviction was being retried: it is not issued again."""


class RecordsChanged(RepackError):
    """A relocation record was replaced or removed under the executor during the run."""


def evicted_any(run) -> bool:
    """Whether any victim of the run (a dict or a RunView) was (or may have been) evicted: starts
    the cooldown. InProgress counts: the call may have gone through."""
    return any(r.eviction.evicted or r.eviction.phase == EVICTION_IN_PROGRESS for r in RunView.of(run).relocations)


# What became of a run's target (spec.target) since its plan: no further eviction starts.
TARGET_BOUND, TARGET_DELETED, TARGET_RESIZED = "bound", "deleted", "resized"


def target_keys(spec) -> list:
    """The "namespace/name" of each target PodGroup of a run's spec ([] for an untargeted run)."""
    return list(as_map(as_map(spec).get("target")).get("podGroups") or ())


def _min_member(pg: dict) -> int:
    value = as_map(pg.get("spec")).get("minMember")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def target_change(key: str, pg: Optional[dict], pods: list, min_member_then: Optional[int]) -> tuple:
    """What became of the target PodGroup `key` (as read now: `pg`, None when gone; `pods`: its
    namespace's pods) since the plan, whose minMember was `min_member_then` (None: not known):
    ('', '') while it still waits as planned, else (TARGET_DELETED | TARGET_RESIZED | TARGET_BOUND,
    why). Bound as vc-scheduler has it: phase Running, or minMember of its pods bound (the planner's
    "not waiting")."""
    if pg is None:
        return TARGET_DELETED, f"the target PodGroup {key} was deleted"
    min_now = _min_member(pg)
    if min_member_then is not None and min_now != min_member_then:
        return TARGET_RESIZED, (f"the target PodGroup {key} changed minMember from {min_member_then} to {min_now}, "
                                "so the plan no longer makes the room it needs")
    name = key.split("/", 1)[1]
    bound = 0
    for p in pods:
        meta, spec = as_map(p.get("metadata")), as_map(p.get("spec"))
        if (pod_group_name(as_map(meta.get("annotations")), as_map(meta.get("labels"))) == name
                and spec.get("nodeName") and as_map(p.get("status")).get("phase") not in ("Succeeded", "Failed")):
            bound += 1
    phase = as_map(pg.get("status")).get("phase")
    if phase == "Running" or bound >= min_now:
        return TARGET_BOUND, (f"the target PodGroup {key} is running ({bound} of minMember {min_now} pod(s) bound"
                              + (", phase Running" if phase == "Running" else "") + ")")
    return "", ""


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
    victim's PodGroup and owner). `mark` (RunMark: the controller's run-state mark, api.control)
    is told what the run is about to become, before the status write that says so: Started with
    its deadline before the plan and records are written, Started again with every settled
    outcome (SETTLED_EVICTIONS) before the status write that settles a record (once for a PodGroup
    rejected as a whole), Finished with the outcome and every record's eviction phase before the
    status that ends the run. A record whose settled outcome the mark holds is never acted on
    again: where the status says otherwise (a status writer turned it back to Pending) it is put
    back from the mark when a run is continued, before its outcome is judged, and before it ends
    (an Event says so). A run ends with every record
    settled: an InProgress record (a crash's) is resolved on the victim as read then (gone or
    terminating: Accepted; running: Pending, saying the run ended before its eviction).
    `scoped` (the controller, whose runs are screened by their creator's rights): the verification
    names only pods and workloads of namespaces the run moved pods in or aims at (its result,
    message and NodeTaken Events; scoped_verification).

    A workload may opt out after the plan was made (planner.model.opt_out: `repack.volcano.sh/
    do-not-disrupt: "true"` and its equivalents). Before a PodGroup's first eviction its victims as
    read then, and the PodGroup itself when `opted_out(namespace, PodGroup)` can tell (the
    controller reads the PodGroup and its workload; it returns what is annotated, or ''), are
    checked: an opt-out rejects every record of the PodGroup, none evicted (as a PDB that forbids
    it). Right before each eviction the victim is read once more: an opt-out rejects its record
    and stops its PodGroup, as a refused eviction does.

    A targeted run (spec.target) reads its target again before each PodGroup's first
    eviction (a GET of the PodGroup, and its namespace's pods unless it is Running): once it is
    bound, deleted, or its minMember is not the plan's (known from plan_live, else from the first
    read of this process: a resumed run compares with the minMember it first sees), no further
    eviction starts; the evicted pods' replacements are still tracked, and the run ends
    TargetChanged (Succeeded when the target bound, else Failed) saying why.
    """

    def __init__(self, reader: ClusterReader, evictor: Evictor, runs: RunWriter, clock: Clock = None,
                 options: Options = None, on_progress: Callable[[Progress], None] = None,
                 guard: Callable[[], Optional[str]] = None, cancelled: Callable[[dict], str] = None,
                 on_event: Callable[[str, str, bool], None] = None,
                 vet: Callable[[dict, Optional[Relocation]], Optional[tuple]] = None,
                 on_evicted: Callable[[Relocation, Optional[dict]], None] = None,
                 opted_out: Callable[[str, str], str] = None,
                 mark: Optional[RunMark] = None, scoped: bool = False):
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
        self.mark = mark or RunMark()
        self._deadline: Optional[str] = None   # the Started mark's deadline, once known (None: no mark to keep)
        self._sealed: Optional[list] = None    # each record's outcome as the Started mark holds it ('' unsettled)
        self.scoped = scoped
        self._cancel = ""
        self._refused: Optional[tuple] = None   # (reason, message) from vet: no further eviction
        self._left_out = ""     # start()'s left_out: repeated in the run's final message
        self._target_min: dict = {}      # target PodGroup key -> its minMember when the plan was made
        self._target: tuple = ("", "")   # target_change's answer that stopped the evictions
        self._last_evicted_at: Optional[dt.datetime] = None   # when this process's last eviction was accepted
        self._tracker = PlacementTracker(reader, runs, self.clock, self.options.poll_interval, self.on_event,
                                         self._progress)

    # -- status writes (each a read-modify-write of only the fields apply owns; api.status shapes them) --
    def _update(self, name: str, mutate: Callable[[dict], None]) -> RunView:
        return RunView(self.runs.update_status(name, mutate))

    def _read(self, name: str) -> RunView:
        return RunView(self.runs.get(name))

    def mark_pending(self, name: str, reason: str, message: str) -> dict:
        now = rfc3339(self.clock.now())
        return self._update(name, lambda st: run_status.mark_pending(st, reason, message, now)).obj

    def _set_eviction(self, name: str, index: int, phase: str, message: str = "",
                      victim: Optional[tuple] = None, only_from: Optional[str] = None) -> RunView:
        """Set record `index`'s eviction; with `victim` (namespace, pod, uid), refuse (RepackError
        naming the record) when the stored record at that index is no longer that victim; with
        `only_from`, change nothing unless the stored record is still in that phase. A settled
        outcome is sealed in the run-state mark first."""
        if phase in SETTLED_EVICTIONS:
            self._seal(name, [index], phase)

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

    # -- the run-state mark (api.control): settled outcomes --
    def _seal(self, name: str, indices: list, phase: str) -> None:
        """Seal `phase` as the outcome of records `indices` in the Started mark (one write, none when
        it holds them already, or when the run has no Started mark of this controller)."""
        if self._deadline is None or self._sealed is None:
            return
        if all(i < len(self._sealed) and self._sealed[i] == phase for i in indices):
            return
        sealed = list(self._sealed) + [""] * (max(indices) + 1 - len(self._sealed))
        for i in indices:
            sealed[i] = phase
        self.mark.write(name, RunState(STATE_STARTED, deadline=self._deadline, evictions=tuple(sealed)))
        self._sealed = sealed

    def _load_sealed(self, run: RunView) -> None:
        """What the stored run's Started mark holds (read once per executor; a finished, missing or
        bad mark leaves nothing to keep: the controller does not evict on such a run)."""
        if self._sealed is not None:
            return
        try:
            state = self.mark.read(run.obj)
        except BadStateMark:
            state = None
        if state is not None and not state.finished:
            self._deadline, self._sealed = state.deadline, list(state.evictions)

    def _restore_sealed(self, name: str, run: RunView) -> RunView:
        """Put back each settled outcome the Started mark holds where the status says otherwise
        (one status write, none when they agree; records not as many as the plan's are left to the
        records seal's check)."""
        self._load_sealed(run)
        sealed = settled_outcomes(self._sealed or ())
        records = run.relocations
        if not sealed or max(sealed) >= len(records) or \
                all(records[i].eviction.phase == phase for i, phase in sealed.items()):
            return run
        phases = [sealed.get(i, "") for i in range(len(records))]
        restored = []
        run = self._update(name, lambda st: restored.extend(run_status.restore_evictions(st, phases)))
        if restored:
            self.on_event(EV_STATUS_RESTORED, f"the eviction outcome of {len(restored)} record(s) "
                          f"({', '.join(records[i].victim for i in restored[:5])}) was rewritten since it settled: "
                          f"restored from annotation {RUN_STATE_ANNOTATION}; a settled record is never acted on "
                          "again", True)
        return run

    def fail(self, name: str, reason: str, message: str) -> dict:
        """End a run that must not (or cannot) start: Failed with `reason`, nothing evicted."""
        return self._finish(name, Outcome(PHASE_FAILED, reason, message))

    def succeed(self, name: str, reason: str, message: str) -> dict:
        """End a run that need not start (its target runs already): Succeeded with `reason`."""
        return self._finish(name, Outcome(PHASE_SUCCEEDED, reason, message))

    def _settle_in_progress(self, name: str, run: RunView, reason: str) -> RunView:
        """Before a run ends: every InProgress record resolved on its victim as read now (a
        ClusterAPIError leaves the run as it is, to be ended on a later try)."""
        for i, rec in enumerate(run.relocations):
            if rec.eviction.phase != EVICTION_IN_PROGRESS:
                continue
            action, msg = resume_action(rec, self.reader.get_pod(rec.namespace, rec.victim_pod_name))
            if action in (RESUME_DONE_GONE, RESUME_DONE_ACCEPTED):
                run = self._set_eviction(name, i, EVICTION_ACCEPTED, msg, only_from=EVICTION_IN_PROGRESS)
            else:
                run = self._set_eviction(name, i, EVICTION_PENDING, f"not evicted: the run ended ({reason}) before "
                                         f"this eviction went through; victim uid {rec.victim_pod_uid} still runs",
                                         only_from=EVICTION_IN_PROGRESS)
        return run

    def target_state(self, spec) -> tuple:
        """target_change for the first target of `spec` that no longer waits as planned (('', '')
        when every one still does); remembers the minMember it sees where the plan's is not known."""
        for key in target_keys(spec):
            ns, _, name = key.partition("/")
            pg = self.reader.get_podgroup(ns, name)
            running = pg is not None and as_map(pg.get("status")).get("phase") == "Running"
            pods = self.reader.list_pods(ns) if pg is not None and not running else []
            change = target_change(key, pg, pods, self._target_min.get(key))
            if change[0]:
                return change
            self._target_min.setdefault(key, _min_member(pg))
        return "", ""

    def _finish(self, name: str, outcome: Outcome) -> dict:
        """End the run with `outcome` (an Event, and the terminal status). Returns the run."""
        if self._left_out and self._left_out not in outcome.message:   # what this run's plan could not move
            outcome = Outcome(outcome.phase, outcome.reason, f"{outcome.message}; {self._left_out}", outcome.result)
        run = self._restore_sealed(name, self._read(name))
        run = self._settle_in_progress(name, run, outcome.reason)
        self.mark.write(name, RunState(STATE_FINISHED, deadline=str(run.status.get("executionDeadline") or ""),
                                       phase=outcome.phase, reason=outcome.reason,
                                       evictions=tuple(r.eviction.phase for r in run.relocations)))
        now = rfc3339(self.clock.now())
        event = (EV_COMPLETED if outcome.phase == PHASE_SUCCEEDED
                 else EV_CANCELLED if outcome.reason == Reason.CANCELLED else EV_FAILED)
        self.on_event(event, f"{outcome.reason}: {outcome.message}", outcome.phase != PHASE_SUCCEEDED)
        return self._update(name, lambda st: run_status.mark_finished(st, outcome.phase, outcome.reason,
                                                                      outcome.message, outcome.result, now)).obj

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
            if snapshot is None:
                snapshot = planner.load_objects(objects)
            for key in target_keys(run["spec"]):   # what the plan is made for: a change stops the evictions
                pg = snapshot.podgroup_by_key.get(key)
                if pg is not None:
                    self._target_min[key] = pg.min_member
            return planner.plan(snapshot, spec, not_evictable=not_evictable)

    def start(self, name: str, plan: "planner.Plan", left_out: str = "") -> dict:
        """Persist the plan and every relocation record BEFORE the first eviction (EXEC-3); or end
        the run at once when the live plan recommends nothing. `left_out` (one line: which pods
        the plan was not allowed to move, and why) goes into the run's message, an Event and the
        message the run ends with (when this executor ends it)."""
        now_t = self.clock.now()
        now, deadline = rfc3339(now_t), rfc3339(now_t + self.options.execution_timeout)
        if plan.outcome == Reason.RECOMMENDED:
            self.mark.write(name, RunState(STATE_STARTED, deadline=deadline))
            self._deadline, self._sealed = deadline, []
        else:
            self.mark.write(name, RunState(STATE_FINISHED, phase=PHASE_SUCCEEDED, reason=plan.outcome))
        run = self._update(name, lambda st: run_status.mark_started(st, plan, now, deadline, left_out))
        self._left_out = left_out
        if left_out:
            self.on_event(EV_LEFT_OUT, left_out, True)
        if plan.outcome == Reason.RECOMMENDED:
            self.on_event(EV_STARTED, run.status.get("message", ""), False)
        else:
            self.on_event(EV_COMPLETED, f"{plan.outcome}: {run.status.get('message', '')}", False)
        return run.obj

    # -- the main loop --
    def execute(self, name: str) -> dict:
        """Evict PodGroup by PodGroup, wait for the replacements, verify, finish. Returns the run.

        The records are checked against status.plan.moves first (anyone who may write
        repackruns/status could have edited them): inconsistent records end the run Failed
        (RelocationRecordsInvalid, naming the record) before any eviction. Past
        status.executionDeadline no eviction starts: the run ends ExecutionDeadlineExceeded."""
        run = self._read(name)
        if run.finished:
            return run.obj
        st = run.status
        problems = validate_records(st)
        if problems:
            msg = (f"status.relocations of repackrun {name} do not match status.plan.moves, so nothing is evicted "
                   f"on their word: {'; '.join(problems[:5])}"
                   + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""))
            return self._finish(name, Outcome(PHASE_FAILED, Reason.INVALID_RECORDS, msg))
        run = self._restore_sealed(name, run)   # a settled record turned back to Pending is not evicted again
        refused = self.vet(run.obj, None)
        if refused:
            # Records this executor may not act on are not tracked either: waiting for the
            # replacements of evictions somebody else made (or claims) would only hold this run
            # (and every run queued behind it) until its deadline.
            moved = [r.victim for r in run.relocations if r.eviction.evicted or r.eviction.phase == EVICTION_IN_PROGRESS]
            done = ("nothing was evicted" if not moved else
                    f"nothing further was evicted (the records say {len(moved)} pod(s) were: {', '.join(moved[:5])})")
            return self._finish(name, Outcome(PHASE_FAILED, refused[0], f"{refused[1]}; {done}"))
        deadline = parse_time(st.get("executionDeadline")) or (self.clock.now() + self.options.execution_timeout)
        run, skipped = self._evict_all(name, run, deadline)
        run, timed_out = self._tracker.track(name, run, deadline)
        run = self._restore_sealed(name, run)    # the outcome is judged on the sealed outcomes
        st = run.status
        ver = None
        if any(r.eviction.evicted for r in run.relocations):
            groups = {f"{r.namespace}/{g}" for r in run.relocations
                      for g in (r.pod_group_name, r.replacement_pod_group_name) if g}
            ver = verify(self.reader.snapshot_objects(), run.goal_resource, run.plan.get("freedNodes") or [],
                         run.spec, groups, parse_time(st.get("startTime")))
            if self.scoped:   # what took or holds a planned node, only where the run itself moved or aims
                ver = scoped_verification(ver, {r.namespace for r in run.relocations}
                                          | {k.partition("/")[0] for k in target_keys(run.spec)})
            for message in taken_messages(ver):
                self.on_event(EV_NODE_TAKEN, message, False)
        if self._refused:
            stopped = decide_outcome(st, ver, timed_out, cancelled=self._refused[1])
            return self._finish(name, Outcome(PHASE_FAILED, self._refused[0], stopped.message, stopped.result))
        if self._target[0] and not self._cancel:
            stopped = decide_outcome(st, ver, timed_out, cancelled=f"{self._target[1]}: no further eviction started")
            outcome = Outcome(PHASE_SUCCEEDED if self._target[0] == TARGET_BOUND else PHASE_FAILED,
                              Reason.TARGET_CHANGED, stopped.message, stopped.result)
        else:
            outcome = decide_outcome(st, ver, timed_out, not_started=skipped, cancelled=self._cancel)
        if target_keys(run.spec) and outcome.result is not None and not self._cancel:
            outcome = self._await_target(name, run, outcome, deadline)
        return self._finish(name, outcome)

    def _await_target(self, name: str, run: RunView, outcome: Outcome, deadline: dt.datetime) -> Outcome:
        """RELIEF-3: a targeted Execute that vacated planned nodes tells the coordinator so
        (status.result written with `target.vacatedAt`, `bound: false`: the coordinator then hints
        the vacated nodes to the target's pending pods) and waits up to `Options.target_wait` (the
        placement lease), within the execution deadline, for every target to be bound. The outcome
        is unchanged (EXEC-6: judged on the vacated nodes); its result gets `target` (whether and
        when the target was bound, the coordinator's nominations) and its message that line."""
        keys = target_keys(run.spec)
        result = dict(outcome.result or {})
        vacated = bool(result.get("vacatedNodes"))
        # a resumed run keeps the moment it wrote before (this process evicted nothing)
        stored = parse_time(as_map(as_map(run.status.get("result")).get("target")).get("vacatedAt"))
        vacated_at = self._last_evicted_at or stored or self.clock.now()
        waited = dt.timedelta(0)
        if vacated:
            interim = dict(result, target={"podGroups": keys, "vacatedAt": micro_time(vacated_at), "bound": False})
            self._update(name, lambda st: st.__setitem__("result", interim))
            start = self.clock.now()
            until = min(start + self.options.target_wait, deadline)
            while True:
                change, _ = self.target_state(run.spec)
                if change or self.clock.now() >= until:
                    break
                self.clock.sleep(self.options.poll_interval)
            waited = self.clock.now() - start
        namespaces = sorted({k.partition("/")[0] for k in keys})
        pods = [p for ns in namespaces for p in self.reader.list_pods(ns)]
        groups = {k: self.reader.get_podgroup(*k.split("/", 1)) for k in keys}
        block = target_result(keys, pods, groups, f"{name}/{run.uid}", vacated_at, vacated, waited)
        result["target"] = block
        line = f"target {', '.join(keys)}: {block['message']}"
        self.on_event(EV_TARGET_BOUND if block["bound"] else EV_TARGET_NOT_BOUND, line, not block["bound"])
        return Outcome(outcome.phase, outcome.reason, f"{outcome.message}; {line}", result)

    def _progress(self, run: RunView) -> None:
        relocs = run.relocations
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

    def _evict_all(self, name: str, run: RunView, deadline: dt.datetime) -> tuple:
        """Evict what is still to be evicted. Returns (run, indices of records whose eviction did
        not start because status.executionDeadline had passed)."""
        grace = (run.spec.get("eviction") or {}).get("gracePeriodSeconds")
        not_started = []
        checked = run.relocations   # as validated against the plan: whom we may evict
        for (ns, group), indices in self._groups(checked):
            # 1. resolve InProgress records left by a crash; collect what still needs evicting
            todo = []
            sealed = settled_outcomes(self._sealed or ())
            for i in indices:
                if i in sealed:
                    continue   # its outcome is sealed: never acted on again, whatever the status says
                rec = run.relocation(i)   # as stored now: a crash may have left it InProgress
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
            if not self._target[0] and target_keys(run.spec):   # between PodGroups: a gang is never split
                self._target = self.target_state(run.spec)
                if self._target[0]:
                    self.on_event(EV_TARGET_CHANGED, f"{self._target[1]}: no further eviction starts",
                                  self._target[0] != TARGET_BOUND)
            if self._target[0]:
                run = self._not_evicted(name, run, [i for i, _ in todo], self._target[1])
                continue
            if self.clock.now() >= deadline:
                run = self._not_started(name, run, [i for i, _ in todo], deadline)
                not_started += [i for i, _ in todo]
                continue
            # 2. the workload's opt-out and the PDBs, checked for the whole PodGroup before any of
            #    it is evicted, so a gang is not left half-moved
            opted = self._opted_out_group(ns, group, [(checked[i], live) for i, live in todo])
            if opted:
                self._seal(name, [i for i, _ in todo], EVICTION_REJECTED)   # one mark write for the PodGroup
                for i, live in todo:
                    own = victim_opt_out(checked[i], live)
                    run = self._set_eviction(name, i, EVICTION_REJECTED, opted if not own else
                                             dnd_message(f"pod {checked[i].victim} is annotated {own}"))
                self.on_event(EV_EVICTION_BLOCKED, f"PodGroup {ns}/{group} not moved: {opted}", True)
                self._progress(run)
                continue
            pending = [live for i, live in todo if run.relocation(i).eviction.phase == EVICTION_PENDING]
            if pending:
                blocks = pdb_blocks([live for live in pending if live], self.reader.list_pdbs(ns))
                if blocks:
                    msg = "; ".join(b.message() for b in blocks)
                    self._seal(name, [i for i, _ in todo], EVICTION_REJECTED)
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
                self._cancel = self.cancelled(run.obj)    # the object as stored by the write-ahead
                if self._cancel:
                    run = self._not_evicted(name, run, rest, self._cancel)
                    break
                self._refused = self.vet(run.obj, rec)
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
                    self._last_evicted_at = self.clock.now()
                    run = self._set_eviction(name, i, EVICTION_ACCEPTED, msg)
                    self.on_event(EV_EVICTED, f"evicted {rec.victim} (planned node {rec.planned_node_name})", False)
                    self.on_evicted(rec, victim_now)
                elif verdict == GONE:
                    run = self._set_eviction(name, i, EVICTION_INDIRECTLY_REMOVED, msg)
                else:
                    self._seal(name, rest, EVICTION_REJECTED)    # this one and the rest of its PodGroup: one write
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

    def _not_evicted(self, name: str, run: RunView, indices: list, why: str) -> RunView:
        """Records that will not be evicted because the run was cancelled: Pending, saying why."""
        for i in indices:
            run = self._set_eviction(name, i, EVICTION_PENDING, f"not evicted: {why}")
        self._progress(run)
        return run

    def _not_started(self, name: str, run: RunView, indices: list, deadline: dt.datetime) -> RunView:
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
