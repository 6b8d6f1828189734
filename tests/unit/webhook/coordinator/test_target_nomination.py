"""RELIEF-3: once a targeted run's planned nodes are vacated, the coordinator hints them to the
target's pending pods. The decision as a table (with the planner's filters on a small live
snapshot), and one tick's I/O order (mark the pod, then pods/status) against fake ports."""
from __future__ import annotations

import copy

import pytest

from tests import builders as kb
from tests.unit.webhook.coordinator.test_coordinator import NOW, LEASE, FakeCluster, FakeElector
from kubectl_repack.api.gates import RELOCATION_RUN_ANNOTATION, TARGET_NODE_ANNOTATION, TARGET_RUN_ANNOTATION
from tests.unit.webhook.builders import PLACEMENT_KEY, sealed_annotations
from webhook.coordinator.loop import Coordinator, PlacementKey
from webhook.coordinator.placement import LiveFit, awaiting_target, decide_target

KEY = PlacementKey(lambda: PLACEMENT_KEY, clock=lambda: 0.0)

R = kb.R
TARGET = "demo/big-pg"
REF = "relief-1/uid-relief-1"


def targeted_run(vacated=("node-a",), phase="Running", target=True, bound=None, placements=None, mode="Execute"):
    status = {"phase": phase, "relocations": [], "plan": {"freedNodes": list(vacated), "summary": {"target": {
        "podGroups": [TARGET], "fits": True, "resource": R,
        "placements": placements if placements is not None else [
            {"pod": "demo/big-0", "node": "node-a"}, {"pod": "demo/big-1", "node": "node-a"}]}}}}
    if target:
        status["result"] = {"fragAfterPercent": 0, "freedNodeCount": len(vacated), "movedCardCount": 2,
                            "metricsVerified": True, "vacatedNodes": [{"node": n} for n in vacated],
                            "target": {"podGroups": [TARGET], "vacatedAt": "2026-07-30T10:00:20Z", "bound": False}}
        if bound is not None:
            status["result"]["target"]["bound"] = bound
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
            "metadata": {"name": "relief-1", "uid": "uid-relief-1",
                         "annotations": sealed_annotations("uid-relief-1", [])},   # as the controller writes it
            "spec": {"mode": mode, "target": {"podGroups": [TARGET]}}, "status": status}


def big(i, on=None, nominated="", marked="", selector=None):
    ann = {}
    if marked:
        ann = {TARGET_RUN_ANNOTATION: REF, TARGET_NODE_ANNOTATION: marked}
    p = kb.pod(f"big-{i}", cards=4, ns="demo", on=on, group="big-pg", phase="Running" if on else "Pending",
               annotations=ann, node_selector=selector or {"pool": "npu"})
    if nominated:
        p["status"]["nominatedNodeName"] = nominated
    return p


def nodes():
    return [kb.node("node-a", cards=8, labels={"pool": "npu"}), kb.node("node-b", cards=8, labels={"pool": "npu"}),
            kb.node("node-c", cards=8, labels={"pool": "other"})]


def pg(min_member=2, phase="Inqueue"):
    g = kb.podgroup("big-pg", ns="demo", min_member=min_member)
    g["status"] = {"phase": phase}
    return g


def decide_on(run, pods, groups=None, extra=()):
    fit = LiveFit(nodes() + list(extra) + [copy.deepcopy(p) for p in pods], R)
    return decide_target(run, pods, {TARGET: pg()} if groups is None else groups, fit)


HOG = kb.pod("hog", cards=6, ns="other", on="node-a")
CASES = [
    # id, run, pods, podgroups, extra live objects, expected nominations, a note that must be there
    ("pending pods go to the vacated node", targeted_run(), [big(0), big(1)], None, (),
     (("demo", "big-0", "node-a"), ("demo", "big-1", "node-a")), None),
    ("bound already: nothing, and it says so", targeted_run(), [big(0, on="node-a"), big(1, on="node-a")], None, (),
     (), "2 of minMember 2 pod(s) bound, nothing to nominate"),
    ("PodGroup Running: nothing", targeted_run(), [big(0), big(1)], {TARGET: pg(phase="Running")}, (),
     (), "nothing to nominate"),
    ("node taken since (no longer fits): no stale hint", targeted_run(), [big(0), big(1)], None, (HOG,),
     (), "no vacated node fits (node-a: NodeResourcesFit"),
    ("room for one pod only: one hint, the other none", targeted_run(), [big(0), big(1)], None,
     (kb.pod("half", cards=4, ns="other", on="node-a"),),
     (("demo", "big-0", "node-a"),), "pod demo/big-1: no vacated node fits"),
    ("a vacated node the pod's filters refuse: no hint", targeted_run(vacated=("node-c",)), [big(0), big(1)], None,
     (), (), "node-c: NodeAffinity"),
    ("the plan's node first, another vacated node next", targeted_run(vacated=("node-b", "node-a")),
     [big(0), big(1)], None, (), (("demo", "big-0", "node-a"), ("demo", "big-1", "node-a")), None),
    ("nominated by this run already: left alone", targeted_run(), [big(0, nominated="node-a", marked="node-a"), big(1)],
     None, (), (("demo", "big-1", "node-a"),), None),
    ("run not targeted: nothing", {**targeted_run(), "spec": {"mode": "Execute"}}, [big(0), big(1)], None, (),
     (), "is not targeted"),
    ("nodes not yet vacated: nothing", targeted_run(target=False), [big(0), big(1)], None, (),
     (), "not vacated yet"),
    ("target deleted: nothing", targeted_run(), [big(0), big(1)], {TARGET: None}, (), (), "was deleted"),
    ("run finished (bound recorded): nothing", targeted_run(bound=True), [big(0), big(1)], None, (), (),
     "not vacated yet"),
    ("run ended: nothing", targeted_run(phase="Succeeded"), [big(0), big(1)], None, (), (),
     "not a Running Execute run"),
    ("a DryRun: nothing", targeted_run(mode="DryRun"), [big(0), big(1)], None, (), (), None),
    ("run gone: nothing", None, [big(0), big(1)], None, (), (), "run not found"),
]


