"""The placement coordinator (NOM-2, NOM-3, EXEC-5): the second half of the webhook's gate.

The webhook can only *gate* a replacement pod (the API server wipes `status` on CREATE), so this
process, the leader of the Lease `repack-coordinator`, finishes the job for every gated pod:

1. record the replacement (replacementPodName/UID, replacementPodGroupName) in its relocation;
2. check the planned node again on live state with the planner's own filters;
3. fits: PATCH `pods/status` nominatedNodeName, record selectedNodeName + phase Nominated, and only
   then remove the gate; does not fit: remove the gate with no hint (no stale nomination);
4. a gate older than the placement lease is removed whatever happens (fail open, TimedOut);
5. once the replacement is bound, record actualNodeName (phase Placed).

It acts only on what it can verify (SEC-2, SEC-5): a pod's marks must carry the webhook's MAC
for that pod (`PlacementKey.marks_problem`, keyed by the placement key Secret, read by name), and
its run's records must match their records digest (an annotation only the controller may write:
kubectl_repack.api.relocations.digest_problem); otherwise the pod is not recorded and its gate only
lifted. It holds no records-seal key: a stolen coordinator token cannot forge what the controller
evicts by.

Binding clears status.nominatedNodeName, and the API server refuses to set it on a bound pod (422,
`ClearingNominatedNodeNameAfterBinding`, on from Kubernetes 1.35): a pod read unbound that binds
before its hint lands is read again and recorded as Placed on the node it is bound to, never hinted
again (`nominate_or_bound`). Other scheduling gates on a pod (Volcano 1.15's queue-allocation gate,
anyone's) are never touched, and never counted or waited on as ours: only PLACEMENT_GATE is lifted.

And for a targeted run (RELIEF-3), once its executor has seen the planned nodes vacated
(status.result.target written, not yet bound): mark each pending pod of the target with the run and
the vacated node that fits it (`decide_target`), then PATCH its pods/status nominatedNodeName.

It never deletes a run: finished runs past `ttlSecondsAfterFinished` are the controller's to delete
(kubectl_repack.engine.workflow.sweep_expired).

Polling (one RepackRun list per tick; while a run is active, the pods of the namespaces its
relocations name, where every replacement appears; a cluster-wide sweep for orphaned gates every
`sweep_interval`) is deliberate: it is restart-safe with no watch bookkeeping, and every decision is
recomputed from what the API server says now. The decision itself is the pure
`webhook.coordinator.placement.decide`, tested as a table; `Coordinator` only does the I/O around it, through
two ports it is given (the kube layer's LiveCluster and RunStore) and a leader elector
(`webhook.common.election`, on the kube layer's one Lease client).

Writes to a RepackRun go through the kube layer's one status read-modify-write (resourceVersion,
retried on 409) and touch only the coordinator's fields (placement.{phase,selectedNodeName,replacementPodName,replacementPodUID,
actualNodeName} and replacementPodGroupName); `kubectl repack apply` owns everything else.
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

from kubectl_repack.api import installed
from kubectl_repack.api.gates import (COORDINATOR_LEASE_NAME, PLACEMENT_KEY_SECRET_NAME, PLACEMENT_LEASE, marks_problem,
                                      target_mark_patch, ungate_patch)
from kubectl_repack.api.relocations import digest_problem
from kubectl_repack.api.run import RunView, as_map, goal_resource, write_placement_fields
from kubectl_repack.api.times import parse_duration, utcnow
from kubectl_repack.api.view import ObjectView
from kubectl_repack.errors import Invalid, NotFound, RepackError
from kubectl_repack.kube.objects import FILTER_KINDS
from webhook.common.election import LeaderElector, leader_process_args, process_identity
from webhook.common.health import Answer, serve
from webhook.common.metrics import Metrics
from webhook.coordinator.placement import (Decision, LiveFit, Replacement, awaiting_target, decide, decide_target,
                                          find_record_in, replacement_of, target_run_ref)

log = logging.getLogger("webhook.coordinator")

DEFAULT_PLACEMENT_LEASE = PLACEMENT_LEASE
DEFAULT_INTERVAL = 1.0               # seconds between ticks
DEFAULT_SWEEP_INTERVAL = 10.0        # seconds between cluster-wide sweeps for orphaned gates


class Cluster(Protocol):
    """What the coordinator reads and writes on pods (kubectl_repack.kube.objects.LiveCluster)."""
    def list_pods(self, namespace: Optional[str] = None) -> list: ...
    def snapshot_objects(self, kinds=...) -> list: ...
    def patch_pod(self, namespace: str, name: str, json_patch: list) -> None: ...
    def nominate(self, namespace: str, name: str, node: str) -> None: ...
    def get_pod(self, namespace: str, name: str) -> Optional[dict]: ...
    def get_podgroup(self, namespace: str, name: str) -> Optional[dict]: ...


class Runs(Protocol):
    """RepackRuns (kubectl_repack.kube.runs.RunStore)."""
    def list(self) -> list: ...
    def update_status(self, name: str, mutate: Callable[[dict], None], uid: Optional[str] = None) -> dict: ...


class PlacementKey:
    """The placement key (the marks MAC's) as last read from its Secret (`read()`: the key, or None while the
    Secret does not exist): read again every `retry` seconds while missing, every `refresh`
    seconds once known. A failed read keeps the key known so far."""

    def __init__(self, read: Callable[[], Optional[bytes]], retry: float = 5.0, refresh: float = 300.0,
                 clock: Callable[[], float] = time.monotonic):
        self._read, self._retry, self._refresh, self._clock = read, retry, refresh, clock
        self._key: Optional[bytes] = None
        self._next = float("-inf")

    def get(self) -> Optional[bytes]:
        now = self._clock()
        if now >= self._next:
            try:
                key = self._read()
            except Exception as exc:  # noqa: BLE001 - keep what we have; try again soon
                log.warning("placement key: %s", exc)
                key = self._key
            if key is None and self._key is None:
                log.info("placement key not readable yet: no replacement's marks are acted on")
            self._key = key if key is not None else self._key
            self._next = now + (self._refresh if self._key is not None else self._retry)
        return self._key

    def marks_problem(self, pod: Mapping[str, Any]) -> str:
        """Why the pod's repack marks are not the webhook's ('' when they are)."""
        return marks_problem(pod, self.get())


class _NotOurs(Exception):
    """The record changed hands between the decision and the write: skip it."""


class Coordinator:
    """One tick = list runs, act on every annotated pod of the cluster."""

    def __init__(self, cluster: Cluster, runs: Runs, elector: Any,
                 placement_lease: timedelta = DEFAULT_PLACEMENT_LEASE, interval: float = DEFAULT_INTERVAL,
                 sweep_interval: float = DEFAULT_SWEEP_INTERVAL, metrics: Optional[Metrics] = None,
                 clock: Callable[[], datetime] = utcnow, *, placement_key: PlacementKey):
        self.cluster, self.runs, self.elector = cluster, runs, elector
        self.placement_key = placement_key   # marks are acted on only when they verify (SEC-5)
        self.placement_lease = placement_lease
        self.interval, self.sweep_interval = interval, sweep_interval
        self.metrics = metrics if metrics is not None else Metrics()
        self.clock = clock
        self._last_sweep = float("-inf")
        self._said: set = set()   # (run uid, note) already logged
        self.stop_event = threading.Event()

    # ----- main loop
    def run(self) -> None:
        """Until `stop_event`: lead, tick; release the Lease on the way out."""
        try:
            while not self.stop_event.is_set():
                try:
                    if self.elector.ensure():
                        self.tick()
                except Exception:  # noqa: BLE001 - keep going; the next tick re-reads everything
                    log.exception("coordinator tick failed")
                self.stop_event.wait(self.interval)
        finally:
            self.elector.release()

    def tick(self) -> None:
        """One pass over runs and annotated pods."""
        runs = self.runs.list()
        now = self.clock()
        views = [RunView(r) for r in runs]
        for view in views:
            if awaiting_target(view.obj) and self.elector.is_leader:
                try:
                    self.nominate_target(view.obj)
                except Exception:  # noqa: BLE001 - retried next tick
                    log.exception("run %s: nominating its target failed", view.name)
        by_name = {v.name: v.obj for v in views}
        namespaces = sorted({str((rel or {}).get("namespace") or "") for v in views if v.active_execute
                             for rel in v.status.get("relocations") or ()} - {""})
        mono = time.monotonic()
        if mono - self._last_sweep >= self.sweep_interval:
            self._last_sweep = mono
            pods = self.cluster.list_pods(None)
        elif namespaces:
            pods = [p for ns in namespaces for p in self.cluster.list_pods(ns)]
        else:
            return
        reps = [(p, rep) for p in pods if (rep := replacement_of(p, self.placement_key.marks_problem)) is not None]
        if not reps:
            return
        fit: Optional[LiveFit] = None
        for pod, rep in sorted(reps, key=lambda pr: (pr[1].gated_at or now, pr[1].key)):
            if not self.elector.is_leader:
                return
            run = by_name.get(rep.run_name)

            def check(node: str, _rep=rep, _run=run) -> Optional[str]:
                nonlocal fit
                if fit is None:
                    try:
                        fit = LiveFit(self.cluster.snapshot_objects(FILTER_KINDS), goal_resource(_run))
                    except Exception as exc:  # noqa: BLE001 - an unreadable cluster: no hint
                        return f"live state could not be loaded: {exc}"
                return fit.check(_rep.key, node)

            decision = decide(rep, run, self.clock(), self.placement_lease, check, self._run_problem(run))
            if decision.record or decision.nominate or decision.ungate or decision.after_nomination:
                try:
                    self.apply(rep, pod, decision, run)
                except Exception:  # noqa: BLE001 - this pod is retried next tick
                    log.exception("pod %s: applying %s failed", rep.key, decision)
                    continue
                if decision.nominate and fit is not None:
                    fit.reserve(rep.key, decision.nominate)

    def nominate_target(self, run: Mapping[str, Any]) -> None:
        """RELIEF-3: once a targeted run's planned nodes are vacated, hint them to its target's
        pending pods (`decide_target`): mark the pod (TARGET_MARKS, a pods patch), then PATCH
        pods/status nominatedNodeName. A hint, never a reservation (NOM-4)."""
        view = RunView(run)
        keys = [str(k) for k in as_map(view.spec.get("target")).get("podGroups") or ()]
        namespaces = sorted({k.partition("/")[0] for k in keys})
        pods = [p for ns in namespaces for p in self.cluster.list_pods(ns)]
        groups = {k: self.cluster.get_podgroup(*k.split("/", 1)) for k in keys if "/" in k}
        fit: Any = _LazyFit(lambda: LiveFit(self.cluster.snapshot_objects(FILTER_KINDS), goal_resource(run)))
        decision = decide_target(run, pods, groups, fit, self._run_problem(run))
        by_key = {f"{ObjectView(p).namespace}/{ObjectView(p).name}": p for p in pods}
        ref = target_run_ref(run)
        for ns, name, node in decision.nominations:
            self.cluster.patch_pod(ns, name, target_mark_patch(by_key[f"{ns}/{name}"], ref, node))
            bound = self.nominate_or_bound(ns, name, node)
            if bound:
                log.info("pod %s/%s: bound to %s before its hint, not nominated", ns, name, bound)
                continue
            log.info("pod %s/%s: nominated %s for the target of run %s", ns, name, node, view.name)
        for note in decision.notes:
            if (view.uid, note) not in self._said:
                self._said.add((view.uid, note))
                log.info("run %s: %s", view.name, note)

    def _run_problem(self, run: Optional[Mapping[str, Any]]) -> str:
        if not isinstance(run, Mapping):
            return ""
        return digest_problem(run)

    def apply(self, rep: Replacement, pod: Mapping[str, Any], d: Decision,
              run: Optional[Mapping[str, Any]] = None) -> None:
        """Carry out a decision in the order NOM-2 requires: record, hint, record, ungate.

        A time-out ungates first and records afterwards: failing open must not depend on the
        RepackRun being writable.
        """
        if d.timed_out:
            self.remove_gate(pod)
            self.metrics.inc("lease_timeouts_total")
            log.info("pod %s: gate removed (%s)", rep.key, d.reason)
            if d.record:
                self.update_record(rep, d.record)
            return
        if d.record:
            self.update_record(rep, d.record)
        if d.nominate:
            bound = self.nominate_or_bound(rep.namespace, rep.name, d.nominate)
            if bound:
                # Bound since it was read (so not gated by us any more): decided again as bound
                # (Placed on that node), no hint.
                again = decide(replace(rep, node_name=bound), run, self.clock(), self.placement_lease, lambda _: None,
                               self._run_problem(run))
                if again.record:
                    self.update_record(rep, again.record)
                log.info("pod %s: bound to %s before its hint, recorded as placed", rep.key, bound)
                return
            log.info("pod %s: nominated %s", rep.key, d.nominate)
        if d.after_nomination:
            self.update_record(rep, d.after_nomination)
        if d.ungate:
            self.remove_gate(pod)
            log.info("pod %s: gate removed (%s)", rep.key, d.reason)

    # ----- writes
    def nominate_or_bound(self, namespace: str, name: str, node: str) -> str:
        """PATCH pods/status nominatedNodeName; '' when written. When the API server refuses it (422)
        because the pod is bound by now, the node it is bound to (read afresh): the caller records
        that instead of retrying a hint the API server will refuse every time. Any other refusal raises."""
        try:
            self.cluster.nominate(namespace, name, node)
        except Invalid:
            pod = self.cluster.get_pod(namespace, name)
            bound = str(ObjectView(pod).spec.get("nodeName") or "") if pod else ""
            if not bound:
                raise
            self.metrics.inc("nominations_refused_bound_total")
            return bound
        self.metrics.inc("nominations_total")   # replacements and target pods alike
        return ""

    def remove_gate(self, pod: Mapping[str, Any]) -> None:
        """Remove our gate and the gate-owner annotation (see `ungate_patch`)."""
        ops = ungate_patch(pod)
        if ops:
            view = ObjectView(pod)
            self.cluster.patch_pod(view.namespace, view.name, ops)

    def update_record(self, rep: Replacement, fields: Mapping[str, Any]) -> None:
        """Set coordinator-owned fields of one relocation (the kube layer's status read-modify-write)."""
        def mutate(status: dict) -> None:
            record, why_not = find_record_in(rep, status)
            if record is None:
                raise _NotOurs(why_not)
            write_placement_fields(record, fields)
        try:
            self.runs.update_status(rep.run_name, mutate, uid=rep.run_uid or None)
        except (_NotOurs, NotFound) as e:
            log.info("pod %s: not recording (%s)", rep.key, e)


class _LazyFit:
    """A LiveFit read from the cluster only when a node is first checked (a target already bound
    needs no snapshot)."""

    def __init__(self, load: Callable[[], LiveFit]):
        self._load, self._fit = load, None
        self._error = ""

    def _get(self) -> Optional[LiveFit]:
        if self._fit is None and not self._error:
            try:
                self._fit = self._load()
            except Exception as exc:  # noqa: BLE001 - an unreadable cluster: no hint
                self._error = f"live state could not be loaded: {exc}"
        return self._fit

    def check(self, pod_key: str, node: str) -> Optional[str]:
        fit = self._get()
        return self._error if fit is None else fit.check(pod_key, node)

    def reserve(self, pod_key: str, node: str) -> None:
        fit = self._get()
        if fit is not None:
            fit.reserve(pod_key, node)


# --- process entry point ---------------------------------------------------------------------------
def serve_metrics(metrics: Metrics, port: int) -> None:
    """/metrics: the coordinator's registry in the Prometheus text format (any other path: ok)."""
    def respond(path: str) -> Answer:
        return 200, "text/plain; version=0.0.4", metrics.render().encode() if path.startswith("/metrics") else b"ok\n"

    serve(port, respond, "metrics")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    env = os.environ.get
    p = leader_process_args(installed.COORDINATOR, __doc__.splitlines()[0], "REPACK_COORDINATOR",
                            COORDINATOR_LEASE_NAME, "1s", "namespace of the Lease",
                            "leader Lease duration (the webhook gates only while it is fresh)")
    p.add_argument("--placement-lease", default=env("REPACK_PLACEMENT_LEASE", "30s"),
                   help="longest time a pod stays gated, whatever happens")
    p.add_argument("--metrics-port", type=int, default=int(env("REPACK_COORDINATOR_METRICS_PORT", "0")),
                   help="serve /metrics on this port (0: off)")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of `python -m webhook.coordinator`."""
    from kubectl_repack.kube.client import connect
    from kubectl_repack.kube.incluster import read_key
    from kubectl_repack.kube.lease import LeaseClient
    from kubectl_repack.kube.objects import LiveCluster
    from kubectl_repack.kube.runs import RunStore

    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        placement_lease = parse_duration(args.placement_lease)
        lease_duration = max(1, int(round(parse_duration(args.lease_duration).total_seconds())))
        interval = parse_duration(args.interval).total_seconds()
        api = connect(args.kubeconfig)
    except (ValueError, RepackError) as e:
        log.error("%s", e)
        return 2
    metrics = Metrics()
    if args.metrics_port:
        serve_metrics(metrics, args.metrics_port)
    identity = process_identity(args.identity)
    elector = LeaderElector(LeaseClient(api, args.namespace, args.lease_name), identity, lease_duration)
    placement_key = PlacementKey(lambda: read_key(api, args.namespace, PLACEMENT_KEY_SECRET_NAME))
    coordinator = Coordinator(LiveCluster(api), RunStore(api), elector, placement_lease, interval, metrics=metrics,
                              placement_key=placement_key)

    def stop(signum: int, _frame: Any) -> None:
        coordinator.stop_event.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    coordinator.run()
    return 0
