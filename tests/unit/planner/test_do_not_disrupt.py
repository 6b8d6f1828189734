"""Workload opt-out: `repack.volcano.sh/do-not-disrupt: "true"` (and Karpenter's and cluster-autoscaler's
equivalents) on a pod, its PodGroup or its workload pins the whole PodGroup: the planner never moves
it, its nodes stay occupied, and the verdict of each node it holds names the annotation."""
import copy

import pytest

import planner
from planner.errors import SnapshotError
from tests.builders import gang, node, spec, vcjob

MODELSERVING_API = "workload.serving.volcano.sh/v1alpha1"


def cluster():
    """Three 8-card nodes; gang `a` holds one card on n1 and one on n3 (next to `c`'s 4), `b` 6 on n2.
    Unpinned, the cheapest plan moves a-worker-0 off n1; with `a` pinned, b moves onto n1 instead."""
    return [node("n1"), node("n2"), node("n3"),
            *gang("a", workers=["n1", "n3"], cards=1, min_member=1),
            *gang("b", workers=["n2"], cards=6, min_member=1),
            *gang("c", workers=["n3"], cards=4, min_member=1),
            vcjob("a"), vcjob("b"), vcjob("c")]


def annotate(objs, kind, name, key="repack.volcano.sh/do-not-disrupt", value="true"):
    objs = copy.deepcopy(objs)
    (obj,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    obj["metadata"].setdefault("annotations", {})[key] = value
    return objs


def plan(objs, **kw):
    return planner.plan(planner.load_objects(objs), spec(**kw))


def moved(result):
    return [(m.pod.name, m.from_node, m.to_node) for m in result.moves]


def verdicts(result):
    return {v.node: v for v in result.verdicts}


@pytest.mark.parametrize("kind,name,source", [
    ("Pod", "a-worker-0", "pod default/a-worker-0"),
    ("Pod", "a-worker-1", "pod default/a-worker-1"),      # on n3: it pins its sibling on n1 too
    ("PodGroup", "a-pg", "PodGroup default/a-pg"),
    ("Job", "a", "VCJob default/a"),
], ids=["pod-moved-before", "sibling-pod-on-another-node", "podgroup", "vcjob"])
def test_an_annotated_gang_is_never_moved_something_else_is(kind, name, source):
    unpinned = plan(cluster())
    assert moved(unpinned) == [("a-worker-0", "n1", "n2")] and unpinned.freed_nodes == ("n1",)
    result = plan(annotate(cluster(), kind, name))
    assert not [m for m in result.moves if m.pod.group_name == "a-pg"]
    assert moved(result) == [("b-worker-0", "n2", "n1")] and result.freed_nodes == ("n2",)
    v = verdicts(result)
    for n, p in (("n1", "a-worker-0"), ("n3", "a-worker-1")):
        assert (v[n].vacated, v[n].reason, v[n].pod) == (False, "DoNotDisrupt", f"default/{p}")
        assert f"do-not-disrupt: {source} is annotated repack.volcano.sh/do-not-disrupt=true" in v[n].message
        assert "default/a-pg" in v[n].message and f"default/{p}" in v[n].message
    # The pinned pods stay and keep their nodes occupied (n1 even receives b).
    assert result.cards["n1"] == (8, 1, 7) and result.cards["n3"] == (8, 5, 5)


def test_an_annotated_modelserving_pins_its_podgroup():
    ms = {"apiVersion": MODELSERVING_API, "kind": "ModelServing", "metadata": {"name": "a", "namespace": "default"},
          "spec": {}}
    objs = [o for o in cluster() if not (o["kind"] == "Job" and o["metadata"]["name"] == "a")]
    objs = [o for o in objs if not o["metadata"]["name"].startswith("a-")]
    objs += gang("a", workers=["n1", "n3"], cards=1, min_member=1, owner=("ModelServing", "a", MODELSERVING_API))
    assert moved(plan(objs + [ms])) == [("a-worker-0", "n1", "n2")]
    result = plan(objs + annotate([ms], "ModelServing", "a"))
    assert moved(result) == [("b-worker-0", "n2", "n1")]
    assert verdicts(result)["n1"].message.startswith(
        "do-not-disrupt: ModelServing default/a is annotated repack.volcano.sh/do-not-disrupt=true")


def test_when_every_gang_that_could_move_is_pinned_nothing_moves_and_the_outcome_says_why():
    objs = annotate(annotate(cluster(), "Pod", "a-worker-1"), "PodGroup", "b-pg")
    result = plan(objs)
    assert result.moves == () and result.freed_nodes == ()
    assert result.outcome == "InsufficientImprovement"
    assert "3 DoNotDisrupt" in result.message
    assert {n: v.reason for n, v in verdicts(result).items()} == {n: "DoNotDisrupt" for n in ("n1", "n2", "n3")}
    assert "DoNotDisrupt" in result.above_minimum


@pytest.mark.parametrize("key,value,pins", [
    ("repack.volcano.sh/do-not-disrupt", "true", True),
    ("repack.volcano.sh/do-not-disrupt", "TRUE", True),
    ("repack.volcano.sh/do-not-disrupt", "True", True),
    ("repack.volcano.sh/do-not-disrupt", "false", False),
    ("repack.volcano.sh/do-not-disrupt", "yes", False),
    ("repack.volcano.sh/do-not-disrupt", "", False),
    ("repack.volcano.sh/do-not-disrupt", " true", False),
    ("karpenter.sh/do-not-disrupt", "true", True),
    ("karpenter.sh/do-not-disrupt", "True", True),
    ("karpenter.sh/do-not-disrupt", "false", False),
    ("cluster-autoscaler.kubernetes.io/safe-to-evict", "false", True),
    ("cluster-autoscaler.kubernetes.io/safe-to-evict", "False", True),
    ("cluster-autoscaler.kubernetes.io/safe-to-evict", "true", False),
    ("repack.volcano.sh/do-not-disrupt-later", "true", False),
])
def test_values_that_pin(key, value, pins):
    for kind, name in (("Pod", "a-worker-1"), ("PodGroup", "a-pg"), ("Job", "a")):
        result = plan(annotate(cluster(), kind, name, key, value))
        a_moves = [m for m in result.moves if m.pod.group_name == "a-pg"]
        assert bool(a_moves) is not pins, (kind, key, value)
        reasons = {v.reason for v in result.verdicts}
        assert ("DoNotDisrupt" in reasons) is pins
        if pins:
            assert f"is annotated {key}={value};" in verdicts(result)["n1"].message
    # Both compatible annotations are honoured whatever the other says (any one pins).
    objs = annotate(annotate(cluster(), "Pod", "a-worker-0", "cluster-autoscaler.kubernetes.io/safe-to-evict", "false"),
                    "Pod", "a-worker-0", "karpenter.sh/do-not-disrupt", "false")
    assert verdicts(plan(objs))["n1"].reason == "DoNotDisrupt"


def test_a_finished_member_does_not_pin_its_gang_a_pending_one_does():
    finished = gang("a", workers=["n2"], cards=1, phase="Succeeded")[1]
    finished["metadata"]["name"] = "a-worker-done"
    finished["metadata"]["uid"] = "uid-done"
    finished["metadata"]["annotations"]["repack.volcano.sh/do-not-disrupt"] = "true"
    assert moved(plan(cluster() + [finished])) == [("a-worker-0", "n1", "n2")]
    pending = gang("a", workers=[None], cards=1, phase="Pending")[1]
    pending["metadata"]["name"] = "a-worker-pending"
    pending["metadata"]["uid"] = "uid-pending"
    pending["metadata"]["annotations"]["repack.volcano.sh/do-not-disrupt"] = "true"
    result = plan(cluster() + [pending])
    assert moved(result) == [("b-worker-0", "n2", "n1")]
    assert "pod default/a-worker-pending is annotated" in verdicts(result)["n1"].message


def test_out_of_scope_is_reported_before_the_pin():
    # Out of scope beats the pin (the run's own choice comes first); b is planned as before.
    objs = annotate(cluster(), "PodGroup", "a-pg")
    result = plan(objs, scope={"podGroups": {"exclude": {"names": ["default/a-pg"]}}})
    assert verdicts(result)["n1"].reason == "PodGroupOutOfScope"
    assert verdicts(plan(objs))["n1"].reason == "DoNotDisrupt"
    assert moved(result) == moved(plan(objs)) == [("b-worker-0", "n2", "n1")]


def test_workload_annotations_are_read_and_checked_like_the_pods():
    objs = annotate(annotate(cluster(), "PodGroup", "a-pg", "x", "1"), "Job", "a", "y", "2")
    snap = planner.load_objects(objs)
    assert dict(snap.podgroup_by_key["default/a-pg"].annotations) == {"x": "1"}
    assert dict(snap.vcjob_by_key["default/a"].annotations) == {"y": "2"}
    bad = annotate(cluster(), "PodGroup", "a-pg", value=True)     # YAML `true` unquoted: not a string
    with pytest.raises(SnapshotError, match=r"PodGroup default/a-pg: metadata.annotations.repack.volcano.sh/"
                                            r"do-not-disrupt: expected string, got bool"):
        planner.load_objects(bad)


def test_an_unpinned_cluster_plans_exactly_as_before_with_unrelated_annotations():
    objs = annotate(annotate(cluster(), "PodGroup", "a-pg", "team", "x"), "Job", "a", "owner", "y")
    base, noted = plan(cluster()), plan(objs)
    assert (moved(noted), noted.verdicts, noted.message) == (moved(base), base.verdicts, base.message)
    # ... and the annotations reach the model (so this test is not vacuous).
    assert planner.load_objects(objs).podgroup_by_key["default/a-pg"].annotations["team"] == "x"
