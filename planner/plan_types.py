"""What a planning pass takes and returns: the run's spec (RunSpec) and the Plan with its moves and
per-node verdicts. Kept apart from the planning machinery so callers and renderers depend on these
types only.
"""
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

from .errors import SpecError
from .frag import percent_int
from .quantity import scaled_limit
from .scope import Scope
from .verdicts import VerdictReason

REASON_RECOMMENDED = "RepackRecommended"
REASON_NO_FRAGMENTATION = "NoFragmentation"
REASON_INSUFFICIENT = "InsufficientImprovement"
# TOPO-3: spec.networkTopology.requiredNodeBlocks cannot be reached; like InsufficientImprovement the
# pass ends Succeeded with no moves (the Go API's state.ReasonRequiredNodeBlocksNotMet).
REASON_BLOCKS_NOT_MET = "RequiredNodeBlocksNotMet"
BLOCK_MODES = ("binpack", "spread")
# RELIEF-2: a run aimed at pending gangs (spec.target) ends with one of these or RepackRecommended;
# like InsufficientImprovement the two end the pass Succeeded with no moves.
REASON_TARGET_FITS = "TargetAlreadyFits"
REASON_TARGET_CANNOT_FIT = "TargetCannotFit"
MAX_TARGETS = 16

# Plan.above_minimum_reason: why a plan stops above theoreticalMin, for callers that act on it
# (Plan.above_minimum is the sentence for people).
ABOVE_BUDGET = "BudgetSpent"                  # maxPerRun (or what one RepackRun's status holds)
ABOVE_NO_RECEIVER = "NoFeasibleReceiver"      # a pod of a remaining candidate fits no receiver
ABOVE_SCOPE = "Scope"                         # nodes outside scope.nodes or blocked (scope.podGroups, pins)
ABOVE_NO_GAIN = "NoFurtherGain"               # candidates remain, but no plan that vacates them frees more
ABOVE_MINIMUM_REASONS = (ABOVE_BUDGET, ABOVE_NO_RECEIVER, ABOVE_SCOPE, ABOVE_NO_GAIN)


@dataclass(frozen=True)
class PodMove:
    """One planned eviction and the receiver the pod's replacement is meant for."""
    pod: object
    from_node: str
    to_node: str
    cards: int
    round: int


@dataclass(frozen=True)
class NodeVerdict:
    """Why a candidate node was vacated or not (an UNSET reason would be a bug)."""
    node: str
    vacated: bool
    reason: VerdictReason
    message: str
    pod: str = ""
    filter: str = ""
    round: int = 0


@dataclass(frozen=True)
class BlockGoal:
    """spec.networkTopology (TOPO-3): free nodes count in blocks of `size` inside one HyperNode of the
    target tier (`tier`, or the tier HyperNodes named `tier_name` have); `required` >= 1 is a hard
    gate, 0 a preference; `mode` binpack concentrates blocks on few HyperNodes, spread on many."""
    tier: Optional[int] = None
    tier_name: Optional[str] = None
    size: int = 1
    required: int = 0
    mode: str = ""

    @property
    def field(self) -> str:
        """The spec field that names the tier (for errors)."""
        return "spec.networkTopology." + ("hyperNodeTier" if self.tier_name is None else "hyperNodeTierName")

    @classmethod
    def from_spec(cls, nt) -> Optional["BlockGoal"]:
        if nt is None:
            return None
        where = "spec.networkTopology"
        if not isinstance(nt, dict):
            raise SpecError(f"{where}: expected an object")
        tier, name = nt.get("hyperNodeTier"), nt.get("hyperNodeTierName")
        if (tier is None) == (name is None):
            raise SpecError(f"{where}: hyperNodeTier and hyperNodeTierName are mutually exclusive; configure exactly one")
        if tier is not None and (not isinstance(tier, int) or isinstance(tier, bool)):
            raise SpecError(f"{where}.hyperNodeTier: an integer is required")
        if name is not None and (not isinstance(name, str) or not name):
            raise SpecError(f"{where}.hyperNodeTierName: a non-empty string is required")
        size = nt.get("nodeBlockSize", 1)
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise SpecError(f"{where}.nodeBlockSize: an integer of at least 1 is required")
        required = nt.get("requiredNodeBlocks", 0)
        if not isinstance(required, int) or isinstance(required, bool) or required < 0:
            raise SpecError(f"{where}.requiredNodeBlocks: a non-negative integer is required")
        mode = nt.get("mode") or ""
        if mode and mode not in BLOCK_MODES:
            raise SpecError(f"{where}.mode: {mode!r} is not one of {list(BLOCK_MODES)}")
        return cls(tier, name, size, required, mode)


