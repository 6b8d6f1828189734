"""The scheduling gate and the annotations a replacement pod carries, and how the gate is lifted.

The webhook adds them at pod creation (admission), the coordinator reads them back and lifts the
gate, the controller lifts any gate older than the placement lease (when the coordinator is down),
`uninstall` lifts any gate left behind: all of them use these names and `ungate_patch`.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
from typing import Any, Mapping, Optional

from .view import ObjectView, as_map
from .times import parse_time

PLACEMENT_GATE = "repack.volcano.sh/placement"
PLACEMENT_GATE_OWNER_ANNOTATION = "repack.volcano.sh/placement-gate-owner"
GATED_AT_ANNOTATION = "repack.volcano.sh/placement-gated-at"

RELOCATION_RUN_ANNOTATION = "repack.volcano.sh/relocation-run"        # `<run name>/<run uid>`
RELOCATION_INDEX_ANNOTATION = "repack.volcano.sh/relocation-index"    # index in status.relocations
RELOCATION_VICTIM_ANNOTATION = "repack.volcano.sh/relocation-victim"
REPLACEMENT_PODGROUP_ANNOTATION = "repack.volcano.sh/replacement-podgroup"
PLANNED_NODE_ANNOTATION = "repack.volcano.sh/planned-node"
# The webhook's MAC over the marks it adds and the pod's controlling owner (SEC-5; see marks_mac).
MARKS_MAC_ANNOTATION = "repack.volcano.sh/replacement-mac"

COORDINATOR_LEASE_NAME = "repack-coordinator"
# Who re-creates an evicted pod (SEC-5): only a pod created by one of these identities can claim a
# relocation record, and only these may create a pod that already carries the repack marks (the
# admission policy `replacement_pod_policy`). An install option (`--replacement-creator`) replaces
# the list; these are Volcano's controllers (its Helm chart's ServiceAccount) and the built-in
# workload controllers, with and without --use-service-account-credentials.
DEFAULT_REPLACEMENT_CREATORS = (
    "system:serviceaccount:volcano-system:volcano-controllers",
    "system:serviceaccount:kube-system:replicaset-controller",
    "system:serviceaccount:kube-system:statefulset-controller",
    "system:serviceaccount:kube-system:job-controller",
    "system:kube-controller-manager",
)
# What marks a pod as a repack replacement (read by the coordinator); nobody else may write them.
REPLACEMENT_MARKS = (RELOCATION_RUN_ANNOTATION, RELOCATION_INDEX_ANNOTATION, RELOCATION_VICTIM_ANNOTATION,
                     REPLACEMENT_PODGROUP_ANNOTATION, PLANNED_NODE_ANNOTATION, PLACEMENT_GATE_OWNER_ANNOTATION,
                     GATED_AT_ANNOTATION, MARKS_MAC_ANNOTATION)
# The marks the MAC covers (the gate owner and gated-at are bookkeeping: the coordinator removes the
# owner when it lifts the gate, and gated-at only shortens how long a gate is held).
MAC_COVERED_MARKS = (RELOCATION_RUN_ANNOTATION, RELOCATION_INDEX_ANNOTATION, RELOCATION_VICTIM_ANNOTATION,
                     REPLACEMENT_PODGROUP_ANNOTATION, PLANNED_NODE_ANNOTATION)
MARKS_MAC_VERSION = "v1"
_MARKS_KEY_LABEL = b"repack.volcano.sh replacement marks v1"

# The pending pods of a targeted run's target (RELIEF-3): the coordinator marks such a pod with the
# run (`<run name>/<run uid>`) and the vacated node it nominates, in one pods patch, and only then
# writes status.nominatedNodeName through pods/status. The admission policy
# `nomination_policy` lets the coordinator set nominatedNodeName only to the node these name (or, on
# a gated replacement, to PLANNED_NODE_ANNOTATION); the executor reads them back for
# status.result.target.nominated. Nobody but the coordinator and the controller may change them.
TARGET_RUN_ANNOTATION = "repack.volcano.sh/target-of"
TARGET_NODE_ANNOTATION = "repack.volcano.sh/target-node"
TARGET_MARKS = (TARGET_RUN_ANNOTATION, TARGET_NODE_ANNOTATION)

# The promise: no pod stays gated longer than this (the coordinator lifts the gate then, and the
# controller does too, should the coordinator be down). Gates fail open.
PLACEMENT_LEASE = dt.timedelta(seconds=30)


def escape_pointer(token: str) -> str:
    """Escape one JSON Pointer reference token (RFC 6901: `~` -> `~0`, `/` -> `~1`)."""
    return token.replace("~", "~0").replace("/", "~1")


def has_gate(pod: Mapping[str, Any]) -> bool:
    """Whether the pod still carries our scheduling gate."""
    gates = ObjectView(pod).spec.get("schedulingGates") or []
    return any(isinstance(g, Mapping) and g.get("name") == PLACEMENT_GATE for g in gates)


def ungate_patch(pod: Mapping[str, Any]) -> list:
    """JSON patch removing our gate (other gates kept) and the gate-owner annotation.

    A `test` op on the whole gate list guards it: if anyone changed the gates since `pod` was
    read, the API server rejects the patch and the caller retries on fresh data.
    """
    view = ObjectView(pod)
    gates = list(view.spec.get("schedulingGates") or [])
    ops: list = []
    if any(as_map(g).get("name") == PLACEMENT_GATE for g in gates):
        keep = [g for g in gates if as_map(g).get("name") != PLACEMENT_GATE]
        ops += [{"op": "test", "path": "/spec/schedulingGates", "value": gates},
                {"op": "replace", "path": "/spec/schedulingGates", "value": keep}]
    if PLACEMENT_GATE_OWNER_ANNOTATION in view.annotations:
        ops.append({"op": "remove", "path": "/metadata/annotations/" + escape_pointer(PLACEMENT_GATE_OWNER_ANNOTATION)})
    return ops


def expired_gate_patches(pods, now: dt.datetime, lease: dt.timedelta = PLACEMENT_LEASE) -> list:
    """[(namespace, name, JSON patch)] lifting our gate from every pod gated `lease` or longer ago
    (or with no gated-at time: nobody knows when, so it is not kept)."""
    out = []
    for pod in pods:
        if not has_gate(pod):
            continue
        view = ObjectView(pod)
        gated = parse_time(view.annotations.get(GATED_AT_ANNOTATION))
        if gated is None or now - gated >= lease:
            out.append((view.namespace, view.name, ungate_patch(pod)))
    return out


def target_mark_patch(pod: Mapping[str, Any], run_ref: str, node: str) -> list:
    """JSON patch writing the target marks (TARGET_MARKS) on `pod`: the run `run_ref`
    (`<name>/<uid>`) and the node about to be nominated."""
    ops: list = [] if ObjectView(pod).meta.get("annotations") else [
        {"op": "add", "path": "/metadata/annotations", "value": {}}]
    for key, value in ((TARGET_RUN_ANNOTATION, run_ref), (TARGET_NODE_ANNOTATION, node)):
        ops.append({"op": "add", "path": "/metadata/annotations/" + escape_pointer(key), "value": value})
    return ops


# --- the marks MAC (SEC-5) ---------------------------------------------------------------------------
# A pod's repack marks decide which relocation record it takes and where it is nominated, so the
# coordinator acts only on marks the webhook wrote: the webhook MACs them, together with the pod's
# namespace and its controlling owner's UID (set by the workload controller that creates the pod,
# never by a pod template), and strips any marks a pod arrives with. Marks copied into a template,
# or onto a pod admitted while the webhook was down, do not verify. The key is derived from the
# placement key (Secret PLACEMENT_KEY_SECRET_NAME, made by the controller), which only the webhook and
# the coordinator may read: never from the records-seal key, so that a stolen webhook or coordinator
# token can at worst forge marks (steer a replacement), never a seal (evictions).
PLACEMENT_KEY_SECRET_NAME = "repack-placement-key"


def marks_key(placement_key: bytes) -> bytes:
    """The marks MAC key, derived from the placement key (a separate key for a separate use)."""
    return hmac.new(placement_key, _MARKS_KEY_LABEL, hashlib.sha256).digest()


def controller_uid(pod: Mapping[str, Any]) -> str:
    """The UID of the pod's controlling owner reference ('' when it has none)."""
    for ref in ObjectView(pod).meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return str(ref.get("uid") or "")
    return ""


