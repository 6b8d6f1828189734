"""Runs aimed at pending gangs (RELIEF-2, planner.relief): the least-disruptive plan after which
the target fits, TargetAlreadyFits, TargetCannotFit, and the spec's rules for spec.target."""
import pytest

from planner import SpecError, load_objects, plan
from planner.filters import run_filters
from planner.state import SimulatedState
from tests.builders import R, gang, node, pod, podgroup

PIN = {"repack.volcano.sh/do-not-disrupt": "true"}


def target_spec(*keys, goals=True, **extra):
    s = {"mode": "DryRun", "target": {"podGroups": list(keys)}, **extra}
    if goals:
        s["goals"] = [{"resource": R}]
    return s


def seed(large_cards=4, large_pods=2):
    """The seed's 3 nodes: node-01 holds the eligible batch job (2 x 1 card), node-02 and node-03 7
    of 8 cards each (pinned); the large job (2 x 4 cards) waits."""
    objs = [node("node-01"), node("node-02"), node("node-03")]
    objs += gang("batch", workers=["node-01", "node-01"], cards=1)
    objs += gang("serving", workers=["node-02"], cards=7, annotations=PIN)
    objs += gang("pretrain", workers=["node-03"], cards=7, annotations=PIN)
    objs += gang("large", workers=[None] * large_pods, cards=large_cards, phase="Pending")
    return objs


def check_fit(snap, p):
    """Independently of planner.relief: replay the moves, then bind the target's pods where the
    plan says, each passing every filter."""
    state = SimulatedState(snap)
    for m in p.moves:
        state.unbind(m.pod)
        assert run_filters(m.pod, snap.node_by_name[m.to_node], state, {}) is None, m
        state.bind(m.pod, m.to_node)
    pods = {x.key: x for x in snap.pods}
    for key, n in p.target.placements:
        assert run_filters(pods[key], snap.node_by_name[n], state, {}) is None, (key, n)
        state.bind(pods[key], n)


def test_the_seed_case_vacates_node_01_and_the_large_job_fits_there():
    snap = load_objects(seed())
    p = plan(snap, target_spec("default/large-pg"))
    assert p.outcome == "RepackRecommended"
    assert p.freed_nodes == ("node-01",)
    assert sorted((m.pod.name, m.to_node) for m in p.moves) == [("batch-worker-0", "node-02"),
                                                                  ("batch-worker-1", "node-03")]
    assert p.target.fits and sorted(n for _, n in p.target.placements) == ["node-01", "node-01"]
    assert "fits after vacating node-01" in p.message
    check_fit(snap, p)
    assert p.summary()["target"]["fits"] is True


def test_resource_comes_from_the_target_when_the_run_names_no_goal():
    p = plan(load_objects(seed()), target_spec("default/large-pg", goals=False))
    assert p.resource == R and p.outcome == "RepackRecommended"


def test_a_target_that_fits_now_moves_nothing():
    p = plan(load_objects(seed(large_cards=3)), target_spec("default/large-pg"))
    assert p.outcome == "TargetAlreadyFits"
    assert p.moves == () and p.freed_nodes == ()
    assert "fits now without any move" in p.message and "waits for something else" in p.message


def test_a_target_no_plan_can_make_room_for_says_what_stopped_it():
    p = plan(load_objects(seed(large_cards=8, large_pods=3)), target_spec("default/large-pg"))
    assert p.outcome == "TargetCannotFit"
    assert p.moves == () and p.freed_nodes == () and not p.target.fits
    assert "cannot fit" in p.message and "NodeResourcesFit" in p.message


def test_the_fragmentation_gate_does_not_apply():
    """A run that frees one node of three (33 points) with minFragImprovementPercent 50 would be
    InsufficientImprovement untargeted; a targeted run succeeds when the target fits."""
    snap = load_objects(seed())
    assert plan(snap, {"mode": "DryRun", "goals": [{"resource": R, "minFragImprovementPercent": 50}]}).outcome \
        == "InsufficientImprovement"
    assert plan(snap, target_spec("default/large-pg")).outcome == "RepackRecommended"


def test_only_nodes_the_target_may_use_are_vacated():
    """pool-a's node is the cheapest to vacate, but the target selects pool b."""
    objs = [node("a1", labels={"pool": "a"}), node("a2", labels={"pool": "a"}),
            node("b1", labels={"pool": "b"}), node("b2", labels={"pool": "b"})]
    objs += gang("small", workers=["a1"], cards=1)
    objs += gang("filler-a", workers=["a2"], cards=6, annotations=PIN)
    objs += gang("mid", workers=["b1", "b1"], cards=2)
    objs += gang("filler-b", workers=["b2"], cards=4, annotations=PIN)
    objs += gang("large", workers=[None], cards=8, phase="Pending", node_selector={"pool": "b"})
    snap = load_objects(objs)
    p = plan(snap, target_spec("default/large-pg"))
    assert p.outcome == "RepackRecommended" and p.freed_nodes == ("b1",)
    assert p.target.placements == (("default/large-worker-0", "b1"),)
    check_fit(snap, p)


