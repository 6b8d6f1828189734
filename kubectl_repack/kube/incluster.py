"""What the in-cluster controller and webhook need from the API server besides runs and pods: the
key of the RepackRun creator stamp (a Secret in their namespace), SubjectAccessReviews for the
run's creator, and Events on a RepackRun."""
from __future__ import annotations

import base64
import logging
import secrets
from typing import Optional

from kubectl_repack.api.control import SIGNING_SECRET_KEY, SIGNING_SECRET_NAME, Creator
from kubectl_repack.api.run import API_VERSION, KIND
from kubectl_repack.api.times import rfc3339, utcnow
from kubectl_repack.errors import ClusterAPIError, Conflict, NotFound

from .client import request

log = logging.getLogger(__name__)

EVENTS_NAMESPACE = "default"   # where Events of cluster-scoped objects go (as kubectl describe finds them)
KEY_BYTES = 32


def read_signing_key(api, namespace: str) -> Optional[bytes]:
    """The stamp key, or None while the Secret does not exist."""
    try:
        obj = request(api, "GET", f"/api/v1/namespaces/{namespace}/secrets/{SIGNING_SECRET_NAME}")
    except NotFound:
        return None
    raw = (obj.get("data") or {}).get(SIGNING_SECRET_KEY)
    if not raw:
        raise ClusterAPIError(f"secret {namespace}/{SIGNING_SECRET_NAME} has no data.{SIGNING_SECRET_KEY}")
    return base64.b64decode(raw)


def ensure_signing_key(api, namespace: str) -> bytes:
    """The stamp key, created (random, in the cluster only: no client ever sees it) when missing."""
    key = read_signing_key(api, namespace)
    if key is not None:
        return key
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": SIGNING_SECRET_NAME, "namespace": namespace,
                         "labels": {"app.kubernetes.io/part-of": "kubectl-repack"}},
            "data": {SIGNING_SECRET_KEY: base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}}
    try:
        request(api, "POST", f"/api/v1/namespaces/{namespace}/secrets", body)
    except Conflict:
        pass   # another replica created it first: use theirs
    key = read_signing_key(api, namespace)
    if key is None:
        raise ClusterAPIError(f"secret {namespace}/{SIGNING_SECRET_NAME} vanished right after its creation")
    return key


def eviction_denied(api, creator: Creator, namespaces: list) -> str:
    """'' when `creator` may create pods/eviction in every namespace; else why not (naming the
    namespace and the permission). One SubjectAccessReview per namespace, as the creator."""
    for ns in namespaces:
        spec = {"user": creator.username, "groups": list(creator.groups),
                "resourceAttributes": {"namespace": ns, "verb": "create", "group": "", "version": "v1",
                                       "resource": "pods", "subresource": "eviction"}}
        if creator.uid:
            spec["uid"] = creator.uid
        if creator.extra:
            spec["extra"] = {k: list(v) for k, v in creator.extra.items()}
        answer = request(api, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                         {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        status = answer.get("status") or {}
        if not status.get("allowed"):
            why = status.get("reason") or status.get("evaluationError") or "no RBAC rule allows it"
            return (f"user {creator.username!r} (the run's creator) may not create pods/eviction in namespace "
                    f"{ns!r} ({why}); nothing was evicted")
    return ""


class EventRecorder:
    """core/v1 Events about one RepackRun (kubectl describe repackrun shows them). A failure to
    record is logged, never raised: events tell the story, they do not decide it."""

    def __init__(self, api, run: dict, component: str):
        self.api, self.component = api, component
        meta = run.get("metadata") or {}
        self.ref = {"apiVersion": API_VERSION, "kind": KIND, "name": meta.get("name", ""),
                    "uid": meta.get("uid", "")}

    def __call__(self, reason: str, message: str, warning: bool = False) -> None:
        now = rfc3339(utcnow())
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{self.ref['name']}.", "namespace": EVENTS_NAMESPACE},
                "involvedObject": self.ref, "reason": reason, "message": message[:1024],
                "type": "Warning" if warning else "Normal", "source": {"component": self.component},
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                "reportingComponent": self.component, "reportingInstance": self.component}
        try:
            request(self.api, "POST", f"/api/v1/namespaces/{EVENTS_NAMESPACE}/events", body)
        except ClusterAPIError as e:
            log.warning("event %s on repackrun %s not recorded: %s", reason, self.ref["name"], e)
