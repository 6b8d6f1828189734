"""Kubernetes implementations of the Execute engine's interfaces (DESIGN convention 5).

* `LiveReader`   pods, PDBs and the planner's snapshot, as raw JSON.
* `KubeEvictor`  policy/v1 Eviction with deleteOptions.preconditions.uid and gracePeriodSeconds.
* `KubeRunWriter` RepackRun status by read-modify-write on resourceVersion, retried on 409: the
                  engine passes a function that edits only the fields apply owns, applied to the
                  freshest object each attempt, so the coordinator's placement writes survive.
* `ExecuteLease` the cluster-wide execute mutex: a coordination.k8s.io/v1 Lease, taken and
                  released with resourceVersion preconditions (no check-then-act), renewed by a
                  background thread. The cooldown setting and the last Execute's completion live
                  in the Lease's annotations, so every `apply` in the cluster sees the same values.

Every API failure becomes a `kubectl_repack.errors` exception (via cluster.api_error).
"""
from __future__ import annotations

import copy
import datetime as dt
import json
import os
import threading
import time
from typing import Callable, Optional

from kubectl_repack import cluster
from kubectl_repack.errors import ClusterAPIError, Conflict, NotFound
from kubectl_repack.execute import (EvictionResponse, LeaseDecision, LeaseView, format_duration,
                                    lease_decision, parse_duration, parse_time, rfc3339)

LEASE_NAMESPACE_ENV = "REPACK_NAMESPACE"
DEFAULT_LEASE_NAMESPACE = "repack-system"
LEASE_NAME = "repack-execute"
LEASE_DURATION_SECONDS = 30
RENEW_SECONDS = 10
COOLDOWN_ANNOTATION = "repack.volcano.sh/execute-cooldown"
LAST_COMPLETION_ANNOTATION = "repack.volcano.sh/last-execute-completion"
LAST_RUN_ANNOTATION = "repack.volcano.sh/last-execute-run"
DEFAULT_COOLDOWN = dt.timedelta(minutes=10)
CONFLICT_RETRIES = 10
TIMEOUT = cluster.REQUEST_TIMEOUT


def _json(resp) -> dict:
    return json.loads(resp.data)


def _micro(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LiveReader:
    """ClusterReader on the API server."""

    def __init__(self, api):
        from kubernetes import client
        self.api = api
        self.core = client.CoreV1Api(api)
        self.policy = client.PolicyV1Api(api)

    def snapshot_objects(self) -> list:
        return cluster.read_snapshot(self.api)

    def get_pod(self, namespace: str, name: str) -> Optional[dict]:
        try:
            return cluster._call(f"reading pod {namespace}/{name}", lambda: _json(self.core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=TIMEOUT)))
        except NotFound:
            return None

    def list_pods(self, namespace: str) -> list:
        return cluster._call(f"listing pods in {namespace}", lambda: _json(self.core.list_namespaced_pod(
            namespace, _preload_content=False, _request_timeout=TIMEOUT)))["items"]

    def list_pdbs(self, namespace: str) -> list:
        items = cluster._call(
            f"listing poddisruptionbudgets in {namespace}",
            lambda: _json(self.policy.list_namespaced_pod_disruption_budget(
                namespace, _preload_content=False, _request_timeout=TIMEOUT)))["items"]
        for pdb in items:
            pdb.setdefault("metadata", {}).setdefault("namespace", namespace)
        return items


class KubeEvictor:
    """Evictor through the Eviction API (the API server enforces PDBs, EXEC-4)."""

    def __init__(self, api):
        from kubernetes import client
        self.core = client.CoreV1Api(api)

    def evict(self, namespace: str, name: str, uid: str, grace_seconds: Optional[int]) -> EvictionResponse:
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        delete_options = {}
        if uid:
            delete_options["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            delete_options["gracePeriodSeconds"] = int(grace_seconds)
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}}
        if delete_options:
            body["deleteOptions"] = delete_options
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body, _request_timeout=TIMEOUT)
            return EvictionResponse(201, "")
        except ApiException as e:
            err = cluster.api_error(e, f"evicting pod {namespace}/{name}")
            return EvictionResponse(int(e.status or 0), str(err))
        except HTTPError as e:
            return EvictionResponse(0, f"evicting pod {namespace}/{name}: cannot reach the API server: {e}")


