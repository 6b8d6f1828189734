"""What the in-cluster controller needs from the API server besides runs and pods: the key of the
records seal (a Secret in its namespace that only its account may read), whether the creator
admission policy is in force, SubjectAccessReviews for the run's creator, Events on a RepackRun and
(the owners' audit trail) on an evicted pod's PodGroup and owner, and whether a PodGroup or its
workload opted out of being moved."""
from __future__ import annotations

import base64
import logging
import secrets
from typing import Optional

import datetime as dt

from planner.model import opt_out

from kubectl_repack.api.view import ObjectView
from kubectl_repack.api.control import CREATOR_POLICY_NAME, SEAL_SECRET_KEY, SEAL_SECRET_NAME, Creator
from kubectl_repack.api.installed import PART_OF, PART_OF_LABEL
from kubectl_repack.api.run import API_VERSION, KIND
from kubectl_repack.api.times import parse_time, rfc3339, utcnow
from kubectl_repack.errors import ClusterAPIError, Conflict, NotFound

from .client import request
from .objects import POD_KIND, SNAPSHOT_KINDS, json_patch

log = logging.getLogger(__name__)

EVENTS_NAMESPACE = "default"   # where Events of cluster-scoped objects go (as kubectl describe finds them)
KEY_BYTES = 32


def read_key(api, namespace: str, name: str = SEAL_SECRET_NAME) -> Optional[bytes]:
    """The key in Secret `name`, or None while the Secret does not exist."""
    try:
        obj = request(api, "GET", f"/api/v1/namespaces/{namespace}/secrets/{name}")
    except NotFound:
        return None
    raw = (obj.get("data") or {}).get(SEAL_SECRET_KEY)
    if not raw:
        raise ClusterAPIError(f"secret {namespace}/{name} has no data.{SEAL_SECRET_KEY}")
    return base64.b64decode(raw)


def create_key(api, namespace: str, name: str) -> None:
    """Create Secret `name` holding a random key unless it exists, without ever reading it (the
    controller makes the placement key this way: only the webhook and the coordinator read it)."""
    body = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {PART_OF_LABEL: PART_OF}},
            "data": {SEAL_SECRET_KEY: base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}}
    try:
        request(api, "POST", f"/api/v1/namespaces/{namespace}/secrets", body)
    except Conflict:
        pass   # it exists (another replica, or an earlier start, made it): keep it


def ensure_key(api, namespace: str, name: str = SEAL_SECRET_NAME) -> bytes:
    """The key, created (random, in the cluster only: no client ever sees it) when missing."""
    key = read_key(api, namespace, name)
    if key is not None:
        return key
    create_key(api, namespace, name)
    key = read_key(api, namespace, name)
    if key is None:
        raise ClusterAPIError(f"secret {namespace}/{name} vanished right after its creation")
    return key


# A policy takes effect once the API server's informer has seen it, a moment after it is stored: a
# run created within this margin of the policy's creation is not counted as checked by it.
POLICY_SETTLE = dt.timedelta(seconds=5)


def creator_policy_since(api) -> Optional[dt.datetime]:
    """Since when the creator admission policy is enforced (its and its binding's later
    creationTimestamp, plus POLICY_SETTLE); None when either is missing or does not deny."""
    since = []
    for plural in ("validatingadmissionpolicies", "validatingadmissionpolicybindings"):
        try:
            obj = request(api, "GET", f"/apis/admissionregistration.k8s.io/v1/{plural}/{CREATOR_POLICY_NAME}")
        except NotFound:
            return None
        spec = ObjectView(obj).spec
        if plural.endswith("bindings") and "Deny" not in (spec.get("validationActions") or []):
            return None
        if not plural.endswith("bindings") and spec.get("failurePolicy", "Fail") != "Fail":
            return None
        created = parse_time(ObjectView(obj).meta.get("creationTimestamp"))
        if created is None:
            return None
        since.append(created)
    return max(since) + POLICY_SETTLE


def unscheduled_pods(api, page_size: int = 500) -> list:
    """Every pod not bound to a node, cluster-wide (paginated): the only pods a scheduling gate can hold."""
    pods, token = [], None
    while True:
        query = [("fieldSelector", "spec.nodeName="), ("limit", str(page_size))] + ([("continue", token)] if token else [])
        page = request(api, "GET", "/api/v1/pods", query=query)
        pods += page.get("items") or []
        token = ObjectView(page).meta.get("continue")
        if not token:
            return pods


def lift_expired_gates(api, now: dt.datetime) -> list:
    """Lift our gate from every pod gated longer than the placement lease (the coordinator's job,
    done here too so that a coordinator that is down keeps no pod gated past the promise).
    Returns the pods ungated, as `namespace/name`. A pod changed meanwhile (the `test` op fails,
    422) or gone is left to the next sweep."""
    from kubectl_repack.api.gates import expired_gate_patches

    lifted = []
    for namespace, name, ops in expired_gate_patches(unscheduled_pods(api), now):
        if not ops:
            continue
        if json_patch(api, POD_KIND.path(namespace, name), ops):
            lifted.append(f"{namespace}/{name}")
    return lifted