@dataclass(frozen=True)
class Target:
    """spec.target (RELIEF-2): the pending gangs a run makes room for, as "namespace/name" of
    their PodGroups, in spec order."""
    podgroups: tuple

    @classmethod
    def from_spec(cls, target) -> Optional["Target"]:
        if target is None:
            return None
        where = "spec.target"
        if not isinstance(target, dict):
            raise SpecError(f"{where}: expected an object with podGroups")
        unknown = sorted(set(target) - {"podGroups"})
        if unknown:
            raise SpecError(f"{where}.{unknown[0]}: unknown field (only podGroups)")
        pgs = target.get("podGroups")
        if not isinstance(pgs, list) or not 1 <= len(pgs) <= MAX_TARGETS:
            raise SpecError(f"{where}.podGroups: a list of 1 to {MAX_TARGETS} PodGroups (namespace/name) is required")
        seen = []
        for i, key in enumerate(pgs):
            ns, _, name = key.partition("/") if isinstance(key, str) else ("", "", "")
            if not ns or not name or "/" in name:
                raise SpecError(f"{where}.podGroups[{i}]: {key!r} is not namespace/name")
            if key in seen:
                raise SpecError(f"{where}.podGroups[{i}]: {key} is named twice")
            seen.append(key)
        return cls(tuple(seen))


@dataclass(frozen=True)
class TargetFit:
    """Where a targeted plan (RELIEF-2) would put the target's pending pods on its final state."""
    podgroups: tuple                  # "namespace/name", spec order
    fits: bool
    placements: tuple = ()            # (pod key, node), in placement order; empty when it does not fit
    message: str = ""
    resource: str = ""                # what the run made room in (goals[0].resource, or the target's)

    def summary(self) -> dict:
        out = {"podGroups": list(self.podgroups), "fits": self.fits, "resource": self.resource}
        if self.placements:
            out["placements"] = [{"pod": k, "node": n} for k, n in self.placements]
        return out


CAPACITY_MAX_ITEMS = 64     # the CRD's maxItems for freedCapacity and its taints and labels


@dataclass(frozen=True)
class Capacity:
    """Freed nodes of one kind (RELIEF-4): how many, the resource each has allocatable, and what a
    pod needs to use them — their NoSchedule/NoExecute taints ('key=value:Effect') and the labels
    some pod selects nodes by ((key, value) pairs)."""
    nodes: int
    allocatable: int
    taints: tuple = ()
    labels: tuple = ()

    def text(self, resource) -> str:
        line = f"{self.nodes} node(s) with {self.allocatable} {resource}, "
        line += ("tainted " + ",".join(self.taints)) if self.taints else "untainted"
        if self.labels:
            line += ", labelled " + ",".join(f"{k}={v}" for k, v in self.labels)
        return line

    def summary(self) -> dict:
        """status.plan.summary.freedCapacity[] (the CRD caps each list at CAPACITY_MAX_ITEMS)."""
        out = {"nodes": self.nodes, "allocatable": self.allocatable}
        if self.taints:
            out["taints"] = list(self.taints[:CAPACITY_MAX_ITEMS])
        if self.labels:
            out["labels"] = dict(self.labels[:CAPACITY_MAX_ITEMS])
        return out


@dataclass(frozen=True)
class HyperNodeRow:
    """One HyperNode in a plan's topology view (TOPO-4): provider nodes of the goal resource in it,
    how many of them are free (none of the resource in use) before and after the plan, and the
    blocks that makes (free // block size; size 1 without a block goal)."""
    name: str
    tier: int
    nodes: int
    free_before: int
    free_after: int
    blocks_before: int
    blocks_after: int


@dataclass(frozen=True)
class NodeBlocks:
    """Blocks of the run's block goal before and after the plan (status.plan.summary.nodeBlocks)."""
    tier: int
    size: int
    required: int
    mode: str
    before: int
    after: int

    def summary(self) -> dict:
        return {"tier": self.tier, "nodeBlockSize": self.size, "before": self.before, "after": self.after}