class KubeRunWriter:
    """RunWriter: RepackRun objects, status written by read-modify-write with 409 retries."""

    def __init__(self, api):
        from kubernetes import client
        self.store = cluster.RunStore(api)
        self.custom = client.CustomObjectsApi(api)

    def get(self, name: str) -> dict:
        return self.store.get(name)

    def create(self, obj: dict) -> dict:
        return self.store.create(obj)

    def update_status(self, name: str, mutate: Callable[[dict], None]) -> dict:
        last = None
        for attempt in range(CONFLICT_RETRIES):
            obj = self.store.get(name)
            status = copy.deepcopy(obj.get("status") or {})
            mutate(status)
            body = dict(obj, status=status)
            try:
                return cluster._call(f"writing the status of repackrun {name}",
                                     self.custom.replace_cluster_custom_object_status,
                                     cluster.GROUP, cluster.VERSION, cluster.PLURAL, name, body,
                                     _request_timeout=TIMEOUT)
            except Conflict as e:  # the coordinator wrote in between: re-read and re-apply
                last = e
                time.sleep(0.05 * (attempt + 1))
        raise last

    def list(self) -> list:
        return cluster.list_objects(self.store.api, cluster.Kind(cluster.RUN_API_VERSION, "RepackRun",
                                                                 cluster.PLURAL))

    def delete(self, name: str, uid: Optional[str] = None) -> bool:
        body = {"preconditions": {"uid": uid}} if uid else None
        try:
            cluster._call(f"deleting repackrun {name}", self.custom.delete_cluster_custom_object,
                          cluster.GROUP, cluster.VERSION, cluster.PLURAL, name, body=body,
                          _request_timeout=TIMEOUT)
            return True
        except (NotFound, Conflict):
            return False


def expired_runs(runs: list, now: dt.datetime, keep: str = "") -> list:
    """Finished runs whose ttlSecondsAfterFinished has passed since completionTime (EXEC-7)."""
    out = []
    for run in runs:
        meta, spec, st = run.get("metadata") or {}, run.get("spec") or {}, run.get("status") or {}
        ttl = spec.get("ttlSecondsAfterFinished")
        done = parse_time(st.get("completionTime"))
        if meta.get("name") == keep or ttl is None or done is None or st.get("phase") not in ("Succeeded", "Failed"):
            continue
        if meta.get("deletionTimestamp"):
            continue
        if done + dt.timedelta(seconds=int(ttl)) <= now:
            out.append(run)
    return out


