"""Volcano network topology in the planner (TOPO-1..4): the HyperNode tree resolved as vc-scheduler
v1.14.1 resolves it, hard topology as a scheduler filter, and block goals.

The scenarios follow the Go fork's e2e E1-E21 where they apply to v1.14.1 (its HyperNode-level
affinity cases E9-E16 do not: no upstream release has those rules).
"""
import pytest

from planner import SnapshotError, SpecError, load_objects, plan
from planner.filters import run_filters
from planner.state import SimulatedState
from tests.builders import gang, hypernode, node, podgroup, pod, spec

HARD1 = {"mode": "hard", "highestTierAllowed": 1}
HARD2 = {"mode": "hard", "highestTierAllowed": 2}


def tree(extra_tier3=False):
    """rt-s0{n0,n1} and rt-s1{n2,n3} at tier 1 under rt-s2 at tier 2 (the fork's e2e tree)."""
    objs = [hypernode("s0", 1, nodes=["n0", "n1"]), hypernode("s1", 1, nodes=["n2", "n3"]),
            hypernode("s2", 2, children=["s0", "s1"])]
    if extra_tier3:
        objs.append(hypernode("s3", 3, nodes=["n0", "n1"]))
    return objs


def nodes(count=4, cards=8):
    return [node(f"n{i}", cards=cards) for i in range(count)]


def moves(p):
    return sorted((m.pod.name, m.from_node, m.to_node) for m in p.moves)


# -- the tree (TOPO-1) ---------------------------------------------------------------------------
def test_members_resolve_as_volcano_does():
    snap = load_objects(nodes(0) + [node("node-1"), node("node-10"), node("xnode-1"), node("gpu-a", labels={"pool": "a"})]
                        + [hypernode("by-regex", 1, regex="node-1"),          # unanchored: all three
                           hypernode("lookahead", 3, regex="node-(?=1)"),   # RE2 rejects it: nothing
                           hypernode("by-label", 4, labels={"pool": "a"}),
                           hypernode("empty-label", 5, labels={}),          # matches nothing
                           hypernode("exact", 1, nodes=["gpu-a", "missing"]),
                           hypernode("top", 2, children=["exact", "no-such-hypernode"], regex="node-10")])
    t = snap.topology
    assert t.nodes["by-regex"] == {"node-1", "node-10", "xnode-1"}
    assert t.nodes["lookahead"] == frozenset()
    assert t.nodes["by-label"] == {"gpu-a"}
    assert t.nodes["empty-label"] == frozenset()
    assert t.nodes["exact"] == {"gpu-a"}            # a missing node drops out, no error
    assert t.nodes["top"] == {"gpu-a", "node-10"}   # missing child HyperNode: no error, nothing added
    assert t.problems == ()


def test_regex_member_of_type_hypernode_is_ignored():
    objs = nodes(2) + [hypernode("a", 1, nodes=["n0"]), hypernode("b", 1, nodes=["n1"]),
                       {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "top"},
                        "spec": {"tier": 2, "members": [{"type": "HyperNode", "selector": {"regexMatch": {"pattern": "a"}}}]}}]
    assert load_objects(objs).topology.nodes["top"] == frozenset()


def test_cycle_and_second_parent_are_problems():
    cyc = load_objects(nodes(1) + [hypernode("a", 1, nodes=["n0"], children=["b"]), hypernode("b", 2, children=["a"])])
    assert any("cycle" in p and "a" in p and "b" in p for p in cyc.topology.problems)
    two = load_objects(nodes(1) + [hypernode("leaf", 1, nodes=["n0"]), hypernode("p1", 2, children=["leaf"]),
                                   hypernode("p2", 2, children=["leaf"])])
    assert two.topology.problems == ("HyperNode leaf is a member of both p1 and p2",)


def test_node_in_two_hypernodes_of_one_tier_is_an_error_naming_both():
    with pytest.raises(SnapshotError, match="node n0 is in two HyperNodes of tier 1, a and b"):
        load_objects(nodes(1) + [hypernode("a", 1, nodes=["n0"]), hypernode("b", 1, nodes=["n0"])])