@dataclass(frozen=True)
class RunSpec:
    """The parts of a RepackRun spec the planner acts on."""
    resource: str
    min_improvement: int = 0
    scope: Scope = Scope()
    max_podgroups: Optional[int] = None
    max_resource: Optional[int] = None
    network_topology: Optional[BlockGoal] = None
    # RELIEF-2: the pending gangs the run makes room for; with it `resource` may be "" until the
    # planner reads it from the target's pods (planner.relief.target_resource)
    target: Optional[Target] = None

    @classmethod
    def from_spec(cls, spec) -> "RunSpec":
        if not isinstance(spec, dict):
            raise SpecError("spec: expected an object")
        target = Target.from_spec(spec.get("target"))
        goals = spec.get("goals") or []
        if not goals and target is None:
            raise SpecError("spec.goals: one goal naming the resource to defragment is required")
        if len(goals) > 1:
            raise SpecError("spec.goals: at most one goal per run")
        goal = goals[0] if goals else {}
        resource = goal.get("resource") if isinstance(goal, dict) else None
        if target is not None and goals == []:
            resource = ""
        elif not isinstance(resource, str) or "/" not in resource:
            raise SpecError("spec.goals[0].resource: a fully-qualified extended resource (e.g. nvidia.com/gpu) is required")
        if target is not None and goal.get("minFragImprovementPercent") is not None:
            raise SpecError("spec.goals[0].minFragImprovementPercent: not with spec.target: a targeted run succeeds when "
                            "its target fits, not by how much fragmentation falls")
        if target is not None and spec.get("networkTopology") is not None:
            raise SpecError("spec.networkTopology: not with spec.target: a targeted run frees what its target needs "
                            "(the target's own network topology is honoured); block goals are for untargeted runs")
        mi = goal.get("minFragImprovementPercent") or 0
        if not isinstance(mi, int) or not 0 <= mi <= 100:
            raise SpecError("spec.goals[0].minFragImprovementPercent: an integer from 0 to 100 is required")
        mpr = spec.get("maxPerRun") or {}
        max_pg = mpr.get("podGroups")
        if max_pg is not None and (not isinstance(max_pg, int) or max_pg < 0):
            raise SpecError("spec.maxPerRun.podGroups: a non-negative integer is required")
        max_r = None
        res = mpr.get("resources") or {}
        if not isinstance(res, dict):
            raise SpecError("spec.maxPerRun.resources: expected an object of quantities")
        if res and not resource:
            raise SpecError("spec.maxPerRun.resources: a targeted run without spec.goals reads its resource from the "
                            "target's pods; name it in spec.goals[0].resource to limit it")
        for other in res:
            if other != resource:  # the CRD's CEL rule says the same; runs from elsewhere meet it here
                raise SpecError(f"spec.maxPerRun.resources[{other}]: maxPerRun.resources may only limit the "
                                f"goal's resource ({resource}); a budget on any other resource would not limit anything")
        if resource in res:
            try:
                max_r = scaled_limit(resource, res[resource])
            except ValueError as e:
                raise SpecError(f"spec.maxPerRun.resources[{resource}]: {e}") from e
        return cls(resource, mi, Scope.from_spec(spec.get("scope")), max_pg, max_r,
                   BlockGoal.from_spec(spec.get("networkTopology")), target)


@dataclass(frozen=True)
class Plan:
    """The outcome of one planning pass (kubectl_repack.api.status turns it into RepackRun status, API-3)."""
    resource: str
    outcome: str
    message: str
    providers: int
    occupied_before: int
    occupied_after: int
    minimum: int
    minimum_exact: bool
    frag_before: Fraction
    frag_after: Fraction
    moves: tuple
    freed_nodes: tuple
    verdicts: tuple
    rounds: int
    resolved_podgroups: int
    resolved_nodes: int
    notes: tuple
    owners: dict = field(default_factory=dict)        # podgroup key -> OwnerRef | None
    cards: dict = field(default_factory=dict)         # node -> (allocatable, used before, used after)
    reoccupied: tuple = ()                            # idle nodes the plan fills (more donors than them)
    above_minimum: str = ""                           # one line: why the plan stops above theoreticalMin
    above_minimum_reason: str = ""                    # its code, one of ABOVE_MINIMUM_REASONS ("" at the minimum)
    node_blocks: Optional[NodeBlocks] = None          # with spec.networkTopology (TOPO-4)
    hypernodes: tuple = ()                            # HyperNodeRow of the goal tier, else of the lowest tier
    target: Optional[TargetFit] = None                # with spec.target (RELIEF-2)
    freed_capacity: tuple = ()                        # Capacity of the freed nodes, one per kind (RELIEF-4)

    @property
    def moved_cards(self) -> int:
        return sum(m.cards for m in self.moves)

    def summary(self) -> dict:
        return {
            "fragBeforePercent": percent_int(self.frag_before),
            "fragAfterPercent": percent_int(self.frag_after),
            "freedNodeCount": len(self.freed_nodes),
            "movedCardCount": self.moved_cards,
            "resolvedScope": {"podGroupCount": self.resolved_podgroups, "nodeCount": self.resolved_nodes},
            **({"nodeBlocks": self.node_blocks.summary()} if self.node_blocks is not None else {}),
            **({"target": self.target.summary()} if self.target is not None else {}),
            **({"freedCapacity": [c.summary() for c in self.freed_capacity[:CAPACITY_MAX_ITEMS]]}
               if self.freed_capacity else {}),
        }

    def moves_by_group(self) -> list:
        """plan.moves[]: one entry per PodGroup, in the order the plan first touches it."""
        groups = {}
        for m in self.moves:
            key = f"{m.pod.namespace}/{m.pod.group_name}"
            groups.setdefault(key, []).append(m)
        out = []
        for key, ms in groups.items():
            ns, name = key.split("/", 1)
            entry = {"namespace": ns, "podGroupName": name}
            owner = self.owners.get(key)
            if owner is not None:
                entry["owner"] = {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name}
            entry["cards"] = sum(m.cards for m in ms)
            entry["pods"] = [{"name": m.pod.name, "fromNode": m.from_node, "toNode": m.to_node, "cards": m.cards}
                             for m in ms]
            out.append(entry)
        return out
