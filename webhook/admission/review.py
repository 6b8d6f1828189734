"""The admission decision, as a pure function of an AdmissionReview (requirements NOM-2, NOM-3).

`review` never rejects a pod: it answers `allowed: true` always, and for a pod CREATE that
replaces an open relocation it adds, as a JSONPatch,

* annotations naming the run and the record (so the coordinator finds the pod and its record
  without guessing, even for pods whose name the API server generates after admission), and
* the `repack.volcano.sh/placement` scheduling gate, but only while the coordinator's leader
  Lease is fresh: a gate is only added when someone is alive to remove it.

Marks are trusted only as the webhook wrote them (SEC-5): they carry a MAC over the marks, the
pod's namespace and its controlling owner's UID (kubectl_repack.api.gates.marks_mac), and a pod
that arrives with marks that do not verify (copied into a workload's template, or from another
pod) has them removed before it is matched like any other pod.

It is idempotent under `reinvocationPolicy: IfNeeded`: a pod that already carries marks that
verify is left alone, and no value already present is patched again. The API server wipes
`status` on create, so nominatedNodeName is not set here but by the coordinator afterwards.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Mapping, Optional, TypedDict

from kubectl_repack.api.gates import (GATED_AT_ANNOTATION, MARKS_MAC_ANNOTATION, PLACEMENT_GATE,
                                      PLACEMENT_GATE_OWNER_ANNOTATION, PLANNED_NODE_ANNOTATION,
                                      RELOCATION_INDEX_ANNOTATION, RELOCATION_RUN_ANNOTATION,
                                      RELOCATION_VICTIM_ANNOTATION, REPLACEMENT_MARKS, REPLACEMENT_PODGROUP_ANNOTATION,
                                      controller_uid, escape_pointer, marks_mac, marks_problem, strip_marks_patch)
from kubectl_repack.api.control import CREATOR_ANNOTATIONS, Creator
from kubectl_repack.api.matching import DEFAULT_SCHEDULER_NAMES, Match, match
from kubectl_repack.api.policy import KIND as POLICY_KIND, PLURAL as POLICY_PLURAL
from kubectl_repack.api.run import GROUP as RUN_GROUP, PLURAL as RUN_PLURAL
from kubectl_repack.api.relocations import RelocationIndex
from kubectl_repack.api.times import rfc3339
from kubectl_repack.api.view import ObjectView
from kubectl_repack.errors import RepackError

ADMISSION_API_VERSION = "admission.k8s.io/v1"


class AdmissionReviewError(RepackError):
    """The request body is not an AdmissionReview v1 the webhook can answer (HTTP 400)."""


# --- wire types ----------------------------------------------------------------------------------
class GroupVersionResource(TypedDict, total=False):
    group: str
    version: str
    resource: str


class AdmissionRequest(TypedDict, total=False):
    uid: str
    kind: dict
    resource: GroupVersionResource
    subResource: str
    namespace: str
    name: str
    operation: str
    object: dict
    dryRun: bool
    userInfo: dict


class AdmissionResponse(TypedDict, total=False):
    uid: str
    allowed: bool
    patchType: str
    patch: str
    warnings: list


class AdmissionReview(TypedDict, total=False):
    apiVersion: str
    kind: str
    request: AdmissionRequest
    response: AdmissionResponse


class PatchOperation(TypedDict, total=False):
    op: str
    path: str
    value: Any


@dataclass(frozen=True)
class ReviewOutcome:
    """The response plus what the caller needs for bookkeeping (claims, metrics)."""

    response: AdmissionReview
    considered: bool  # a pod CREATE that was looked at
    match: Optional[Match] = None
    gated: bool = False
    dry_run: bool = False
    patch: tuple = ()


def _validate(body: Any) -> AdmissionRequest:
    if not isinstance(body, Mapping):
        raise AdmissionReviewError("body is not a JSON object (expected an AdmissionReview)")
    if body.get("apiVersion") != ADMISSION_API_VERSION:
        raise AdmissionReviewError(
            f"apiVersion {body.get('apiVersion')!r} is not supported (expected {ADMISSION_API_VERSION!r})")
    if body.get("kind") != "AdmissionReview":
        raise AdmissionReviewError(f"kind {body.get('kind')!r} is not AdmissionReview")
    request = body.get("request")
    if not isinstance(request, Mapping):
        raise AdmissionReviewError("AdmissionReview.request is missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise AdmissionReviewError("AdmissionReview.request.uid is missing or not a non-empty string")
    return request  # type: ignore[return-value]


def _is_pod_create(request: Mapping[str, Any]) -> bool:
    resource = request.get("resource")
    if not isinstance(resource, Mapping):
        return False
    return (request.get("operation") == "CREATE"
            and resource.get("group", "") == "" and resource.get("resource") == "pods"
            and not request.get("subResource"))


def _response(uid: str, patch: list) -> AdmissionReview:
    response: AdmissionResponse = {"uid": uid, "allowed": True}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()
    return {"apiVersion": ADMISSION_API_VERSION, "kind": "AdmissionReview", "response": response}


def build_patch(pod: Mapping[str, Any], annotations: Mapping[str, str], gate: bool) -> list[PatchOperation]:
    """JSONPatch adding `annotations` and (if `gate`) the placement gate; nothing already present."""
    ops: list[PatchOperation] = []
    meta = pod.get("metadata")
    if not isinstance(meta, Mapping):
        if annotations:
            ops.append({"op": "add", "path": "/metadata", "value": {"annotations": dict(annotations)}})
    else:
        existing = meta.get("annotations")
        if not isinstance(existing, Mapping):
            if annotations:
                ops.append({"op": "add", "path": "/metadata/annotations", "value": dict(annotations)})
        else:
            for key, value in annotations.items():
                if existing.get(key) != value:
                    # `add` on an existing member replaces it, so one op covers both cases.
                    ops.append({"op": "add", "path": "/metadata/annotations/" + escape_pointer(key),
                                "value": value})
    if gate:
        spec = pod.get("spec")
        if not isinstance(spec, Mapping):
            ops.append({"op": "add", "path": "/spec", "value": {"schedulingGates": [{"name": PLACEMENT_GATE}]}})
        else:
            gates = spec.get("schedulingGates")
            if not isinstance(gates, list):
                ops.append({"op": "add", "path": "/spec/schedulingGates", "value": [{"name": PLACEMENT_GATE}]})
            elif not any(isinstance(g, Mapping) and g.get("name") == PLACEMENT_GATE for g in gates):
                ops.append({"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": PLACEMENT_GATE}})
    return ops


def relocation_annotations(found: Match) -> dict[str, str]:
    """Annotations that name the run and the record a replacement belongs to."""
    record = found.record
    out = {
        RELOCATION_RUN_ANNOTATION: record.run_ref,
        RELOCATION_INDEX_ANNOTATION: str(record.index),
        RELOCATION_VICTIM_ANNOTATION: record.victim_pod_name,
        PLANNED_NODE_ANNOTATION: record.planned_node_name,
    }
    if found.replacement_pod_group_name:
        out[REPLACEMENT_PODGROUP_ANNOTATION] = found.replacement_pod_group_name
    return out


def review_outcome(admission_review: Any, index: RelocationIndex, gate_allowed: bool, now: datetime,
                   scheduler_names: frozenset[str] = DEFAULT_SCHEDULER_NAMES,
                   creators: Optional[frozenset[str]] = None, mac_key: Optional[bytes] = None) -> ReviewOutcome:
    """Decide on one AdmissionReview; raises AdmissionReviewError for malformed input.

    `creators`: the identities that re-create evicted pods (SEC-5); a pod created by anybody else
    claims no record, whatever labels, owner references or annotations it copies (None: no check,
    for tests of the matching alone). `mac_key`: the placement key the marks MAC is derived
    from; the webhook always has one whenever its index holds a record (it trusts no record
    without it). None: marks are written without a MAC and marks present are taken as they are
    (tests of the matching alone)."""
    request = _validate(admission_review)
    uid = request["uid"]
    if not _is_pod_create(request):
        return ReviewOutcome(_response(uid, []), considered=False)
    pod = request.get("object")
    if not isinstance(pod, Mapping):
        raise AdmissionReviewError(f"AdmissionReview.request.object of pod CREATE {uid} is missing or not an object")
    dry_run = bool(request.get("dryRun"))
    view = ObjectView(pod)
    namespace = str(request.get("namespace") or view.namespace)
    strip: list = []
    if mac_key is None and view.annotations.get(RELOCATION_RUN_ANNOTATION):
        return ReviewOutcome(_response(uid, []), considered=True, dry_run=dry_run)
    if mac_key is not None and any(k in view.annotations for k in REPLACEMENT_MARKS):
        if not marks_problem(pod, mac_key, namespace):
            # Reinvocation (or a pod stamped earlier): it is already somebody's replacement.
            return ReviewOutcome(_response(uid, []), considered=True, dry_run=dry_run)
        # Marks the webhook did not write for this pod: they go, and the pod is matched on its own.
        strip = strip_marks_patch(pod)
        pod = _without_marks(pod)
    if creators is not None and _username(request) not in creators:
        return ReviewOutcome(_response(uid, strip), considered=True, dry_run=dry_run, patch=tuple(strip))
    found = match(pod, index, namespace=namespace, scheduler_names=scheduler_names)
    if found is None:
        return ReviewOutcome(_response(uid, strip), considered=True, dry_run=dry_run, patch=tuple(strip))
    wanted = relocation_annotations(found)
    if mac_key is not None:
        wanted[MARKS_MAC_ANNOTATION] = marks_mac(mac_key, namespace, controller_uid(pod), wanted)
    if gate_allowed:
        wanted[PLACEMENT_GATE_OWNER_ANNOTATION] = found.record.run_ref
        wanted[GATED_AT_ANNOTATION] = rfc3339(now)
    patch = strip + build_patch(pod, wanted, gate=gate_allowed)
    return ReviewOutcome(_response(uid, patch), considered=True, match=found, gated=gate_allowed,
                         dry_run=dry_run, patch=tuple(patch))


def _without_marks(pod: Mapping[str, Any]) -> dict:
    """The pod as it is once `strip_marks_patch` is applied (what the rest of the patch builds on)."""
    meta = dict(ObjectView(pod).meta)
    meta["annotations"] = {k: v for k, v in ObjectView(pod).annotations.items() if k not in REPLACEMENT_MARKS}
    return {**pod, "metadata": meta}


def _username(request: Mapping[str, Any]) -> str:
    info = request.get("userInfo")
    return str(info.get("username") or "") if isinstance(info, Mapping) else ""


def review(admission_review: Any, index: RelocationIndex, gate_allowed: bool, now: datetime) -> AdmissionReview:
    """AdmissionReview v1 in, AdmissionReview v1 out: always allowed, JSONPatch for a replacement."""
    return review_outcome(admission_review, index, gate_allowed, now).response


# --- RepackRuns: the creator record (kubectl_repack.api.control) ---------------------------------
def _is_run_write(request: Mapping[str, Any]) -> bool:
    resource = request.get("resource")
    return (isinstance(resource, Mapping) and request.get("operation") in ("CREATE", "UPDATE")
            and resource.get("group") == RUN_GROUP and resource.get("resource") in (RUN_PLURAL, POLICY_PLURAL)
            and not request.get("subResource"))


def _policy_run(obj: Mapping[str, Any]) -> bool:
    """A run a RepackPolicy owns that already carries a creator record: the controller copied the
    policy's record onto it (POLICY-1, POLICY-2); the admission policy decides whether it may."""
    view = ObjectView(obj)
    return (view.annotations.get(CREATOR_ANNOTATIONS[0]) is not None
            and any(isinstance(r, Mapping) and r.get("kind") == POLICY_KIND for r in view.meta.get("ownerReferences") or ()))


