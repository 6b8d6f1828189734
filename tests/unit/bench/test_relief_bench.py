"""bench.relief (RELIEF-2, RELIEF-3): the checker refutes what it must, and the MILP, the planner and the
checker agree on a few tiny targeted instances. Fast (a few seconds); the full run is
`python -m bench.relief`."""
import pytest

pytest.importorskip("highspy")

import planner  # noqa: E402
from planner.plan import RunSpec  # noqa: E402

from bench import quality, relief  # noqa: E402
from bench.generate import R  # noqa: E402
from tests.builders import gang, node  # noqa: E402

PIN = {"repack.volcano.sh/do-not-disrupt": "true"}


def _objs(large_cards=4, large_pods=2):
    """tests/unit/planner/test_relief.py's seed: node-01 holds a movable 2 x 1-card job, node-02 and
    node-03 7 of 8 cards each (pinned); `large` waits."""
    objs = [node("node-01"), node("node-02"), node("node-03")]
    objs += gang("batch", workers=["node-01", "node-01"], cards=1)
    objs += gang("serving", workers=["node-02"], cards=7, annotations=PIN)
    objs += gang("pretrain", workers=["node-03"], cards=7, annotations=PIN)
    objs += gang("large", workers=[None] * large_pods, cards=large_cards, phase="Pending")
    return objs


def _solve(objs, key="default/large-pg", **extra):
    spec = {"goals": [{"resource": R}], "target": {"podGroups": [key]}, **extra}
    snap = planner.load_objects(objs)
    s = quality.Setting(snap, RunSpec.from_spec(spec))
    return relief.ReliefModel(s, [key], time_limit=5.0).solve(), planner.plan(snap, spec)


def test_checker_selftest():
    assert relief.checker_selftest()


def test_checker_flags_a_placement_without_room_and_accepts_the_planners():
    objs = _objs()
    opt, p = _solve(objs)
    assert p.outcome == "RepackRecommended" and p.target.fits
    moves = [(m.pod.key, m.to_node) for m in p.moves]
    assert relief.check(objs, ["default/large-pg"], moves, list(p.target.placements)) == []
    # the same placements without the moves: node-01 still holds the batch job's 2 cards
    bad = relief.check(objs, ["default/large-pg"], [], list(p.target.placements))
    assert bad and any("node-01" in x for x in bad), bad
    # one pod short of minMember
    short = relief.check(objs, ["default/large-pg"], moves, list(p.target.placements)[:1])
    assert any("minMember - bound = 2" in x for x in short), short


def test_milp_and_planner_agree_on_the_seed_case():
    opt, p = _solve(_objs())
    assert opt["fits"] and opt["proven"]
    assert opt["freed_nodes"] == ["node-01"] == list(p.freed_nodes)
    dims, weighted, _ = quality.dimensions(quality.Setting(planner.load_objects(_objs()), RunSpec.from_spec(
        {"goals": [{"resource": R}]})), [m.pod.key for m in p.moves])
    assert weighted == pytest.approx(opt["value"]) and weighted > 0


def test_a_target_that_fits_now_costs_nothing_and_one_that_cannot_is_infeasible():
    opt, p = _solve(_objs(large_cards=3))
    assert p.outcome == "TargetAlreadyFits" and opt["fits"] and opt["value"] == 0.0
    opt, p = _solve(_objs(large_cards=8, large_pods=3))
    assert p.outcome == "TargetCannotFit" and opt["fits"] is False and opt["proven"]


def test_a_budget_the_only_plan_exceeds_makes_the_milp_infeasible_too():
    # vacating node-01 disrupts one PodGroup and moves 2 cards; a budget of 1 card forbids it
    opt, p = _solve(_objs(), maxPerRun={"resources": {R: "1"}})
    assert opt["fits"] is False and p.outcome == "TargetCannotFit"


def test_instances_are_seeded_and_cover_every_outcome_class():
    a, b = relief.instances(), relief.instances()
    assert a == b and len(a) == relief.COUNT
    assert {v for *_, v in a} == set(relief.VARIANTS)
    objs, spec, key, desc = relief.build(a[0])
    assert objs == relief.build(a[0])[0] and spec["target"] == {"podGroups": [key]}
    pods = [o for o in objs if o.get("kind") == "Pod" and o["metadata"]["name"].startswith("pending-job")]
    assert pods and all("nodeName" not in o["spec"] for o in pods)
