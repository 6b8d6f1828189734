"""The coordinator's decisions, pure: which relocation a gated pod replaces, and what to do with it.

`replacement_of` reads the webhook's annotations back off a pod; `decide` is the whole policy for
one pod (record, nominate, lift the gate, time out) as a function of the pod, its run and the
time, tested as a table; `decide_target` is the policy for a targeted run's pending pods once its
planned nodes are vacated (RELIEF-3), also a table; `LiveFit` checks a planned node on a live snapshot with the planner's
own scheduler filters. The coordinator process (webhook.coordinator.loop) only does the I/O around them.
The placement fields a decision writes are the run API's `Placement` transitions (the executor's
time-out writes through the same ones).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Callable, Mapping, Optional, Protocol

from kubectl_repack.api.gates import (GATED_AT_ANNOTATION, PLACEMENT_GATE_OWNER_ANNOTATION,
                                      RELOCATION_INDEX_ANNOTATION, RELOCATION_RUN_ANNOTATION,
                                      RELOCATION_VICTIM_ANNOTATION, REPLACEMENT_PODGROUP_ANNOTATION,
                                      TARGET_NODE_ANNOTATION, TARGET_RUN_ANNOTATION, has_gate)
from kubectl_repack.api.run import Placement, RunView, as_map, is_active_execute
from kubectl_repack.api.times import parse_time
from kubectl_repack.api.view import ObjectView
from planner.filters import run_filters
from planner.load import load_objects
from planner.model import pod_group_name
from planner.state import SimulatedState

POD_FINISHED_PHASES = ("Succeeded", "Failed")


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


def replacement_of(pod: Mapping[str, Any],
                   verify: Callable[[Mapping[str, Any]], str]) -> Optional[Replacement]:
    """The webhook's annotations read back; None for pods that are nobody's replacement.

    `verify(pod)`: why the pod's marks are not the webhook's ('' when they are; the coordinator
    passes the marks MAC check, kubectl_repack.api.gates.marks_problem): marks that do not verify
    name no run, so the pod takes no record and a gate on it is only lifted."""
    view = ObjectView(pod)
    ann = view.annotations
    run_ref = ann.get(RELOCATION_RUN_ANNOTATION)
    gated = has_gate(pod)
    if run_ref is not None and verify(pod):
        run_ref = None   # marks copied from a template or another pod: not a replacement
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
        namespace=view.namespace, name=view.name, uid=view.uid, run_name=run_name, run_uid=run_uid, index=index,
        victim=str(ann.get(RELOCATION_VICTIM_ANNOTATION) or ""),
        node_name=str(view.spec.get("nodeName") or ""), gated=gated,
        gated_at=parse_time(ann.get(GATED_AT_ANNOTATION)),
        gate_owner=str(ann.get(PLACEMENT_GATE_OWNER_ANNOTATION) or ""),
        nominated_node=str(view.status.get("nominatedNodeName") or ""),
        replacement_pod_group=str(ann.get(REPLACEMENT_PODGROUP_ANNOTATION) or ""),
        deleting=view.deleting)


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


def find_record(rep: Replacement, run: Optional[Mapping[str, Any]]) -> tuple[Optional[dict], str]:
    """The relocation this pod replaces, or None with the reason it is not ours to write."""
    if not isinstance(run, Mapping):
        return None, f"run {rep.run_name or '?'} not found"
    view = ObjectView(run)
    if rep.run_uid and view.uid != rep.run_uid:
        return None, f"run {rep.run_name} is another run (uid {view.meta.get('uid')}, pod names {rep.run_uid})"
    return find_record_in(rep, view.status)


def find_record_in(rep: Replacement, status: Mapping[str, Any]) -> tuple[Optional[dict], str]:
    """find_record within one status (of the run the pod names)."""
    relocations = status.get("relocations") or []
    if not 0 <= rep.index < len(relocations) or not isinstance(relocations[rep.index], Mapping):
        return None, f"run {rep.run_name} has no relocation #{rep.index}"
    record = relocations[rep.index]
    if record.get("namespace") != rep.namespace or (rep.victim and record.get("victimPodName") != rep.victim):
        return None, f"relocation #{rep.index} of run {rep.run_name} is about another pod"
    placement = as_map(record.get("placement"))
    owner_uid, owner_name = placement.get("replacementPodUID"), placement.get("replacementPodName")
    if (owner_uid and owner_uid != rep.uid) or (not owner_uid and owner_name and owner_name != rep.name):
        return None, f"relocation #{rep.index} of run {rep.run_name} belongs to pod {owner_name}"
    return record, ""


def decide(rep: Replacement, run: Optional[Mapping[str, Any]], now: datetime, placement_lease: timedelta,
           check_fit: Callable[[str], Optional[str]], run_problem: str = "") -> Decision:
    """The coordinator's decision for one annotated (or gated) pod, as a pure function.

    `check_fit(node)` answers None when the pod fits `node` on live state, else the reason.
    `run_problem`: why the run's records may not be acted on ('' when they may; the coordinator
    passes the records-digest check, SEC-2: a record a status writer added or changed, a
    `plannedNodeName` edited, steers nothing): the pod is then not recorded, only released.
    """
    record, why_not = find_record(rep, run) if rep.run_name else (None, "pod carries no run annotation")
    if record is not None and run_problem:
        record, why_not = None, f"run {rep.run_name}: {run_problem}"
    if record is None or not is_active_execute(run):
        if record is not None:
            why_not = f"run {rep.run_name} is not a Running Execute run"
        # Not ours to record: never hold the gate for a run that will not place the pod.
        return Decision(ungate=rep.gated, reason=why_not + ("; releasing the gate" if rep.gated else ""))
    stored = Placement.from_dict(record.get("placement"))
    placement, group = stored, {}
    if stored.replacement_pod_name != rep.name or stored.replacement_pod_uid != rep.uid:
        placement = stored.with_replacement(rep.name, rep.uid)
        if rep.replacement_pod_group and record.get("replacementPodGroupName") != rep.replacement_pod_group:
            group = {"replacementPodGroupName": rep.replacement_pod_group}

    def first(new: Placement) -> dict:
        """The fields written before any hint: the placement's changes, and the new PodGroup."""
        return {**stored.changes(new), **group}

    if rep.node_name:
        # Also after TimedOut: Placed means bound (what `apply` waits for); a time-out shows
        # as an empty selectedNodeName, the lease_timeouts counter and the log.
        return Decision(record=first(placement.placed_on(rep.node_name)), reason=f"bound to {rep.node_name}")
    if not rep.gated:
        return Decision(record=first(placement), reason="not gated (webhook saw no fresh coordinator Lease)")
    if rep.gated_at is None or now - rep.gated_at >= placement_lease:
        return Decision(record=first(placement.timed_out()), ungate=True, timed_out=True,
                        reason=f"gated longer than the placement lease ({placement_lease.total_seconds():g}s)")
    planned = str(record.get("plannedNodeName") or "")
    if rep.deleting or not planned:
        return Decision(record=first(placement), ungate=True,
                        reason="no planned node" if not planned else "pod is being deleted")
    if rep.nominated_node == planned:
        reason = None  # nominated before a restart: finish the sequence
    else:
        reason = check_fit(planned)
    if reason is None:
        return Decision(record=first(placement), nominate=planned if rep.nominated_node != planned else "",
                        after_nomination=placement.changes(placement.nominated(planned)), ungate=True,
                        reason=f"planned node {planned} still fits")
    return Decision(record=first(placement), ungate=True, reason=f"planned node {planned} no longer fits: {reason}")


