"""The placement coordinator (NOM-2, NOM-3, EXEC-5, EXEC-7): the second half of the webhook's gate.

The webhook can only *gate* a replacement pod (the API server wipes `status` on CREATE), so this
process, the leader of the Lease `repack-coordinator`, finishes the job for every gated pod:

1. record the replacement (replacementPodName/UID, replacementPodGroupName) in its relocation;
2. check the planned node again on live state with the planner's own filters;
3. fits: PATCH `pods/status` nominatedNodeName, record selectedNodeName + phase Nominated, and only
   then remove the gate; does not fit: remove the gate with no hint (no stale nomination);
4. a gate older than the placement lease is removed whatever happens (fail open, TimedOut);
5. once the replacement is bound, record actualNodeName (phase Placed).

It also deletes finished runs past `ttlSecondsAfterFinished` (deleting never rolls back).

Polling (one RepackRun list per tick; while a run is active, the pods of the namespaces its
relocations name, where every replacement appears; a cluster-wide sweep for orphaned gates every
`sweep_interval`) is deliberate: it is restart-safe with no watch bookkeeping, and every decision is
recomputed from what the API server says now. The decision itself is the pure `decide`, tested
as a table; `Coordinator` only does the I/O around it.

Writes to a RepackRun are read-modify-write on resourceVersion, retried on 409, and touch only the
coordinator's fields (placement.{phase,selectedNodeName,replacementPodName,replacementPodUID,
actualNodeName} and replacementPodGroupName); `kubectl repack apply` owns everything else.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import re
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Mapping, Optional, Sequence

from kubectl_repack.api.gates import (COORDINATOR_LEASE_NAME, GATED_AT_ANNOTATION, PLACEMENT_GATE,
                                      PLACEMENT_GATE_OWNER_ANNOTATION, RELOCATION_INDEX_ANNOTATION,
                                      RELOCATION_RUN_ANNOTATION, RELOCATION_VICTIM_ANNOTATION,
                                      REPLACEMENT_PODGROUP_ANNOTATION, escape_pointer, has_gate, ungate_patch)
from kubectl_repack.api.run import (MODE_EXECUTE, PHASE_RUNNING as RUN_RUNNING, PLACEMENT_NOMINATED,
                                    PLACEMENT_PLACED, PLACEMENT_TIMED_OUT, PLACEMENT_WAITING_FOR_NODE_SELECTION)
from webhook.lease import lease_is_fresh, parse_time
from webhook.metrics import Metrics

log = logging.getLogger("webhook.coordinator")

GROUP, VERSION, PLURAL = "repack.volcano.sh", "v1alpha1", "repackruns"
DEFAULT_PLACEMENT_LEASE = timedelta(seconds=30)
DEFAULT_LEASE_DURATION = 15          # seconds; the webhook gates only while this is fresh
DEFAULT_INTERVAL = 1.0               # seconds between ticks
DEFAULT_SWEEP_INTERVAL = 10.0        # seconds between cluster-wide sweeps for orphaned gates
CONFLICT_RETRIES = 8
FINISHED_PHASES = ("Succeeded", "Failed")


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def rfc3339(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: datetime) -> str:
    """metav1.MicroTime as the API server writes it."""
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_duration(text: str) -> timedelta:
    """`30s`, `2m`, `1m30s`, `500ms` or a bare number of seconds."""
    text = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return timedelta(seconds=float(text))
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a duration such as 30s, 2m or 1m30s")
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return timedelta(seconds=sum(float(n) * scale[u] for n, u in parts))


# --- what a pod tells us -------------------------------------------------------------------------
@dataclass(frozen=True)
class Replacement:
    """A pod the webhook annotated as the replacement of a relocation record."""

    namespace: str
    name: str
    uid: str
    run_name: str
    run_uid: str
    index: int
    victim: str
    node_name: str = ""
    gated: bool = False
    gated_at: Optional[datetime] = None
    gate_owner: str = ""
    nominated_node: str = ""
    replacement_pod_group: str = ""
    deleting: bool = False

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def replacement_of(pod: Mapping[str, Any]) -> Optional[Replacement]:
    """The webhook's annotations read back; None for pods that are nobody's replacement."""
    meta = _map(pod.get("metadata"))
    ann = _map(meta.get("annotations"))
    run_ref = ann.get(RELOCATION_RUN_ANNOTATION)
    gated = has_gate(pod)
    if not isinstance(run_ref, str) or "/" not in run_ref:
        if not gated:
            return None
        run_ref = ""  # gated by us but unreadable: still ours to release
    run_name, _, run_uid = run_ref.partition("/")
    try:
        index = int(ann.get(RELOCATION_INDEX_ANNOTATION, "-1"))
    except (TypeError, ValueError):
        index = -1
    return Replacement(
        namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""), run_name=run_name, run_uid=run_uid, index=index,
        victim=str(ann.get(RELOCATION_VICTIM_ANNOTATION) or ""),
        node_name=str(_map(pod.get("spec")).get("nodeName") or ""), gated=gated,
        gated_at=parse_time(ann.get(GATED_AT_ANNOTATION)),
        gate_owner=str(ann.get(PLACEMENT_GATE_OWNER_ANNOTATION) or ""),
        nominated_node=str(_map(pod.get("status")).get("nominatedNodeName") or ""),
        replacement_pod_group=str(ann.get(REPLACEMENT_PODGROUP_ANNOTATION) or ""),
        deleting=bool(meta.get("deletionTimestamp")))


# --- the decision ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Decision:
    """What to do for one replacement pod; applied in the order of the fields."""

    record: dict = field(default_factory=dict)      # replacement fields to write first
    nominate: str = ""                              # node for pods/status nominatedNodeName
    after_nomination: dict = field(default_factory=dict)  # fields written once the hint is set
    ungate: bool = False
    timed_out: bool = False
    reason: str = ""


def is_active(run: Optional[Mapping[str, Any]]) -> bool:
    """A Running Execute run not being deleted: the only kind whose records change."""
    if not isinstance(run, Mapping):
        return False
    return (_map(run.get("spec")).get("mode") == MODE_EXECUTE
            and _map(run.get("status")).get("phase") == RUN_RUNNING
            and not _map(run.get("metadata")).get("deletionTimestamp"))


def find_record(rep: Replacement, run: Optional[Mapping[str, Any]]) -> tuple[Optional[dict], str]:
    """The relocation this pod replaces, or None with the reason it is not ours to write."""
    if not isinstance(run, Mapping):
        return None, f"run {rep.run_name or '?'} not found"
    meta = _map(run.get("metadata"))
    if rep.run_uid and meta.get("uid") != rep.run_uid:
        return None, f"run {rep.run_name} is another run (uid {meta.get('uid')}, pod names {rep.run_uid})"
    relocations = _map(run.get("status")).get("relocations") or []
    if not 0 <= rep.index < len(relocations) or not isinstance(relocations[rep.index], Mapping):
        return None, f"run {rep.run_name} has no relocation #{rep.index}"
    record = relocations[rep.index]
    if record.get("namespace") != rep.namespace or (rep.victim and record.get("victimPodName") != rep.victim):
        return None, f"relocation #{rep.index} of run {rep.run_name} is about another pod"
    placement = _map(record.get("placement"))
    owner_uid, owner_name = placement.get("replacementPodUID"), placement.get("replacementPodName")
    if (owner_uid and owner_uid != rep.uid) or (not owner_uid and owner_name and owner_name != rep.name):
        return None, f"relocation #{rep.index} of run {rep.run_name} belongs to pod {owner_name}"
    return record, ""


def decide(rep: Replacement, run: Optional[Mapping[str, Any]], now: datetime, placement_lease: timedelta,
           check_fit: Callable[[str], Optional[str]]) -> Decision:
    """The coordinator's decision for one annotated (or gated) pod, as a pure function.

    `check_fit(node)` answers None when the pod fits `node` on live state, else the reason.
    """
    record, why_not = find_record(rep, run) if rep.run_name else (None, "pod carries no run annotation")
    if record is None or not is_active(run):
        if record is not None:
            why_not = f"run {rep.run_name} is not a Running Execute run"
        # Not ours to record: never hold the gate for a run that will not place the pod.
        return Decision(ungate=rep.gated, reason=why_not + ("; releasing the gate" if rep.gated else ""))
    placement = _map(record.get("placement"))
    phase = placement.get("phase")
    first: dict = {}
    if placement.get("replacementPodName") != rep.name or placement.get("replacementPodUID") != rep.uid:
        first["replacementPodName"] = rep.name
        first["replacementPodUID"] = rep.uid
        if rep.replacement_pod_group and record.get("replacementPodGroupName") != rep.replacement_pod_group:
            first["replacementPodGroupName"] = rep.replacement_pod_group
        if phase not in (PLACEMENT_NOMINATED, PLACEMENT_PLACED, PLACEMENT_TIMED_OUT):
            first["phase"] = phase = PLACEMENT_WAITING_FOR_NODE_SELECTION
    if rep.node_name:
        if placement.get("actualNodeName") != rep.node_name:
            first["actualNodeName"] = rep.node_name
        if phase != PLACEMENT_PLACED:
            # Also after TimedOut: Placed means bound (what `apply` waits for); a time-out shows
            # as an empty selectedNodeName, the lease_timeouts counter and the log.
            first["phase"] = PLACEMENT_PLACED
        return Decision(record=first, reason=f"bound to {rep.node_name}")
    if not rep.gated:
        return Decision(record=first, reason="not gated (webhook saw no fresh coordinator Lease)")
    if rep.gated_at is None or now - rep.gated_at >= placement_lease:
        first["phase"] = PLACEMENT_TIMED_OUT
        return Decision(record=first, ungate=True, timed_out=True,
                        reason=f"gated longer than the placement lease ({placement_lease.total_seconds():g}s)")
    planned = str(record.get("plannedNodeName") or "")
    if rep.deleting or not planned:
        return Decision(record=first, ungate=True, reason="no planned node" if not planned else "pod is being deleted")
    if rep.nominated_node == planned:
        reason = None  # nominated before a restart: finish the sequence
    else:
        reason = check_fit(planned)
    if reason is None:
        after = {}
        if placement.get("selectedNodeName") != planned:
            after["selectedNodeName"] = planned
        if phase != PLACEMENT_NOMINATED:
            after["phase"] = PLACEMENT_NOMINATED
        return Decision(record=first, nominate=planned if rep.nominated_node != planned else "",
                        after_nomination=after, ungate=True, reason=f"planned node {planned} still fits")
    return Decision(record=first, ungate=True, reason=f"planned node {planned} no longer fits: {reason}")


# --- live feasibility with the planner's filters ---------------------------------------------------
class LiveFit:
    """`check_fit` on one snapshot of the live cluster, cumulative within a tick.

    Pods already nominated somewhere (and not bound) count on that node, and every nomination made
    in this tick is added too, so two replacements can never together overfill a node.
    """

    def __init__(self, objects: list, resource: str = ""):
        from planner.load import load_objects
        from planner.state import SimulatedState

        self.snapshot = load_objects(objects)
        self.state = SimulatedState(self.snapshot)
        self.resource = resource
        self._pods = {p.key: p for p in self.snapshot.pods}
        self._nominated = {}
        for obj in objects:
            if obj.get("kind") != "Pod":
                continue
            meta, spec, status = _map(obj.get("metadata")), _map(obj.get("spec")), _map(obj.get("status"))
            node = status.get("nominatedNodeName")
            key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
            if node and not spec.get("nodeName") and status.get("phase") not in FINISHED_PHASES:
                self._hold(key, node)

    def _hold(self, key: str, node: str) -> None:
        pod = self._pods.get(key)
        if pod is None or node not in self.state.pods_on or key in self.state.node_of:
            return
        self.state.bind(pod, node)
        self._nominated[key] = node

    def check(self, pod_key: str, node: str) -> Optional[str]:
        """None when the pod fits `node`, else the scheduler-worded reason."""
        from planner.filters import run_filters

        pod = self._pods.get(pod_key)
        if pod is None:
            return f"pod {pod_key} is not in the live snapshot"
        target = self.snapshot.node_by_name.get(node)
        if target is None:
            return f"node {node} does not exist"
        held = self._nominated.pop(pod_key, None)
        if held is not None:  # re-checking a pod nominated earlier: do not count it twice
            self.state._remove(pod)
        failed = run_filters(pod, target, self.state, {})
        if failed is not None:
            return f"{failed[0]}: {failed[1]}"
        if self.resource and pod.requests.get(self.resource, 0) > self.state.free(node, self.resource):
            return f"Insufficient {self.resource}"
        return None

    def reserve(self, pod_key: str, node: str) -> None:
        """Count a nomination made in this tick against `node`."""
        self._hold(pod_key, node)


def _goal_resource(run: Optional[Mapping[str, Any]]) -> str:
    goals = _map(_map(run).get("spec")).get("goals") or []
    return str(_map(goals[0]).get("resource") or "") if goals else ""


# --- leader election on a Lease ----------------------------------------------------------------------
class LeaderElector:
    """Acquire/renew the Lease with optimistic concurrency (update on resourceVersion; 409 = lost)."""

    def __init__(self, coordination_api: Any, namespace: str, name: str, identity: str,
                 duration_seconds: int = DEFAULT_LEASE_DURATION, clock: Callable[[], datetime] = utcnow):
        self.api, self.namespace, self.name, self.identity = coordination_api, namespace, name, identity
        self.duration = int(duration_seconds)
        self.clock = clock
        self._renewed_at: Optional[datetime] = None  # local time of our last successful write

    @property
    def is_leader(self) -> bool:
        """True while our last successful renewal is younger than the lease duration."""
        return self._renewed_at is not None and self.clock() < self._renewed_at + timedelta(seconds=self.duration)

    def ensure(self) -> bool:
        """Acquire or renew when due; returns whether we lead now."""
        from kubernetes.client.rest import ApiException

        now = self.clock()
        if self.is_leader and now < self._renewed_at + timedelta(seconds=self.duration / 3.0):
            return True
        try:
            lease = self.api.read_namespaced_lease(self.name, self.namespace)
        except ApiException as e:
            if e.status != 404:
                log.warning("reading lease %s/%s: %s", self.namespace, self.name, e.reason)
                return self.is_leader
            body = {"metadata": {"name": self.name, "namespace": self.namespace},
                    "spec": self._spec(now, acquired=True, transitions=0)}
            try:
                self.api.create_namespaced_lease(self.namespace, body)
            except ApiException as ce:
                log.info("lease %s/%s: create lost (%s)", self.namespace, self.name, ce.status)
                self._renewed_at = None
                return False
            self._renewed_at = now
            log.info("acquired lease %s/%s as %s", self.namespace, self.name, self.identity)
            return True
        as_dict = self.api.api_client.sanitize_for_serialization(lease)
        spec = _map(as_dict.get("spec"))
        holder = spec.get("holderIdentity") or ""
        if holder != self.identity and lease_is_fresh(as_dict, now):
            self._renewed_at = None
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquiring = holder != self.identity
        new_spec = self._spec(now, acquired=acquiring, transitions=transitions + (1 if acquiring else 0))
        if not acquiring:
            new_spec["acquireTime"] = spec.get("acquireTime") or new_spec["renewTime"]
        body = {"metadata": {"name": self.name, "namespace": self.namespace,
                             "resourceVersion": as_dict["metadata"]["resourceVersion"]}, "spec": new_spec}
        try:
            self.api.replace_namespaced_lease(self.name, self.namespace, body)
        except ApiException as e:
            log.info("lease %s/%s: %s lost (%s)", self.namespace, self.name,
                     "acquire" if acquiring else "renew", e.status)
            if e.status == 409:
                self._renewed_at = None
            return self.is_leader
        if acquiring:
            log.info("acquired lease %s/%s as %s (previous holder %r)", self.namespace, self.name,
                     self.identity, holder)
        self._renewed_at = now
        return True

    def release(self) -> None:
        """Clear holderIdentity so the webhook stops gating at once and a successor need not wait."""
        from kubernetes.client.rest import ApiException

        if self._renewed_at is None:
            return
        self._renewed_at = None
        try:
            lease = self.api.api_client.sanitize_for_serialization(
                self.api.read_namespaced_lease(self.name, self.namespace))
            if _map(lease.get("spec")).get("holderIdentity") != self.identity:
                return
            spec = dict(lease["spec"])
            spec["holderIdentity"] = ""
            spec["leaseDurationSeconds"] = 1
            body = {"metadata": {"name": self.name, "namespace": self.namespace,
                                 "resourceVersion": lease["metadata"]["resourceVersion"]}, "spec": spec}
            self.api.replace_namespaced_lease(self.name, self.namespace, body)
            log.info("released lease %s/%s", self.namespace, self.name)
        except ApiException as e:
            log.warning("releasing lease %s/%s: %s", self.namespace, self.name, e.reason)

    def _spec(self, now: datetime, acquired: bool, transitions: int) -> dict:
        spec = {"holderIdentity": self.identity, "leaseDurationSeconds": self.duration,
                "renewTime": micro_time(now), "leaseTransitions": transitions}
        if acquired:
            spec["acquireTime"] = micro_time(now)
        return spec


# --- the I/O loop ----------------------------------------------------------------------------------
class Coordinator:
    """One tick = list runs, GC finished ones, act on every annotated pod of the cluster."""

    def __init__(self, api_client: Any, namespace: str = "repack-system", lease_name: str = COORDINATOR_LEASE_NAME,
                 identity: Optional[str] = None, placement_lease: timedelta = DEFAULT_PLACEMENT_LEASE,
                 lease_duration: int = DEFAULT_LEASE_DURATION, interval: float = DEFAULT_INTERVAL,
                 sweep_interval: float = DEFAULT_SWEEP_INTERVAL, metrics: Optional[Metrics] = None,
                 clock: Callable[[], datetime] = utcnow):
        from kubernetes import client

        self.api_client = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        identity = identity or f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}"
        self.elector = LeaderElector(client.CoordinationV1Api(api_client), namespace, lease_name, identity,
                                     lease_duration, clock)
        self.placement_lease = placement_lease
        self.interval, self.sweep_interval = interval, sweep_interval
        self.metrics = metrics if metrics is not None else Metrics()
        self.clock = clock
        self._last_sweep = 0.0
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
        runs = self.custom.list_cluster_custom_object(GROUP, VERSION, PLURAL).get("items") or []
        now = self.clock()
        self.collect_garbage(runs, now)
        by_name = {_map(r.get("metadata")).get("name"): r for r in runs}
        namespaces = sorted({str(_map(rel).get("namespace") or "") for r in runs if is_active(r)
                             for rel in _map(r.get("status")).get("relocations") or ()} - {""})
        mono = time.monotonic()
        if mono - self._last_sweep >= self.sweep_interval:
            self._last_sweep = mono
            pods = self._list_pods(None)
        elif namespaces:
            pods = [p for ns in namespaces for p in self._list_pods(ns)]
        else:
            return
        reps = [(p, rep) for p in pods if (rep := replacement_of(p)) is not None]
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
                        fit = LiveFit(self._snapshot_objects(), _goal_resource(_run))
                    except Exception as exc:  # noqa: BLE001 - an unreadable cluster: no hint
                        return f"live state could not be loaded: {exc}"
                return fit.check(_rep.key, node)

            decision = decide(rep, run, self.clock(), self.placement_lease, check)
            if decision.record or decision.nominate or decision.ungate or decision.after_nomination:
                try:
                    self.apply(rep, pod, decision)
                except Exception:  # noqa: BLE001 - this pod is retried next tick
                    log.exception("pod %s: applying %s failed", rep.key, decision)
                    continue
                if decision.nominate and fit is not None:
                    fit.reserve(rep.key, decision.nominate)

    def apply(self, rep: Replacement, pod: Mapping[str, Any], d: Decision) -> None:
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
            self.core.patch_namespaced_pod_status(rep.name, rep.namespace,
                                                  {"status": {"nominatedNodeName": d.nominate}})
            self.metrics.inc("nominations_total")
            log.info("pod %s: nominated %s", rep.key, d.nominate)
        if d.after_nomination:
            self.update_record(rep, d.after_nomination)
        if d.ungate:
            self.remove_gate(pod)
            log.info("pod %s: gate removed (%s)", rep.key, d.reason)

    # ----- API helpers
    def remove_gate(self, pod: Mapping[str, Any]) -> None:
        """Remove our gate and the gate-owner annotation (see `ungate_patch`)."""
        meta = _map(pod.get("metadata"))
        ops = ungate_patch(pod)
        if ops:
            self.core.patch_namespaced_pod(meta.get("name"), meta.get("namespace"), ops)

    def update_record(self, rep: Replacement, fields: Mapping[str, Any]) -> None:
        """Set coordinator-owned fields of one relocation (RMW on resourceVersion, retry on 409)."""
        from kubernetes.client.rest import ApiException

        for attempt in range(CONFLICT_RETRIES):
            run = self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, rep.run_name)
            record, why_not = find_record(rep, run)
            if record is None:
                log.info("pod %s: not recording (%s)", rep.key, why_not)
                return
            record = dict(record)
            placement = dict(_map(record.get("placement")))
            for key, value in fields.items():
                if key == "replacementPodGroupName":
                    record[key] = value
                else:
                    placement[key] = value
            record["placement"] = placement
            relocations = list(run["status"]["relocations"])
            relocations[rep.index] = record
            body = {"apiVersion": run["apiVersion"], "kind": run["kind"], "metadata": run["metadata"],
                    "spec": run.get("spec"), "status": {**run["status"], "relocations": relocations}}
            try:
                self.custom.replace_cluster_custom_object_status(GROUP, VERSION, PLURAL, rep.run_name, body)
                return
            except ApiException as e:
                if e.status != 409 or attempt + 1 == CONFLICT_RETRIES:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def collect_garbage(self, runs: Sequence[Mapping[str, Any]], now: datetime) -> list[str]:
        """Delete finished runs past ttlSecondsAfterFinished (EXEC-7); never rolls anything back."""
        from kubernetes.client.rest import ApiException

        deleted = []
        for run in runs:
            if not ttl_expired(run, now):
                continue
            name = _map(run.get("metadata")).get("name")
            try:
                self.custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
                deleted.append(name)
                log.info("deleted repackrun %s: finished and past ttlSecondsAfterFinished", name)
            except ApiException as e:
                if e.status != 404:
                    log.warning("deleting repackrun %s: %s", name, e.reason)
        return deleted

    def _list_pods(self, namespace: Optional[str]) -> list:
        """Pods as raw JSON, cluster-wide (paginated) or of one namespace."""
        from kubectl_repack.cluster import Kind, list_objects

        if namespace is None:
            return list_objects(self.api_client, Kind("v1", "Pod", "pods"))
        resp = self.core.list_namespaced_pod(namespace, _preload_content=False, _request_timeout=60)
        return [dict(p, apiVersion="v1", kind="Pod") for p in json.loads(resp.data).get("items") or []]

    def _snapshot_objects(self) -> list:
        """What the planner's filters read, listed live: namespaces, nodes, PVs, PVCs, pods."""
        from kubectl_repack.cluster import Kind, list_objects

        objs: list = []
        for kind in (Kind("v1", "Namespace", "namespaces"), Kind("v1", "Node", "nodes"),
                     Kind("v1", "PersistentVolume", "persistentvolumes"),
                     Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims"), Kind("v1", "Pod", "pods")):
            objs.extend(list_objects(self.api_client, kind))
        return objs


def ttl_expired(run: Mapping[str, Any], now: datetime) -> bool:
    """Finished, has ttlSecondsAfterFinished, and completionTime + ttl has passed."""
    status = _map(run.get("status"))
    ttl = _map(run.get("spec")).get("ttlSecondsAfterFinished")
    if status.get("phase") not in FINISHED_PHASES or not isinstance(ttl, int) or isinstance(ttl, bool):
        return False
    if _map(run.get("metadata")).get("deletionTimestamp"):
        return False
    finished = parse_time(status.get("completionTime"))
    if finished is None:
        times = [parse_time(_map(c).get("lastTransitionTime")) for c in status.get("conditions") or []]
        times = [t for t in times if t is not None]
        finished = max(times) if times else None
    return finished is not None and now >= finished + timedelta(seconds=ttl)


# --- process entry point ---------------------------------------------------------------------------
def _serve_metrics(metrics: Metrics, port: int) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            body = metrics.render().encode() if self.path.startswith("/metrics") else b"ok\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="repack-coordinator", description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="in-cluster configuration when absent")
    p.add_argument("--namespace", default=env("REPACK_NAMESPACE", "repack-system"), help="namespace of the Lease")
    p.add_argument("--lease-name", default=env("REPACK_COORDINATOR_LEASE", COORDINATOR_LEASE_NAME))
    p.add_argument("--lease-duration", default=env("REPACK_LEASE_DURATION", f"{DEFAULT_LEASE_DURATION}s"),
                   help="leader Lease duration (the webhook gates only while it is fresh)")
    p.add_argument("--placement-lease", default=env("REPACK_PLACEMENT_LEASE", "30s"),
                   help="longest time a pod stays gated, whatever happens")
    p.add_argument("--interval", default=env("REPACK_COORDINATOR_INTERVAL", "1s"))
    p.add_argument("--identity", default=env("REPACK_COORDINATOR_IDENTITY"))
    p.add_argument("--metrics-port", type=int, default=int(env("REPACK_COORDINATOR_METRICS_PORT", "0")),
                   help="serve /metrics on this port (0: off)")
    p.add_argument("--log-level", default=env("REPACK_LOG_LEVEL", "INFO"))
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of `python -m webhook.coordinator`."""
    from kubernetes import client, config

    args = parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    try:
        placement_lease = parse_duration(args.placement_lease)
        lease_duration = max(1, int(round(parse_duration(args.lease_duration).total_seconds())))
        interval = parse_duration(args.interval).total_seconds()
    except ValueError as e:
        log.error("%s", e)
        return 2
    if args.kubeconfig:
        config.load_kube_config(config_file=args.kubeconfig)
    else:
        config.load_incluster_config()
    metrics = Metrics()
    if args.metrics_port:
        _serve_metrics(metrics, args.metrics_port)
    coordinator = Coordinator(client.ApiClient(), args.namespace, args.lease_name, args.identity,
                              placement_lease, lease_duration, interval, metrics=metrics)

    def stop(signum: int, _frame: Any) -> None:
        coordinator.stop_event.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    coordinator.run()
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main())