def eviction_denied(api, creator: Creator, namespaces: list) -> str:
    """'' when `creator` may create pods/eviction in every namespace; else why not (naming the
    namespace and the permission; the caller says what that stopped). One SubjectAccessReview per
    namespace, as the creator, until the first refusal."""
    for ns in namespaces:
        spec = {"user": creator.username, "groups": list(creator.groups),
                "resourceAttributes": {"namespace": ns, "verb": "create", "group": "", "version": "v1",
                                       "resource": "pods", "subresource": "eviction"}}
        if creator.uid:
            spec["uid"] = creator.uid
        answer = request(api, "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                         {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec})
        status = ObjectView(answer).status
        if not status.get("allowed"):
            why = status.get("reason") or status.get("evaluationError") or "no RBAC rule allows it"
            return (f"user {creator.username!r} (the run's creator) may not create pods/eviction in namespace "
                    f"{ns!r} ({why})")
    return ""


class EventRecorder:
    """core/v1 Events about one RepackRun (kubectl describe repackrun shows them). A failure to
    record is logged, never raised: events tell the story, they do not decide it."""

    def __init__(self, api, run: dict, component: str, ref: Optional[dict] = None, namespace: str = EVENTS_NAMESPACE):
        self.api, self.component, self.namespace = api, component, namespace
        meta = ObjectView(run).meta
        self.ref = ref or {"apiVersion": API_VERSION, "kind": KIND, "name": meta.get("name", ""),
                           "uid": meta.get("uid", "")}

    def __call__(self, reason: str, message: str, warning: bool = False) -> None:
        now = rfc3339(utcnow())
        body = {"apiVersion": "v1", "kind": "Event",
                "metadata": {"generateName": f"{self.ref['name']}.", "namespace": self.namespace},
                "involvedObject": self.ref, "reason": reason, "message": message[:1024],
                "type": "Warning" if warning else "Normal", "source": {"component": self.component},
                "firstTimestamp": now, "lastTimestamp": now, "count": 1,
                "reportingComponent": self.component, "reportingInstance": self.component}
        try:
            request(self.api, "POST", f"/api/v1/namespaces/{self.namespace}/events", body)
        except ClusterAPIError as e:
            log.warning("event %s on %s %s not recorded: %s", reason, self.ref["kind"], self.ref["name"], e)


_KINDS = {k.kind: k for k in SNAPSHOT_KINDS}
PODGROUP = _KINDS["PodGroup"]
# Workloads that may own a PodGroup and carry an opt-out (as planner.model reads them), by (group, kind).
WORKLOADS = {(k.group, k.kind): k for k in (_KINDS["Job"], _KINDS["ModelServing"])}


def controlling_owner(obj: Optional[dict]) -> Optional[dict]:
    """The object's controlling ownerReference (`controller: true`, as metav1.GetControllerOf) as an
    Event's involvedObject needs it (apiVersion, kind, name, uid), or None."""
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") if isinstance(obj, dict) else None
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") is True:
            out = {k: ref.get(k) for k in ("apiVersion", "kind", "name", "uid")}
            return out if all(isinstance(v, str) and v for v in out.values()) else None
    return None


def _pod_group_path(namespace: str, name: str) -> str:
    return f"/apis/{PODGROUP.api_version}/namespaces/{namespace}/{PODGROUP.plural}/{name}"


def record_eviction(api, namespace: str, pod_group: str, owner: Optional[dict], reason: str, message: str,
                    component: str) -> None:
    """The workload owners' audit trail of one eviction: an Event on the PodGroup `namespace/pod_group`
    (`kubectl describe podgroup`) and one on the evicted pod's controlling owner (`owner`, from the
    pod; else the PodGroup's own controlling owner, e.g. the Volcano Job). Never raises: an object
    gone or unreadable just gets no Event."""
    pg = None
    try:
        pg = request(api, "GET", _pod_group_path(namespace, pod_group))
    except ClusterAPIError as e:
        log.warning("event %s on podgroup %s/%s not recorded: %s", reason, namespace, pod_group, e)
    pg_uid = ObjectView(pg).uid
    if pg is not None:
        ref = {"apiVersion": PODGROUP.api_version, "kind": PODGROUP.kind, "name": pod_group, "namespace": namespace,
               "uid": pg_uid}
        EventRecorder(api, {}, component, ref=ref, namespace=namespace)(reason, message, False)
    owner = owner or controlling_owner(pg)
    if owner and (not pg_uid or owner.get("uid") != pg_uid):
        ref = {**{k: owner[k] for k in ("apiVersion", "kind", "name", "uid")}, "namespace": namespace}
        EventRecorder(api, {}, component, ref=ref, namespace=namespace)(reason, message, False)


def _annotations(obj: dict) -> dict:
    ann = ObjectView(obj).meta.get("annotations")
    return {k: v for k, v in ann.items() if isinstance(v, str)} if isinstance(ann, dict) else {}


def pod_group_opt_out(api, namespace: str, name: str) -> str:
    """What opted PodGroup `namespace/name` out of being moved, read now: "PodGroup ns/name is
    annotated key=value", or the same of its controlling workload (VCJob, ModelServing) — the
    planner's opt-out (planner.model.opt_out) — or '' when neither is (or either is gone). Other
    read failures raise: no eviction is made on a guess."""
    try:
        pg = request(api, "GET", _pod_group_path(namespace, name))
    except NotFound:
        return ""
    found = opt_out(_annotations(pg))
    if found:
        return f"PodGroup {namespace}/{name} is annotated {found}"
    owner = controlling_owner(pg)
    group = owner["apiVersion"].split("/", 1)[0] if owner and "/" in owner["apiVersion"] else ""
    kind = WORKLOADS.get((group, owner["kind"])) if owner else None
    if kind is None:
        return ""
    plural = kind.plural
    try:
        workload = request(api, "GET", f"/apis/{owner['apiVersion']}/namespaces/{namespace}/{plural}/{owner['name']}")
    except NotFound:
        return ""
    found = opt_out(_annotations(workload))
    what = "VCJob" if plural == "jobs" else owner["kind"]
    return f"{what} {namespace}/{owner['name']} is annotated {found}" if found else ""
