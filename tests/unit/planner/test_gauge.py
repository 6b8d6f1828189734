"""The live fragmentation gauge (planner.gauge, POLICY-3) equals what `kubectl repack plan` and
`kubectl repack why` say about the same snapshot: fragmentation, providers, occupied nodes, the
theoretical minimum, free whole nodes per pool (plan's POOLS table) and per HyperNode of the
lowest tier (plan's HYPERNODES table), and the gangs `why` says wait for fragmentation."""
from __future__ import annotations

import pytest

import planner
from bench import generate as bench_generate
from bench import hypernodes as bench_hypernodes
from planner.frag import percent_int, usage
from planner.gauge import (MAX_GANGS, Gauge, gauge_resources, measure, measure_resource, waiting_gangs)
from planner.pools import node_pools
from planner.relief import CAUSE_FRAGMENTATION, explain
from tests.builders import R, gang, node, pod
from tests.unit.planner.test_relief import queue, seed

GPU = "nvidia.com/gpu"


def plan_figures(snapshot, resource):
    """What plan reports for `resource`: (fragBeforePercent, providers, occupied before, minimum,
    {pool: empty nodes before} as the POOLS table counts them, {HyperNode: free before})."""
    p = planner.plan(snapshot, {"mode": "DryRun", "goals": [{"resource": resource}]})
    _, pools = node_pools(snapshot, resource)
    empty: dict = {}
    for n, (_total, before, _after) in p.cards.items():
        empty[pools[n]] = empty.get(pools[n], 0) + (before == 0)
    return (p.summary()["fragBeforePercent"], p.providers, p.occupied_before, p.minimum, empty,
            {h.name: (h.tier, h.nodes, h.free_before) for h in p.hypernodes})


def gauge_figures(g):
    return (g.frag_percent, g.providers, g.occupied, g.minimum, {p.pool: p.free for p in g.pools},
            {h.name: (h.tier, h.nodes, h.free_before) for h in g.hypernodes})


@pytest.mark.parametrize("profile,nodes,seed_", [("base", 120, 1), ("base", 200, 7), ("gangs", 80, 3),
                                                 ("split", 100, 5)])
def test_the_gauge_is_plans_figures_on_generated_clusters(profile, nodes, seed_):
    snap = planner.load_objects(bench_generate.generate(nodes=nodes, seed=seed_, profile=profile))
    g = measure(snap)
    assert [r.resource for r in g.resources] == list(gauge_resources(snap)) and g.resources
    for r in g.resources:
        assert gauge_figures(r) == plan_figures(snap, r.resource), r.resource
        assert r.free_nodes == r.providers - r.occupied
        assert r.frag_percent > 0     # these clusters are fragmented: the comparison is not of zeros


@pytest.mark.parametrize("seed_", [1, 2, 3])
def test_free_whole_nodes_per_hypernode_of_the_lowest_tier_are_plans(seed_):
    snap = planner.load_objects(bench_hypernodes.generate(nodes=48, seed=seed_))
    lowest = snap.topology.lowest_tier
    g = measure(snap).resources[0]
    assert g.hypernodes and {h.tier for h in g.hypernodes} == {lowest}
    assert gauge_figures(g) == plan_figures(snap, g.resource)
    # every provider node of a lowest-tier HyperNode counted once, free ones as free
    where = snap.topology.at_tier(lowest)
    alloc, used, _ = usage(snap, g.resource)
    assert sum(h.nodes for h in g.hypernodes) == sum(1 for n in alloc if where.get(n))
    assert sum(h.free_before for h in g.hypernodes) == sum(1 for n in alloc if where.get(n) and not used.get(n))


def test_the_examples_and_the_frag_metric_of_the_spec():
    """FRAG-3's example (the seed of 20 nodes): 20 providers, 15 occupied, minimum 12 -> 15 %."""
    g = measure(planner.load_file("examples/seed-20-nodes.yaml"))
    (r,) = g.resources
    assert (r.resource, r.providers, r.occupied, r.minimum, r.minimum_exact, r.frag_percent) == (
        R, 20, 15, 12, True, 15)
    assert r.pool_grouping == "label accelerator-pool" and [(p.pool, p.nodes, p.free) for p in r.pools] == [
        ("ascend-npu", 20, 5)]
    assert r.hypernodes == () and r.pending_blocked == 0


