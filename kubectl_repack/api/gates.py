"""The scheduling gate and the annotations a replacement pod carries, and how the gate is lifted.

The webhook adds them at pod creation (admission), the coordinator reads them back and lifts the
gate, the controller lifts any gate older than the placement lease (when the coordinator is down),
`uninstall` lifts any gate left behind: all of them use these names and `ungate_patch`.
"""
from __future__ import annotations

import datetime as dt
from typing import Any, Mapping

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
                     GATED_AT_ANNOTATION)

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
