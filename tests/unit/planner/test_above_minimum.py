"""Plan.above_minimum: one line saying why a plan stops above the theoretical minimum (budget
spent, no feasible receiver for a pod, scope), also appended to the condition message; and the
planner leaves the process-wide garbage collector alone (planner.gcpause is for callers)."""
import gc

from kubectl_repack.api.status import plan_status
from planner import load_objects, plan
from planner.gcpause import paused_gc
from planner.plan_types import ABOVE_BUDGET, ABOVE_NO_RECEIVER, ABOVE_SCOPE
from tests.builders import gang, node, spec

PROTECTED = {"repack.volcano.sh/protected": "true"}
UNPROTECTED_ONLY = {"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}}}


def three_small_jobs():
    objs = [node(n) for n in ("a", "b", "c", "r")]
    for n in ("a", "b", "c"):
        objs += gang(f"j{n}", workers=[n], cards=1, min_member=0)
    objs += gang("fill", workers=["r"], cards=4, labels=PROTECTED)
    return load_objects(objs)


def test_budget_spent():
    p = plan(three_small_jobs(), spec(scope=UNPROTECTED_ONLY, max_podgroups=1))
    assert len(p.freed_nodes) == 1
    assert p.above_minimum.startswith("stops 2 node(s) above the theoretical minimum 1: budget spent (vacating ")
    assert "maxPerRun.podGroups is 1; 1 more node(s) likewise)" in p.above_minimum
    assert p.above_minimum in plan_status(p)["conditions"][0]["message"]
    assert p.above_minimum_reason == ABOVE_BUDGET          # callers act on the code, not on the sentence


def test_no_feasible_receiver_names_the_pod():
    objs = [node("a", labels={"pool": "x"}), node("b", labels={"pool": "y"}), node("c", labels={"pool": "y"})]
    objs += gang("j", workers=["a"], cards=2, node_selector={"pool": "x"})
    objs += gang("k", workers=["b"], cards=2, min_member=0)
    objs += gang("m", workers=["c"], cards=2, labels=PROTECTED)
    p = plan(load_objects(objs), spec(scope=UNPROTECTED_ONLY))
    assert p.freed_nodes == ("b",)
    assert p.above_minimum == ("stops 1 node(s) above the theoretical minimum 1: no feasible receiver for pod "
                               "default/j-worker-0 on a (NodeAffinity)")
    assert p.message.endswith(p.above_minimum)
    assert [c.text(p.resource) for c in p.freed_capacity] == [
        "1 node(s) with 8 huawei.com/ascend-1980, untainted"]  # no pod requesting cards selects pool=y
    assert p.above_minimum_reason == ABOVE_NO_RECEIVER


def test_scope():
    p = plan(three_small_jobs(), spec(scope={**UNPROTECTED_ONLY, "nodes": {"include": {"names": ["a"]}}}))
    assert p.freed_nodes == ("a",)
    assert p.above_minimum == ("stops 2 node(s) above the theoretical minimum 1: scope (3 occupied node(s) "
                               "outside scope.nodes)")
    assert p.above_minimum_reason == ABOVE_SCOPE


def test_blocked_by_podgroup_scope():
    p = plan(three_small_jobs(), spec(scope={"podGroups": {"include": {"names": ["default/ja-pg"]}}}))
    assert p.freed_nodes == ("a",)
    assert p.above_minimum.endswith("scope (3 node(s) PodGroupOutOfScope)")
    assert p.above_minimum_reason == ABOVE_SCOPE


def test_nothing_said_at_the_minimum():
    p = plan(three_small_jobs(), spec(scope=UNPROTECTED_ONLY))
    assert p.occupied_after == p.minimum and p.above_minimum == "" and p.above_minimum_reason == ""


def test_plan_leaves_gc_alone(monkeypatch):
    snap = three_small_jobs()

    def refuse():
        raise AssertionError("the planner must not toggle the process-wide GC")
    monkeypatch.setattr(gc, "disable", refuse)
    monkeypatch.setattr(gc, "enable", refuse)
    plan(snap, spec(scope=UNPROTECTED_ONLY))


def test_paused_gc_restores_the_previous_state():
    was = gc.isenabled()
    try:
        gc.enable()
        with paused_gc():
            assert not gc.isenabled()
        assert gc.isenabled()
        gc.disable()
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
