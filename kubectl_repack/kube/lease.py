"""coordination.k8s.io/v1 Leases: one client for the execute mutex and the coordinator's election.

Every change is a replace on the resourceVersion that was read (or a create that fails if the
Lease appeared meanwhile), so two contenders can never both win: the loser gets 409 and decides
again on what the winner wrote. What a Lease *means* (who may take it) is the caller's `decide`.
"""
from __future__ import annotations

import copy
import datetime as dt
from typing import Any, Callable, Mapping, Optional

from kubectl_repack.api.view import ObjectView
from kubectl_repack.api.lease import LeaseRecord
from kubectl_repack.api.times import micro_time
from kubectl_repack.errors import Conflict, NotFound

from .client import CONFLICT_RETRIES, REQUEST_TIMEOUT, call_json


class LeaseClient:
    """One named Lease: read, acquire/renew on resourceVersion, release."""

    def __init__(self, api, namespace: str, name: str, timeout: float = REQUEST_TIMEOUT):
        from kubernetes import client

        self.namespace, self.name = namespace, name
        self.timeout = timeout   # per request: a holder's renewal must fail well within its Lease
        self.coord = client.CoordinationV1Api(api)
        self.core = client.CoreV1Api(api)

    @property
    def ref(self) -> str:
        return f"lease {self.namespace}/{self.name}"

    def read(self) -> Optional[dict]:
        """The Lease as raw JSON, or None when it does not exist."""
        try:
            return call_json(f"reading {self.ref}", self.coord.read_namespaced_lease, self.name, self.namespace,
                             timeout=self.timeout)
        except NotFound:
            return None

    def _replace(self, body: dict) -> dict:
        return call_json(f"updating {self.ref}", self.coord.replace_namespaced_lease, self.name, self.namespace, body,
                         timeout=self.timeout)

    def _create(self, body: dict) -> dict:
        try:
            return call_json(f"creating {self.ref}", self.coord.create_namespaced_lease, self.namespace, body,
                             timeout=self.timeout)
        except NotFound:  # the namespace does not exist yet
            try:
                call_json(f"creating namespace {self.namespace}", self.core.create_namespace,
                          {"metadata": {"name": self.namespace}})
            except Conflict:
                pass
            return call_json(f"creating {self.ref}", self.coord.create_namespaced_lease, self.namespace, body)

    def acquire(self, holder: str, duration_seconds: int, now: dt.datetime,
                decide: Callable[[Optional[LeaseRecord]], Any], annotations: Optional[Mapping[str, str]] = None):
        """Take (or renew) the Lease for `holder` if `decide(current record or None)` is truthy.

        Returns (decision, taken). On 409 the Lease is read and decided again, CONFLICT_RETRIES
        times at most; then (decision, False).
        """
        decision = None
        for _ in range(CONFLICT_RETRIES):
            lease = self.read()
            decision = decide(LeaseRecord.from_dict(lease))
            if not decision:
                return decision, False
            stamp = micro_time(now)
            try:
                if lease is None:
                    self._create({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                  "metadata": {"name": self.name, "namespace": self.namespace,
                                               "annotations": dict(annotations or {})},
                                  "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration_seconds,
                                           "acquireTime": stamp, "renewTime": stamp, "leaseTransitions": 0}})
                else:
                    body = copy.deepcopy(lease)
                    spec = body.setdefault("spec", {})
                    if spec.get("holderIdentity") != holder:
                        spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
                        spec["acquireTime"] = stamp
                    spec.update(holderIdentity=holder, leaseDurationSeconds=duration_seconds, renewTime=stamp)
                    if annotations:
                        body.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
                    self._replace(body)   # metadata.resourceVersion from the read: 409 if changed
                return decision, True
            except Conflict:
                continue
        return decision, False

    def _edit_if_held(self, holder: str, edit: Callable[[dict], None]) -> bool:
        """Apply `edit` to the Lease and write it while `holder` holds it (re-read on 409);
        False once it does not."""
        for _ in range(CONFLICT_RETRIES):
            lease = self.read()
            if lease is None or ObjectView(lease).spec.get("holderIdentity") != holder:
                return False
            edit(lease)
            try:
                self._replace(lease)
                return True
            except Conflict:
                continue
        return False

    def renew(self, holder: str, now: dt.datetime) -> bool:
        """Move renewTime to `now` while `holder` holds the Lease; False once it does not."""
        return self._edit_if_held(holder, lambda lease: lease["spec"].update(renewTime=micro_time(now)))

    def release(self, holder: str, annotations: Optional[Mapping[str, str]] = None) -> bool:
        """Clear holderIdentity if `holder` still holds the Lease (and set `annotations`), so a
        successor need not wait for it to expire. False when it was not ours (any more)."""
        def edit(lease: dict) -> None:
            lease["spec"]["holderIdentity"] = None
            if annotations:
                lease.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
        return self._edit_if_held(holder, edit)
