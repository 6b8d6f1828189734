"""The Execute engine's orchestration over in-memory interfaces: the record state machine, the
write-ahead order, resume over every phase, the PDB pre-check, backoff to a deadline, placement
tracking next to the coordinator, and the terminal outcome."""
from __future__ import annotations

import datetime as dt

import pytest

from kubectl_repack.engine import executor
from kubectl_repack.api import run as runapi
from kubectl_repack.api import times
from tests.unit.engine.fakes import (NS, T0, FakeClock, FakeCluster, FakeRuns, engine_for, execute_run,
                                      planned_nodes, seed_objects, started)

PLANNED = {"train-worker-0": "n2", "train-worker-1": "n3"}


def _setup(responses=None, rebind=PLANNED, pdbs=None, **opts):
    clock = FakeClock()
    cluster = FakeCluster(seed_objects(), responses=responses, rebind=rebind, pdbs=pdbs, clock=clock)
    runs = FakeRuns([execute_run()])
    eng, plan = started(cluster, runs, clock, **opts)
    assert planned_nodes(plan) == PLANNED
    return clock, cluster, runs, eng


def _phases(run):
    return [(r["eviction"]["phase"], r["placement"]["phase"]) for r in run["status"]["relocations"]]


def _cond(run, ctype):
    return next((c["status"], c["reason"]) for c in run["status"]["conditions"] if c["type"] == ctype)


def test_records_are_persisted_before_the_first_eviction():
    clock, cluster, runs, eng = _setup()
    seen = []
    cluster.on_evict = lambda name: seen.append(_phases(runs.get("run-1")))
    eng.execute("run-1")
    # At each Eviction call every record exists, and the victim's own record says InProgress.
    assert seen == [[("InProgress", "WaitingForReplacement"), ("Pending", "WaitingForReplacement")],
                    [("Accepted", "WaitingForReplacement"), ("InProgress", "WaitingForReplacement")]]


def test_all_accepted_and_placed_as_planned_completes():
    clock, cluster, runs, eng = _setup()
    run = eng.execute("run-1")
    assert [c[:2] for c in cluster.calls] == [("train-worker-0", "uid-demo-train-worker-0"),
                                              ("train-worker-1", "uid-demo-train-worker-1")]
    assert all(c[2] == 0 for c in cluster.calls)  # spec.eviction.gracePeriodSeconds
    assert _phases(run) == [("Accepted", "Placed")] * 2
    for rec in run["status"]["relocations"]:
        assert rec["placement"]["actualNodeName"] == rec["plannedNodeName"]
        assert rec["placement"]["replacementPodName"] == rec["victimPodName"]
        assert rec["placement"]["replacementPodUID"] != rec["victimPodUID"]
    st = run["status"]
    assert st["phase"] == "Succeeded" and _cond(run, "Complete") == ("True", "ExecutionCompleted")
    assert _cond(run, "Progressing") == ("False", "ExecutionCompleted")
    assert st["result"] == {"fragAfterPercent": 0, "freedNodeCount": 1, "freedNodes": ["n1"],
                            "vacatedNodes": [{"node": "n1"}], "movedCardCount": 2, "metricsVerified": True}
    assert st["completionTime"] == times.rfc3339(clock.now())


def test_alternative_placement_that_still_frees_the_node():
    clock, cluster, runs, eng = _setup(rebind={"train-worker-0": "n3", "train-worker-1": "n2"})
    run = eng.execute("run-1")
    assert run["status"]["phase"] == "Succeeded"
    assert _cond(run, "Complete") == ("True", "ExecutionCompletedWithAlternativePlacement")
    assert run["status"]["result"]["freedNodes"] == ["n1"]


def test_replacements_back_on_the_vacated_node_fail_with_the_truth():
    clock, cluster, runs, eng = _setup(rebind={"train-worker-0": "n1", "train-worker-1": "n1"})
    run = eng.execute("run-1")
    assert run["status"]["phase"] == "Failed"
    status, reason = _cond(run, "Failed")
    assert (status, reason) == ("True", "NodesNotFreed")
    msg = next(c["message"] for c in run["status"]["conditions"] if c["type"] == "Failed")
    assert "n1" in msg and "demo/train-worker-0 on n1" in msg
    assert run["status"]["result"] == {"fragAfterPercent": 33, "freedNodeCount": 0, "movedCardCount": 2,
                                       "metricsVerified": True}