def test_a_gang_blocked_by_fragmentation_is_counted_and_others_are_not():
    objs = seed() + [queue()]
    objs += gang("nowhere", workers=[None], cards=1, phase="Pending", node_selector={"pool": "none"})
    objs += gang("huge", workers=[None, None], cards=8, phase="Pending")
    objs += gang("small", workers=[None], cards=2, phase="Pending")
    snap = planner.load_objects(objs)
    causes = {k: explain(snap, k).cause for k, _ in waiting_gangs(snap, [R])}
    assert causes == {"default/large-pg": CAUSE_FRAGMENTATION, "default/nowhere-pg": "NoNodeMatches",
                      "default/huge-pg": "NotEnoughResources", "default/small-pg": "FitsNow"}
    g = measure(snap)
    assert g.resources[0].pending_blocked == 1 and (g.gangs_waiting, g.gangs_left_out) == (4, 0)


def test_a_gang_its_queue_keeps_out_is_not_blocked_by_fragmentation():
    g = measure(planner.load_objects(seed() + [queue(state="Closed")]))
    assert g.resources[0].pending_blocked == 0 and g.gangs_waiting == 1


def test_the_cause_without_the_fix_is_whys_cause_and_plans_nothing():
    snap = planner.load_objects(seed() + [queue()])
    full, quick = explain(snap, "default/large-pg"), explain(snap, "default/large-pg", with_fix=False)
    assert full.cause == quick.cause == CAUSE_FRAGMENTATION and full.summary == quick.summary
    assert full.fix and full.plan is not None and quick.fix == "" and quick.plan is None


def test_running_gangs_and_gangs_of_other_resources_do_not_count():
    objs = [node("n1"), node("g1", cards=4, resource=GPU)]
    objs += gang("running", workers=["n1", "n1"], cards=2)
    gpu_gang = gang("gpu-job", workers=[None], cards=0, phase="Pending")
    for o in gpu_gang:
        if o["kind"] == "Pod":
            o["spec"]["containers"][0]["resources"]["requests"][GPU] = "2"
            o["spec"]["containers"][0]["resources"]["limits"] = {GPU: "2"}
    snap = planner.load_objects(objs + gpu_gang)
    assert gauge_resources(snap) == tuple(sorted((R, GPU)))
    assert waiting_gangs(snap, [R]) == []                        # the GPU gang asks for no R
    assert waiting_gangs(snap, [R, GPU]) == [("default/gpu-job-pg", (GPU,))]
    g = measure(snap)
    assert {r.resource: r.pending_blocked for r in g.resources} == {R: 0, GPU: 0}    # it fits now on g1


def test_resources_are_the_extended_ones_nodes_have_and_their_number_is_bounded():
    objs = [node("n1")]
    extra = [f"example.com/dev-{i}" for i in range(10)]
    for name in extra + ["hugepages-2Mi"]:
        objs[0]["status"]["allocatable"][name] = "1"
    objs[0]["status"]["allocatable"]["example.com/none"] = "0"
    snap = planner.load_objects(objs + [pod("p", on="n1")])
    found = gauge_resources(snap)
    assert found == tuple(sorted(extra + [R])) and "hugepages-2Mi" not in found and "example.com/none" not in found
    g = measure(snap, max_resources=3)
    assert [r.resource for r in g.resources] == list(found[:3]) and g.resources_left_out == found[3:]
    assert [r.resource for r in measure(snap, resources=[R]).resources] == [R]


def test_waiting_gangs_beyond_the_cap_are_counted_as_left_out():
    objs = seed() + [queue()]
    for i in range(3):
        objs += gang(f"more{i}", workers=[None, None], cards=4, phase="Pending")
    snap = planner.load_objects(objs)
    g = measure(snap, max_gangs=2)
    assert (g.gangs_waiting, g.gangs_left_out) == (4, 2)
    assert g.resources[0].pending_blocked == 2      # large-pg and more0-pg, in key order; the rest unexplained
    assert measure(snap).resources[0].pending_blocked == 4 and MAX_GANGS >= 4


def test_an_empty_cluster_measures_nothing_and_a_resource_without_providers_is_zero():
    snap = planner.load_objects([node("n1", cards=0)])
    assert measure(snap) == Gauge((), (), 0, 0)
    r = measure_resource(planner.load_objects([node("n1")]), GPU)
    assert (r.providers, r.occupied, r.minimum, r.frag_percent, r.pools) == (0, 0, 0, 0, ())
    assert percent_int(0) == r.frag_percent
