"""Recognise a newly created pod as the replacement of an evicted victim (requirement NOM-1).

Pure and shared: the webhook matches at admission, `apply` without a webhook matches the pods it
lists, so both sides recognise the same pod. A pod's controller is its `controller: true` owner
reference and its PodGroup is read with the planner's key set (planner.model).

A replacement is the pod the victim's own workload controller creates to restore its replica
count. It must be in the victim's namespace and share the victim's workload identity:

* same-name     VCJob, StatefulSet and Kthena ModelServing re-create a pod under the victim's
                exact name; the new pod's controller must agree with the victim's owner.
* controller    ReplicaSet-style owners create a fresh random name; the new pod must have the
                same controller (kind + name) and the same pod template (`pod-template-hash`
                label, or the Volcano task for VCJob pods).
* serving-role  Kthena's ServingGroupRecreate rebuilds a whole ServingGroup, possibly under a new
                group (= PodGroup) name; the new pod must belong to the same ModelServing, play
                the same role, and sit at the same position in it (entry vs n-th worker). Its
                PodGroup is reported as `replacement_pod_group_name`.

The records do not carry the victim's labels, so the victim's identity is derived from what a
RepackRun does hold: `status.plan.moves[].owner` (the PodGroup's controller), the PodGroup name,
and the naming schemes the controllers use for pods (`<replicaset>-<random>`,
`<statefulset>-<ordinal>`, `<job>-<task>-<index>`,
`<modelserving>-<group index>-<role>-<role index>-<pod index>`).

Exact-name matches win over derived ones, then records of the pod's own PodGroup, each tier
oldest eviction first. Anything else is no match.

Names and labels can be copied by anyone who may create pods in the namespace (a ReplicaSet of
their own, a template), so every rule also requires what only the victim's workload controller can
produce (SEC-5): Volcano names the PodGroup of a workload after its controller's UID
(`podgroup-<owner uid>` for a ReplicaSet's or a StatefulSet's pods, `<job>-<job uid>` for a VCJob),
and the record's PodGroup is sealed by the controller, so when it ends in a UID the new pod's
controlling owner reference must carry that UID. A PodGroup named by hand carries no UID; its
records match on names and labels only (README, Safety). Should a PodGroup carry another owner's
UID (one above the pod's controller), no pod matches: its replacement gets no hint, never a wrong one.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from planner.model import OwnerRef, controller_of
from planner.model import pod_group_name as group_name_of

from .gates import controller_uid
from .relocations import RelocationIndex, RelocationRecord
from .view import ObjectView

VCJOB_NAME_ANNOTATION = "volcano.sh/job-name"
VCJOB_TASK_ANNOTATION = "volcano.sh/task-spec"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"

# Kthena (volcano-sh/kthena, pkg/apis/workload/v1alpha1/labels.go)
MODELSERVING_NAME_LABEL = "modelserving.volcano.sh/name"
MODELSERVING_ROLE_LABEL = "modelserving.volcano.sh/role"
MODELSERVING_ENTRY_LABEL = "modelserving.volcano.sh/entry"

VCJOB_GROUP = "batch.volcano.sh"
MODELSERVING_GROUP = "workload.serving.volcano.sh"

RULE_SAME_NAME = "same-name"
RULE_CONTROLLER = "controller-template"
RULE_SERVING_ROLE = "serving-role"

DEFAULT_SCHEDULER_NAMES = frozenset({"volcano"})


@dataclass(frozen=True)
class Match:
    """A pod recognised as the replacement of `record`."""

    record: RelocationRecord
    rule: str
    replacement_pod_group_name: str = ""


@dataclass(frozen=True)
class PodIdentity:
    """What the webhook reads off a new pod to compare workload identity."""

    namespace: str
    name: str
    controller: Optional[OwnerRef]
    group_name: str
    template_hash: str
    vcjob_name: str
    vcjob_task: str
    serving_name: str
    serving_role: str
    serving_position: Optional[int]
    controller_uid: str = ""


def is_vcjob(ref: Optional[OwnerRef]) -> bool:
    """Owner is a Volcano Job (batch.volcano.sh, kind Job)."""
    return ref is not None and ref.kind == "Job" and ref.group == VCJOB_GROUP


def is_statefulset(ref: Optional[OwnerRef]) -> bool:
    """Owner is an apps StatefulSet."""
    return ref is not None and ref.kind == "StatefulSet" and ref.group == "apps"


def is_modelserving(ref: Optional[OwnerRef]) -> bool:
    """Owner is a Kthena ModelServing."""
    return ref is not None and ref.kind == "ModelServing" and ref.group == MODELSERVING_GROUP


_TRAILING_INT = re.compile(r"-(\d+)$")


def pod_identity(pod: Mapping[str, Any], namespace: str = "") -> PodIdentity:
    """Read the identity fields of a pod object; `namespace` (the request's) wins over metadata."""
    view = ObjectView(pod)
    meta, labels, annotations = view.meta, view.labels, view.annotations
    name = str(meta.get("name") or "")
    position: Optional[int] = None
    if labels.get(MODELSERVING_ROLE_LABEL):
        if str(labels.get(MODELSERVING_ENTRY_LABEL, "")) == "true":
            position = 0
        else:
            m = _TRAILING_INT.search(name)
            position = int(m.group(1)) if m else None
    return PodIdentity(
        namespace=str(namespace or meta.get("namespace") or ""),
        name=name,
        controller=controller_of(meta.get("ownerReferences") if isinstance(meta.get("ownerReferences"), list) else ()),
        group_name=group_name_of(annotations, labels),
        template_hash=str(labels.get(POD_TEMPLATE_HASH_LABEL) or ""),
        vcjob_name=str(annotations.get(VCJOB_NAME_ANNOTATION) or ""),
        vcjob_task=str(annotations.get(VCJOB_TASK_ANNOTATION) or ""),
        serving_name=str(labels.get(MODELSERVING_NAME_LABEL) or ""),
        serving_role=str(labels.get(MODELSERVING_ROLE_LABEL) or ""),
        serving_position=position,
        controller_uid=controller_uid(pod),
    )


# --- victim identity derived from the record -----------------------------------------------------
def _strip_last_segment(name: str) -> str:
    return name.rsplit("-", 1)[0] if "-" in name else ""


def serving_parent(pod_group_name: str) -> str:
    """ModelServing name of a Kthena ServingGroup/PodGroup named `<modelserving>-<index>`."""
    m = _TRAILING_INT.search(pod_group_name)
    return pod_group_name[: m.start()] if m else ""


def victim_serving_slot(record: RelocationRecord) -> Optional[tuple[str, str, int]]:
    """(ModelServing, role, position) of a Kthena victim, parsed from its pod name."""
    serving = record.owner.name if is_modelserving(record.owner) else serving_parent(record.pod_group_name)
    if not serving:
        return None
    m = re.fullmatch(re.escape(serving) + r"-\d+-(.+)-(\d+)-(\d+)", record.victim_pod_name)
    if not m:
        return None
    return serving, m.group(1), int(m.group(3))


def victim_controller(record: RelocationRecord) -> Optional[OwnerRef]:
    """The victim pod's controller: the plan's owner if given, else read off a ReplicaSet-style name."""
    parent = _strip_last_segment(record.victim_pod_name)
    owner = record.owner
    if owner is not None and owner.kind == "Deployment" and owner.group == "apps":
        # Plans that walk up to the Deployment: the pod's own controller is its ReplicaSet.
        return OwnerRef("apps/v1", "ReplicaSet", parent, True) if parent.startswith(owner.name + "-") else None
    if owner is not None:
        return owner
    return OwnerRef("apps/v1", "ReplicaSet", parent, True) if parent else None


def victim_vcjob_task(record: RelocationRecord) -> str:
    """Task of a VCJob victim named `<job>-<task>-<index>`."""
    if not is_vcjob(record.owner):
        return ""
    m = re.fullmatch(re.escape(record.owner.name) + r"-(.+)-\d+", record.victim_pod_name)
    return m.group(1) if m else ""


_UID_SUFFIX = re.compile(r"-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$")


def victim_owner_uid(record: RelocationRecord) -> str:
    """The victim's controller UID as Volcano wrote it into the PodGroup's name ('' when the name
    carries none: a PodGroup named by hand)."""
    m = _UID_SUFFIX.search(record.pod_group_name)
    return m.group(1) if m else ""


def owner_agrees(pod: PodIdentity, record: RelocationRecord) -> bool:
    """The pod's controlling owner is the victim's, as far as the record can tell (SEC-5)."""
    want = victim_owner_uid(record)
    return not want or pod.controller_uid == want


# --- rules --------------------------------------------------------------------------------------
def _same_name(pod: PodIdentity, record: RelocationRecord) -> Optional[Match]:
    if not pod.name or pod.name != record.victim_pod_name or pod.controller is None:
        return None
    ctrl, owner = pod.controller, record.owner
    if is_vcjob(ctrl) or is_statefulset(ctrl):
        if owner is not None and (owner.kind, owner.name, owner.group) != (ctrl.kind, ctrl.name, ctrl.group):
            return None
        if owner is None and is_statefulset(ctrl) and _strip_last_segment(record.victim_pod_name) != ctrl.name:
            return None
        return Match(record, RULE_SAME_NAME)
    if is_modelserving(ctrl):
        if owner is not None and not (is_modelserving(owner) and owner.name == ctrl.name):
            return None
        return Match(record, RULE_SAME_NAME, _new_group(pod, record))
    return None


def _controller_template(pod: PodIdentity, record: RelocationRecord) -> Optional[Match]:
    ctrl = pod.controller
    if ctrl is None or is_statefulset(ctrl) or is_modelserving(ctrl):
        return None
    expected = victim_controller(record)
    if expected is None or (expected.kind, expected.name, expected.group) != (ctrl.kind, ctrl.name, ctrl.group):
        return None
    if is_vcjob(ctrl):
        task = victim_vcjob_task(record)
        if not task or task != pod.vcjob_task:
            return None
    elif pod.template_hash and not ctrl.name.endswith("-" + pod.template_hash):
        # A ReplicaSet is named `<deployment>-<pod-template-hash>`; a pod whose hash label
        # disagrees with its own owner's name was not stamped from the victim's template.
        return None
    return Match(record, RULE_CONTROLLER)


def _serving_role(pod: PodIdentity, record: RelocationRecord) -> Optional[Match]:
    ctrl = pod.controller
    if not is_modelserving(ctrl) or not pod.serving_role or pod.serving_position is None:
        return None
    slot = victim_serving_slot(record)
    if slot is None:
        return None
    serving, role, position = slot
    if ctrl.name != serving or (pod.serving_name and pod.serving_name != serving):
        return None
    if pod.serving_role != role or pod.serving_position != position:
        return None
    return Match(record, RULE_SERVING_ROLE, _new_group(pod, record))


def _new_group(pod: PodIdentity, record: RelocationRecord) -> str:
    return pod.group_name if pod.group_name and pod.group_name != record.pod_group_name else ""


def _lookups(index: RelocationIndex) -> dict:
    """Records keyed by what a new pod can be looked up with, built once per index."""
    cached = index.derived.get("matching")
    if cached is not None:
        return cached
    by_name: dict[tuple, list[RelocationRecord]] = {}
    by_controller: dict[tuple, list[RelocationRecord]] = {}
    by_slot: dict[tuple, list[RelocationRecord]] = {}
    for record in index.records:  # index order = oldest eviction first, kept in every list
        by_name.setdefault((record.namespace, record.victim_pod_name), []).append(record)
        ctrl = victim_controller(record)
        if ctrl is not None:
            by_controller.setdefault((record.namespace, ctrl.kind, ctrl.group, ctrl.name), []).append(record)
        slot = victim_serving_slot(record)
        if slot is not None:
            by_slot.setdefault((record.namespace,) + slot, []).append(record)
    cached = {"name": by_name, "controller": by_controller, "slot": by_slot}
    index.derived["matching"] = cached
    return cached


def match_identity(pod: PodIdentity, index: RelocationIndex) -> Optional[Match]:
    """Match a pod identity against the index's unclaimed open records."""
    lookups = _lookups(index)
    for record in lookups["name"].get((pod.namespace, pod.name), ()):
        if index.is_open(record) and owner_agrees(pod, record):
            found = _same_name(pod, record)
            if found:
                return found
    ctrl = pod.controller
    if ctrl is None:
        return None
    if is_modelserving(ctrl):
        candidates = lookups["slot"].get((pod.namespace, ctrl.name, pod.serving_role, pod.serving_position), ())
    else:
        candidates = lookups["controller"].get((pod.namespace, ctrl.kind, ctrl.group, ctrl.name), ())
    candidates = [r for r in candidates if index.is_open(r) and owner_agrees(pod, r)]
    if pod.group_name:
        # Records of the pod's own PodGroup first; stable sort keeps oldest-first inside each tier.
        candidates.sort(key=lambda r: r.pod_group_name != pod.group_name)
    for record in candidates:
        found = _controller_template(pod, record) or _serving_role(pod, record)
        if found:
            return found
    return None


def match(pod: Mapping[str, Any], index: RelocationIndex, namespace: str = "",
          scheduler_names: frozenset[str] = DEFAULT_SCHEDULER_NAMES) -> Optional[Match]:
    """The open relocation `pod` replaces, or None (NOM-1).

    Pods already bound (`spec.nodeName`) or scheduled by another scheduler never match: a gate
    cannot be combined with nodeName, and only Volcano-scheduled pods are ever relocated.

    The index's claims (records handed to a pod admitted moments ago) only order the choice: an
    unclaimed record is preferred, but when every record the pod matches is claimed it still gets
    the oldest of them. A claim comes from what an admission request says, which any client that
    reaches the webhook can forge (SEC-5), so a claim never keeps a genuine replacement from its
    record; which pod takes a record is decided by the coordinator from the pods it observes
    through the API server.
    """
    spec = ObjectView(pod).spec
    if spec.get("nodeName"):
        return None
    if scheduler_names and spec.get("schedulerName") not in scheduler_names:
        return None
    identity = pod_identity(pod, namespace)
    found = match_identity(identity, index)
    if found is None and index.claimed:
        found = match_identity(identity, index.with_claims(()))
    return found
