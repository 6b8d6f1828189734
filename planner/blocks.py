"""Block goals (TOPO-3, TOPO-4): free nodes counted in blocks inside HyperNodes of one tier.

With `spec.networkTopology`, a block is `nodeBlockSize` free provider nodes of the goal resource
inside one HyperNode of the target tier; nodes already idle count, nodes in no HyperNode of that
tier count nothing, and blocks never span HyperNodes. Plans compare lexicographically: blocks, then
net nodes freed, then GANG-3 disruption, then the mode (binpack: fewest HyperNodes holding the
blocks; spread: most). `requiredNodeBlocks` >= 1 is a hard gate (RequiredNodeBlocksNotMet).

`BlockCounter` is made once per Prepared snapshot; `rows` gives the plan's HYPERNODES view, also
without a goal (free whole nodes per HyperNode of the lowest tier).
"""
from .errors import SpecError
from .frag import usage
from .plan_types import HyperNodeRow, NodeBlocks, RunSpec
from .topology import count_blocks


def goal_tier(goal, topology) -> int:
    """The tier `goal` (plan_types.BlockGoal) targets on this snapshot, or SpecError naming the field
    when the snapshot has no HyperNode of it (a goal that cannot be counted is not ignored)."""
    if not topology.names:
        raise SpecError(f"{goal.field}: the cluster has no HyperNodes (topology.volcano.sh/v1alpha1), so "
                        "node blocks cannot be counted; remove spec.networkTopology or create the HyperNodes")
    if goal.tier_name is not None:
        tier = topology.tier_by_name(goal.tier_name)
        if tier is None:
            names = sorted({topology.by_name[h].tier_name for h in topology.names} - {""})
            raise SpecError(f"{goal.field}: no HyperNode has tierName {goal.tier_name!r} (tier names: "
                            f"{', '.join(names) or 'none'})")
        return tier
    if goal.tier not in topology.tiers:
        raise SpecError(f"{goal.field}: no HyperNode has tier {goal.tier} (tiers: "
                        f"{', '.join(str(t) for t in topology.tiers)})")
    return goal.tier


class BlockCounter:
    """Blocks of one goal on one Prepared snapshot, for any plan (freed and re-occupied nodes)."""

    def __init__(self, prep, goal):
        topo = prep.snapshot.topology
        self.goal = goal
        self.tier = goal_tier(goal, topo)
        self.size = goal.size
        where = topo.at_tier(self.tier)
        # only providers of the goal resource count (Volcano's repack counts by that resource)
        self.where = {n: h for n, h in where.items() if n in prep.alloc}
        self.hypernodes = tuple(h for h in topo.names if topo.tier[h] == self.tier)
        self.idle = {h: 0 for h in self.hypernodes}
        for n in prep.idle:
            h = self.where.get(n)
            if h is not None:
                self.idle[h] += 1
        self.members = {h: 0 for h in self.hypernodes}
        for h in self.where.values():
            self.members[h] += 1
        self.before = sum(v // self.size for v in self.idle.values())

    def free(self, freed, reoccupied) -> dict:
        """{HyperNode: free nodes in it} after a plan that frees `freed` and fills `reoccupied`."""
        out = dict(self.idle)
        for n in freed:
            h = self.where.get(n)
            if h is not None:
                out[h] += 1
        for n in reoccupied:
            h = self.where.get(n)
            if h is not None:
                out[h] -= 1
        return out

    def blocks(self, freed, reoccupied) -> int:
        return sum(v // self.size for v in self.free(freed, reoccupied).values())

    def key(self, freed, reoccupied) -> tuple:
        """(-blocks, mode term): lower is better; the mode term only orders plans of equal blocks,
        net freed and disruption (binpack: fewer HyperNodes holding blocks; spread: more)."""
        free = self.free(freed, reoccupied)
        blocks = sum(v // self.size for v in free.values())
        holding = sum(1 for v in free.values() if v >= self.size)
        mode = {"binpack": holding, "spread": -holding}.get(self.goal.mode, 0)
        return -blocks, mode

    def bound(self, candidates) -> int:
        """The most blocks any plan could make: every candidate in a HyperNode of the tier freed."""
        free = dict(self.idle)
        for n in candidates:
            h = self.where.get(n)
            if h is not None:
                free[h] += 1
        return sum(v // self.size for v in free.values())

    def deficit(self, h) -> int:
        """Nodes of `h` still to free for its next block."""
        return self.size - self.idle[h] % self.size

    def node_blocks(self, freed, reoccupied) -> NodeBlocks:
        g = self.goal
        return NodeBlocks(self.tier, self.size, g.required, g.mode, self.before, self.blocks(freed, reoccupied))


def rows(prep, counter, freed, reoccupied) -> tuple:
    """HyperNodeRow per HyperNode of the goal tier (or, without a goal, of the lowest tier), by name."""
    topo = prep.snapshot.topology
    if counter is not None:
        tier, size = counter.tier, counter.size
    elif topo.names:
        tier, size = topo.lowest_tier, 1
    else:
        return ()
    after_idle = (set(prep.idle) | set(freed)) - set(reoccupied)
    return hypernode_rows(topo, tier, size, prep.alloc, prep.idle, after_idle)


def hypernode_rows(topo, tier, size, providers, idle, after_idle) -> tuple:
    """HyperNodeRow per HyperNode of `tier`, by name: its `providers` (nodes), how many of them are
    in `idle` (before) and in `after_idle` (after), and the blocks of `size` that makes. Also the
    controller's per-HyperNode gauge (planner.gauge), so both count free nodes alike."""
    where = topo.at_tier(tier)
    idle, after_idle = set(idle), set(after_idle)
    before = {}
    after = {}
    members = {}
    for n in providers:
        h = where.get(n)
        if h is None:
            continue
        members[h] = members.get(h, 0) + 1
        before[h] = before.get(h, 0) + (n in idle)
        after[h] = after.get(h, 0) + (n in after_idle)
    return tuple(HyperNodeRow(h, tier, members.get(h, 0), before.get(h, 0), after.get(h, 0),
                              before.get(h, 0) // size, after.get(h, 0) // size)
                 for h in topo.names if topo.tier[h] == tier)


def blocks_on(snapshot, spec, taken=()):
    """status.result.nodeBlocks of a snapshot as it is: {"tier", "nodeBlockSize", "before", "after"}
    with before = after = the blocks its idle provider nodes make (the caller keeps the plan's
    before), or None when `spec` (a RunSpec or spec dict) has no networkTopology. `taken`: nodes a
    run freed that a waiting workload took since (they count as free: the block did its job).
    SpecError when the snapshot has no HyperNode of the goal's tier."""
    run = spec if isinstance(spec, RunSpec) else RunSpec.from_spec(spec)
    goal = run.network_topology
    if goal is None:
        return None
    tier = goal_tier(goal, snapshot.topology)
    alloc, used, _ = usage(snapshot, run.resource)
    idle = [n for n in alloc if used.get(n, 0) == 0 or n in taken]
    blocks, _ = count_blocks(idle, snapshot.topology, tier, goal.size)
    return {"tier": tier, "nodeBlockSize": goal.size, "before": blocks, "after": blocks}