def test_malformed_hypernode_names_the_field():
    bad = hypernode("a", 1, nodes=["n0"])
    bad["spec"]["members"][0]["selector"] = {"exactMatch": {"name": "n0"}, "regexMatch": {"pattern": "n"}}
    with pytest.raises(SnapshotError, match=r"HyperNode a: spec.members\[0\].selector: exactly one of"):
        load_objects(nodes(1) + [bad])
    bad = hypernode("a", 1, nodes=["n0"])
    del bad["spec"]["tier"]
    with pytest.raises(SnapshotError, match="HyperNode a: spec.tier: required field is missing"):
        load_objects(nodes(1) + [bad])


def test_broken_tree_pins_every_topology_gang_naming_the_problem():
    objs = nodes(4) + [hypernode("a", 1, nodes=["n0", "n1"], children=["b"]), hypernode("b", 2, children=["a"])]
    objs += gang("t", workers=["n0"], cards=1, topology={"mode": "soft"})
    objs += gang("free", workers=["n1"], cards=1)
    objs += gang("big", workers=["n2"], cards=6)
    p = plan(load_objects(objs), spec())
    v = {v.node: v for v in p.verdicts}
    assert v["n0"].reason == "TopologyUnavailable"
    assert "PodGroup default/t-pg has network topology" in v["n0"].message and "form a cycle" in v["n0"].message
    assert v["n1"].vacated            # a gang without topology still moves


# -- hard topology as a filter (TOPO-2) -----------------------------------------------------------
def split_gang(topology):
    """Gang a has a pod on n0 and on n1 (s0); n1 is nearly full, so the pod of n0 has room only in s1."""
    objs = nodes(4) + tree()
    objs += gang("a", workers=["n0", "n1"], cards=2, topology=topology)
    objs += gang("b", workers=["n1"], cards=5) + gang("c", workers=["n2"], cards=4) + gang("d", workers=["n3"], cards=2)
    return load_objects(objs)


@pytest.mark.parametrize("optimized", [True, False])
def test_partially_vacated_hard_gang_stays_in_its_hypernode(optimized):
    p = plan(split_gang(HARD1), spec(), optimized=optimized)
    for m in p.moves:
        if m.pod.group_name == "a-pg":
            assert m.to_node in ("n0", "n1")
    assert "n0" not in p.freed_nodes
    # without topology the same pod crosses to s1 (the filter is what keeps it)
    free = plan(split_gang(None), spec(), optimized=optimized)
    assert ("a-worker-0", "n0", "n2") in moves(free)


def test_soft_mode_and_unknown_tier_name_filter_nothing():
    assert ("a-worker-0", "n0", "n2") in moves(plan(split_gang({"mode": "soft", "highestTierAllowed": 1}), spec()))
    # v1.14.1's updateJobTier only logs a highestTierName no HyperNode carries: the job is not hard
    assert ("a-worker-0", "n0", "n2") in moves(plan(split_gang({"mode": "hard", "highestTierName": "nope"}), spec()))


def test_tier_name_resolves_and_tier_two_allows_the_sibling():
    objs = nodes(4) + [hypernode("s0", 1, nodes=["n0", "n1"], tier_name="leaf"),
                       hypernode("s1", 1, nodes=["n2", "n3"], tier_name="leaf"),
                       hypernode("s2", 2, children=["s0", "s1"], tier_name="spine")]
    objs += gang("a", workers=["n0", "n1"], cards=2, topology={"mode": "hard", "highestTierName": "leaf"})
    objs += gang("b", workers=["n1"], cards=5) + gang("c", workers=["n2"], cards=4) + gang("d", workers=["n3"], cards=2)
    snap = load_objects(objs)
    assert all(m.to_node in ("n0", "n1") for m in plan(snap, spec()).moves if m.pod.group_name == "a-pg")
    assert ("a-worker-0", "n0", "n2") in moves(plan(split_gang(HARD2), spec()))


