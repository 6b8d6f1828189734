"""Volcano network topology (TOPO-1, TOPO-2): the HyperNode tree as vc-scheduler v1.14.1 resolves it,
and which gangs it binds.

HyperNodes (`topology.volcano.sh/v1alpha1`) group nodes into tiers: a tier-1 HyperNode holds nodes
(members of type Node), a higher one holds HyperNodes (members of type HyperNode). `Topology`
resolves them once per snapshot the way Volcano's HyperNode cache does (`BuildHyperNodeCache`,
`GetMembers` in pkg/scheduler/api/hyper_node_info.go; docs/research/hypernode-topology.md §1):

- a Node member selects by `exactMatch` (the name, kept only if the snapshot has that node), by
  `regexMatch` (an unanchored search with Go's RE2 semantics; a pattern RE2 rejects matches nothing)
  or by `labelMatch` (a label selector; an empty or invalid one matches nothing);
- a HyperNode member counts only by `exactMatch` (regex and label members of that type are ignored);
  a member HyperNode that does not exist adds nothing and is no error;
- a cycle, or a HyperNode listed as member by two parents, makes vc-scheduler place no gang with
  network topology at all (`problems`);
- a node in two HyperNodes of one tier is legal in Volcano (it then picks one by map order); the
  planner refuses such a snapshot with an error naming both, because no plan can say where such a
  node belongs.

A gang with hard network topology (`Constraint`) is a PodGroup whose `spec.networkTopology` has mode
hard (the CRD default) and `highestTierAllowed` (or a `highestTierName` some HyperNode carries), or
one of its SubGroups (a `subGroupPolicy` entry with its own hard network topology; pods join the
first policy whose labelSelector matches and whose matchLabelKeys they all carry). vc-scheduler
binds a pod of such a gang only inside one HyperNode of tier <= the allowed tier that holds the
gang's bound pods (the network-topology-aware plugin's `getSearchRoot` and gradient), and places a
gang without bound pods as one unit inside one such HyperNode; a node in no HyperNode of an allowed
tier never takes it. `allowed_nodes` is that rule on a simulated state.
"""
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Optional

from .errors import SnapshotError
from .model import EMPTY, LabelSelector
from .selectors import selector_matches

# What Python's `re` accepts but Go's RE2 does not (lookaround, backreferences, atomic groups and
# possessive quantifiers): Volcano fails to compile such a pattern and the member matches nothing.
# Hand-written instead of a RE2 binding because the plugin also runs as a pure-Python zipapp.
_NOT_RE2 = re.compile(r"\(\?[=!]|\(\?<[=!]|\(\?>|\(\?P=|\\[1-9]|[*+?}]\+")


@dataclass(frozen=True, slots=True)
class Member:
    """One `spec.members[]` entry: its type and exactly one selector."""
    type: str                                  # "Node" or "HyperNode"
    exact: Optional[str] = None
    regex: Optional[str] = None
    labels: Optional[LabelSelector] = None
    invalid_labels: bool = False               # a labelMatch Volcano cannot parse: matches nothing


@dataclass(frozen=True, slots=True)
class HyperNode:
    name: str
    tier: int
    tier_name: str
    members: tuple


@dataclass(frozen=True, slots=True)
class NetworkTopology:
    """A PodGroup's or SubGroup policy's `networkTopology`."""
    mode: str = "hard"                         # the CRD default
    highest_tier: Optional[int] = None
    highest_tier_name: str = ""


@dataclass(frozen=True, slots=True)
class SubGroupPolicy:
    name: str
    network_topology: Optional[NetworkTopology]
    selector: Optional[LabelSelector]          # None: every pod of the PodGroup
    match_label_keys: tuple = ()


@dataclass(frozen=True, slots=True)
class Constraint:
    """A gang whose pods vc-scheduler keeps inside one HyperNode of tier <= `tier`."""
    what: str                                  # "PodGroup ns/x" or "SubGroup ns/x/policy-values"
    tier: int
    members: tuple                             # pod keys, sorted


def go_regex(pattern: str):
    """`pattern` compiled with RE2's meaning where Python's differs (ASCII classes, `\\z`), or None
    where RE2 would reject it (Volcano then matches nothing)."""
    if _NOT_RE2.search(pattern):
        return None
    try:
        return re.compile(pattern.replace(r"\z", r"\Z"), re.ASCII)
    except (re.error, OverflowError, RecursionError):
        return None


