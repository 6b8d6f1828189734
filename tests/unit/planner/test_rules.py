"""Migratability rules (MIG-1..2): each rule's reason code, a movable pod, and MIG-1 through the planner."""
import re
from types import SimpleNamespace

import pytest

import planner
from planner import load_objects
from planner.rules import RULES, RuleContext, check_movable
from planner.scope import Scope
from tests.builders import gang, hypernode, node, pod, podgroup, spec


def pvc(name, volume):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"volumeName": volume}}


def pv(name, **spec_):
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec_}


def verdict(p, others=(), scope=None, not_evictable=None):
    snap = load_objects([p, podgroup("job-pg", labels={"team": "x"}), *others])
    target = next(q for q in snap.pods if q.name == p["metadata"]["name"])
    if not_evictable is None:       # a context without that input (as tests and benchmarks build)
        return check_movable(target, SimpleNamespace(snapshot=snap, scope=Scope.from_spec(scope)))
    return check_movable(target, RuleContext(snap, Scope.from_spec(scope), not_evictable))


MOVABLE = dict(on="n1", group="job-pg")
VOL = [{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]

CASES = [
    ("movable", pod("p", **MOVABLE), (), None, None),
    ("mirror-pod", pod("p", **MOVABLE, annotations={"kubernetes.io/config.mirror": "x"}, owner=("Node", "n1", "v1")),
     (), None, "MirrorPod"),
    ("terminating", pod("p", **MOVABLE, deleting=True), (), None, "PodTerminating"),
    ("default-scheduler", pod("p", **MOVABLE, scheduler="default-scheduler"), (), None, "NotScheduledByVolcano"),
    ("other-scheduler", pod("p", **MOVABLE, scheduler="volcano-custom"), (), None, "NotScheduledByVolcano"),
    ("daemonset", pod("p", **MOVABLE, owner=("DaemonSet", "dev-plugin")), (), None, "DaemonSetPod"),
    ("bare-pod", pod("p", on="n1", annotations={"scheduling.k8s.io/group-name": "job-pg"}), (), None, "NoController"),
    ("owner-not-controller", {**pod("p", **MOVABLE), "metadata": {
        **pod("p", **MOVABLE)["metadata"],
        "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "u"}]}}, (), None,
     "NoController"),
    ("no-group-annotation", pod("p", on="n1", owner=("ReplicaSet", "rs")), (), None, "NoPodGroup"),
    ("podgroup-not-found", pod("p", on="n1", group="gone-pg"), (), None, "NoPodGroup"),
    ("podgroup-in-other-namespace", pod("p", on="n1", group="job-pg", ns="other"), (), None, "NoPodGroup"),
    ("podgroup-excluded-by-name", pod("p", **MOVABLE), (), {"podGroups": {"exclude": {"names": ["default/job-pg"]}}},
     "PodGroupOutOfScope"),
    ("podgroup-not-included", pod("p", **MOVABLE), (), {"podGroups": {"include": {"names": ["default/other"]}}},
     "PodGroupOutOfScope"),
    ("podgroup-included-by-selector", pod("p", **MOVABLE), (),
     {"podGroups": {"include": {"selector": {"matchLabels": {"team": "x"}}}}}, None),
    ("do-not-disrupt", pod("p", **MOVABLE, annotations={"repack.volcano.sh/do-not-disrupt": "true"}), (), None,
     "DoNotDisrupt"),
    ("local-volume", pod("p", **MOVABLE, volumes=VOL), (pvc("data", "v1"), pv("v1", local={"path": "/mnt"})), None,
     "LocalVolume"),
    ("hostpath-volume", pod("p", **MOVABLE, volumes=VOL), (pvc("data", "v1"), pv("v1", hostPath={"path": "/x"})), None,
     "LocalVolume"),
    ("network-volume", pod("p", **MOVABLE, volumes=VOL), (pvc("data", "v1"), pv("v1", nfs={"server": "s", "path": "/"})),
     None, None),
    ("first-objection-wins", pod("p", on="n1", scheduler="default-scheduler", deleting=True), (), None,
     "PodTerminating"),
]


DENIED = {"default": "the run's creator bob may not evict pods in namespace default"}
CASES += [
    ("not-evictable-namespace", pod("p", **MOVABLE), (), None, "EvictionNotAuthorized"),
    ("evictable-namespace", pod("p", **MOVABLE), (), None, None),
]
NOT_EVICTABLE = {"not-evictable-namespace": DENIED, "evictable-namespace": {"other": "may not"}}

# a cycle in the HyperNode tree: vc-scheduler places no gang with network topology (TOPO-1)
CYCLE = (hypernode("a", 1, nodes=["n1"], children=["b"]), hypernode("b", 2, children=["a"]))
CASES += [
    ("topology-gang-broken-tree", pod("p", on="n1", group="topo-pg"),
     (podgroup("topo-pg", topology={"mode": "soft"}),) + CYCLE, None, "TopologyUnavailable"),
    ("plain-gang-broken-tree", pod("p", **MOVABLE), CYCLE, None, None),
    ("topology-gang-sound-tree", pod("p", on="n1", group="topo-pg"),
     (podgroup("topo-pg", topology={"mode": "hard", "highestTierAllowed": 1}), hypernode("a", 1, nodes=["n1"])),
     None, None),
]


@pytest.mark.parametrize("p,others,scope,reason,name", [c[1:] + (c[0],) for c in CASES], ids=[c[0] for c in CASES])
def test_rule_reason(p, others, scope, reason, name):
    v = verdict(p, others, scope, NOT_EVICTABLE.get(name))
    assert (v.reason if v else None) == reason
    if v is not None:
        assert re.search(rf"pod {p['metadata']['namespace']}/p[ :]", v.message), v.message


def test_messages_name_pod_and_cause():
    assert verdict(pod("p", on="n1", group="gone-pg")).message == \
        "pod default/p names PodGroup default/gone-pg, which does not exist"
    assert verdict(pod("p", **MOVABLE, scheduler="default-scheduler")).message == \
        "pod default/p is scheduled by 'default-scheduler', not volcano"
    assert verdict(pod("p", on="n1", owner=("ReplicaSet", "rs"))).message == "pod default/p is not linked to a PodGroup"
    assert verdict(pod("p", **MOVABLE), not_evictable=DENIED).message == \
        "pod default/p: the run's creator bob may not evict pods in namespace default"


def test_every_rule_has_a_case():
    covered = {"mirror_pod", "terminating", "not_volcano", "daemonset_pod", "bare_pod", "no_podgroup", "out_of_scope",
               "do_not_disrupt", "local_volume", "topology_unavailable", "not_evictable"}
    assert {r.__name__ for r in RULES} == covered


# -- MIG-1 through the planner ----------------------------------------------------------------------

def cluster(extra_on_n1=()):
    return load_objects([
        node("n1", cards=8), node("n2", cards=8),
        *gang("a", workers=["n1"], cards=2, min_member=1),
        *gang("b", workers=["n2"], cards=4, min_member=1),
        *extra_on_n1])


NON_R_PODS = [
    ("daemonset-without-cards", [pod("cni", cards=0, on="n1", scheduler="default-scheduler", owner=("DaemonSet", "cni"))]),
    ("bare-pod-without-cards", [pod("debug", cards=0, on="n1", scheduler="default-scheduler")]),
    ("mirror-pod-without-cards", [pod("kube-proxy", cards=0, on="n1", scheduler="default-scheduler",
                                      annotations={"kubernetes.io/config.mirror": "x"})]),
]


@pytest.mark.parametrize("extra", [c[1] for c in NON_R_PODS], ids=[c[0] for c in NON_R_PODS])
def test_pods_without_the_resource_never_block_vacating(extra):
    result = planner.plan(cluster(extra), spec())
    assert list(result.freed_nodes) == ["n1"]
    assert [(m.pod.name, m.from_node, m.to_node) for m in result.moves] == [("a-worker-0", "n1", "n2")]


def test_a_pod_with_the_resource_that_cannot_move_blocks_its_node():
    blocker = pod("held", cards=1, on="n1", scheduler="default-scheduler", owner=("ReplicaSet", "rs"))
    result = planner.plan(cluster([blocker]), spec())
    verdicts = {v.node: v for v in result.verdicts}
    assert "n1" not in result.freed_nodes
    assert (verdicts["n1"].vacated, verdicts["n1"].reason, verdicts["n1"].pod) == \
        (False, "NotScheduledByVolcano", "default/held")
