"""The live fragmentation gauge (POLICY-3): what the controller exports about a snapshot, computed
with the functions `kubectl repack plan` and `kubectl repack why` use, so the figures are theirs.

Per resource R (the accelerator resources of the cluster, `gauge_resources`):

- `frag_percent`, `providers`, `occupied`, `minimum`: planner.frag over the whole cluster
  (FRAG-1..3), as planner.prepare computes them for a plan; `frag_percent` is the whole percent a
  plan reports as status.plan.summary.fragBeforePercent (planner.frag.percent_int);
- `pools`: per node pool (planner.pools, the grouping of plan's POOLS table) its provider nodes and
  free whole nodes (providers with none of R in use: the table's EMPTY NODES before the plan);
- `hypernodes`: with Volcano HyperNodes, the same per HyperNode of the lowest tier
  (planner.blocks.hypernode_rows, plan's HYPERNODES table);
- `pending_blocked`: waiting gangs (bound pods fewer than minMember, some pods pending) whose
  pending pods request R and that `kubectl repack why --resource R` says wait for fragmentation
  (planner.relief.explain's cause `Fragmentation`, not the queue, the selectors or capacity).

Pure: a snapshot in, a Gauge out. The cost is bounded for a cluster of any size: at most
MAX_RESOURCES resources (label values of the exported metrics) and MAX_GANGS waiting gangs
explained per call (the rest are counted in `gangs_left_out`).
"""
from __future__ import annotations

from dataclasses import dataclass

from .blocks import hypernode_rows
from .errors import RepackError
from .frag import frag_percent, percent_int, theoretical_min, usage
from .pools import node_pools
from .relief import CAUSE_FRAGMENTATION, explain, extended, gang_members

MAX_RESOURCES = 8      # resources measured (each is a label value of every gauge)
MAX_GANGS = 64         # waiting gangs explained per measure (each places its pods on every node)


@dataclass(frozen=True)
class PoolFree:
    """One node pool of a resource: its provider nodes and how many of them are free whole nodes."""
    pool: str
    nodes: int
    free: int


@dataclass(frozen=True)
class ResourceGauge:
    resource: str
    providers: int                 # nodes with allocatable R > 0
    occupied: int                  # providers where bound, non-terminal pods request R
    minimum: int                   # theoreticalMin (FRAG-2: never above the optimum)
    minimum_exact: bool
    frag_percent: int              # what plan reports as fragBeforePercent
    pool_grouping: str             # how pools are told apart ("label KEY" or "card count")
    pools: tuple                   # PoolFree, by pool name
    hypernodes: tuple              # planner.plan_types.HyperNodeRow of the lowest tier ((): no HyperNodes)
    pending_blocked: int           # waiting gangs requesting R blocked by fragmentation

    @property
    def free_nodes(self) -> int:
        return sum(p.free for p in self.pools)


@dataclass(frozen=True)
class Gauge:
    resources: tuple               # ResourceGauge, by resource name
    resources_left_out: tuple      # accelerator resources beyond MAX_RESOURCES (not measured)
    gangs_waiting: int             # waiting gangs with pending pods requesting a measured resource
    gangs_left_out: int            # of them, not explained (beyond MAX_GANGS)


def gauge_resources(snapshot) -> tuple:
    """The accelerator resources of the cluster: every extended resource (vendor/name, as
    planner.relief.extended tells them) some node has allocatable, by name."""
    return tuple(sorted({r for n in snapshot.nodes for r, v in n.allocatable.items() if v > 0 and extended(r)}))


def measure_resource(snapshot, resource: str, pending_blocked: int = 0) -> ResourceGauge:
    """The fragmentation figures of one resource, as plan computes them (see the module doc)."""
    alloc, used, items = usage(snapshot, resource)
    occupied = {n for n in alloc if used.get(n, 0) > 0}
    minimum = theoretical_min(items, alloc.values())
    idle = set(alloc) - occupied
    grouping, pool_of = node_pools(snapshot, resource)
    pools: dict = {}
    for node in alloc:
        entry = pools.setdefault(pool_of[node], [0, 0])
        entry[0] += 1
        entry[1] += node in idle
    topo = snapshot.topology
    rows = hypernode_rows(topo, topo.lowest_tier, 1, alloc, idle, idle) if topo is not None and topo.names else ()
    return ResourceGauge(resource, len(alloc), len(occupied), minimum.value, minimum.exact,
                         percent_int(frag_percent(len(occupied), minimum.value, len(alloc))), grouping,
                         tuple(PoolFree(p, n, f) for p, (n, f) in sorted(pools.items())), rows, pending_blocked)


def waiting_gangs(snapshot, resources) -> list:
    """(PodGroup key, resources of `resources` its pending pods request) of every gang that waits:
    fewer pods bound than minMember and some pods pending (a gang without pods yet is NotEnqueued,
    never Fragmentation). By key."""
    wanted = set(resources)
    pending_groups: dict = {}
    for p in snapshot.pods:        # one pass: pending pods are few, PodGroups many
        if not p.node_name and not p.terminal and p.group_name:
            asks = {r for r, v in p.requests.items() if v > 0 and r in wanted}
            pending_groups.setdefault(f"{p.namespace}/{p.group_name}", set()).update(asks)
    out = []
    for key in sorted(pending_groups):
        pg = snapshot.podgroup_by_key.get(key)
        if pg is None or not pending_groups[key]:
            continue
        pending, bound = gang_members(snapshot, key)
        if pending and pg.min_member - bound > 0:
            out.append((key, tuple(sorted(pending_groups[key]))))
    return out


def blocked_by_fragmentation(snapshot, key: str, resource: str) -> bool:
    """Whether `kubectl repack why` (with --resource `resource`) says gang `key` waits for
    fragmentation. A gang the diagnosis refuses (planner.errors) is not counted as blocked."""
    try:
        return explain(snapshot, key, resource, with_fix=False).cause == CAUSE_FRAGMENTATION
    except RepackError:
        return False


def measure(snapshot, resources=None, max_resources: int = MAX_RESOURCES, max_gangs: int = MAX_GANGS) -> Gauge:
    """The gauge of `snapshot` for `resources` (default: gauge_resources, the first `max_resources`)."""
    found = tuple(resources) if resources is not None else gauge_resources(snapshot)
    measured, left_out = found[:max_resources], found[max_resources:]
    gangs = waiting_gangs(snapshot, measured)
    blocked = dict.fromkeys(measured, 0)
    for key, asks in gangs[:max_gangs]:
        for r in asks:
            blocked[r] += blocked_by_fragmentation(snapshot, key, r)
    return Gauge(tuple(measure_resource(snapshot, r, blocked[r]) for r in measured), left_out, len(gangs),
                 max(len(gangs) - max_gangs, 0))
