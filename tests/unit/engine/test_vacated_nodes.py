"""Verification that knows who took the node (EXEC-6 amended).

A planned node is *vacated* when neither the pods that held it before the run nor their
replacements hold the resource any more; a waiting job that the scheduler bound there as soon as it
emptied does not undo that: the run succeeds, `status.result.vacatedNodes[]` names the job in
`takenBy`, and an Event on the RepackRun says so. `status.result.freedNodes` stays what the Go API
means: nodes no pod uses. A replacement, or a pod that was there before the run, still on a planned
node is NodesNotFreed."""
from __future__ import annotations

import datetime as dt

from kubectl_repack.api import times
from kubectl_repack.engine.outcome import decide_outcome, taken_messages, verify
from tests import builders as b
from tests.unit.engine.fakes import (NS, T0, FakeClock, FakeCluster, FakeRuns, execute_run, seed_objects,
                                     started)

PLANNED = {"train-worker-0": "n2", "train-worker-1": "n3"}
RUN_GROUPS = {f"{NS}/train-pg"}


def large_training(node, scheduled_at):
    """The seed's ascend-large-training (2 workers x 4 cards) bound to `node`: a VCJob whose PodGroup
    is named after the job's UID, as Volcano's job controller names it."""
    objs = [b.podgroup("ascend-large-training-5f2c", NS, 2, owner=("Job", "ascend-large-training"))]
    for i in range(2):
        p = b.pod(f"ascend-large-training-worker-{i}", cards=4, on=node, ns=NS, group="ascend-large-training-5f2c",
                  owner=("Job", "ascend-large-training"))
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                      "lastTransitionTime": times.rfc3339(scheduled_at)}]
        objs.append(p)
    return objs


def _run(rebind=PLANNED, arrive_on_n1=True):
    """The seed run; with `arrive_on_n1`, the waiting job binds to n1 once the last victim is evicted."""
    clock = FakeClock()
    cluster = FakeCluster(seed_objects(), rebind=rebind, clock=clock)
    runs = FakeRuns([execute_run()])
    eng, plan = started(cluster, runs, clock)
    assert plan.freed_nodes == ("n1",)
    events = []
    eng.on_event = lambda reason, message, warning: events.append((reason, message, warning))
    evicted = []

    def on_evict(name):
        evicted.append(name)
        if arrive_on_n1 and len(evicted) == 2:
            cluster.objects.extend(large_training("n1", clock.now()))
    cluster.on_evict = on_evict
    run = eng.execute("run-1")
    return run, events


def _cond(run, ctype):
    return next((c["status"], c["reason"], c["message"]) for c in run["status"]["conditions"] if c["type"] == ctype)


def test_a_planned_node_taken_by_a_waiting_job_is_vacated_not_freed_and_the_run_succeeds():
    run, events = _run()
    st = run["status"]
    status, reason, message = _cond(run, "Complete")
    assert (st["phase"], status, reason) == ("Succeeded", "True", "ExecutionCompleted")
    res = st["result"]
    assert res["vacatedNodes"] == [{"node": "n1", "takenBy": [f"{NS}/ascend-large-training"]}]
    assert "freedNodes" not in res and res["freedNodeCount"] == 0    # n1 is in use: not free
    assert res["metricsVerified"] is True
    assert f"vacated 1 node(s) now used by waiting workloads (n1: {NS}/ascend-large-training)" in message
    assert ("VacatedNodeTaken", f"n1 vacated; now used by {NS}/ascend-large-training", False) in events
    assert [e[0] for e in events][-2:] == ["VacatedNodeTaken", "Completed"]


def test_a_node_nobody_took_is_freed_and_vacated_and_no_event_says_taken():
    run, events = _run(arrive_on_n1=False)
    res = run["status"]["result"]
    assert res["freedNodes"] == ["n1"] and res["freedNodeCount"] == 1
    assert res["vacatedNodes"] == [{"node": "n1"}]
    assert "VacatedNodeTaken" not in [e[0] for e in events]


