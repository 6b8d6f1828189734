"""The seed's own examples and the planner's outcomes, through the loader and `planner.plan`."""
from fractions import Fraction

import pytest

from kubectl_repack.api.status import plan_status
from planner import load_objects, plan
from planner.cost import GangInfo, plan_dimensions, scores
from planner.frag import frag_percent, theoretical_min
from tests.builders import gang, node, spec, vcjob

POOL = {"accelerator-pool": "ascend-npu"}
ELIGIBLE = {"repack.volcano.sh/eligible": "true"}
PROTECTED = {"repack.volcano.sh/protected": "true"}
GUARDED_SCOPE = {"podGroups": {"include": {"selector": {"matchLabels": ELIGIBLE}},
                               "exclude": {"selector": {"matchLabels": PROTECTED}}},
                 "nodes": {"include": {"selector": {"matchLabels": POOL}}}}


def seed_three_nodes():
    objs = [node(f"ascend-node-0{i}", labels=POOL) for i in (1, 2, 3)]
    objs += gang("ascend-batch-training", ns="repack-demo", workers=["ascend-node-01"] * 2, min_member=2,
                 labels=ELIGIBLE)
    objs += gang("serving-a", ns="repack-demo", workers=["ascend-node-02"], cards=7, labels=PROTECTED)
    objs += gang("serving-b", ns="repack-demo", workers=["ascend-node-03"], cards=7, labels=PROTECTED)
    return load_objects(objs)


def test_seed_guarded_dryrun_three_nodes():
    p = plan(seed_three_nodes(), spec(min_improvement=10, max_podgroups=1, max_cards=4, scope=GUARDED_SCOPE))
    st = plan_status(p)
    assert st["conditions"][0]["reason"] == "RepackRecommended"
    assert st["plan"]["summary"] == {"fragBeforePercent": 33, "fragAfterPercent": 0, "freedNodeCount": 1,
                                     "movedCardCount": 2,
                                     "resolvedScope": {"podGroupCount": 1, "nodeCount": 3},
                                     "freedCapacity": [{"nodes": 1, "allocatable": 8}]}
    assert st["plan"]["freedNodes"] == ["ascend-node-01"]
    (move,) = st["plan"]["moves"]
    assert move["owner"] == {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "ascend-batch-training"}
    assert move["cards"] == 2
    assert [(m["name"], m["fromNode"], m["toNode"]) for m in move["pods"]] == [
        ("ascend-batch-training-worker-0", "ascend-node-01", "ascend-node-02"),
        ("ascend-batch-training-worker-1", "ascend-node-01", "ascend-node-03")]
    verdicts = {v.node: v for v in p.verdicts}
    assert verdicts["ascend-node-01"].vacated
    assert verdicts["ascend-node-02"].reason == "PodGroupOutOfScope"


def seed_twenty_nodes():
    objs = [node(f"npu-{i:02d}", labels=POOL) for i in range(20)]
    for i in range(10):
        objs += gang(f"full-{i}", workers=[f"npu-{i:02d}"], cards=8, labels=PROTECTED)
    objs += gang("train-a", workers=["npu-10"] * 3, min_member=1, labels=ELIGIBLE)
    objs += gang("train-b", workers=["npu-11"] * 3, min_member=1, labels=ELIGIBLE)
    for i, n in enumerate(("npu-12", "npu-13", "npu-14")):
        objs += gang(f"small-{i}", workers=[n], cards=1, labels=PROTECTED)
    return load_objects(objs)


def test_seed_twenty_node_fragmentation_example():
    snap = seed_twenty_nodes()
    p = plan(snap, spec(min_improvement=10, scope=GUARDED_SCOPE))
    assert (p.providers, p.occupied_before, p.minimum, p.minimum_exact) == (20, 15, 12, True)
    assert p.frag_before == 15 and p.frag_after == 5
    assert sorted(p.freed_nodes) == ["npu-10", "npu-11"]
    assert p.outcome == "RepackRecommended"
    assert p.frag_before - p.frag_after == 10


def test_threshold_not_reached_is_insufficient_improvement_with_best_plan():
    p = plan(seed_twenty_nodes(), spec(min_improvement=11, scope=GUARDED_SCOPE))
    assert p.outcome == "InsufficientImprovement"
    assert len(p.freed_nodes) == 2 and "below the required 11" in p.message