def record_creator(admission_review: Any) -> AdmissionReview:
    """Allowed always; a JSONPatch that fills in the creator annotations, for `kubectl apply`.

    On CREATE they are set from the request's userInfo (whatever was pre-filled is overwritten);
    on UPDATE they are put back as the stored object has them, so a server-side re-apply of a
    manifest without them (their field manager is the applier's) does not drop them. Nothing is
    signed and nothing here is trusted: the admission policy CREATOR_POLICY_NAME, enforced by the
    API server, compares the annotations with the authenticated user (CREATE) and with the stored
    object (UPDATE), so a review forged by any caller gains nothing. Raises AdmissionReviewError
    for malformed input (answered 400, never 500)."""
    request = _validate(admission_review)
    uid = request["uid"]
    if not _is_run_write(request):
        return _response(uid, [])
    run = request.get("object")
    if not isinstance(run, Mapping):
        raise AdmissionReviewError(f"AdmissionReview.request.object of repackrun {request.get('operation')} {uid} "
                                   "is missing or not an object")
    if request["operation"] == "CREATE" and _policy_run(run):
        return _response(uid, [])
    if request["operation"] == "CREATE":
        info = request.get("userInfo")
        if not isinstance(info, Mapping) or not isinstance(info.get("username"), str) or not info.get("username"):
            raise AdmissionReviewError(f"AdmissionReview.request.userInfo.username of repackrun CREATE {uid} "
                                       "is missing or not a string")
        groups = info.get("groups")
        if groups is not None and not (isinstance(groups, list) and all(isinstance(g, str) for g in groups)):
            raise AdmissionReviewError(f"AdmissionReview.request.userInfo.groups of repackrun CREATE {uid} "
                                       "is not a list of strings")
        wanted = Creator.from_user_info(info).annotations()
        return _response(uid, build_patch(run, wanted, gate=False))
    old_ann = ObjectView(request.get("oldObject")).annotations
    kept = {k: old_ann[k] for k in CREATOR_ANNOTATIONS if isinstance(old_ann.get(k), str)}
    return _response(uid, build_patch(run, kept, gate=False) if kept else [])