def test_of_two_nodes_either_enough_the_least_disruptive_is_vacated():
    """n1 holds one pod of a 4-pod gang (evicting it disrupts the whole gang's progress more in
    GANG-3 terms) and n2 a lone 1-pod job: n2 goes."""
    objs = [node(f"n{i}") for i in range(1, 6)]
    objs += gang("wide", workers=["n1", "n3", "n4", "n5"], cards=2)
    objs += gang("lone", workers=["n2"], cards=2)
    objs += gang("large", workers=[None], cards=8, phase="Pending")
    snap = load_objects(objs)
    p = plan(snap, target_spec("default/large-pg"))
    assert p.outcome == "RepackRecommended" and p.freed_nodes == ("n2",)
    check_fit(snap, p)


def test_a_taint_the_target_does_not_tolerate_keeps_its_node_out():
    taint = [{"key": "dedicated", "value": "infer", "effect": "NoSchedule"}]
    objs = [node("t1", taints=taint), node("u1"), node("u2")]
    objs += gang("cheap", workers=["t1"], cards=1, tolerations=[{"key": "dedicated", "operator": "Exists"}])
    objs += gang("dear", workers=["u1", "u1"], cards=2)
    objs += gang("filler", workers=["u2"], cards=3, annotations=PIN)
    objs += gang("large", workers=[None], cards=8, phase="Pending")
    snap = load_objects(objs)
    p = plan(snap, target_spec("default/large-pg"))
    assert p.outcome == "RepackRecommended" and p.freed_nodes == ("u1",)
    check_fit(snap, p)


def test_budget_and_scope_still_apply():
    snap = load_objects(seed())
    p = plan(snap, target_spec("default/large-pg", maxPerRun={"podGroups": 0}))
    assert p.outcome == "TargetCannotFit" and p.moves == ()
    scoped = target_spec("default/large-pg", scope={"nodes": {"exclude": {"names": ["node-01"]}}})
    assert plan(snap, scoped).outcome == "TargetCannotFit"


@pytest.mark.parametrize("spec,field", [
    (target_spec("large-pg"), "spec.target.podGroups[0]"),
    (target_spec("default/large-pg", "default/large-pg"), "spec.target.podGroups[1]"),
    ({"mode": "DryRun", "target": {"podGroups": []}}, "spec.target.podGroups"),
    ({"mode": "DryRun", "target": {"podGroups": ["default/large-pg"]},
      "goals": [{"resource": R, "minFragImprovementPercent": 10}]}, "spec.goals[0].minFragImprovementPercent"),
    ({"mode": "DryRun", "target": {"podGroups": ["default/large-pg"]}, "goals": [{"resource": R}],
      "networkTopology": {"hyperNodeTier": 1}}, "spec.networkTopology"),
    (target_spec("default/nope"), "spec.target.podGroups[0]: PodGroup default/nope is not in the snapshot"),
    (target_spec("default/batch-pg"), "spec.target.podGroups[0]: PodGroup default/batch-pg is not waiting"),
])
def test_bad_targets_name_the_field(spec, field):
    with pytest.raises(SpecError) as e:
        plan(load_objects(seed()), spec)
    assert str(e.value).startswith(field), e.value


def test_two_extended_resources_without_a_goal_are_named():
    objs = seed()
    objs += gang("mixed", workers=[None], cards=1, phase="Pending", extra={"nvidia.com/gpu": "1"})
    with pytest.raises(SpecError, match="huawei.com/ascend-1980, nvidia.com/gpu"):
        plan(load_objects(objs), target_spec("default/mixed-pg", goals=False))


# -- why (RELIEF-1) ---------------------------------------------------------------------------------
from planner.relief import explain, resolve_gang  # noqa: E402
from tests.builders import vcjob  # noqa: E402


def queue(name="default", state="Open", capability=None, allocated=None):
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, **({"capability": capability} if capability else {})},
            "status": {"state": state, **({"allocated": allocated} if allocated else {})}}


def test_why_names_fragmentation_and_the_smallest_repack():
    objs = seed() + [queue()]
    pg = next(o for o in objs if o["kind"] == "PodGroup" and o["metadata"]["name"] == "large-pg")
    pg["status"] = {"phase": "Inqueue", "conditions": [{
        "type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
        "message": "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable"}]}
    d = explain(load_objects(objs), "default/large-pg")
    assert d.cause == "Fragmentation" and (d.need, d.fit_now) == (2, 1)
    assert d.phase == "Inqueue" and d.conditions[0].reason == "NotEnoughResources"
    rows = {(f, n): detail for f, _, n, detail in d.pods[0].verdicts}
    assert rows[("NodeResourcesFit", 2)] == f"{R} free 1 < 4 requested" and ("", 1) in rows
    assert d.fix.startswith("vacate node-01 (2 pod(s) of 1 PodGroup(s) moved)")
    assert d.fix.endswith("kubectl repack plan --for podgroup/large-pg -n default")
    assert d.as_dict()["cause"] == "Fragmentation"


