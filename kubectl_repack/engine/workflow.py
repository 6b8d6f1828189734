"""`kubectl repack apply` as a workflow, independent of click (the command only wires it).

Order (EXEC-1..7): delete finished runs past their TTL -> create the run (or pick up the existing
one) -> take the cluster-wide execute Lease (else the run stays Pending with AnotherRunActive /
ExecuteCooldownActive, and apply waits or gives up) -> plan again on live state (in the cluster:
only pods the run's creator may evict, `screen`) -> persist the plan and every relocation record ->
evict, track, verify (Executor) -> release the Lease, starting the cooldown if anything was
evicted. Re-running it on the same run continues from the records. A targeted run (spec.target)
whose target runs already when the Lease is taken ends TargetAlreadyFits there, evicting nothing.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

import planner

from kubectl_repack.api.run import EVICTION_IN_PROGRESS, EVICTION_PENDING, MODE_EXECUTE, Reason, RunView, is_finished
from kubectl_repack.api.status import initial_relocations, scoped_plan
from kubectl_repack.errors import ClusterAPIError, NotFound, RepackError, SpecError, ValidationError

from .executor import TARGET_BOUND, Executor, Options, RunMark, evicted_any, target_keys
from .mutex import holder_identity
from .ports import Clock, ClusterReader, Evictor, Mutex, Reporter, RunStore


@dataclass(frozen=True)
class ApplyRequest:
    """What the user asked for: a validated Execute run to create (`run`) or the name to resume."""
    name: str
    run: Optional[dict] = None
    wait: bool = True
    timeout: dt.timedelta = dt.timedelta(minutes=10)
    cooldown: Optional[dt.timedelta] = None          # given: used now and stored as the setting
    eviction_retry_timeout: dt.timedelta = dt.timedelta(seconds=60)


@dataclass(frozen=True)
class ApplyResult:
    """The run as it stands when apply returns; `pending` when it gave up waiting for the Lease."""
    run: dict
    pending: bool = False
    note: str = ""


@dataclass(frozen=True)
class Screening:
    """The answer of `screen(namespaces)` before a new start is planned: whether the run may evict
    at all (`refused`: why not, e.g. its creator record cannot authorize it) and, of the namespaces
    asked about, where it may not (`denied`: namespace -> why, as the authorizer says it), on
    behalf of whom (`creator`, the username for the run's message)."""
    refused: str = ""
    denied: Mapping[str, str] = field(default_factory=dict)
    creator: str = ""


def left_out_line(denied: list, creator: str) -> str:
    """One line for the run's message and Event: that the plan left out pods of namespaces where
    the creator may not evict. The namespaces are not named: the creator may not see into them
    (the controller's log names them)."""
    who = creator or "the run's creator"
    return (f"left out: pods in {len(denied)} namespace(s) where {who} may not evict (not named: the run shows "
            "nothing of a namespace its creator may not evict in)")


def not_evictable_reasons(denied: list, creator: str) -> dict:
    """{namespace: why} for planner.plan's `not_evictable` (each node verdict says "pod ns/x: why")."""
    who = f"the run's creator {creator}" if creator else "the run's creator"
    return {ns: f"{who} may not evict pods in namespace {ns}" for ns in denied}


def refused_everywhere(namespaces: list, screening: Screening) -> str:
    """Why the run may evict nowhere it has pods to move ('' when it may somewhere): every namespace
    asked about was denied. Names none of them (left_out_line)."""
    if not namespaces or any(ns not in screening.denied for ns in namespaces):
        return ""
    who = f"user {screening.creator!r} (the run's creator)" if screening.creator else "the run's creator"
    return (f"{who} may create pods/eviction in none of the {len(namespaces)} namespace(s) holding pods this run "
            "could move (a SubjectAccessReview as the creator refused each; they are not named here)")


@dataclass(frozen=True)
class Scope:
    """What a run screened by its creator's rights may plan and show (`scope_for`): `refused` why
    nothing at all; `not_evictable` planner.plan's input (None: no namespace denied); `left_out` the
    line for the message; `visible` the namespaces its status may name (None: any, nothing screened)."""
    refused: str = ""
    not_evictable: Optional[dict] = None
    left_out: str = ""
    visible: Optional[frozenset] = None


def scope_for(namespaces: list, screening: Screening, spec: Mapping[str, Any]) -> Scope:
    """The Scope of a run whose creator was screened (`screening`) for the namespaces holding pods
    it could move (`namespaces`). It may show what lies in the namespaces the creator may evict in
    and the ones its spec names (its target's)."""
    refused = screening.refused or refused_everywhere(namespaces, screening)
    if refused:
        return Scope(refused=refused)
    denied = [ns for ns in namespaces if ns in screening.denied]
    visible = frozenset([ns for ns in namespaces if ns not in screening.denied]
                        + [key.partition("/")[0] for key in target_keys(spec)])
    if not denied:
        return Scope(visible=visible)
    return Scope(not_evictable=not_evictable_reasons(denied, screening.creator),
                 left_out=left_out_line(denied, screening.creator), visible=visible)


def sweep_expired(runs: RunStore, now: dt.datetime, keep: str, reporter: Reporter,
                  listed: Optional[Iterable[Mapping[str, Any]]] = None) -> None:
    """Delete finished runs past ttlSecondsAfterFinished (EXEC-7), except the one being applied
    (`keep`); each delete has the uid and resourceVersion that were judged expired as preconditions.
    `listed`: the runs as just listed (the controller's tick has them), instead of listing again."""
    for old in map(RunView, runs.list() if listed is None else listed):
        meta = old.meta
        if meta.get("name") != keep and old.ttl_expired(now) and runs.delete(meta["name"], meta.get("uid"),
                                                                               meta.get("resourceVersion")):
            reporter.note(f"repackrun.repack.volcano.sh/{meta['name']} deleted (ttlSecondsAfterFinished passed)")


def create_or_resume(runs: RunStore, request: ApplyRequest, reporter: Reporter) -> dict:
    """The stored run: created from the request, or the existing one if its spec is the same."""
    name = request.name
    try:
        current = runs.get(name)
    except NotFound:
        if request.run is None:
            raise
        current = None
    if current is not None and RunView(current).mode != MODE_EXECUTE:
        raise ValidationError([f"repackrun {name} exists with mode {current['spec'].get('mode')}; "
                               "choose a new name (--name) for the Execute run"])
    if current is not None and request.run is not None and RunView(current).spec != request.run["spec"]:
        raise ValidationError([f"repackrun {name} exists with a different spec (a RepackRun's spec is immutable); "
                               f"continue it with `kubectl repack apply --resume {name}` or choose a new name (--name)"])
    if current is None:
        current = runs.create(request.run)
        reporter.note(f"repackrun.repack.volcano.sh/{name} created")
    else:
        reporter.note(f"repackrun.repack.volcano.sh/{name} exists: continuing it from its records")
    return current


def namespaces_to_evict(run: dict) -> list:
    """Namespaces of the records whose eviction may still be issued (the authorization's scope)."""
    return sorted({r.namespace for r in RunView.of(run).relocations
                   if r.eviction.phase in (EVICTION_PENDING, EVICTION_IN_PROGRESS)})


def _target_moved_on(engine: Executor, name: str, current: dict) -> Optional[dict]:
    """Before anything is planned (spec.target): a target that runs already leaves nothing to make
    room for (Succeeded, TargetAlreadyFits), one that is gone nothing to aim at (Failed,
    TargetChanged); the ended run, or None (untargeted, or every target still waits)."""
    if not target_keys(current["spec"]):
        return None
    target, why = engine.target_state(current["spec"])
    if target == TARGET_BOUND:
        return engine.succeed(name, Reason.TARGET_FITS, f"{why} before the Execute began: nothing to make room "
                                                        "for; nothing was evicted")
    if target:
        return engine.fail(name, Reason.TARGET_CHANGED, f"{why} before the Execute began; nothing was evicted")
    return None


def _start_new(engine: Executor, name: str, current: dict, request: ApplyRequest,
               screen: Optional[Callable[[list], Screening]], authorize: Optional[Callable[[list], str]],
               seal: Optional[Callable[[dict, list], None]]) -> tuple:
    """A new start under the Lease (apply_run's docstring says which hook does what): the target
    checked, the screen, the live plan, the authorization of what it moves, the records. Returns
    (the run, the cooldown to store when the Lease is released: None unless the run started)."""
    ended = _target_moved_on(engine, name, current)
    if ended is not None:
        return ended, None
    snapshot, scope = None, Scope()
    try:
        if screen:
            snapshot = engine.live_snapshot()
            namespaces = planner.movable_namespaces(snapshot, current["spec"])
            scope = scope_for(namespaces, screen(namespaces), current["spec"])
            if scope.refused:
                return engine.fail(name, Reason.NOT_AUTHORIZED, f"{scope.refused}; nothing was evicted"), None
        plan = engine.plan_live(current, snapshot, scope.not_evictable)    # EXEC-1: never a DryRun's plan
        if scope.visible is not None:
            plan = scoped_plan(plan, scope.visible)
    except SpecError as e:   # a spec the live state refuses would never pass: the run ends
        # (the planner refuses a target that is not waiting: one that started running or went away meanwhile)
        ended = _target_moved_on(engine, name, current)
        return ended if ended is not None else engine.fail(
            name, Reason.INVALID_SPEC, f"the planner refuses the spec on live state: {e}; nothing was evicted"), None
    # asked again for what the plan moves (the screen is not the only check)
    denied_now = authorize(sorted({m.pod.namespace for m in plan.moves})) if authorize and plan.moves else ""
    if denied_now:
        return engine.fail(name, Reason.NOT_AUTHORIZED, f"{denied_now}; nothing was evicted"), None
    if seal and plan.moves:
        seal(current, initial_relocations(plan))    # before the records exist
    return engine.start(name, plan, scope.left_out), (request.cooldown if authorize else None)


def apply_run(request: ApplyRequest, runs: RunStore, lease: Mutex, cluster: ClusterReader, evictor: Evictor,
              reporter: Reporter, clock: Optional[Clock] = None, me: Optional[str] = None,
              authorize: Optional[Callable[[list], str]] = None, cancelled: Optional[Callable[[dict], str]] = None,
              on_event: Optional[Callable[[str, str, bool], None]] = None,
              seal: Optional[Callable[[dict, list], None]] = None,
              vet: Optional[Callable[[dict, object], Optional[tuple]]] = None,
              on_evicted: Optional[Callable[[object, Optional[dict]], None]] = None,
              screen: Optional[Callable[[list], Screening]] = None,
              opted_out: Optional[Callable[[str, str], str]] = None,
              mark: Optional[RunMark] = None) -> ApplyResult:
    """Carry out (or continue) one Execute run; see the module docstring for the order.

    In the cluster (webhook.controller) more hooks apply. `screen(namespaces)` is asked before a
    new start is planned, with the namespaces holding pods the plan could move
    (planner.movable_namespaces on the live snapshot the plan then uses): a `refused` answer ends
    the run Failed, EvictionNotAuthorized, before anything else; pods of the `denied` namespaces
    are left out of the plan (planner.plan's `not_evictable`) and the run's message and an Event
    say which and why; if every one is denied the run ends Failed, EvictionNotAuthorized.
    `authorize(namespaces)` returns why the run's creator may not evict in one of them ('' when
    allowed) and is asked before the first eviction of a new (the plan's namespaces) or continued
    run (the run then ends Failed, EvictionNotAuthorized); `cancelled(run)` says why the run must
    stop (cancel annotation, delete); `on_event` hears each step (Events); `seal(run, records)` is
    handed the relocation records of a new plan before they are written (the controller seals
    them); `vet`, `on_evicted` and `opted_out` are the Executor's (asked before every eviction;
    told of each accepted one; asked whether a PodGroup opted out since the plan was made), and so
    is `mark` (RunMark: told what the run becomes before the status says so, and read back: the
    run-state mark).
    Screened, the plan's status names nothing of a namespace the creator may not evict in
    (`Scope`, api.status.scoped_plan)."""
    clock = clock or Clock()
    name = request.name
    sweep_expired(runs, clock.now(), name, reporter)
    current = create_or_resume(runs, request, reporter)
    if is_finished(current):
        return ApplyResult(current, note=f"repackrun {name} already finished")
    cancelled = cancelled or (lambda run: "")

    cooldown = request.cooldown if request.cooldown is not None else lease.stored_cooldown()
    # A started run continues; the cooldown gates new runs only.
    cooldown_now = dt.timedelta(0) if RunView(current).has_records else cooldown
    me = me or holder_identity(name)
    engine = Executor(cluster, evictor, runs, clock=clock,
                      options=Options(execution_timeout=request.timeout,
                                      eviction_retry_timeout=request.eviction_retry_timeout),
                      on_progress=reporter.progress,
                      guard=lease.check, cancelled=cancelled, on_event=on_event, vet=vet, on_evicted=on_evicted,
                      opted_out=opted_out, mark=mark, scoped=screen is not None)
    why = cancelled(current)
    if why and not RunView(current).has_records:
        return ApplyResult(engine.fail(name, Reason.CANCELLED, f"{why}: nothing was evicted"))

    give_up = clock.now() + request.timeout
    last_reason = None
    # In the cluster the run's cooldown becomes everyone's setting only once its creator was
    # authorized (stored when the Lease is released); the plugin's own --cooldown is stored at once.
    store_now = None if authorize else request.cooldown
    store_later = None
    while True:
        decision = lease.try_acquire(me, clock.now(), cooldown_now, store_now)
        if decision.acquire:
            break
        why = cancelled(runs.get(name))
        if why and not RunView(current).has_records:
            return ApplyResult(engine.fail(name, Reason.CANCELLED, f"{why} while Pending: nothing was evicted"))
        if decision.reason != last_reason:
            # A started run stays Running while it waits (a fail-over waits for the dead holder's
            # Lease to expire): Pending would tell the webhook and coordinator to stop steering the
            # replacements of pods it has already evicted.
            if not RunView(current).has_records:
                engine.mark_pending(name, decision.reason, decision.message)
            last_reason = decision.reason
            reporter.note(f"waiting: {decision.reason}: {decision.message}")
        left = (give_up - clock.now()).total_seconds()
        if not request.wait or left <= 0:
            return ApplyResult(runs.get(name), pending=True,
                               note=f"repackrun {name} is Pending ({decision.reason}); "
                                    f"run `kubectl repack apply --resume {name}` later")
        clock.sleep(max(0.5, min(decision.retry_after, 5.0, left)))

    lease.start_renewing(me)
    completed = None
    try:
        if not RunView(current).has_records and not is_finished(current):
            current, store_later = _start_new(engine, name, current, request, screen, authorize, seal)
        elif not is_finished(current) and authorize:
            denied_now = authorize(namespaces_to_evict(current))
            if denied_now:
                done = "nothing further was evicted" if evicted_any(current) else "nothing was evicted"
                current = engine.fail(name, Reason.NOT_AUTHORIZED, f"{denied_now}; {done}")
            else:
                store_later = request.cooldown
        if not is_finished(current):
            current = engine.execute(name)
        if evicted_any(current):
            completed = clock.now()
    except RepackError:   # the API failed, the Lease was lost, the records changed: stopped mid-run
        try:
            evicted = evicted_any(runs.get(name))
        except ClusterAPIError:
            evicted = True   # cannot tell: assume the worst, so the cooldown applies
        completed = clock.now() if evicted else None
        raise
    finally:
        try:
            lease.release(me, name, completed, store_later)
        except ClusterAPIError as e:   # never hides what ended the run; the Lease then expires
            reporter.note(f"warning: releasing the execute Lease: {e}; it expires by itself")
    return ApplyResult(current)