def test_filter_message_names_receiver_hypernode_and_gang():
    snap = split_gang(HARD1)
    state = SimulatedState(snap)
    victim = next(p for p in snap.pods if p.name == "a-worker-0")
    state.unbind(victim)
    assert run_filters(victim, snap.node_by_name["n2"], state, {}) == (
        "NetworkTopology", "receiver n2 is outside HyperNode s0 of PodGroup default/a-pg (tier 1, hard)")
    assert run_filters(victim, snap.node_by_name["n0"], state, {}) is None


PIN = {"repack.volcano.sh/do-not-disrupt": "true"}


def test_node_outside_every_hypernode_never_takes_a_hard_gang():
    objs = nodes(3) + [hypernode("s0", 1, nodes=["n0", "n1"])]
    objs += gang("a", workers=["n0"], cards=2, topology=HARD1)
    objs += gang("b", workers=["n1"], cards=7, annotations=PIN) + gang("c", workers=["n2"], cards=1, annotations=PIN)
    p = plan(load_objects(objs), spec())
    assert "n0" not in p.freed_nodes          # n2 (in no HyperNode) has room but may not take it
    v = {v.node: v for v in p.verdicts}
    assert v["n0"].filter == "NetworkTopology"
    assert "n2: receiver n2 is in no HyperNode of tier <= 1 (PodGroup default/a-pg, hard)" in v["n0"].message


def test_wholly_vacated_gang_is_placed_as_one_unit_in_another_hypernode():
    """E21: both pods of a hard tier-1 gang sit on n0; s0 (n1) has room for one replacement only, s1
    for both: they go to s1 together, never split across HyperNodes."""
    objs = nodes(4) + tree()
    objs += gang("a", workers=["n0", "n0"], cards=2, topology=HARD1)
    objs += gang("b", workers=["n1"], cards=6, annotations=PIN)
    objs += gang("c", workers=["n2"], cards=4, annotations=PIN) + gang("d", workers=["n3"], cards=4, annotations=PIN)
    p = plan(load_objects(objs), spec())
    dest = {m.to_node for m in p.moves if m.pod.group_name == "a-pg"}
    assert "n0" in p.freed_nodes and dest and dest <= {"n2", "n3"}


def test_set_search_places_a_wholly_vacated_gang_where_all_of_it_fits():
    """The search's model (planner.setsearch) places a gang that leaves whole as one unit: pod by
    pod, best fit would put the first pod on n1 (2 cards free: the tightest) and anchor the gang in
    s0, where the second finds no room; the model then could not vacate n0 at all, nor reach the
    plans (blocks, least disruption) that need such a gang moved to another HyperNode."""
    from planner import setsearch
    from planner.cost import DEFAULT_WEIGHTS
    from planner.plan import RunSpec
    from planner.prepare import prepare
    objs = nodes(4) + tree()
    objs += gang("a", workers=["n0", "n0"], cards=2, topology=HARD1)
    objs += gang("b", workers=["n1"], cards=6) + gang("c", workers=["n2"], cards=4) + gang("d", workers=["n3"], cards=4)
    prep = prepare(load_objects(objs), RunSpec.from_spec(spec()), None)
    search = setsearch.SetSearch(prep, DEFAULT_WEIGHTS)
    assert search.start(["n0"], {})
    where = {k: m for k, m in search.where.items() if k.startswith("default/a-")}
    assert len(where) == 2 and set(where.values()) <= {"n2", "n3"}, where


def test_gang_split_only_by_capacity_is_not_moved():
    """E21b: each tier-1 HyperNode has room for one of the two replacements only."""
    def cluster(topology):
        objs = nodes(4) + tree()
        objs += gang("a", workers=["n0", "n0"], cards=3, topology=topology)
        objs += gang("b", workers=["n1"], cards=5, annotations=PIN) + gang("c", workers=["n2"], cards=5, annotations=PIN)
        objs += gang("d", workers=["n3"], cards=8, annotations=PIN)
        return load_objects(objs)
    p = plan(cluster(HARD1), spec())
    assert p.moves == () and "n0" not in p.freed_nodes
    # the same geometry without topology splits the gang
    assert {m.to_node for m in plan(cluster(None), spec()).moves} == {"n1", "n2"}