def test_429_is_retried_with_backoff_then_accepted():
    clock, cluster, runs, eng = _setup(responses={"train-worker-0": [429, 429, 201]})
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == ["train-worker-0"] * 3 + ["train-worker-1"]
    assert clock.slept[:2] == [1.0, 2.0]
    assert _phases(run)[0] == ("Accepted", "Placed")


def test_429_until_the_deadline_rejects_and_stops_the_podgroup():
    clock, cluster, runs, eng = _setup(responses={"train-worker-0": [429] * 100},
                                       eviction_retry_timeout=dt.timedelta(seconds=20))
    run = eng.execute("run-1")
    assert {c[0] for c in cluster.calls} == {"train-worker-0"}        # the second victim is never touched
    assert (clock.now() - T0).total_seconds() == pytest.approx(20, abs=0.01)
    first, second = run["status"]["relocations"]
    assert first["eviction"]["phase"] == "Rejected"
    assert "disruption budget" in first["eviction"]["message"] and "still blocked" in first["eviction"]["message"]
    assert second["eviction"]["phase"] == "Rejected"
    assert "stopped moving" in second["eviction"]["message"]
    assert run["status"]["phase"] == "Failed" and _cond(run, "Failed") == ("True", "EvictionBlockedByPDB")
    assert "result" not in run["status"]


@pytest.mark.parametrize("code, phase", [
    pytest.param(404, "IndirectlyRemoved", id="404-pod-gone"),
    pytest.param(409, "IndirectlyRemoved", id="409-uid-precondition"),
    pytest.param(500, "Rejected", id="500-several-pdbs"),
    pytest.param(403, "Rejected", id="403-forbidden"),
])
def test_eviction_answers_map_to_record_phases(code, phase):
    clock, cluster, runs, eng = _setup(responses={"train-worker-0": [code]})
    run = eng.execute("run-1")
    assert run["status"]["relocations"][0]["eviction"]["phase"] == phase
    if phase == "Rejected":
        assert run["status"]["relocations"][1]["eviction"]["phase"] == "Rejected"
        assert len(cluster.calls) == 1


def test_pdb_precheck_rejects_the_whole_group_before_any_eviction():
    pdb = {"metadata": {"name": "keep", "namespace": NS, "generation": 1},
           "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "train"}}},
           "status": {"observedGeneration": 1, "disruptionsAllowed": 1}}
    clock, cluster, runs, eng = _setup(pdbs=[pdb])
    run = eng.execute("run-1")
    assert cluster.calls == []
    for rec in run["status"]["relocations"]:
        assert rec["eviction"] == {"phase": "Rejected", "message":
                                   "PodDisruptionBudget demo/keep allows 1 disruption(s), the PodGroup needs 2; "
                                   "no pod of this PodGroup was evicted"}
    assert _cond(run, "Failed") == ("True", "EvictionBlockedByPDB")


def test_placement_times_out_at_the_execution_deadline():
    clock, cluster, runs, eng = _setup(rebind={"train-worker-0": "n2"},
                                       execution_timeout=dt.timedelta(seconds=30))
    run = eng.execute("run-1")
    assert _phases(run) == [("Accepted", "Placed"), ("Accepted", "TimedOut")]
    assert _cond(run, "Failed") == ("True", "ReplacementTimedOut")
    assert run["status"]["result"]["metricsVerified"] is False
    assert run["status"]["result"]["fragAfterPercent"] == 33  # conservatively plan.fragBeforePercent