def test_no_fragmentation():
    objs = [node("a"), node("b")] + gang("j", workers=["a"] * 8)
    p = plan(load_objects(objs), spec())
    assert p.outcome == "NoFragmentation" and p.frag_before == 0 and not p.moves
    assert plan_status(p)["conditions"][0]["reason"] == "NoFragmentation"


def test_fragmented_but_nothing_movable_is_insufficient():
    objs = [node("a", labels=POOL), node("b", labels=POOL)]
    objs += gang("x", workers=["a"], labels=PROTECTED) + gang("y", workers=["b"], labels=PROTECTED)
    p = plan(load_objects(objs), spec(scope=GUARDED_SCOPE))
    assert p.frag_before == 50 and p.outcome == "InsufficientImprovement" and not p.freed_nodes
    assert {v.reason for v in p.verdicts} == {"PodGroupOutOfScope"}


def test_eight_workers_min_available_six():
    g = GangInfo("ns/pg", "ns/Job/train", running=8, min_available=6, resource_total=8,
                 pod_amounts={f"ns/w{i}": 1 for i in range(8)})
    gangs = {"ns/pg": g}
    two = plan_dimensions(gangs, {"ns/pg": {"ns/w0", "ns/w1"}})
    three = plan_dimensions(gangs, {"ns/pg": {"ns/w0", "ns/w1", "ns/w2"}})
    assert two == (1, 0, 2, 2, 2)           # still >= minAvailable: affected = moved cards
    assert three == (1, 1, 8, 3, 3)         # third worker: the whole PodGroup's 8 cards are affected


def test_abc_scoring_example_picks_a():
    # Each candidate frees one node and moves 3 cards.
    objs = [node("a"), node("b"), node("c"), node("r1", cards=16), node("r2", cards=16)]
    objs += gang("big", workers=["a"] * 3 + ["r1"] * 5, min_member=5)                    # A: stays >= min
    for w in ("w1", "w2", "w3"):
        objs += gang(w, workers=["b", "r2"], min_member=1)                               # B: 3 workloads
    objs += gang("tight", workers=["c"] * 3 + ["r1"], min_member=4)                      # C: drops below min
    objs += gang("fill", workers=["r1", "r2"], cards=4, labels=PROTECTED)
    sp = spec(scope={"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}},
                     "nodes": {"include": {"names": ["a", "b", "c"]}}})
    p = plan(load_objects(objs), sp)
    first = [m for m in p.moves if m.round == 1]
    assert {m.from_node for m in first} == {"a"}
    assert sum(m.cards for m in first) == 3
    assert p.freed_nodes[0] == "a"


def test_scores_min_max_normalised_and_weighted():
    rows = [(1, 0, 3, 3, 3), (3, 0, 3, 3, 3), (1, 1, 8, 3, 3)]
    assert scores(rows) == [0.0, 1.0, 1.4]


