"""The RepackRun controller (EXEC-8): RepackRuns created with `kubectl apply` are carried out in the
cluster, not from a laptop.

One leader (Lease `repack-controller`, the kube layer's Lease client) reconciles every RepackRun:

* **DryRun**, no status yet: planned on live state with `planner.plan`, screened like a new
  Execute (below); the status written is the one `kubectl repack plan --save` writes (plan,
  Complete condition, phase Succeeded).
* **Execute**, not finished: carried out by the engine `kubectl repack apply --local` uses
  (kubectl_repack.engine.workflow.apply_run: execute Lease mutex and cooldown, write-ahead records,
  Eviction API with PDBs, placement tracking, verification, result, TTL), in one worker thread, one
  run at a time, oldest first. A run continues from its records after a restart or fail-over, so no
  pod is evicted twice (the records are written before each Eviction call).
* **Finished** runs are never touched again, except that the finalizer is removed, and that once
  `ttlSecondsAfterFinished` has passed the run is deleted (EXEC-7; on every tick, by this controller only).
  Where an Execute stands is read from the controller's own run-state mark
  (webhook.controller.authority, SEC-2), not from its status: a run marked Finished stays
  finished (a status rewritten since is put back), one marked Started is never planned again,
  and a started run's execution deadline must be the one its mark holds.
* Runs marked `repack.volcano.sh/executor: local` belong to the plugin (`apply --local`, `plan
  --save`) and are left alone.

Before a run's first eviction (and again when a started run is continued) the controller checks
that the run's *creator* may evict (kubectl_repack.api.control): the creator annotations, which the
API server's admission policy vouches for, must exist, the run must be younger than that policy's
enforcement and than the record's trust bound (`--creator-max-age`, 1h), for a new start and a
continued one alike. Otherwise the run ends Failed, EvictionNotAuthorized, before any
SubjectAccessReview. A new start (and a DryRun) then plans only pods the creator may evict: before
planning, a SubjectAccessReview as that user (`create pods/eviction`) is asked for every namespace
holding pods the plan could move; pods of the namespaces it refuses are left out of the plan, the
run's status names nothing of them (api.status.scoped_plan), and its message and an Event say how
many were left out; if it refuses all of them the run ends Failed, EvictionNotAuthorized. The
annotations that bound a run (execution-timeout, execute-cooldown, window-end) are checked before
its first eviction; once it started, a bad one is ignored, never ending the run halfway. The plan's namespaces are asked again before the first eviction, and the
victim's before every single eviction. A spec the CRD accepts but the planner refuses ends Failed,
InvalidSpec, naming the field.

A workload that opts out (`repack.volcano.sh/do-not-disrupt: "true"`) after the plan was made is
not evicted: the executor reads the victims, and the controller the PodGroup and its workload,
right before; each eviction leaves an Event `RepackEvicted` on the victim's PodGroup and on its
controlling owner (e.g. the Volcano Job), naming the run and its creator.

Only the controller decides what a run evicts (SEC-2): it plans on live state itself, and seals the
victims of the records it writes with an HMAC keyed by a Secret only its account reads; records
that do not verify against the seal, before the first and before every eviction, end the run
Failed, RelocationRecordsInvalid, with nothing (further) evicted.

RepackPolicies (POLICY-1, POLICY-2): after the runs, each tick hands the runs it listed to
webhook.controller.policies, which creates the policies' runs (carried out here like any other). An
Execute a policy made inside a maintenance window carries the window's end
(`repack.volcano.sh/window-end`): its execution deadline is capped there, and one that could only
start after it ends ExecutionDeadlineExceeded before any eviction.

Cancel and delete: the annotation `repack.volcano.sh/cancel: "true"` (`kubectl repack cancel`),
or a delete, stops a run before its next eviction; it ends Failed/Cancelled saying what was and was
not moved. An Execute run carries the finalizer `repack.volcano.sh/stop-before-delete` while the
controller works on it, so a delete waits until the run has stopped (the finalizer is removed as
soon as the run is finished).
"""
from __future__ import annotations

import argparse
import datetime as dt
import logging
import os
import signal
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any, Callable, Optional, Sequence