def test_coordinator_placement_fields_are_never_overwritten():
    clock, cluster, runs, eng = _setup()

    def coordinator(status):
        rec = status.get("relocations", [{}])[0]
        if rec.get("eviction", {}).get("phase") == "Accepted" and not rec["placement"].get("selectedNodeName"):
            rec["placement"].update(phase="Nominated", selectedNodeName="n2",
                                    replacementPodName="train-worker-0",
                                    replacementPodUID="uid-demo-train-worker-0-r1")
    runs.interleave = coordinator
    run = eng.execute("run-1")
    first = run["status"]["relocations"][0]["placement"]
    assert first["selectedNodeName"] == "n2"                    # the coordinator's field survives
    assert first["replacementPodUID"] == "uid-demo-train-worker-0-r1"
    assert first["phase"] == "Placed" and first["actualNodeName"] == "n2"


def test_live_replan_without_recommendation_evicts_nothing():
    clock = FakeClock()
    cluster = FakeCluster(seed_objects(eligible_on=("n2", "n3")), clock=clock)  # already compact
    cluster.objects = [o for o in cluster.objects if o["metadata"]["name"] != "fixed-n3"]
    runs = FakeRuns([execute_run()])
    eng = engine_for(cluster, runs, clock)
    plan = eng.plan_live(runs.get("run-1"))
    run = eng.start("run-1", plan)
    assert plan.outcome in ("NoFragmentation", "InsufficientImprovement")
    assert run["status"]["phase"] == "Succeeded"
    assert _cond(run, "Complete") == ("True", plan.outcome)
    assert "relocations" not in run["status"] and cluster.calls == []
    assert runapi.is_finished(run)


# ---- resume ---------------------------------------------------------------------------------------

def _crashed_after_first_call(victim_state):
    """A run killed right after the first Eviction call: record 0 InProgress, record 1 Pending.

    victim_state is what apply sees of the victim when it resumes: "running" (the call never
    reached the server), "gone" (deleted, no replacement yet), "replaced" (a same-name pod with a
    new uid) or "terminating" (same uid, deletionTimestamp set). Except for "running", the
    replacement is bound to n2 by the time placement is tracked.
    """
    clock, cluster, runs, eng = _setup()

    def mark(st):
        st["relocations"][0]["eviction"] = {"phase": "InProgress"}
    runs.update_status("run-1", mark)
    if victim_state == "running":
        return clock, cluster, runs, engine_for(cluster, runs, clock)
    victim = cluster.get_pod(NS, "train-worker-0")
    cluster.remove(NS, "train-worker-0")
    cluster.recreate(NS, "train-worker-0", "n2", victim)
    seen = {"gone": None, "replaced": cluster.get_pod(NS, "train-worker-0"),
            "terminating": {**victim, "metadata": {**victim["metadata"],
                                                   "deletionTimestamp": "2026-07-30T08:00:00Z"}}}[victim_state]
    original_get, looked = cluster.get_pod, []

    def get_pod(ns, name):
        if name == "train-worker-0" and not looked:
            looked.append(name)
            return seen            # what the resuming apply finds
        return original_get(ns, name)
    cluster.get_pod = get_pod
    return clock, cluster, runs, engine_for(cluster, runs, clock)


@pytest.mark.parametrize("victim_state", ["gone", "replaced", "terminating"])
def test_resume_inprogress_with_victim_gone_never_evicts_it_again(victim_state):
    clock, cluster, runs, eng = _crashed_after_first_call(victim_state)
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == ["train-worker-1"]
    first = run["status"]["relocations"][0]
    assert first["eviction"]["phase"] == "Accepted"
    assert "when apply resumed" in first["eviction"]["message"]
    assert _phases(run) == [("Accepted", "Placed")] * 2
    assert run["status"]["phase"] == "Succeeded"


def test_resume_inprogress_with_victim_still_running_evicts_it_once_with_its_uid():
    clock, cluster, runs, eng = _crashed_after_first_call("running")
    run = eng.execute("run-1")
    assert [c[:2] for c in cluster.calls] == [("train-worker-0", "uid-demo-train-worker-0"),
                                              ("train-worker-1", "uid-demo-train-worker-1")]
    assert _phases(run) == [("Accepted", "Placed")] * 2