def marks_mac(key: bytes, namespace: str, owner_uid: str, marks: Mapping[str, Any]) -> str:
    """The MAC annotation's value for these marks on a pod of `namespace` controlled by `owner_uid`."""
    body = json.dumps({"ns": namespace, "owner": owner_uid,
                       "marks": [str(marks.get(k) or "") for k in MAC_COVERED_MARKS]},
                      separators=(",", ":"), ensure_ascii=True).encode()
    return f"{MARKS_MAC_VERSION}:" + hmac.new(marks_key(key), body, hashlib.sha256).hexdigest()


def marks_problem(pod: Mapping[str, Any], key: Optional[bytes], namespace: str = "") -> str:
    """'' when the pod's marks are the ones the webhook wrote for this pod (its namespace and its
    controlling owner), else why they are not trusted. `key`: the records-seal key (None: unknown,
    nothing verifies)."""
    view = ObjectView(pod)
    got = view.annotations.get(MARKS_MAC_ANNOTATION)
    if not isinstance(got, str) or not got:
        return f"the pod's repack marks carry no MAC (annotation {MARKS_MAC_ANNOTATION}): the webhook did not write them"
    if key is None:
        return "the records-seal key is not readable (yet): no marks can be verified"
    owner = controller_uid(pod)
    if not owner:
        return "the pod has no controlling owner: only a workload controller's pod replaces an evicted one"
    want = marks_mac(key, namespace or view.namespace, owner, view.annotations)
    if not hmac.compare_digest(got.encode("utf-8", "replace"), want.encode()):
        return (f"the pod's repack marks do not match their MAC (annotation {MARKS_MAC_ANNOTATION}): they were "
                "copied from a template or another pod, or changed")
    return ""


def strip_marks_patch(pod: Mapping[str, Any]) -> list:
    """JSON patch removing every repack mark (REPLACEMENT_MARKS) the pod arrived with."""
    ann = ObjectView(pod).annotations
    return [{"op": "remove", "path": "/metadata/annotations/" + escape_pointer(k)}
            for k in REPLACEMENT_MARKS if k in ann]