class ExecuteLease:
    """The cluster-wide execute mutex (EXEC-2): one Lease, changed only with resourceVersion."""

    def __init__(self, api, namespace: Optional[str] = None, name: str = LEASE_NAME):
        from kubernetes import client
        self.api = api
        self.namespace = namespace or os.environ.get(LEASE_NAMESPACE_ENV) or DEFAULT_LEASE_NAMESPACE
        self.name = name
        self.coord = client.CoordinationV1Api(api)
        self.core = client.CoreV1Api(api)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.lost = threading.Event()

    # -- raw access --
    def _read(self) -> Optional[dict]:
        try:
            return cluster._call(f"reading lease {self.namespace}/{self.name}", lambda: _json(
                self.coord.read_namespaced_lease(self.name, self.namespace, _preload_content=False,
                                                 _request_timeout=TIMEOUT)))
        except NotFound:
            return None

    def _replace(self, body: dict) -> dict:
        return cluster._call(f"updating lease {self.namespace}/{self.name}", lambda: _json(
            self.coord.replace_namespaced_lease(self.name, self.namespace, body, _preload_content=False,
                                                _request_timeout=TIMEOUT)))

    def _create(self, body: dict) -> dict:
        try:
            return cluster._call(f"creating lease {self.namespace}/{self.name}", lambda: _json(
                self.coord.create_namespaced_lease(self.namespace, body, _preload_content=False,
                                                   _request_timeout=TIMEOUT)))
        except NotFound:  # the namespace does not exist yet
            try:
                cluster._call(f"creating namespace {self.namespace}", self.core.create_namespace,
                              {"metadata": {"name": self.namespace}}, _request_timeout=TIMEOUT)
            except Conflict:
                pass
            return cluster._call(f"creating lease {self.namespace}/{self.name}", lambda: _json(
                self.coord.create_namespaced_lease(self.namespace, body, _preload_content=False,
                                                   _request_timeout=TIMEOUT)))

    @staticmethod
    def view(lease: Optional[dict]) -> Optional[LeaseView]:
        if lease is None:
            return None
        spec = lease.get("spec") or {}
        ann = (lease.get("metadata") or {}).get("annotations") or {}
        return LeaseView(holder=spec.get("holderIdentity") or "",
                         renew_time=parse_time(spec.get("renewTime") or spec.get("acquireTime")),
                         duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
                         last_completion=parse_time(ann.get(LAST_COMPLETION_ANNOTATION)),
                         last_run=ann.get(LAST_RUN_ANNOTATION) or "")

    def stored_cooldown(self) -> dt.timedelta:
        """The cluster-wide cooldown setting (annotation on the Lease), or the default."""
        lease = self._read()
        text = (((lease or {}).get("metadata") or {}).get("annotations") or {}).get(COOLDOWN_ANNOTATION)
        try:
            return parse_duration(text) if text else DEFAULT_COOLDOWN
        except ValueError:
            return DEFAULT_COOLDOWN

    # -- acquire / renew / release --
    def try_acquire(self, me: str, now: dt.datetime, cooldown: dt.timedelta,
                    store_cooldown: Optional[dt.timedelta] = None) -> LeaseDecision:
        """Take the Lease for `me` if the decision allows it (and store `store_cooldown` as the
        cluster-wide setting); race-free: a concurrent writer makes
        our create/replace fail with 409 and we decide again on what it wrote."""
        for _ in range(CONFLICT_RETRIES):
            lease = self._read()
            decision = lease_decision(self.view(lease), me, now, cooldown)
            if not decision.acquire:
                return decision
            stamp = _micro(now)
            try:
                if lease is None:
                    ann = ({COOLDOWN_ANNOTATION: format_duration(store_cooldown)}
                           if store_cooldown is not None else {})
                    self._create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                  "metadata": {"name": self.name, "namespace": self.namespace,
                                               "annotations": ann},
                                  "spec": {"holderIdentity": me, "leaseDurationSeconds": LEASE_DURATION_SECONDS,
                                           "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}})
                else:
                    body = copy.deepcopy(lease)
                    spec = body.setdefault("spec", {})
                    if spec.get("holderIdentity") != me:
                        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
                        spec["acquireTime"] = stamp
                    spec.update(holderIdentity=me, leaseDurationSeconds=LEASE_DURATION_SECONDS, renewTime=stamp)
                    if store_cooldown is not None:
                        body["metadata"].setdefault("annotations", {})[COOLDOWN_ANNOTATION] = \
                            format_duration(store_cooldown)
                    self._replace(body)   # metadata.resourceVersion from the read: 409 if changed
                return decision
            except Conflict:
                continue
        return LeaseDecision(False, "AnotherRunActive", "the execute Lease kept changing under us", 1.0)

    def renew(self, me: str) -> bool:
        for _ in range(CONFLICT_RETRIES):
            lease = self._read()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != me:
                return False
            lease["spec"]["renewTime"] = _micro(dt.datetime.now(dt.timezone.utc))
            try:
                self._replace(lease)
                return True
            except Conflict:
                continue
        return False

    def start_renewing(self, me: str) -> None:
        def loop():
            while not self._stop.wait(RENEW_SECONDS):
                try:
                    if not self.renew(me):
                        self.lost.set()
                        return
                except ClusterAPIError:
                    pass  # transient; the next tick tries again within the Lease duration
        self._stop.clear()
        self._thread = threading.Thread(target=loop, name="repack-lease-renew", daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def release(self, me: str, run_name: str, completed: Optional[dt.datetime]) -> None:
        """Give the Lease up; `completed` (an Execute that evicted something finished then) starts
        the cooldown for everyone."""
        self.stop_renewing()
        for _ in range(CONFLICT_RETRIES):
            lease = self._read()
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != me:
                return
            lease["spec"]["holderIdentity"] = None
            if completed is not None:
                ann = lease["metadata"].setdefault("annotations", {})
                ann[LAST_COMPLETION_ANNOTATION] = rfc3339(completed)
                ann[LAST_RUN_ANNOTATION] = run_name
            try:
                self._replace(lease)
                return
            except Conflict:
                continue