def test_a_replacement_still_on_a_planned_node_is_nodes_not_freed_even_with_a_waiting_job_there():
    run, events = _run(rebind={"train-worker-0": "n1", "train-worker-1": "n3"})
    st = run["status"]
    status, reason, message = _cond(run, "Failed")
    assert (st["phase"], status, reason) == ("Failed", "True", "NodesNotFreed")
    assert "planned node(s) n1 still hold the resource" in message
    assert f"the scheduler bound replacement(s) back onto them: {NS}/train-worker-0 on n1" in message
    assert "vacatedNodes" not in st["result"] and "freedNodes" not in st["result"]
    assert "VacatedNodeTaken" not in [e[0] for e in events]


def test_a_pod_there_before_the_run_still_on_a_planned_node_is_nodes_not_freed():
    """Another workload's pod on the planned node, scheduled before the run started: the run did not
    vacate the node (whatever the plan saw), so the node is not free and not vacated either."""
    start = T0 + dt.timedelta(seconds=10)
    objs = [o for o in seed_objects() if not (o["kind"] == "Pod" and o["spec"].get("nodeName") == "n1")]
    objs += large_training("n1", T0)
    ver = verify(objs, b.R, ["n1"], run_groups=RUN_GROUPS, since=start)
    assert ver.not_freed == ("n1",) and ver.vacated == {} and ver.freed_nodes == ()
    assert ver.held == {"n1": (f"{NS}/ascend-large-training-worker-0", f"{NS}/ascend-large-training-worker-1")}
    out = decide_outcome({"plan": {"freedNodes": ["n1"], "summary": {"fragBeforePercent": 50}}}, ver, False)
    assert out.reason == "NodesNotFreed"
    assert "planned node(s) n1 still hold the resource" in out.message
    assert f"held by {NS}/ascend-large-training-worker-0, {NS}/ascend-large-training-worker-1" in out.message
    assert "vacatedNodes" not in out.result and "freedNodes" not in out.result
    # the same pods scheduled since the start arrived after the node emptied: vacated, taken by the job
    objs = [o for o in seed_objects() if not (o["kind"] == "Pod" and o["spec"].get("nodeName") == "n1")]
    objs += large_training("n1", start)
    ver = verify(objs, b.R, ["n1"], run_groups=RUN_GROUPS, since=start)
    assert ver.not_freed == () and ver.vacated == {"n1": (f"{NS}/ascend-large-training",)}
    assert taken_messages(ver) == [f"n1 vacated; now used by {NS}/ascend-large-training"]


def test_taken_by_names_the_workload_a_user_knows():
    """The PodGroup's owner (a VCJob), else the pod's controller (a ReplicaSet's Deployment), else
    the PodGroup, else the pod; one entry per workload."""
    objs = [b.node("n1"), b.node("n2"), b.node("n3"), b.node("n4")]
    objs += [b.pod("web-7c9d8-x", cards=1, on="n1", ns=NS, owner=("ReplicaSet", "web-7c9d8"),
                   labels={"pod-template-hash": "7c9d8"}),
             b.pod("bare", cards=1, on="n2", ns=NS, group="lonely-pg", owner=("Pod", "x", "v1")),
             b.pod("solo", cards=1, on="n3", ns=NS)]
    objs[-2]["metadata"].pop("ownerReferences")
    ver = verify(objs, b.R, ["n1", "n2", "n3"], run_groups=RUN_GROUPS)
    assert ver.vacated == {"n1": (f"{NS}/web",), "n2": (f"{NS}/lonely-pg",), "n3": (f"{NS}/solo",)}


def test_many_taken_nodes_make_ten_events_and_one_that_counts_the_rest():
    objs = [b.node(f"n{i:02d}") for i in range(13)]
    objs += [b.pod(f"w-{i}", cards=8, on=f"n{i:02d}", ns=NS, group="wait-pg", owner=("Job", "wait")) for i in range(13)]
    ver = verify(objs, b.R, [f"n{i:02d}" for i in range(13)], run_groups=RUN_GROUPS)
    messages = taken_messages(ver)
    assert len(messages) == 11 and messages[0] == f"n00 vacated; now used by {NS}/wait"
    assert messages[-1] == "3 more vacated node(s) now used by waiting workloads (status.result.vacatedNodes)"