def test_subgroup_topology_binds_the_pods_that_join_it():
    objs = nodes(4) + tree()
    objs.append(podgroup("a-pg", min_member=2, owner=("Job", "a"), subgroups=[
        {"name": "part", "matchLabelKeys": ["volcano.sh/partition-id"], "networkTopology": HARD1}]))
    objs += [pod("a-0", cards=2, on="n0", group="a-pg", owner=("Job", "a"), labels={"volcano.sh/partition-id": "0"}),
             pod("a-1", cards=2, on="n1", group="a-pg", owner=("Job", "a"), labels={"volcano.sh/partition-id": "0"})]
    objs += gang("b", workers=["n1"], cards=5) + gang("c", workers=["n2"], cards=4) + gang("d", workers=["n3"], cards=2)
    snap = load_objects(objs)
    assert [c.what for c in snap.constraints["default/a-0"]] == ["SubGroup default/a-pg/part-0"]
    assert all(m.to_node in ("n0", "n1") for m in plan(snap, spec()).moves if m.pod.group_name == "a-pg")


def test_vcjob_topology_counts_where_its_podgroup_has_none():
    objs = [o for o in split_gang(None).pods]  # noqa: F841 (readability: same geometry as split_gang)
    base = nodes(4) + tree() + gang("a", workers=["n0", "n1"], cards=2)
    base += gang("b", workers=["n1"], cards=5) + gang("c", workers=["n2"], cards=4) + gang("d", workers=["n3"], cards=2)
    base.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "a", "namespace": "default"},
                 "spec": {"networkTopology": HARD1, "tasks": []}})
    snap = load_objects(base)
    assert "default/a-worker-0" in snap.constraints


def test_every_move_of_a_plan_keeps_hard_gangs_in_one_hypernode():
    """An independent check on generated clusters: final positions of each hard gang lie in one
    HyperNode of its tier."""
    import random
    rng = random.Random(21)
    for trial in range(12):
        count = 12
        objs = [node(f"n{i}", cards=8) for i in range(count)]
        leaves = [[f"n{i}" for i in range(j, j + 3)] for j in range(0, count, 3)]
        objs += [hypernode(f"l{j}", 1, nodes=ns) for j, ns in enumerate(leaves)]
        objs += [hypernode("r0", 2, children=["l0", "l1"]), hypernode("r1", 2, children=["l2", "l3"])]
        for g in range(10):
            leaf = rng.choice(leaves)
            workers = [rng.choice(leaf) for _ in range(rng.randint(1, 3))]
            objs += gang(f"g{g}", workers=workers, cards=rng.choice([1, 2]),
                         topology=rng.choice([HARD1, HARD2, None]))
        snap = load_objects(objs)
        p = plan(snap, spec())
        where = {pd.key: pd.node_name for pd in snap.pods}
        for m in p.moves:
            where[m.pod.key] = m.to_node
        for key, cons in snap.constraints.items():
            for c in cons:
                final = {where[k] for k in c.members}
                assert any(final <= snap.topology.nodes[h] for h in snap.topology.domains(c.tier)), (trial, c, final)


# -- block goals (TOPO-3, TOPO-4) -----------------------------------------------------------------
def blocks_cluster(cards=(1, 1, 1, 1), extra_tier3=False):
    objs = nodes(4) + tree(extra_tier3)
    for i, c in enumerate(cards):
        objs += gang(f"j{i}", workers=[f"n{i}"], cards=c)
    return load_objects(objs)


def goal(tier=1, size=2, required=1, mode="binpack", **kw):
    return {"hyperNodeTier": tier, "nodeBlockSize": size, "requiredNodeBlocks": required, "mode": mode, **kw}