import planner
from planner.gcpause import paused_gc
from kubectl_repack.api import installed
from kubectl_repack.api import control
from kubectl_repack.api.control import (CONTROLLER_LEASE_NAME, CREATOR_MAX_AGE, FINALIZER, RECORDS_SEAL_ANNOTATION,
                                        RUN_STATE_ANNOTATION, BadStateMark, UntrustedCreator, cancel_requested,
                                        creator_of, executed_locally, finalizer_removal, run_durations, seal_problem,
                                        state_disagreement)
from kubectl_repack.api.policy import WINDOW_END_ANNOTATION, window_timeout
from kubectl_repack.api.run import MODE_DRY_RUN, MODE_EXECUTE, Reason, RunView, is_finished, phase_of, relocations
from kubectl_repack.api.status import plan_status, restore_finished, scoped_plan
from kubectl_repack.api.times import parse_duration, rfc3339, utcnow
from kubectl_repack.api.view import ObjectView
from kubectl_repack.engine.executor import Executor
from kubectl_repack.engine.mutex import holder_identity
from kubectl_repack.engine.ports import EV_LEFT_OUT
from kubectl_repack.engine.workflow import ApplyRequest, Screening, apply_run, scope_for, sweep_expired
from kubectl_repack.errors import NotFound, RepackError, SpecError
from kubectl_repack.kube.incluster import controlling_owner
from webhook.common.election import LeaderElector, leader_process_args, process_identity
from webhook.common.health import Answer, serve
from webhook.common.metrics import ControllerMetrics
from webhook.controller.authority import RunAuthority
from webhook.controller.gauge import DEFAULT_GAUGE_INTERVAL, MAX_RESOURCES, GaugeRefresher, gauge_resource_list

log = logging.getLogger("webhook.controller")

COMPONENT = installed.CONTROLLER
DEFAULT_INTERVAL = 2.0
DEFAULT_EXECUTION_TIMEOUT = "10m"
DRY_RUNS_PER_MINUTE = 10    # live DryRun plans at most (each reads and plans the whole cluster)
GATE_SWEEP_SECONDS = 5.0     # a gate is lifted at most this long after the placement lease ran out


class _Log:
    """The workflow's reporter: notes into the log (no terminal here)."""

    def note(self, message: str) -> None:
        log.info("%s", message)

    def progress(self, progress: Any) -> None:
        pass


def _created(run: dict) -> str:
    return str(ObjectView(run).meta.get("creationTimestamp") or "")