def test_budget_podgroups_and_cards_are_hard_limits():
    objs = [node(n) for n in ("a", "b", "r")]
    objs += gang("j1", workers=["a"] * 2, min_member=1) + gang("j2", workers=["b"] * 2, min_member=1)
    objs += gang("fill", workers=["r"], cards=4, labels=PROTECTED)
    sp = spec(scope={"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}}}, max_podgroups=1)
    p = plan(load_objects(objs), sp)
    assert len(p.freed_nodes) == 1
    assert any(v.reason == "BudgetExceeded" for v in p.verdicts)
    p2 = plan(load_objects(objs), spec(scope={"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}}},
                                       max_cards=1))
    assert not p2.freed_nodes and {v.reason for v in p2.verdicts if not v.vacated} >= {"BudgetExceeded"}


def test_receiver_prefers_surely_occupied_then_best_fit():
    # x may be vacated later (movable pod, 3 cards); p is pinned by a protected pod with 2 free.
    objs = [node(n) for n in ("src", "x", "p")]
    objs += gang("mover", workers=["src"], cards=2, min_member=0)
    objs += gang("other", workers=["x"], cards=3, min_member=0)
    objs += gang("pin", workers=["p"], cards=6, labels=PROTECTED)
    sp = spec(scope={"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}},
                     "nodes": {"include": {"names": ["src"]}}})
    p = plan(load_objects(objs), sp)
    assert [(m.pod.name, m.to_node) for m in p.moves] == [("mover-worker-0", "p")]


def test_never_reoccupies_idle_node_and_blocked_reason_names_pod_and_filter():
    objs = [node("a", labels={"pool": "x"}), node("idle", labels={"pool": "x"}), node("b", labels={"pool": "y"})]
    objs += gang("j", workers=["a"], cards=2, node_selector={"pool": "x"})
    objs += gang("k", workers=["b"], cards=2, labels=PROTECTED)
    p = plan(load_objects(objs), spec(scope={"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}}}))
    assert not p.freed_nodes
    v = {v.node: v for v in p.verdicts}["a"]
    assert (v.reason, v.pod, v.filter) == ("NoFeasibleReceiver", "default/j-worker-0", "NodeAffinity")
    assert "didn't match Pod's node affinity/selector" in v.message


def test_restart_job_policy_widens_cost_and_is_noted():
    objs = [node("a"), node("b"), node("r", cards=16)]
    objs.append(vcjob("rj", policies=[{"event": "PodEvicted", "action": "RestartJob"}]))
    objs += gang("rj", workers=["a", "r", "r", "r"], min_member=2)
    objs += gang("plain", workers=["b"], min_member=0)
    objs += gang("fill", workers=["r"], cards=4, labels=PROTECTED)
    sp = spec(scope={"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}}}, max_podgroups=1)
    p = plan(load_objects(objs), sp)
    # Vacating a moves one pod but restarts all four: the plain single-pod job on b wins.
    assert p.freed_nodes[0] == "b"
    p2 = plan(load_objects(objs), spec(scope={"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}},
                                              "nodes": {"include": {"names": ["a"]}}}))
    assert p2.freed_nodes == ("a",) and "RestartJob" in p2.message


def test_frag_formula_and_minimum():
    assert frag_percent(15, 12, 20) == 15
    assert frag_percent(2, 1, 3) == Fraction(100, 3)
    assert theoretical_min([4, 4, 4, 3, 3, 3, 2, 2, 2], [9, 9, 9]).value == 3


def test_minimum_reached_stops_planning():
    objs = [node(n) for n in ("a", "b", "c")]
    objs += gang("j1", workers=["a"] * 4, min_member=0) + gang("j2", workers=["b"] * 4, min_member=0)
    objs += gang("j3", workers=["c"] * 4, min_member=0)
    p = plan(load_objects(objs), spec())
    assert p.minimum == 2 and len(p.freed_nodes) == 1
    assert any(v.reason == "MinimumReached" for v in p.verdicts)


@pytest.mark.parametrize("optimized", [True, False])
def test_output_is_deterministic(optimized):
    snap = seed_twenty_nodes()
    a = plan_status(plan(snap, spec(scope=GUARDED_SCOPE), optimized=optimized), now="2026-01-01T00:00:00Z")
    b = plan_status(plan(seed_twenty_nodes(), spec(scope=GUARDED_SCOPE), optimized=optimized), now="2026-01-01T00:00:00Z")
    assert a == b


@pytest.mark.parametrize("resources, error", [
    ({"huawei.com/ascend1980": 0}, "spec.maxPerRun.resources[huawei.com/ascend1980]: maxPerRun.resources may only "
                                   "limit the goal's resource (huawei.com/ascend-1980)"),
    ({"huawei.com/ascend-1980": "-1"}, "spec.maxPerRun.resources[huawei.com/ascend-1980]: '-1' is negative"),
    ("8", "spec.maxPerRun.resources: expected an object of quantities"),
], ids=["typo", "negative", "not-a-map"])
def test_a_budget_the_planner_cannot_honour_is_a_spec_error(resources, error):
    """Runs stored before the CRD's rule, or written by other clients, meet the same rule here."""
    from planner import RunSpec, SpecError
    spec = {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}], "maxPerRun": {"resources": resources}}
    with pytest.raises(SpecError) as refused:
        RunSpec.from_spec(spec)
    assert str(refused.value).startswith(error)


def test_a_fractional_card_budget_allows_no_card():
    from planner import RunSpec
    spec = {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}],
            "maxPerRun": {"resources": {"huawei.com/ascend-1980": "0.0000001"}}}
    assert RunSpec.from_spec(spec).max_resource == 0