@pytest.mark.parametrize("q,says", [
    (queue(state="Closed"), "queue default is Closed"),
    (queue(capability={R: "16"}, allocated={R: "16"}), f"queue default is at its capability for {R}"),
    (queue(name="other"), "queue default does not exist"),
])
def test_why_puts_the_queue_first_and_suggests_no_repack(q, says):
    d = explain(load_objects(seed() + [q]), "default/large-pg")
    assert d.cause == "Queue" and d.queue_problem.startswith(says) and not d.fix


def test_why_tells_selectors_capacity_and_fits_now_apart():
    objs = seed()
    objs += gang("nowhere", workers=[None], cards=1, phase="Pending", node_selector={"pool": "none"})
    objs += gang("huge", workers=[None, None], cards=8, phase="Pending")
    objs += gang("small", workers=[None], cards=2, phase="Pending")
    snap = load_objects(objs)
    d = explain(snap, "default/nowhere-pg")
    assert d.cause == "NoNodeMatches" and "node affinity/selector" in d.summary and not d.fix
    d = explain(snap, "default/huge-pg")
    assert d.cause == "NotEnoughResources" and not d.fix
    d = explain(snap, "default/small-pg")
    assert d.cause == "FitsNow" and d.fit_now == 1


def test_why_and_for_resolve_vcjob_pod_and_podgroup():
    objs = seed() + [vcjob("large")]
    snap = load_objects(objs)
    assert resolve_gang(snap, "vcjob/large", "default") == "default/large-pg"
    assert resolve_gang(snap, "pod/large-worker-1", "default") == "default/large-pg"
    assert resolve_gang(snap, "pg/large-pg", "default") == "default/large-pg"
    for ref, msg in (("vcjob/nope", "vcjob default/nope: not found"), ("podgroup/x", "podgroup default/x: not found"),
                     ("deployment/x", "deployment/x: expected KIND/NAME"), ("pod/nope", "pod default/nope: not found")):
        with pytest.raises(SpecError, match=msg):
            resolve_gang(snap, ref, "default")
    lone = load_objects([node("n1"), pod("lone", on="n1")])
    with pytest.raises(SpecError, match="pod default/lone: is not in a Volcano gang"):
        resolve_gang(lone, "pod/lone", "default")


def test_a_target_that_fits_but_waits_for_its_closed_queue_says_so():
    p = plan(load_objects(seed(large_cards=3) + [queue(state="Closed")]), target_spec("default/large-pg"))
    assert p.outcome == "TargetAlreadyFits" and "queue default is Closed" in p.message


def test_a_target_its_queue_keeps_out_moves_nothing_even_without_room():
    p = plan(load_objects(seed() + [queue(state="Closed")]), target_spec("default/large-pg"))
    assert p.outcome == "TargetAlreadyFits" and p.moves == ()
    assert "waits for its queue, not for room: queue default is Closed" in p.message


def test_a_gang_without_pods_yet_waits_for_enqueue_and_its_queue_comes_first():
    """Volcano creates a job's pods once its PodGroup is Inqueue: a PodGroup in a closed queue has
    none. why names the queue; a targeted plan moves nothing (TargetAlreadyFits naming the queue, or
    TargetCannotFit when the queue admits it but it has no pod to make room for)."""
    objs = seed() + [queue(name="closed-q", state="Closed"), queue()]
    pg = podgroup("unborn-pg", min_member=1)
    pg["spec"].update(queue="closed-q", minResources={R: "1", "count/pods": "1", "pods": "1"})   # as Volcano writes it
    pg["status"] = {"phase": "Pending"}
    open_pg = podgroup("unborn2-pg", min_member=1)
    open_pg["spec"]["minResources"] = {R: "1"}
    snap = load_objects(objs + [pg, open_pg])
    d = explain(snap, "default/unborn-pg")
    assert d.cause == "Queue" and "queue closed-q is Closed" in d.summary and not d.fix
    assert explain(snap, "default/unborn2-pg").cause == "NotEnqueued"
    p = plan(snap, target_spec("default/unborn-pg", goals=False))
    assert p.outcome == "TargetAlreadyFits" and "queue closed-q is Closed" in p.message and p.resource == R
    p = plan(snap, target_spec("default/unborn2-pg"))
    assert p.outcome == "TargetCannotFit" and "has no pod yet" in p.message and p.moves == ()


def test_the_namespaces_a_targeted_run_may_move_are_those_of_its_resource():
    """The controller asks whether the creator may evict in movable_namespaces(snapshot, spec) before
    planning: a targeted run without goals must name the namespaces of the pods holding the
    target's resource, not none (then nothing would be screened out)."""
    from planner import movable_namespaces
    objs = seed()
    for o in objs:
        if o["kind"] in ("Pod", "PodGroup") and o["metadata"]["name"].startswith("batch"):
            o["metadata"]["namespace"] = "team-b"
    snap = load_objects(objs)
    assert "team-b" in movable_namespaces(snap, target_spec("default/large-pg", goals=False))