class Topology:
    """The resolved HyperNode tree of one snapshot (empty when it has no HyperNodes)."""

    def __init__(self, hypernodes=(), nodes=()):
        self.by_name = MappingProxyType({h.name: h for h in hypernodes})
        self.names = tuple(sorted(self.by_name))
        self.tier = MappingProxyType({h.name: h.tier for h in hypernodes})
        self.tiers = tuple(sorted(set(self.tier.values())))
        # ClusterTop, the virtual root vc-scheduler adds: above every real tier (tier 1 without any)
        self.top_tier = max(max(self.tiers, default=0) + 1, 1)
        problems = []
        self.parent = {}
        children = {h: [] for h in self.names}
        for h in self.names:
            for m in self.by_name[h].members:
                if m.type != "HyperNode" or not m.exact or m.exact not in self.by_name:
                    continue
                child = m.exact
                if child in self.parent and self.parent[child] != h:
                    problems.append(f"HyperNode {child} is a member of both {self.parent[child]} and {h}")
                    continue
                self.parent[child] = h
                children[h].append(child)
        self.children = MappingProxyType({h: tuple(sorted(set(c))) for h, c in children.items()})
        cycles = set()
        for h in self.names:
            seen, cur = [h], self.parent.get(h)
            while cur is not None:
                if cur in seen:
                    cycle = seen[seen.index(cur):]
                    if frozenset(cycle) not in cycles:
                        cycles.add(frozenset(cycle))
                        problems.append(f"HyperNodes {' -> '.join(cycle + [cur])} form a cycle")
                    break
                seen.append(cur)
                cur = self.parent.get(cur)
        self.problems = tuple(problems)
        names = frozenset(n.name for n in nodes)    # once: a 25,000-node tree has ~3,500 HyperNodes
        own = {h: self._own_nodes(self.by_name[h], nodes, names) for h in self.names}
        real = {}
        for h in self.names:
            self._collect(h, own, real, set())
        self.nodes = MappingProxyType(real)
        self._at_tier = {}
        self._reachable = {}
        self._check_overlaps()

    @staticmethod
    def _own_nodes(h, nodes, names) -> frozenset:
        """The nodes HyperNode `h` selects itself (`names`: the names of `nodes`)."""
        out = set()
        for m in h.members:
            if m.type != "Node":
                continue
            if m.exact is not None:
                if m.exact in names:
                    out.add(m.exact)
            elif m.regex is not None:
                rx = go_regex(m.regex)
                if rx is not None:
                    out.update(n.name for n in nodes if rx.search(n.name))
            elif m.labels is not None and not m.invalid_labels and (m.labels.match_labels or m.labels.match_expressions):
                out.update(n.name for n in nodes if selector_matches(m.labels, n.labels))
        return frozenset(out)

    def _collect(self, h, own, real, path) -> frozenset:
        if h in real:
            return real[h]
        if h in path:                      # a cycle: its problem is recorded; stop the walk here
            return frozenset()
        path.add(h)
        out = set(own[h])
        for c in self.children[h]:
            out |= self._collect(c, own, real, path)
        path.discard(h)
        real[h] = frozenset(out)
        return real[h]

    def _check_overlaps(self):
        for t in self.tiers:
            self.at_tier(t)

    def at_tier(self, tier) -> Mapping:
        """{node: the HyperNode of `tier` that holds it}."""
        got = self._at_tier.get(tier)
        if got is None:
            got = {}
            for h in self.names:
                if self.tier[h] != tier:
                    continue
                for n in sorted(self.nodes[h]):
                    other = got.get(n)
                    if other is not None:
                        raise SnapshotError(
                            f"node {n} is in two HyperNodes of tier {tier}, {other} and {h}: vc-scheduler would "
                            "pick one at random, so no plan can say where it belongs; make each node a "
                            "member of one HyperNode per tier")
                    got[n] = h
            got = self._at_tier[tier] = MappingProxyType(got)
        return got

    @property
    def lowest_tier(self) -> Optional[int]:
        return self.tiers[0] if self.tiers else None

    def tier_by_name(self, tier_name: str) -> Optional[int]:
        """The tier of the HyperNodes whose spec.tierName is `tier_name` (None if none has it).
        Volcano keeps one tier per name; the lowest wins here where HyperNodes disagree."""
        tiers = sorted(self.tier[h] for h in self.names if self.by_name[h].tier_name == tier_name)
        return tiers[0] if tiers else None

    # -- the domain rule ---------------------------------------------------------------------------
    def domains(self, tier) -> tuple:
        """HyperNodes of tier <= `tier` that hold nodes, lowest tier first, then by name."""
        return tuple(sorted((h for h in self.names if self.tier[h] <= tier and self.nodes[h]),
                            key=lambda h: (self.tier[h], h)))

    def reachable(self, tier) -> frozenset:
        """Nodes in some HyperNode of tier <= `tier`: where a gang with none of its pods bound may go."""
        got = self._reachable.get(tier)
        if got is None:
            got = self._reachable[tier] = frozenset().union(*(self.nodes[h] for h in self.domains(tier)))
        return got

    def _highest_within(self, h, tier) -> str:
        """The highest ancestor of `h` (itself included) whose tier is <= `tier`."""
        best, cur, seen = h, self.parent.get(h), {h}
        while cur is not None and cur not in seen and self.tier[cur] <= tier:
            best = cur
            seen.add(cur)
            cur = self.parent.get(cur)
        return best

    def anchor_domain(self, bound_nodes, tier):
        """Where vc-scheduler lets a gang with pods bound on `bound_nodes` (non-empty) place another
        pod: (HyperNode name, its nodes). The anchor is the lowest-tier HyperNode holding every bound
        node (one per tier: a node is in at most one HyperNode of a tier), and the allowed subtree is
        its highest ancestor within `tier`. ("", empty) when no HyperNode within `tier` holds them all
        (the scheduler then binds no new pod of that gang)."""
        first, *rest = bound_nodes
        for t in self.tiers:
            if t > tier:
                break
            where = self.at_tier(t)
            h = where.get(first)
            if h is not None and all(where.get(n) == h for n in rest):
                top = self._highest_within(h, tier)
                return top, self.nodes[top]
        return "", frozenset()


