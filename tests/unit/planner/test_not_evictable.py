"""A planner input that stays pure (issue 19: "plan only pods the creator may evict"): `not_evictable`
({namespace: why}) pins every pod of those namespaces, so the plan moves something else and the
verdict of each node they hold says why; `movable_namespaces` says which namespaces to ask about."""
import copy

import planner
from tests.builders import gang, node, pod, spec

WHY_A = "the run's creator alice may not evict pods in namespace team-a"


def cluster():
    """Three 8-card nodes: team-a's gang `a` holds 2 cards on n1 and 2 on n3 (next to team-c's 4),
    team-b's `b` 4 on n2. Unconstrained, the plan moves a-worker-0 off n1 (onto n3); with team-a
    pinned it moves b off n2 instead."""
    return [node("n1"), node("n2"), node("n3"),
            *gang("a", ns="team-a", workers=["n1", "n3"], cards=2, min_member=1),
            *gang("b", ns="team-b", workers=["n2"], cards=4, min_member=1),
            *gang("c", ns="team-c", workers=["n3"], cards=4, min_member=1)]


def plan(objs=None, **kw):
    return planner.plan(planner.load_objects(objs if objs is not None else cluster()), spec(), **kw)


def moved(result):
    return [(m.pod.key, m.from_node, m.to_node) for m in result.moves]


def test_pods_of_a_namespace_the_run_may_not_evict_in_are_never_moved_something_else_is():
    assert moved(plan()) == [("team-a/a-worker-0", "n1", "n3")]
    result = plan(not_evictable={"team-a": WHY_A})
    assert moved(result) == [("team-b/b-worker-0", "n2", "n1")] and result.freed_nodes == ("n2",)
    verdicts = {v.node: v for v in result.verdicts}
    # the whole gang stays: its pod on n3 pins that node too
    for n, p in (("n1", "a-worker-0"), ("n3", "a-worker-1")):
        v = verdicts[n]
        assert (v.vacated, v.reason, v.pod) == (False, "EvictionNotAuthorized", f"team-a/{p}")
        assert v.message == f"pod team-a/{p}: {WHY_A}"


def test_when_no_namespace_with_movable_pods_may_be_evicted_in_nothing_moves_and_the_message_says_why():
    why = {ns: f"the run's creator bob may not evict pods in namespace {ns}" for ns in ("team-a", "team-b", "team-c")}
    result = plan(not_evictable=why)
    assert result.moves == () and result.outcome == "InsufficientImprovement"
    assert "3 EvictionNotAuthorized" in result.message
    assert {v.reason for v in result.verdicts} == {"EvictionNotAuthorized"}


def test_no_constraint_plans_exactly_as_before_and_the_input_is_not_kept_mutable():
    assert plan(not_evictable=None) == plan() == plan(not_evictable={}) == plan(not_evictable={"team-a": ""})
    given = {"team-a": WHY_A}
    result = plan(not_evictable=given)
    given["team-a"] = ""                  # the caller changes its dict afterwards: the plan was made
    assert moved(result) == [("team-b/b-worker-0", "n2", "n1")]


def test_a_namespace_without_movable_pods_changes_nothing():
    assert moved(plan(not_evictable={"elsewhere": "may not"})) == moved(plan())


def test_an_intrinsic_objection_is_named_before_the_missing_right():
    objs = copy.deepcopy(cluster())
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "a-worker-0":
            o["metadata"]["annotations"]["repack.volcano.sh/do-not-disrupt"] = "true"
    v = {v.node: v for v in plan(objs, not_evictable={"team-a": WHY_A}).verdicts}
    assert v["n1"].reason == "DoNotDisrupt"


def test_movable_namespaces_are_those_of_pods_a_plan_could_move():
    objs = cluster() + [
        node("n4"),
        # requests the resource but no rule lets it move: not asked about
        pod("fixed", cards=2, on="n4", ns="kube-system", scheduler="default-scheduler", owner=("ReplicaSet", "rs")),
        # movable but requests no card: not asked about
        *gang("cpu", ns="cpu-only", workers=["n4"], cards=0, min_member=1),
        # pinned by its owners
        *gang("pinned", ns="opted-out", workers=["n4"], cards=1, min_member=1,
              annotations={"repack.volcano.sh/do-not-disrupt": "true"}),
        # not bound yet
        *gang("waiting", ns="pending", workers=[None], cards=1, min_member=1, phase="Pending"),
        # finished
        *gang("done", ns="finished", workers=["n4"], cards=1, min_member=1, phase="Succeeded"),
    ]
    snap = planner.load_objects(objs)
    assert planner.movable_namespaces(snap, spec()) == ["team-a", "team-b", "team-c"]
    # outside scope.nodes: not movable either
    scoped = spec(scope={"nodes": {"exclude": {"names": ["n2"]}}})
    assert planner.movable_namespaces(snap, scoped) == ["team-a", "team-c"]
    # out of scope.podGroups
    only_a = spec(scope={"podGroups": {"include": {"names": ["team-a/a-pg"]}}})
    assert planner.movable_namespaces(snap, planner.RunSpec.from_spec(only_a)) == ["team-a"]
