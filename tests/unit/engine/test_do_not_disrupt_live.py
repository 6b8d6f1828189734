"""A workload that opts out after the plan was made (`repack.volcano.sh/do-not-disrupt: "true"` and the
equivalents planner.model.opt_out honours) is not evicted: the executor reads the live victims before a
PodGroup's first eviction and each victim again right before its own, and asks `opted_out` about the
PodGroup; a refusal is recorded Rejected (a phase of the CRD's enum) saying so, as a refused eviction."""
from __future__ import annotations

import pytest

from tests.unit.engine.fakes import NS
from tests.unit.engine.test_faults import _setup

W0, W1 = "train-worker-0", "train-worker-1"
DND = "repack.volcano.sh/do-not-disrupt"


def annotate(cluster, name, key=DND, value="true"):
    for o in cluster.objects:
        if o["kind"] == "Pod" and o["metadata"]["name"] == name:
            o["metadata"].setdefault("annotations", {})[key] = value


def evictions(run):
    return [(r["eviction"]["phase"], r["eviction"].get("message", "")) for r in run["status"]["relocations"]]


def failed(run):
    return next((c["reason"], c["message"]) for c in run["status"]["conditions"] if c["type"] == "Failed")


@pytest.mark.parametrize("member", [W0, W1])
def test_a_victim_annotated_after_the_plan_keeps_its_whole_podgroup_where_it_is(member):
    clock, cluster, runs, eng = _setup()
    events = []
    eng.on_event = lambda reason, message, warning: events.append((reason, message, warning))
    annotate(cluster, member)                 # the owner opts out between the plan and the eviction
    run = eng.execute("run-1")
    assert cluster.calls == []                # before: both pods evicted
    own = (f"do-not-disrupt: pod {NS}/{member} is annotated {DND}=true since the plan was made; not evicted")
    group = f"{own} (PodGroup {NS}/train-pg is not moved)"
    assert evictions(run) == [("Rejected", own if name == member else group) for name in (W0, W1)]
    assert ("EvictionBlocked", f"PodGroup {NS}/train-pg not moved: {group}", True) in events
    assert run["status"]["phase"] == "Failed" and failed(run)[0] == "EvictionRejected"
    assert "since the plan was made" in failed(run)[1]


def test_a_victim_annotated_while_its_podgroup_is_being_moved_is_not_evicted_and_stops_the_podgroup():
    """Read again right before its own eviction: the rest of the PodGroup stops, as after any
    refused eviction (the run says the PodGroup was left partly evicted)."""
    clock, cluster, runs, eng = _setup()

    def owner_opts_out(name):
        if name == W0:
            annotate(cluster, W1)
    cluster.on_evict = owner_opts_out
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == [W0]
    (first, _), (second, message) = evictions(run)
    assert (first, second) == ("Accepted", "Rejected")
    assert message == f"do-not-disrupt: pod {NS}/{W1} is annotated {DND}=true since the plan was made; not evicted"
    reason, summary = failed(run)
    assert reason == "EvictionRejected" and "left partly evicted" in summary


@pytest.mark.parametrize("key,value,pins", [
    (DND, "TRUE", True),
    ("karpenter.sh/do-not-disrupt", "true", True),
    ("cluster-autoscaler.kubernetes.io/safe-to-evict", "false", True),
    (DND, "false", False),
    ("cluster-autoscaler.kubernetes.io/safe-to-evict", "true", False),
])
def test_the_same_annotations_pin_as_in_the_planner(key, value, pins):
    clock, cluster, runs, eng = _setup()
    annotate(cluster, W1, key, value)
    run = eng.execute("run-1")
    assert (cluster.calls == []) is pins
    assert run["status"]["phase"] == ("Failed" if pins else "Succeeded")


def test_a_podgroup_or_workload_that_opted_out_is_asked_about_once_and_not_evicted():
    clock, cluster, runs, eng = _setup()
    asked = []
    eng.opted_out = lambda ns, group: asked.append((ns, group)) or f"VCJob {ns}/train is annotated {DND}=true"
    run = eng.execute("run-1")
    assert cluster.calls == [] and asked == [(NS, "train-pg")]
    message = (f"do-not-disrupt: VCJob {NS}/train is annotated {DND}=true since the plan was made; not evicted "
               f"(PodGroup {NS}/train-pg is not moved)")
    assert evictions(run) == [("Rejected", message)] * 2


def test_a_same_name_pod_with_another_uid_is_not_the_victim():
    """Only the victim's own annotations count: a same-name pod with another UID does not hold the
    PodGroup back; the victim is gone, as before."""
    clock, cluster, runs, eng = _setup()
    for o in cluster.objects:
        if o["kind"] == "Pod" and o["metadata"]["name"] == W1:
            o["metadata"]["uid"] = "uid-someone-else"
    annotate(cluster, W1)
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == [W0]
    assert [phase for phase, _ in evictions(run)] == ["Accepted", "IndirectlyRemoved"]


def test_each_accepted_eviction_is_told_with_the_victim_as_read_right_before_it():
    clock, cluster, runs, eng = _setup()
    told = []
    eng.on_evicted = lambda record, pod: told.append((record.victim_pod_name, pod["metadata"]["uid"],
                                                      pod["metadata"]["ownerReferences"][0]["kind"]))
    eng.execute("run-1")
    assert told == [(W0, f"uid-{NS}-{W0}", "Job"), (W1, f"uid-{NS}-{W1}", "Job")]
