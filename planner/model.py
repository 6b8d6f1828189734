"""The immutable snapshot the planner reads: nodes, pods, PodGroups and the objects around them.

Domain data are frozen dataclasses made once by `planner.load`; nothing here knows about JSON.
Resource amounts are scaled integers (`planner.quantity.scaled`).
"""
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Optional

EMPTY: Mapping = MappingProxyType({})
# Where a pod names its PodGroup, in order of precedence (one key set for planner and webhook).
GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
GROUP_LABEL = "volcano.sh/podgroup"

# Workload opt-out: a pod, its PodGroup or its workload (VCJob, ModelServing) annotated with one of
# these is never moved, and one pinned pod pins its whole PodGroup (evicting any other member
# disrupts the same gang). The pinned pods stay in the snapshot and keep their nodes occupied.
DO_NOT_DISRUPT = "repack.volcano.sh/do-not-disrupt"
# Honoured the same way because operators already set them to keep the other node consolidators
# (Karpenter; cluster-autoscaler's scale-down) from evicting a pod, and repack would evict it too.
KARPENTER_DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CA_SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# (annotation, the value that pins, compared case-insensitively); any other value does not pin.
DO_NOT_DISRUPT_ANNOTATIONS = ((DO_NOT_DISRUPT, "true"), (KARPENTER_DO_NOT_DISRUPT, "true"),
                              (CA_SAFE_TO_EVICT, "false"))