# --- the target of a run (RELIEF-3) ---------------------------------------------------------------
class Fit(Protocol):
    """What decide_target asks about a node (LiveFit): check, then count a nomination made."""
    def check(self, pod_key: str, node: str) -> Optional[str]: ...
    def reserve(self, pod_key: str, node: str) -> None: ...


@dataclass(frozen=True)
class TargetDecision:
    """The target pods to nominate, and why the others get no hint (one line each)."""

    nominations: tuple = ()   # ((namespace, pod, node), ...) in the order to write them
    notes: tuple = ()


def target_run_ref(run: Mapping[str, Any]) -> str:
    """`<name>/<uid>` of a run: the value of TARGET_RUN_ANNOTATION on the pods it nominates."""
    view = ObjectView(run)
    return f"{view.name}/{view.uid}"


def awaiting_target(run: Optional[Mapping[str, Any]]) -> bool:
    """A Running targeted Execute whose executor has seen the planned nodes vacated and waits for
    the target to bind (status.result.target written without `bound: true`)."""
    if not isinstance(run, Mapping) or not is_active_execute(run):
        return False
    view = RunView(run)
    target = as_map(as_map(view.status.get("result")).get("target"))
    return bool(as_map(view.spec.get("target")).get("podGroups")) and bool(target.get("vacatedAt")) \
        and target.get("bound") is not True