EMPTY_TOPOLOGY = Topology()


def hard_tier(nt: Optional[NetworkTopology], topology: Topology) -> Optional[int]:
    """The tier a hard network topology allows, or None when vc-scheduler v1.14.1 does not enforce
    it (soft mode; neither field; a highestTierName no HyperNode carries: updateJobTier only logs)."""
    if nt is None or nt.mode != "hard":
        return None
    if nt.highest_tier is not None:
        return nt.highest_tier
    if nt.highest_tier_name:
        return topology.tier_by_name(nt.highest_tier_name)
    return None


def job_topology(pg, snapshot) -> Optional[NetworkTopology]:
    """The PodGroup's network topology; where it has none, its VCJob's (Volcano's job controller
    copies it onto the PodGroup it creates, so only a hand-written snapshot differs)."""
    if pg.network_topology is not None:
        return pg.network_topology
    o = pg.owner
    if o is not None and o.kind == "Job" and o.group == "batch.volcano.sh":
        job = snapshot.vcjob_by_key.get(f"{pg.namespace}/{o.name}")
        if job is not None:
            return job.network_topology
    return None


def has_network_topology(pg, snapshot) -> bool:
    """Does vc-scheduler treat this PodGroup as a topology job (job or SubGroup level, hard or soft)?"""
    return pg is not None and (job_topology(pg, snapshot) is not None
                               or any(s.network_topology is not None for s in pg.subgroups))


def subgroup_of(pod, pg) -> Optional[tuple]:
    """(policy, values) of the SubGroup `pod` joins: the first policy whose selector matches it and
    whose matchLabelKeys it all carries non-empty (a policy without keys captures no pod); None for
    the default SubGroup."""
    for s in pg.subgroups:
        if not s.match_label_keys:
            continue
        if s.selector is not None and not selector_matches(s.selector, pod.labels):
            continue
        values = tuple(pod.labels.get(k, "") for k in s.match_label_keys)
        if all(values):
            return s, values
    return None


def gang_constraints(snapshot) -> Mapping:
    """{pod key: (Constraint, ...)} for every non-terminal pod of a gang with hard network topology.

    The PodGroup's own network topology binds all its pods (the default SubGroup clones it); a
    SubGroup policy's binds the pods that join it (SubGroups do not inherit the PodGroup's). A
    SubGroup's `highestTierName` is resolved too, although v1.14.1 drops it (its SubJob copies the
    spec before the name is translated): the stricter reading never plans a move the scheduler
    refuses."""
    topo = snapshot.topology
    members = {}
    for p in snapshot.pods:
        if p.terminal or not p.group_name:
            continue
        pg = snapshot.podgroup_by_key.get(f"{p.namespace}/{p.group_name}")
        if pg is None or not has_network_topology(pg, snapshot):
            continue
        t = hard_tier(job_topology(pg, snapshot), topo)
        if t is not None:
            members.setdefault((f"PodGroup {pg.key}", t), []).append(p.key)
        sub = subgroup_of(p, pg)
        if sub is not None:
            policy, values = sub
            t = hard_tier(policy.network_topology, topo)
            if t is not None:
                what = f"SubGroup {pg.key}/{policy.name}-{'-'.join(values)}"
                members.setdefault((what, t), []).append(p.key)
    out = {}
    for (what, tier), keys in sorted(members.items()):
        if tier >= topo.top_tier:
            continue               # ClusterTop is within reach: the whole cluster is allowed
        c = Constraint(what, tier, tuple(sorted(keys)))
        for k in c.members:
            out.setdefault(k, []).append(c)
    return MappingProxyType({k: tuple(v) for k, v in out.items()}) if out else EMPTY


def count_blocks(free_nodes, topology: Topology, tier: int, size: int):
    """(blocks, {HyperNode of `tier`: free nodes in it}) for the set `free_nodes` (TOPO-3): a block is
    `size` free nodes inside one HyperNode of the tier; nodes outside every one count nothing."""
    where = topology.at_tier(tier)
    free = {h: 0 for h in topology.names if topology.tier[h] == tier}
    for n in free_nodes:
        h = where.get(n)
        if h is not None:
            free[h] += 1
    return sum(v // size for v in free.values()), free