def test_resume_after_everything_was_evicted_only_tracks_and_verifies():
    clock, cluster, runs, eng = _setup()
    eng.execute("run-1")
    calls = list(cluster.calls)
    # Pretend the run was killed before its final write: drop the terminal fields.
    run = runs.runs["run-1"]
    for key in ("result", "completionTime"):
        run["status"].pop(key, None)
    run["status"]["conditions"] = [c for c in run["status"]["conditions"] if c["type"] == "Progressing"]
    run["status"]["conditions"][0].update(status="True", reason="Executing")
    run["status"]["phase"] = "Running"
    run = engine_for(cluster, runs, clock).execute("run-1")
    assert cluster.calls == calls                  # no second eviction
    assert run["status"]["phase"] == "Succeeded"
    assert len(run["status"]["relocations"]) == 2  # no record lost or duplicated


def test_a_finished_run_is_left_alone():
    clock, cluster, runs, eng = _setup()
    done = eng.execute("run-1")
    writes = runs.writes
    assert engine_for(cluster, runs, clock).execute("run-1") == done
    assert runs.writes == writes


def test_a_lost_lease_stops_before_the_next_eviction():
    clock, cluster, runs, eng = _setup()
    lost = []
    cluster.on_evict = lambda name: lost.append(name)
    eng.guard = lambda: "the execute Lease was lost" if lost else None
    with pytest.raises(executor.LeaseLost, match="--resume run-1"):
        eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]
    assert _phases(runs.get("run-1")) == [("Accepted", "WaitingForReplacement"),
                                          ("Pending", "WaitingForReplacement")]


def test_random_name_replacements_of_a_replicaset_are_tracked_by_controller_and_template():
    """A ReplicaSet re-creates an evicted pod under a new random name: the replacement is found by
    the same controller (and pod-template-hash), never confused with a sibling that was running
    before the run started."""
    from tests import builders as b
    from tests.unit.engine.fakes import FakeClock, FakeCluster, FakeRuns, NS, engine_for, execute_run

    rs = ("ReplicaSet", "serve-7d9f", "apps/v1")
    labels = {"app": "serve", "pod-template-hash": "7d9f"}
    objs = [b.node("n1"), b.node("n2"), b.node("n3"),
            b.podgroup("serve-pg", ns=NS, min_member=1, labels={"app": "serve"}, owner=rs)]
    for pod_name, node in (("serve-7d9f-aaaaa", "n1"), ("serve-7d9f-bbbbb", "n1"), ("serve-7d9f-ccccc", "n2")):
        objs.append(b.pod(pod_name, cards=1, on=node, group="serve-pg", ns=NS, owner=rs, labels=labels))
    objs.append(b.pod("fixed-n2", cards=6, on="n2", ns=NS, scheduler="default-scheduler",
                      owner=("ReplicaSet", "fixed-n2-abc")))
    objs.append(b.pod("fixed-n3", cards=7, on="n3", ns=NS, scheduler="default-scheduler",
                      owner=("ReplicaSet", "fixed-n3-abc")))
    for o in objs:
        if o["kind"] == "Pod":
            o["metadata"]["creationTimestamp"] = "2026-07-30T07:00:00Z"
    clock = FakeClock()
    cluster = FakeCluster(objs, clock=clock)
    runs = FakeRuns([execute_run()])
    eng = engine_for(cluster, runs, clock)
    plan = eng.plan_live(runs.get("run-1"))
    assert plan.outcome == "RepackRecommended", plan.message
    planned = {m.pod.name: m.to_node for m in plan.moves}
    assert set(planned) == {"serve-7d9f-aaaaa", "serve-7d9f-bbbbb"}
    cluster.rebind = {victim: (node, victim.replace("7d9f-", "7d9f-new")) for victim, node in planned.items()}
    eng.start("run-1", plan)
    run = eng.execute("run-1")
    assert run["status"]["phase"] == "Succeeded", run["status"]["conditions"]
    for rec in run["status"]["relocations"]:
        pl = rec["placement"]
        assert pl["phase"] == "Placed"
        assert pl["replacementPodName"].startswith("serve-7d9f-new")     # not the old sibling ccccc
        assert pl["actualNodeName"] == rec["plannedNodeName"]
    assert len({rec["placement"]["replacementPodName"] for rec in run["status"]["relocations"]}) == 2
