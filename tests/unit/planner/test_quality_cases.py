"""Three kinds of loss found against scenarios nobody here wrote (issue 15), each with the best
plan's nodes freed and PodGroups disrupted.

1. Receivers priced on the plan so far (PLAN-2 rule 3): filling a node whose pods belong to a
   PodGroup the plan already disrupts makes a second PodGroup pay for the next node.
2. Idle receivers (PLAN-2 rule 1): two half-full nodes whose taints keep each other's pods out
   can both be vacated onto one idle node: one net node freed.
3. A PodGroup budget (BUDGET-1) spent on the cheapest node first leaves nothing for the nodes
   that share their PodGroups.
"""
from kubectl_repack.api.status import plan_status
from planner import load_objects, plan
from tests.builders import gang, node, spec

PROTECTED = {"repack.volcano.sh/protected": "true"}
UNPROTECTED_ONLY = {"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}}}


def disrupted(p):
    return {f"{m.pod.namespace}/{m.pod.group_name}" for m in p.moves}


def test_receiver_avoids_node_of_a_podgroup_the_plan_disrupts():
    objs = [node(f"node-{i}") for i in (1, 2, 3, 4)]
    objs += gang("job-a", workers=["node-1", "node-2"], cards=4, min_member=2)
    objs += gang("job-b", workers=["node-3", "node-4"], cards=4, min_member=2)
    p = plan(load_objects(objs), spec())
    assert sorted(p.freed_nodes) == ["node-1", "node-2"]
    assert disrupted(p) == {"default/job-a-pg"}


def test_idle_node_not_reoccupied_for_a_single_donor():
    objs = [node("a", taints=[{"key": "team", "value": "a", "effect": "NoSchedule"}]), node("spare"),
            node("c", taints=[{"key": "team", "value": "c", "effect": "NoSchedule"}])]
    objs += gang("ja", workers=["a"], cards=4, min_member=1,
                 tolerations=[{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}])
    objs += gang("pin", workers=["c"], cards=2, labels=PROTECTED,
                 tolerations=[{"key": "team", "operator": "Exists"}])
    p = plan(load_objects(objs), spec(scope=UNPROTECTED_ONLY))
    assert not p.freed_nodes and not p.moves


def test_podgroup_budget_spent_where_it_frees_most_nodes():
    objs = [node("cheap"), node("m1"), node("m2"), node("m3"), node("r1", cards=16), node("r2", cards=16)]
    objs += gang("solo", workers=["cheap"], cards=1, min_member=0)
    for g in ("g2", "g3", "g4"):
        objs += gang(g, workers=["m1", "m2", "m3"], cards=1, min_member=0)
    objs += gang("fill", workers=["r1", "r2"], cards=6, labels=PROTECTED)
    p = plan(load_objects(objs), spec(scope=UNPROTECTED_ONLY, max_podgroups=3))
    assert sorted(p.freed_nodes) == ["m1", "m2", "m3"]
    assert disrupted(p) == {"default/g2-pg", "default/g3-pg", "default/g4-pg"}