@pytest.mark.parametrize("run,pods,groups,extra,nominations,note", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_target_nomination_decisions(run, pods, groups, extra, nominations, note):
    d = decide_on(run, pods, groups, extra)
    assert d.nominations == nominations, d.notes
    if note is not None:
        assert any(note in n for n in d.notes), d.notes


def test_a_replacement_of_the_target_namespace_is_not_a_target_pod():
    rep = big(1)
    rep["metadata"]["annotations"][RELOCATION_RUN_ANNOTATION] = "relief-1/uid-relief-1"
    assert decide_on(targeted_run(), [big(0), rep]).nominations == (("demo", "big-0", "node-a"),)


def test_awaiting_target_only_between_vacated_and_the_end():
    assert awaiting_target(targeted_run())
    assert not awaiting_target(targeted_run(target=False))
    assert not awaiting_target(targeted_run(bound=True))
    assert not awaiting_target(targeted_run(phase="Failed"))
    assert not awaiting_target(None)


class TargetCluster(FakeCluster):
    def __init__(self, pods, runs, objects=(), groups=None):
        super().__init__(pods, runs, objects)
        self.groups = {("demo", "big-pg"): pg()} if groups is None else groups

    def get_podgroup(self, ns, name):
        return copy.deepcopy(self.groups.get((ns, name)))

    def patch_pod(self, ns, name, ops):
        from tests.unit.webhook.patching import apply_patch

        self.pods[(ns, name)] = apply_patch(self.pods[(ns, name)], ops)
        self.calls.append(("mark", name, copy.deepcopy(self.pods[(ns, name)]["metadata"]["annotations"])))


def test_tick_marks_the_target_pod_then_writes_the_hint_once():
    fake = TargetCluster([big(0), big(1)], [targeted_run()], nodes())
    c = Coordinator(fake, fake, FakeElector(), clock=lambda: NOW, placement_lease=LEASE,
                    placement_key=KEY)
    c.tick()
    assert [x[:2] for x in fake.calls] == [("mark", "big-0"), ("nominate", "big-0"), ("mark", "big-1"),
                                           ("nominate", "big-1")], fake.calls
    assert fake.calls[0][2][TARGET_RUN_ANNOTATION] == REF and fake.calls[0][2][TARGET_NODE_ANNOTATION] == "node-a"
    assert all(fake.pods[("demo", f"big-{i}")]["status"]["nominatedNodeName"] == "node-a" for i in (0, 1))
    assert c.metrics.value("nominations_total") == 2
    fake.calls.clear()
    c.tick()   # nominated already: no second write
    assert fake.calls == []


def test_tick_writes_nothing_for_a_target_that_bound_on_its_own(caplog):
    fake = TargetCluster([big(0, on="node-a"), big(1, on="node-a")], [targeted_run()], nodes())
    c = Coordinator(fake, fake, FakeElector(), clock=lambda: NOW, placement_lease=LEASE,
                    placement_key=KEY)
    with caplog.at_level("INFO", logger="webhook.coordinator"):
        c.tick()
        c.tick()
    assert fake.calls == []
    said = [r.getMessage() for r in caplog.records if "nothing to nominate" in r.getMessage()]
    assert len(said) == 1, said   # said once, not every tick


def test_a_target_pod_bound_before_its_hint_is_skipped_and_the_others_still_get_theirs():
    """Kubernetes >= 1.35 refuses nominatedNodeName on a bound pod (422): that pod took its room on its
    own; the next pod of the target is still hinted in the same tick, and nothing is retried."""
    fake = TargetCluster([big(0), big(1)], [targeted_run()], nodes())
    fake.binds_before_hint = {"big-0": "node-a"}
    c = Coordinator(fake, fake, FakeElector(), clock=lambda: NOW, placement_lease=LEASE,
                    placement_key=KEY)
    c.tick()
    assert [x[:2] for x in fake.calls] == [("mark", "big-0"), ("nominate", "big-0"), ("get", "big-0"),
                                           ("mark", "big-1"), ("nominate", "big-1")], fake.calls
    assert fake.pods[("demo", "big-1")]["status"]["nominatedNodeName"] == "node-a"
    assert c.metrics.value("nominations_total") == 1 and c.metrics.value("nominations_refused_bound_total") == 1