@dataclass(frozen=True, slots=True)
class Requirement:
    """One selector requirement: `key operator values` (label selectors and node selector terms)."""
    key: str
    operator: str
    values: tuple = ()


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """metav1.LabelSelector: matchLabels AND matchExpressions. An empty selector matches everything."""
    match_labels: tuple = ()          # ((key, value), ...)
    match_expressions: tuple = ()     # (Requirement, ...)


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """A required node-affinity term: matchExpressions on labels AND matchFields on metadata.name."""
    match_expressions: tuple = ()
    match_fields: tuple = ()


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """A required (anti-)affinity term; `namespaces` None with no namespace selector means the pod's own."""
    label_selector: Optional[LabelSelector]
    topology_key: str
    namespaces: tuple = ()
    namespace_selector: Optional[LabelSelector] = None


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A topologySpreadConstraint with whenUnsatisfiable DoNotSchedule (the only kind that filters)."""
    max_skew: int
    topology_key: str
    label_selector: Optional[LabelSelector]
    min_domains: int = 1
    node_affinity_policy: str = "Honor"
    node_taints_policy: str = "Ignore"


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    host_ip: str
    port: int


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """A metadata.ownerReferences entry (also the plan's `moves[].owner`)."""
    api_version: str
    kind: str
    name: str
    controller: bool = False

    @property
    def group(self) -> str:
        """API group of the owner ("" for the core group)."""
        return self.api_version.split("/", 1)[0] if "/" in self.api_version else ""


def controller_of(owner_references) -> Optional[OwnerRef]:
    """The managing controller, as apimachinery's metav1.GetControllerOf: the reference with
    `controller: true`, else None (a non-controller owner manages nothing). Entries that are not
    objects with a kind and a name are skipped (planner.load reports them as errors first)."""
    for r in owner_references or ():
        if isinstance(r, Mapping) and r.get("controller") is True and r.get("kind") and r.get("name"):
            return OwnerRef(str(r.get("apiVersion") or ""), str(r["kind"]), str(r["name"]), True)
    return None


def pod_group_name(annotations: Mapping, labels: Mapping) -> str:
    """A pod's PodGroup: the first GROUP_ANNOTATIONS value, else the label GROUP_LABEL ('' if none)."""
    for a in GROUP_ANNOTATIONS:
        v = annotations.get(a)
        if v:
            return str(v)
    return str(labels.get(GROUP_LABEL, "") or "")


def opt_out(annotations: Mapping) -> str:
    """`key=value` of the first DO_NOT_DISRUPT_ANNOTATIONS entry that pins, or ''."""
    for key, pins in DO_NOT_DISRUPT_ANNOTATIONS:
        value = annotations.get(key)
        if value is not None and value.lower() == pins:
            return f"{key}={value}"
    return ""


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    labels: Mapping
    allocatable: Mapping          # resource -> scaled int
    unschedulable: bool = False
    taints: tuple = ()


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str
    node_name: str
    phase: str
    labels: Mapping
    annotations: Mapping
    scheduler_name: str
    requests: Mapping             # resource -> scaled int; includes "pods": 1
    owner: Optional[OwnerRef]
    node_selector: Mapping = field(default_factory=lambda: EMPTY)
    affinity_terms: Optional[tuple] = None     # required NodeSelectorTerms (OR); None = none
    tolerations: tuple = ()
    host_ports: tuple = ()
    pod_affinity: tuple = ()                   # required PodAffinityTerms
    pod_anti_affinity: tuple = ()
    spread: tuple = ()                         # SpreadConstraints (DoNotSchedule)
    pvc_names: tuple = ()
    terminating: bool = False
    mirror: bool = False
    priority: int = 0
    # Derived once at construction: the planner reads them hundreds of thousands of times at scale.
    key: str = field(init=False, repr=False, compare=False)          # namespace/name
    group_name: str = field(init=False, repr=False, compare=False)   # its PodGroup ('' if none)
    terminal: bool = field(init=False, repr=False, compare=False)    # Succeeded or Failed

    def __post_init__(self):
        object.__setattr__(self, "key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "group_name", pod_group_name(self.annotations, self.labels))
        object.__setattr__(self, "terminal", self.phase in ("Succeeded", "Failed"))


@dataclass(frozen=True, slots=True)
class PodGroup:
    namespace: str
    name: str
    labels: Mapping
    min_member: int
    owner: Optional[OwnerRef]
    annotations: Mapping = field(default_factory=lambda: EMPTY)
    network_topology: Optional[object] = None    # planner.topology.NetworkTopology
    subgroups: tuple = ()                         # planner.topology.SubGroupPolicy, in spec order
    # what vc-scheduler decides on and writes back (read by `kubectl repack why`, RELIEF-1)
    queue: str = "default"
    phase: str = ""
    conditions: tuple = ()                        # Condition, as vc-scheduler wrote them
    min_resources: Mapping = field(default_factory=lambda: EMPTY)   # resource -> scaled int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition: str = ""


@dataclass(frozen=True, slots=True)
class Queue:
    """A Volcano Queue (scheduling.volcano.sh/v1beta1): what its PodGroups may use."""
    name: str
    state: str = ""                                                  # status.state: Open, Closed, Closing, Unknown
    capability: Mapping = field(default_factory=lambda: EMPTY)      # resource -> scaled int (absent: unlimited)
    guarantee: Mapping = field(default_factory=lambda: EMPTY)
    allocated: Mapping = field(default_factory=lambda: EMPTY)       # status.allocated


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    node_terms: Optional[tuple]      # required NodeSelectorTerms, None = not restricted
    local: bool = False


@dataclass(frozen=True, slots=True)
class PersistentVolumeClaim:
    namespace: str
    name: str
    volume_name: str


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    namespace: str
    name: str
    selector: Optional[LabelSelector]
    disruptions_allowed: Optional[int]


@dataclass(frozen=True, slots=True)
class VCJob:
    """A Volcano Job: what matters is which PodEvicted policies restart more than the evicted pod."""
    namespace: str
    name: str
    labels: Mapping
    job_action: str = ""             # action for PodEvicted at job level ("" if none)
    task_actions: Mapping = field(default_factory=lambda: EMPTY)  # task -> action for PodEvicted
    annotations: Mapping = field(default_factory=lambda: EMPTY)
    network_topology: Optional[object] = None    # planner.topology.NetworkTopology (copied to its PodGroup)


@dataclass(frozen=True, slots=True)
class ModelServing:
    namespace: str
    name: str
    labels: Mapping
    recovery_policy: str = ""
    annotations: Mapping = field(default_factory=lambda: EMPTY)


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    labels: Mapping


@dataclass(frozen=True)
class ClusterSnapshot:
    """Everything the planner reads, indexed once. Treat as immutable."""
    nodes: tuple
    pods: tuple
    podgroups: tuple = ()
    pvs: tuple = ()
    pvcs: tuple = ()
    pdbs: tuple = ()
    vcjobs: tuple = ()
    modelservings: tuple = ()
    namespaces: tuple = ()
    hypernodes: tuple = ()
    queues: tuple = ()
    node_by_name: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    podgroup_by_key: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    pods_by_node: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    pv_by_name: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    pvc_by_key: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    vcjob_by_key: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    modelserving_by_key: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    namespace_labels: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    queue_by_name: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    # PodGroup key -> (what is annotated, "key=value") for each PodGroup an opt-out pins
    do_not_disrupt: Mapping = field(default_factory=lambda: EMPTY, compare=False)
    # the resolved HyperNode tree (planner.topology.Topology) and the hard-topology gangs of each pod
    topology: object = field(default=None, compare=False)
    constraints: Mapping = field(default_factory=lambda: EMPTY, compare=False)

    @classmethod
    def build(cls, nodes=(), pods=(), podgroups=(), pvs=(), pvcs=(), pdbs=(), vcjobs=(),
              modelservings=(), namespaces=(), hypernodes=(), queues=()):
        """Assemble a snapshot and its indexes from domain objects (sorted for determinism)."""
        from .topology import EMPTY_TOPOLOGY, Topology, gang_constraints  # topology reads this module's types
        nodes = tuple(sorted(nodes, key=lambda n: n.name))
        pods = tuple(sorted(pods, key=lambda p: (p.namespace, p.name, p.uid)))
        by_node = {}
        for p in pods:
            if p.node_name:
                by_node.setdefault(p.node_name, []).append(p)
        ns_labels = {n.name: n.labels for n in namespaces}
        for p in pods:
            ns_labels.setdefault(p.namespace, {"kubernetes.io/metadata.name": p.namespace})
        vcjob_by_key = {f"{j.namespace}/{j.name}": j for j in vcjobs}
        modelserving_by_key = {f"{m.namespace}/{m.name}": m for m in modelservings}
        hypernodes = tuple(sorted(hypernodes, key=lambda h: h.name))
        snap = cls(
            nodes=nodes, pods=pods, podgroups=tuple(podgroups), pvs=tuple(pvs), pvcs=tuple(pvcs),
            pdbs=tuple(pdbs), vcjobs=tuple(vcjobs), modelservings=tuple(modelservings),
            namespaces=tuple(namespaces), hypernodes=hypernodes, queues=tuple(sorted(queues, key=lambda q: q.name)),
            queue_by_name={q.name: q for q in queues},
            node_by_name={n.name: n for n in nodes},
            podgroup_by_key={g.key: g for g in podgroups},
            pods_by_node={k: tuple(v) for k, v in by_node.items()},
            pv_by_name={v.name: v for v in pvs},
            pvc_by_key={f"{c.namespace}/{c.name}": c for c in pvcs},
            vcjob_by_key=vcjob_by_key,
            modelserving_by_key=modelserving_by_key,
            namespace_labels=ns_labels,
            do_not_disrupt=_do_not_disrupt(podgroups, pods, vcjob_by_key, modelserving_by_key),
            topology=Topology(hypernodes, nodes) if hypernodes else EMPTY_TOPOLOGY,
        )
        if any(g.network_topology is not None or g.subgroups for g in snap.podgroups) or any(
                j.network_topology is not None for j in snap.vcjobs):
            object.__setattr__(snap, "constraints", gang_constraints(snap))
        return snap


def _do_not_disrupt(podgroups, pods, vcjob_by_key, modelserving_by_key):
    """{PodGroup key: (what, "key=value")} for every PodGroup an opt-out pins: on the PodGroup, on its
    workload, on a non-terminal member pod (pending ones too) or on that pod's workload, named in
    that order of precedence, pods in snapshot order. A finished pod is not disrupted, so its
    annotation pins nothing. One pass over the snapshot."""
    out = {}

    def workload(namespace, owner):
        if owner is not None:
            key = f"{namespace}/{owner.name}"
            if owner.kind == "Job" and owner.group == "batch.volcano.sh":
                return f"VCJob {key}", vcjob_by_key.get(key)
            if owner.kind == "ModelServing":
                return f"ModelServing {key}", modelserving_by_key.get(key)
        return "", None

    def pin(key, what, obj):
        if key not in out and obj is not None:
            found = opt_out(obj.annotations)
            if found:
                out[key] = (what, found)

    for g in podgroups:
        pin(g.key, f"PodGroup {g.key}", g)
        pin(g.key, *workload(g.namespace, g.owner))
    for p in pods:
        if p.group_name and not p.terminal:
            key = f"{p.namespace}/{p.group_name}"
            pin(key, f"pod {p.key}", p)
            pin(key, *workload(p.namespace, p.owner))
    return MappingProxyType(out) if out else EMPTY