def test_e1_block_goal_frees_a_whole_block():
    p = plan(blocks_cluster(), spec(topology=goal()))
    assert p.outcome == "RepackRecommended"
    assert p.node_blocks.before == 0 and p.node_blocks.after >= 1
    assert p.summary()["nodeBlocks"] == {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": p.node_blocks.after}
    rows = {r.name: r for r in p.hypernodes}
    assert any(r.blocks_after == 1 and r.free_after == 2 for r in rows.values())


def test_e2_unreachable_blocks_end_not_met_with_nothing_moved():
    p = plan(blocks_cluster(), spec(topology=goal(required=3)))
    assert p.outcome == "RequiredNodeBlocksNotMet"
    assert p.moves == () and p.freed_nodes == ()
    assert "requiredNodeBlocks 3 not reached" in p.message and "s0" in p.message and "s1" in p.message
    assert all(not v.vacated for v in p.verdicts)
    assert p.node_blocks.after == p.node_blocks.before == 0


def test_e3_without_a_goal_nothing_changes_but_the_view():
    p = plan(blocks_cluster(), spec())
    assert p.outcome == "RepackRecommended" and p.moves and p.node_blocks is None
    assert [r.name for r in p.hypernodes] == ["s0", "s1"]       # the lowest tier, free whole nodes
    assert "nodeBlocks" not in p.summary()


def test_e5_blocks_and_min_improvement_both_gate():
    p = plan(blocks_cluster(), spec(min_improvement=100, topology=goal()))
    assert p.outcome == "InsufficientImprovement"


def test_e6_tier_three_spread_frees_exactly_its_members():
    p = plan(blocks_cluster(cards=(4, 5, 3, 3), extra_tier3=True), spec(topology=goal(tier=3, mode="spread")))
    assert p.outcome == "RepackRecommended"
    assert sorted(p.freed_nodes) == ["n0", "n1"] and p.node_blocks.after == 1


def test_blocks_beat_more_scattered_freed_nodes():
    """Greedy by disruption frees the cheapest nodes, one per HyperNode; the block goal frees two
    in one HyperNode instead."""
    objs = nodes(6) + [hypernode("a", 1, nodes=["n0", "n1", "n2"]), hypernode("b", 1, nodes=["n3", "n4", "n5"])]
    for i, c in enumerate((1, 3, 6, 1, 3, 6)):
        objs += gang(f"j{i}", workers=[f"n{i}"], cards=c)
    snap = load_objects(objs)
    p = plan(snap, spec(topology=goal(size=2)))
    assert p.node_blocks.after == 1
    freed = set(p.freed_nodes)
    assert freed & {"n0", "n1", "n2"} == {"n0", "n1"} or freed & {"n3", "n4", "n5"} == {"n3", "n4"}


def test_idle_nodes_count_toward_blocks():
    """E-RS: n2 is idle; freeing n0 alone completes the block {n0, n2} (a1 moves to n3, outside)."""
    objs = nodes(4) + [hypernode("s", 1, nodes=["n0", "n1", "n2"])]
    objs += gang("a1", workers=["n0"], cards=1) + gang("a2", workers=["n1"], cards=7) + gang("o", workers=["n3"], cards=1)
    p = plan(load_objects(objs), spec(max_cards="1", topology=goal(size=2)))
    assert p.freed_nodes == ("n0",) and p.node_blocks.after == 1


@pytest.mark.parametrize("field,value,message", [
    ("hyperNodeTier", 5, "spec.networkTopology.hyperNodeTier: no HyperNode has tier 5 (tiers: 1, 2)"),
    ("hyperNodeTierName", "nope", "spec.networkTopology.hyperNodeTierName: no HyperNode has tierName 'nope'"),
])
def test_goal_on_a_tier_no_hypernode_has_is_an_error(field, value, message):
    g = {"nodeBlockSize": 2, field: value}
    with pytest.raises(SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        plan(blocks_cluster(), spec(topology=g))


def test_goal_without_any_hypernode_is_an_error():
    snap = load_objects(nodes(4) + gang("j", workers=["n0"]) + gang("k", workers=["n1"]))
    with pytest.raises(SpecError, match="spec.networkTopology.hyperNodeTier: the cluster has no HyperNodes"):
        plan(snap, spec(topology=goal()))


def generated_with_tree(nodes, seed, hard_share=0.3):
    """A bench.generate cluster with a 3-tier tree (leaves of 8 nodes, spines of 4 leaves, one core)
    and a share of its PodGroups hard-bound to tier 1 or 2."""
    import random

    from bench.generate import generate
    objs = generate(nodes=nodes, seed=seed)
    names = [o["metadata"]["name"] for o in objs if o["kind"] == "Node"]
    leaves = [names[i:i + 8] for i in range(0, len(names), 8)]
    objs += [hypernode(f"leaf-{i}", 1, nodes=ns) for i, ns in enumerate(leaves)]
    spines = [[f"leaf-{i}" for i in range(j, min(j + 4, len(leaves)))] for j in range(0, len(leaves), 4)]
    objs += [hypernode(f"spine-{i}", 2, children=ch) for i, ch in enumerate(spines)]
    objs.append(hypernode("core", 3, children=[f"spine-{i}" for i in range(len(spines))]))
    rng = random.Random(seed)
    for o in objs:
        if o["kind"] == "PodGroup" and rng.random() < hard_share:
            o.setdefault("spec", {})["networkTopology"] = {"mode": "hard", "highestTierAllowed": rng.choice([1, 2])}
    return load_objects(objs)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("with_goal", [False, True])
def test_optimized_plan_identical_to_bruteforce_with_topology(seed, with_goal):
    from kubectl_repack.api.status import plan_status
    from tests.builders import R
    snap = generated_with_tree(96, seed)
    s = spec(topology=goal(tier=1, size=2, required=0) if with_goal else None)
    assert s["goals"][0]["resource"] == R
    fast, slow = plan(snap, s), plan(snap, s, optimized=False)
    assert plan_status(fast, now="t") == plan_status(slow, now="t")
    assert fast.verdicts == slow.verdicts and fast.rounds == slow.rounds
    assert fast.freed_nodes and snap.constraints


@pytest.mark.parametrize("seed", [21000, 21002, 21009, 21017, 21023])
def test_block_plans_free_what_they_say_on_their_final_placement(seed):
    """Independent of the planner's bookkeeping: apply the plan's moves to the snapshot; every freed
    node then holds none of the resource, every hard gang lies in one HyperNode of its tier, and the
    blocks the plan reports are the blocks of the final placement (the bench's instances)."""
    import random

    from bench.hypernodes import generate as hn_generate
    from bench.hypernodes import goal_spec, tiers_of
    from planner.topology import count_blocks
    objs = hn_generate(random.Random(seed).randint(16, 60), seed)
    s = goal_spec(seed, tiers_of(objs))
    snap = load_objects(objs)
    p = plan(snap, s)
    R = s["goals"][0]["resource"]
    where = {pd.key: pd.node_name for pd in snap.pods if pd.node_name and not pd.terminal}
    for m in p.moves:
        assert where[m.pod.key] == m.from_node
        where[m.pod.key] = m.to_node
    used = {}
    for pd in snap.pods:
        if pd.key in where and pd.requests.get(R, 0):
            used[where[pd.key]] = used.get(where[pd.key], 0) + pd.requests[R]
    assert not [n for n in p.freed_nodes if used.get(n, 0)]
    for cons in snap.constraints.values():
        for c in cons:
            final = {where[k] for k in c.members if k in where}
            assert any(final <= snap.topology.nodes[h] for h in snap.topology.domains(c.tier)), (c, final)
    if p.node_blocks is not None and p.outcome != "RequiredNodeBlocksNotMet":
        providers = [n.name for n in snap.nodes if n.allocatable.get(R, 0) > 0]
        free = [n for n in providers if not used.get(n, 0)]
        assert p.node_blocks.after == count_blocks(free, snap.topology, p.node_blocks.tier, p.node_blocks.size)[0]