def decide_target(run: Optional[Mapping[str, Any]], pods: list, podgroups: Mapping[str, Optional[Mapping]],
                  fit: Fit, run_problem: str = "") -> TargetDecision:
    """Which pending pods of a targeted run's target get status.nominatedNodeName, and which node.

    Only while the run awaits its target (`awaiting_target`): the nodes are the vacated ones
    (status.result.vacatedNodes), the plan's node for the pod first
    (status.plan.summary.target.placements), every one checked with `fit` (the planner's filters on
    live state; a node that no longer fits gets no hint), and each nomination is reserved so two pods
    never overfill a node. A target that is gone, or bound already (phase Running or minMember of
    its pods bound: it took the room on its own), gets nothing; a pod nominated by this run already
    is left as it is; a run whose records do not verify (`run_problem`, as in `decide`) nominates
    nothing. `pods`: the pods of the targets' namespaces; `podgroups`: "namespace/name" ->
    the PodGroup as read now (None: deleted). The marks on the pod (TARGET_*_ANNOTATION) are written
    before the hint, and admission lets the coordinator write no other hint."""
    if not isinstance(run, Mapping):
        return TargetDecision(notes=("run not found",))
    view = RunView(run)
    if run_problem:   # as in `decide`: a run whose records do not verify steers nothing
        return TargetDecision(notes=(f"run {view.name}: {run_problem}; nothing nominated",))
    keys = [str(k) for k in as_map(view.spec.get("target")).get("podGroups") or ()]
    if not keys:
        return TargetDecision(notes=(f"run {view.name} is not targeted",))
    if not awaiting_target(run):
        return TargetDecision(notes=(f"run {view.name}: the planned nodes are not vacated yet"
                                     if is_active_execute(run) else f"run {view.name} is not a Running Execute run",))
    result = as_map(view.status.get("result"))
    vacated = [str(as_map(v).get("node")) for v in result.get("vacatedNodes") or () if as_map(v).get("node")]
    planned = {str(as_map(p).get("pod")): str(as_map(p).get("node"))
               for p in as_map(as_map(view.plan.get("summary")).get("target")).get("placements") or ()}
    ref = target_run_ref(run)
    nominations, notes = [], []
    for key in keys:
        ns, _, name = key.partition("/")
        pg = podgroups.get(key)
        if pg is None:
            notes.append(f"target {key} was deleted: nothing to nominate")
            continue
        min_member = as_map(pg.get("spec")).get("minMember")
        min_member = min_member if isinstance(min_member, int) and not isinstance(min_member, bool) else 0
        members = []
        for p in pods:
            pv = ObjectView(p)
            if (pv.namespace == ns and pod_group_name(pv.annotations, pv.labels) == name
                    and pv.status.get("phase") not in POD_FINISHED_PHASES and not pv.deleting):
                members.append(pv)
        bound = sum(1 for pv in members if pv.spec.get("nodeName"))
        if as_map(pg.get("status")).get("phase") == "Running" or bound >= max(min_member, 1):
            notes.append(f"target {key}: {bound} of minMember {min_member} pod(s) bound, nothing to nominate")
            continue
        if not vacated:
            notes.append(f"target {key}: no planned node was vacated, nothing to nominate")
            continue
        for pv in sorted((pv for pv in members if not pv.spec.get("nodeName")), key=lambda pv: pv.name):
            pod_key = f"{ns}/{pv.name}"
            if pv.annotations.get(RELOCATION_RUN_ANNOTATION):
                continue   # a replacement: decide's to place
            ours = pv.annotations.get(TARGET_RUN_ANNOTATION) == ref
            if ours and pv.status.get("nominatedNodeName") == pv.annotations.get(TARGET_NODE_ANNOTATION):
                continue   # nominated by this run already
            first = planned.get(pod_key)
            candidates = ([first] if first in vacated else []) + [n for n in vacated if n != first]
            why = []
            for node in candidates:
                reason = fit.check(pod_key, node)
                if reason is None:
                    fit.reserve(pod_key, node)
                    nominations.append((ns, pv.name, node))
                    break
                why.append(f"{node}: {reason}")
            else:
                notes.append(f"pod {pod_key}: no vacated node fits ({'; '.join(why)}), no hint")
    return TargetDecision(tuple(nominations), tuple(notes))


# --- live feasibility with the planner's filters ---------------------------------------------------
class LiveFit:
    """`check_fit` on one snapshot of the live cluster, cumulative within a tick.

    Pods already nominated somewhere (and not bound) count on that node, and every nomination made
    in this tick is added too, so two replacements can never together overfill a node.
    """

    def __init__(self, objects: list, resource: str = ""):
        self.snapshot = load_objects(objects)
        self.state = SimulatedState(self.snapshot)
        self.resource = resource
        self._pods = {p.key: p for p in self.snapshot.pods}
        self._nominated = {}
        for obj in objects:
            if obj.get("kind") != "Pod":
                continue
            view = ObjectView(obj)
            node = view.status.get("nominatedNodeName")
            key = f"{view.namespace or 'default'}/{view.name}"
            if node and not view.spec.get("nodeName") and view.status.get("phase") not in POD_FINISHED_PHASES:
                self._hold(key, node)

    def _hold(self, key: str, node: str) -> None:
        pod = self._pods.get(key)
        if pod is None or node not in self.state.pods_on or key in self.state.node_of:
            return
        self.state.bind(pod, node)
        self._nominated[key] = node

    def check(self, pod_key: str, node: str) -> Optional[str]:
        """None when the pod fits `node`, else the scheduler-worded reason."""
        pod = self._pods.get(pod_key)
        if pod is None:
            return f"pod {pod_key} is not in the live snapshot"
        target = self.snapshot.node_by_name.get(node)
        if target is None:
            return f"node {node} does not exist"
        held = self._nominated.pop(pod_key, None)
        if held is not None:  # re-checking a pod nominated earlier: do not count it twice
            self.state.unbind(pod)
        failed = run_filters(pod, target, self.state, {})
        if failed is not None:
            return f"{failed[0]}: {failed[1]}"
        if self.resource and pod.requests.get(self.resource, 0) > self.state.free(node, self.resource):
            return f"Insufficient {self.resource}"
        return None

    def reserve(self, pod_key: str, node: str) -> None:
        """Count a nomination made in this tick against `node`."""
        self._hold(pod_key, node)