class Controller:
    """One tick = elect, list runs, plan new DryRuns, hand Execute runs to the worker thread."""

    metrics = None   # webhook.common.metrics.ControllerMetrics (main sets it): runs as they end, evictions

    def __init__(self, api, runs, cluster, lease, elector, key: Callable[[], bytes],
                 events: Callable[[dict], Callable[[str, str, bool], None]],
                 authorize_as: Callable[[Any, list], str], interval: float = DEFAULT_INTERVAL,
                 execution_timeout=None, clock=None, patch_run: Optional[Callable[[str, list], None]] = None,
                 policy_since: Callable[[], Any] = lambda: None, creator_max_age=CREATOR_MAX_AGE,
                 lift_gates: Callable[[Any], list] = lambda now: [], gate_sweep_seconds: float = GATE_SWEEP_SECONDS,
                 dry_runs_per_minute: int = DRY_RUNS_PER_MINUTE,
                 audit_event: Callable[[str, str, Optional[dict], str, str], None] =
                 lambda ns, group, owner, reason, message: None,
                 pod_group_opt_out: Callable[[str, str], str] = lambda ns, group: "",
                 policies=None):
        """`key()` is the records-seal key; `authorize_as(creator, namespaces)` why that user may not
        evict there ('' when they may); `policy_since()` since when the creator admission policy is
        enforced (None: it is not); `lift_gates(now)` lifts gates older than the placement lease
        (every `gate_sweep_seconds`), so a coordinator that is down keeps no pod gated past it;
        `audit_event(namespace, PodGroup, owner, reason, message)` leaves the owners' Events for
        one eviction (on the PodGroup, and on `owner`, the victim's controlling ownerReference, or
        the PodGroup's when None); `pod_group_opt_out(namespace, PodGroup)` says what opted that
        PodGroup out of being moved, read now ('' when nothing did)."""
        self.api, self.runs, self.cluster, self.lease, self.elector = api, runs, cluster, lease, elector
        # JSON patch of a run's metadata (finalizer); refused when the run changed or is gone, and the
        # next tick decides again
        self.patch_run = patch_run or runs.patch
        self.key, self.events, self.authorize_as = key, events, authorize_as
        self.policy_since, self.creator_max_age = policy_since, creator_max_age
        self.authority = RunAuthority(runs, key, authorize_as, policy_since, creator_max_age, self._now)
        self.lift_gates, self.gate_sweep_seconds = lift_gates, gate_sweep_seconds
        self.dry_runs_per_minute = dry_runs_per_minute
        self.audit_event = audit_event   # (namespace, PodGroup, owner, reason, message): the owners' audit trail
        self.pod_group_opt_out = pod_group_opt_out
        self.policies = policies         # webhook.controller.policies.PolicyReconciler (None: policies off)
        self._planned_at: list = []      # when the last DryRuns were planned (the rate limit's window)
        self._last_gate_sweep = float("-inf")
        self.interval = interval
        self.execution_timeout = execution_timeout or parse_duration(DEFAULT_EXECUTION_TIMEOUT)
        self.clock = clock
        self.stop_event = threading.Event()
        self.worker: Optional[threading.Thread] = None
        self.last_tick = time.monotonic()

    # -- the loop --
    def keep_leading(self) -> None:
        """Acquire/renew the leader Lease on its own thread: planning a large cluster takes longer
        than the Lease lasts, and leadership must not lapse (stopping the running Execute) meanwhile."""
        period = max(0.5, min(self.interval, self.elector.duration / 3.0))
        while not self.stop_event.is_set():
            try:
                self.elector.ensure()
            except Exception:  # noqa: BLE001 - a failed renewal is retried; leadership lapses by itself
                log.exception("leader election")
            self.stop_event.wait(period)

    def run(self) -> None:
        threading.Thread(target=self.keep_leading, name="leader-election", daemon=True).start()
        while not self.stop_event.is_set():
            try:
                self.tick()
            except RepackError as e:
                log.warning("tick: %s", e)
            except Exception:  # noqa: BLE001 - the loop must survive anything and try again
                log.exception("tick failed")
            self.last_tick = time.monotonic()
            self.stop_event.wait(self.interval)
        if self.worker is not None:
            self.worker.join(timeout=30)
        self.elector.release()

    def tick(self) -> None:
        if not self.elector.is_leader:      # kept by keep_leading (tests may call ensure themselves)
            return
        if time.monotonic() - self._last_gate_sweep >= self.gate_sweep_seconds:
            self._last_gate_sweep = time.monotonic()
            try:
                for pod in self.lift_gates(self._now()):
                    log.info("pod %s: placement gate lifted (older than the placement lease)", pod)
            except RepackError as e:
                log.warning("lifting expired placement gates: %s", e)
        runs = sorted(self.runs.list(), key=_created)
        settled = []    # finished runs whose finalizer is gone: the ones a TTL may delete as listed
        for run in runs:
            if is_finished(run):
                if finalizer_removal(run):
                    self.drop_finalizer(run)    # its resourceVersion changes: judged on the next tick
                else:
                    settled.append(run)
            elif executed_locally(run):
                continue
            elif RunView(run).mode == MODE_DRY_RUN and not phase_of(run):
                if self.may_plan_dry_run():
                    self.plan_dry_run(run)
        # Expired runs are deleted here, on every tick, and nowhere else (EXEC-7).
        sweep_expired(self.runs, self._now(), "", _Log(), listed=settled)
        if self.policies is not None:   # with the runs as listed: a run the sweep just deleted still counts
            self.policies.reconcile(runs)
        execute = [r for r in runs if RunView(r).mode == MODE_EXECUTE
                   and not is_finished(r) and not executed_locally(r)]
        if execute and (self.worker is None or not self.worker.is_alive()):
            names = [r["metadata"]["name"] for r in execute]
            self.worker = threading.Thread(target=self.execute_all, args=(names,), name="execute", daemon=True)
            self.worker.start()

    def may_plan_dry_run(self) -> bool:
        """At most `dry_runs_per_minute` live DryRun plans a minute (each is a full snapshot of the
        cluster): anybody who may create RepackRuns could otherwise keep the controller planning.
        A DryRun over the limit keeps waiting, unplanned, for a later tick."""
        now = self._now()
        self._planned_at = [t for t in self._planned_at if (now - t).total_seconds() < 60]
        if len(self._planned_at) >= self.dry_runs_per_minute:
            return False
        self._planned_at.append(now)
        return True

    def leading(self) -> Optional[str]:
        """The engine's guard: None while we lead, else why no further eviction may be issued."""
        return None if self.elector.is_leader else "this controller is no longer the leader"

    # -- DryRun --
    def plan_dry_run(self, run: dict) -> None:
        """Plan a new DryRun on live state, as its creator may see it (SEC-1): screened like a new
        Execute (Controller.screen), pods of namespaces where the creator may not evict are neither
        moved nor named (the message says how many namespaces were left out), and a creator who may
        evict in none of them gets no plan (Failed, EvictionNotAuthorized)."""
        name, uid = run["metadata"]["name"], run["metadata"].get("uid")
        record = self.events(run)
        try:
            spec = planner.RunSpec.from_spec(run["spec"])
        except SpecError as e:
            self._engine(record, run).fail(name, Reason.INVALID_SPEC, f"the planner refuses the spec: {e}")
            return
        with paused_gc():
            snapshot = planner.load_objects(self.cluster.snapshot_objects())
        try:
            namespaces = planner.movable_namespaces(snapshot, run["spec"])
            scope = scope_for(namespaces, self.authority.screen(run, namespaces), run["spec"])
            if scope.refused:
                self._engine(record, run).fail(name, Reason.NOT_AUTHORIZED, f"{scope.refused}; nothing was planned")
                return
            with paused_gc():
                result = scoped_plan(planner.plan(snapshot, spec, not_evictable=scope.not_evictable), scope.visible)
        except SpecError as e:   # e.g. a target that is not waiting (any more)
            self._engine(record, run).fail(name, Reason.INVALID_SPEC, f"the planner refuses the spec: {e}")
            return
        status = plan_status(result, rfc3339(utcnow()), scope.left_out)

        def mutate(st: dict) -> None:
            if st.get("phase"):        # planned meanwhile (plan --save, or a previous leader)
                return
            st.update(status)
        self.runs.update_status(name, mutate, uid=uid)
        self.finished(dict(run, status=status))
        if scope.left_out:
            record(EV_LEFT_OUT, scope.left_out, True)
        record("Planned", f"{result.outcome}: {status['message']}", False)
        log.info("planned DryRun %s: %s", name, result.outcome)

    # -- Execute --
    def _engine(self, record, run: dict) -> Executor:
        return Executor(self.cluster, self.cluster, self.runs, on_event=record, mark=self.authority.marker(run))

    def execute_all(self, names: list) -> None:
        """Oldest first; stop after one run that actually ran (the next tick looks again)."""
        for name in names:
            if self.stop_event.is_set() or not self.elector.is_leader:
                return
            try:
                if self.execute(name):
                    return
            except RepackError as e:
                log.warning("repackrun %s: %s", name, e)
            except Exception:  # noqa: BLE001 - one run's failure must not stop the controller
                log.exception("repackrun %s", name)

    def execute(self, name: str) -> bool:
        """Carry out (or continue) one Execute run. True when it held the mutex (ran or ended)."""
        try:
            run = self.runs.get(name)
        except NotFound:
            return False
        if executed_locally(run):
            self.drop_finalizer(run)
            return False
        record = self.events(run)
        engine = self._engine(record, run)
        try:   # SEC-2: what the controller vouches for, not what the status says, tells where the run is
            state = self.authority.state_of(run)
        except BadStateMark as e:
            if not is_finished(run):
                self.drop_finalizer(self.finished(engine.fail(name, Reason.INVALID_RECORDS,
                                                              f"{e}; nothing further is evicted")))
            else:
                self.drop_finalizer(run)
            return False
        if state is not None and state.finished:
            self.keep_finished(name, run, state)
            return False
        if is_finished(run):
            self.drop_finalizer(run)
            return False
        started = bool(relocations(run))
        if state is not None and not started:
            self.drop_finalizer(self.finished(engine.fail(
                name, Reason.INVALID_RECORDS, "the controller started this run before (annotation "
                f"{RUN_STATE_ANNOTATION}), but its status no longer holds the relocation records: a started run is "
                "never planned again; nothing further is evicted")))
            return False
        try:
            planner.RunSpec.from_spec(run["spec"])
        except SpecError as e:
            self.drop_finalizer(self.finished(engine.fail(name, Reason.INVALID_SPEC,
                                                          f"the planner refuses the spec: {e}")))
            return False
        durations, timeout = self.run_limits(name, run, started, engine, record)
        if timeout is None:
            return False
        if not ObjectView(run).deleting and not self.add_finalizer(run):
            log.info("repackrun %s: the finalizer did not land (the run changed meanwhile); next tick", name)
            return False       # never evict for a run whose delete would not wait for us

        def authorize(namespaces: list) -> str:
            creator, problem = self.authority.trusted_creator(self.runs.get(name))
            return problem or self.authorize_as(creator, namespaces)

        def screen(namespaces: list) -> Screening:
            return self.authority.screen(self.runs.get(name), namespaces)

        def seal(run: dict, records: list) -> None:
            uid = ObjectView(run).uid   # the digest: what the webhook and the coordinator verify, keyless
            self.runs.annotate_all(name, {RECORDS_SEAL_ANNOTATION: control.seal(self.key(), uid, records),
                                          control.RECORDS_DIGEST_ANNOTATION: control.records_digest(uid, records)})

        def vet(run: dict, record) -> Optional[tuple]:
            problem = seal_problem(run, self.key()) or self.authority.state_problem(run)
            if problem:
                return Reason.INVALID_RECORDS, f"{problem}; nothing is evicted on their word"
            if record is None:
                return None
            try:
                denied = self.authorize_as(creator_of(run), [record.namespace])
            except UntrustedCreator as e:
                denied = f"no trustworthy creator record: {e}"
            return (Reason.NOT_AUTHORIZED, denied) if denied else None

        def evicted(record, pod: Optional[dict]) -> None:
            if self.metrics is not None:
                self.metrics.evicted()
            try:
                who = creator_of(self.runs.get(name)).username
            except (UntrustedCreator, RepackError):
                who = "unknown"
            self.audit_event(record.namespace, record.pod_group_name, controlling_owner(pod), "RepackEvicted",
                             f"pod {record.victim_pod_name} evicted by RepackRun {name} (created by {who}) to "
                             f"move it to {record.planned_node_name}")

        request = ApplyRequest(name, None, wait=False, timeout=timeout,
                               cooldown=durations.get("cooldown"))
        kwargs = {"clock": self.clock} if self.clock else {}
        result = apply_run(request, self.runs, _GuardedLease(self.lease, self.leading), self.cluster, self.cluster,
                           _Log(), me=holder_identity(name, host=os.environ.get("POD_NAME")),
                           authorize=authorize, cancelled=cancel_requested, on_event=record, seal=seal, vet=vet,
                           on_evicted=evicted, screen=screen, opted_out=self.pod_group_opt_out,
                           mark=self.authority.marker(run), **kwargs)
        if is_finished(result.run):
            self.drop_finalizer(self.finished(result.run))
        return not result.pending

    def run_limits(self, name: str, run: dict, started: bool, engine: Executor, record) -> tuple:
        """(durations, timeout) from the run's annotations; (None, None) when the run just ended.
        Before its first eviction a bad value ends the run InvalidSpec (nothing evicted) and a
        maintenance window that has ended DeadlineExceeded; once started, the run keeps the deadline
        its mark holds, and a bad value is ignored (an Event says so): the run goes on, never left
        halfway with a record unsettled."""
        try:
            durations = run_durations(run, parse_duration)
            window = None if started else window_timeout(ObjectView(run).annotations.get(WINDOW_END_ANNOTATION),
                                                         self._now())
        except ValueError as e:
            if started:
                record("AnnotationIgnored", f"{e}: ignored, the run goes on with the execution deadline it started "
                                            "with", True)
                return {}, self.execution_timeout
            self.drop_finalizer(self.finished(engine.fail(name, Reason.INVALID_SPEC, f"{e}; nothing was evicted")))
            return None, None
        timeout = durations.get("timeout", self.execution_timeout)
        if window is not None:
            if window <= dt.timedelta(0):
                self.drop_finalizer(self.finished(engine.fail(
                    name, Reason.DEADLINE_EXCEEDED, f"its maintenance window ended at "
                    f"{ObjectView(run).annotations.get(WINDOW_END_ANNOTATION)} before it could start; nothing was "
                    "evicted")))
                return None, None
            timeout = min(timeout, window)
        return durations, timeout

    def keep_finished(self, name: str, run: dict, state) -> None:
        """A run the controller ended stays ended: a status rewritten since is put back."""
        why = state_disagreement(run, state)
        if why:
            log.warning("repackrun %s: %s; restoring its status (a finished run is never resumed)", name, why)
            self.events(run)("StatusRestored", f"{why}: restored from annotation {RUN_STATE_ANNOTATION}; a finished "
                                               "run is never resumed", True)
            run = self.runs.update_status(name, lambda st: restore_finished(st, state, rfc3339(self._now())),
                                          uid=ObjectView(run).uid)
        self.drop_finalizer(run)

    def finished(self, run: dict) -> dict:
        """A run this controller just ended, counted by the metrics (mode, phase, reason, freed nodes)."""
        if self.metrics is not None:
            self.metrics.run_finished(run)
        return run

    def _now(self):
        return self.clock.now() if self.clock else utcnow()

    # -- finalizer --
    def add_finalizer(self, run: dict) -> bool:
        """Put FINALIZER on the run; True once the stored run carries it (a patch refused because the
        run changed meanwhile is not an error, but then nothing may be evicted until it lands)."""
        meta = ObjectView(run).meta
        current = list(meta.get("finalizers") or [])
        if FINALIZER in current:
            return True
        ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
               {"op": "add", "path": "/metadata/finalizers", "value": current + [FINALIZER]}]
        self.patch_run(meta["name"], ops)
        try:
            stored = self.runs.get(meta["name"])
        except NotFound:
            return False
        return FINALIZER in (ObjectView(stored).meta.get("finalizers") or [])

    def drop_finalizer(self, run: dict) -> None:
        ops = finalizer_removal(run)
        if ops:
            self.patch_run(run["metadata"]["name"], ops)


class _GuardedLease:
    """The execute Lease, whose check also fails when this controller stops leading."""

    def __init__(self, lease, leading: Callable[[], Optional[str]]):
        self._lease, self._leading = lease, leading

    def check(self) -> Optional[str]:
        return self._leading() or self._lease.check()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._lease, name)


# --- process entry point ---------------------------------------------------------------------------
def serve_health(controller: Controller, port: int, metrics=None) -> ThreadingHTTPServer:
    """/healthz: 200 while the loop ticks (503 when it has not for 3 intervals + 30 s); /metrics:
    `metrics` (a ControllerMetrics) in the Prometheus text format."""
    def respond(path: str) -> Answer:
        if metrics is not None and path.split("?", 1)[0] == "/metrics":
            return 200, "text/plain; version=0.0.4; charset=utf-8", metrics.render().encode()
        stale = time.monotonic() - controller.last_tick > 3 * controller.interval + 30
        return (503, "text/plain", b"loop stalled\n") if stale else (200, "text/plain", b"ok\n")

    return serve(port, respond, "health")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    env = os.environ.get
    p = leader_process_args(COMPONENT, __doc__.splitlines()[0], "REPACK_CONTROLLER", CONTROLLER_LEASE_NAME,
                            f"{DEFAULT_INTERVAL}s", "namespace of the Leases and of the records-seal key Secret")
    p.add_argument("--execution-timeout", default=env("REPACK_EXECUTION_TIMEOUT", DEFAULT_EXECUTION_TIMEOUT),
                   help="status.executionDeadline of a run, counted from its start")
    p.add_argument("--health-port", type=int, default=int(env("REPACK_CONTROLLER_HEALTH_PORT", "0")),
                   help="serve /healthz and /metrics on this port (0: off)")
    p.add_argument("--gauge-interval", default=env("REPACK_GAUGE_INTERVAL", DEFAULT_GAUGE_INTERVAL),
                   help="how often the leader re-reads the cluster for the fragmentation gauge of /metrics "
                        "(0s: no gauge)")
    p.add_argument("--gauge-resources", default=env("REPACK_GAUGE_RESOURCES", ""),
                   help="comma-separated extended resources the gauge measures (default: every one some node has "
                        f"allocatable, at most {MAX_RESOURCES})")
    p.add_argument("--creator-max-age", default=env("REPACK_CREATOR_MAX_AGE", "1h"),
                   help="an Execute whose creator record (the run's creation) is older than this when it would "
                        "start is refused: the creator's groups are read at creation only")
    p.add_argument("--policy-interval", default=env("REPACK_POLICY_INTERVAL", "60s"),
                   help="how often each RepackPolicy is evaluated (fragmentation, waiting gangs; cron slots are "
                        "checked on every tick)")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of `python -m webhook.controller`."""
    from kubectl_repack.engine.execute_lease import ExecuteLease
    from kubectl_repack.kube.client import connect
    from kubectl_repack.api.gates import PLACEMENT_KEY_SECRET_NAME
    from kubectl_repack.kube.incluster import (EventRecorder, create_key, creator_policy_since, ensure_key,
                                               eviction_denied, lift_expired_gates, pod_group_opt_out, record_eviction)
    from kubectl_repack.kube.lease import LeaseClient
    from kubectl_repack.kube.objects import LiveCluster
    from kubectl_repack.kube.policies import PolicyStore
    from kubectl_repack.kube.runs import RunStore
    from webhook.controller.policies import PolicyReconciler

    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        lease_duration = max(1, int(round(parse_duration(args.lease_duration).total_seconds())))
        try:
            gauge_interval = parse_duration(args.gauge_interval).total_seconds()
        except ValueError as e:
            raise ValueError(f"--gauge-interval: {e}") from e
        gauge_resources = gauge_resource_list(args.gauge_resources)
        interval = parse_duration(args.interval).total_seconds()
        execution_timeout = parse_duration(args.execution_timeout)
        creator_max_age = parse_duration(args.creator_max_age)
        policy_interval = parse_duration(args.policy_interval).total_seconds()
        api = connect(args.kubeconfig)
    except (ValueError, RepackError) as e:
        log.error("%s", e)
        return 2
    identity = process_identity(args.identity)
    elector = LeaderElector(LeaseClient(api, args.namespace, args.lease_name), identity, lease_duration)
    key_cache: dict = {}

    def key() -> bytes:
        if "key" not in key_cache:
            key_cache["key"] = ensure_key(api, args.namespace)
        if "placement" not in key_cache:   # the webhook's and the coordinator's marks key (SEC-5): made, never read
            try:
                create_key(api, args.namespace, PLACEMENT_KEY_SECRET_NAME)
                key_cache["placement"] = True
            except RepackError as e:
                log.warning("placement key: %s (retried when a run needs the seal key)", e)
        return key_cache["key"]

    cluster = LiveCluster(api)
    controller = Controller(api, RunStore(api), cluster, ExecuteLease(api, args.namespace), elector, key,
                            lambda run: EventRecorder(api, run, COMPONENT),
                            lambda creator, namespaces: eviction_denied(api, creator, namespaces),
                            interval=interval, execution_timeout=execution_timeout,
                            policy_since=lambda: creator_policy_since(api), creator_max_age=creator_max_age,
                            lift_gates=lambda now: lift_expired_gates(api, now),
                            audit_event=lambda ns, group, owner, reason, message: record_eviction(
                                api, ns, group, owner, reason, message, COMPONENT),
                            pod_group_opt_out=lambda ns, group: pod_group_opt_out(api, ns, group),
                            policies=PolicyReconciler(PolicyStore(api), RunStore(api), cluster, utcnow,
                                                      lambda: creator_policy_since(api), policy_interval))
    try:
        key()   # made at start, not in the middle of a run's first status write
    except RepackError as e:
        log.warning("records-seal key: %s (retried when a run needs it)", e)
    controller.metrics = ControllerMetrics()
    if gauge_interval > 0:
        GaugeRefresher(cluster.snapshot_objects, controller.metrics, gauge_interval, lambda: elector.is_leader,
                       controller.stop_event, gauge_resources).start()
    if args.health_port:
        serve_health(controller, args.health_port, controller.metrics)
    from webhook.controller import certmanager   # NOM-5: the webhook's TLS Secret and caBundle, made in the cluster

    certmanager.start(api, args.namespace, controller.stop_event)

    def stop(signum: int, _frame: Any) -> None:
        controller.stop_event.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    log.info("repack-controller %s starting (namespace %s)", identity, args.namespace)
    controller.run()
    return 0
