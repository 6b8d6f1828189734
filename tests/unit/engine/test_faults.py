"""Faults and races of the Execute engine (EXEC-2, EXEC-3, EXEC-9), over the in-memory ports:
the execution deadline on resume, the Lease guard inside the 429 retry loop, relocation records
edited through repackruns/status, and a PodGroup left partly evicted said so in status."""
from __future__ import annotations

import copy
import datetime as dt

import pytest

from kubectl_repack.engine import executor
from tests.unit.engine.fakes import NS, FakeClock, FakeCluster, FakeRuns, execute_run, planned_nodes, seed_objects, \
    started

PLANNED = {"train-worker-0": "n2", "train-worker-1": "n3"}


def _setup(responses=None, **opts):
    clock = FakeClock()
    cluster = FakeCluster(seed_objects(), responses=responses, rebind=PLANNED, clock=clock)
    runs = FakeRuns([execute_run()])
    eng, plan = started(cluster, runs, clock, **opts)
    assert planned_nodes(plan) == PLANNED
    return clock, cluster, runs, eng


def _cond(run, ctype):
    return next((c["status"], c["reason"], c["message"]) for c in run["status"]["conditions"] if c["type"] == ctype)


# ---- item 1: the execution deadline ------------------------------------------------------------

def test_resume_after_the_execution_deadline_evicts_nothing_and_says_why():
    clock, cluster, runs, eng = _setup(execution_timeout=dt.timedelta(minutes=10))
    clock.t += dt.timedelta(minutes=11)          # `apply --resume` long after the run was started
    run = eng.execute("run-1")
    assert cluster.calls == []                   # before the fix: both victims evicted, then ReplacementTimedOut
    status, reason, message = _cond(run, "Failed")
    assert (run["status"]["phase"], status, reason) == ("Failed", "True", "ExecutionDeadlineExceeded")
    assert "2 of 2 planned eviction(s) were not started" in message and "demo/train-worker-0" in message
    for rec in run["status"]["relocations"]:
        assert rec["eviction"]["phase"] == "Pending"
        assert "executionDeadline" in rec["eviction"]["message"]


def test_the_deadline_passing_mid_gang_stops_evicting_and_names_the_partly_evicted_group():
    clock, cluster, runs, eng = _setup(execution_timeout=dt.timedelta(minutes=10))
    cluster.on_evict = lambda name: setattr(clock, "t", clock.t + dt.timedelta(minutes=10, seconds=1))
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]
    _, reason, message = _cond(run, "Failed")
    assert reason == "ExecutionDeadlineExceeded"
    assert "1 of 2 planned eviction(s) were not started (demo/train-worker-1)" in message
    assert f"left partly evicted: {NS}/train-pg: 1 of 2 pod(s) evicted" in message


def test_the_lease_guard_is_asked_again_inside_the_429_retry_loop():
    clock, cluster, runs, eng = _setup(responses={"train-worker-0": [429] * 50})
    lost = []
    cluster.on_evict = lambda name: lost.append(name)
    eng.guard = lambda: "the execute Lease could not be renewed" if lost else None
    with pytest.raises(executor.LeaseLost, match="no further eviction was issued"):
        eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]   # before the fix: retried for 60 s
    assert runs.get("run-1")["status"]["relocations"][1]["eviction"]["phase"] == "Pending"


def test_a_pdb_tightened_mid_gang_stops_the_gang_and_status_says_it_is_partly_evicted():
    clock, cluster, runs, eng = _setup(responses={"train-worker-1": [429] * 100},
                                       eviction_retry_timeout=dt.timedelta(seconds=5))
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls][0] == "train-worker-0"
    _, reason, message = _cond(run, "Failed")
    assert reason == "EvictionBlockedByPDB"
    assert f"left partly evicted: {NS}/train-pg: 1 of 2 pod(s) evicted" in message


# ---- item 7: relocation records edited through repackruns/status --------------------------------

def _edit(runs, fn):
    st = runs.runs["run-1"]["status"]
    fn(st["relocations"], st)


@pytest.mark.parametrize("edit, named", [
    pytest.param(lambda r, st: r[1].update(victimPodName="fixed-n2"), "relocations[1] (demo/fixed-n2): the pod "
                 "is not in status.plan.moves", id="arbitrary-pod"),
    pytest.param(lambda r, st: r[0].update(victimPodUID=""), "relocations[0] (demo/train-worker-0): victimPodUID "
                 "is empty", id="empty-uid"),
    pytest.param(lambda r, st: r.pop(), "no record for demo/train-worker-1", id="shortened-list"),
    pytest.param(lambda r, st: r[0].update(namespace="kube-system"), "relocations[0] (kube-system/train-worker-0)",
                 id="other-namespace"),
    pytest.param(lambda r, st: r[0].update(plannedNodeName="n1"), "plannedNodeName n1 is not the plan's toNode n2",
                 id="planned-node-changed"),
    pytest.param(lambda r, st: r.append(copy.deepcopy(r[0])), "a second record for the same pod", id="duplicate"),
    pytest.param(lambda r, st: r.__setitem__(0, "x"), "relocations[0] is not an object", id="not-an-object"),
])
def test_resume_refuses_records_that_do_not_match_the_plan(edit, named):
    clock, cluster, runs, eng = _setup()
    _edit(runs, edit)
    run = eng.execute("run-1")
    assert cluster.calls == []
    status, reason, message = _cond(run, "Failed")
    assert (run["status"]["phase"], reason) == ("Failed", "RelocationRecordsInvalid")
    assert named in message and "nothing is evicted" in message


def test_a_record_replaced_during_the_run_stops_before_its_eviction():
    clock, cluster, runs, eng = _setup()

    def tamper(name):
        if name == "train-worker-0":
            runs.runs["run-1"]["status"]["relocations"][1]["victimPodName"] = "fixed-n3"
            runs.runs["run-1"]["status"]["relocations"][1]["victimPodUID"] = "uid-of-fixed-n3"
    cluster.on_evict = tamper
    with pytest.raises(executor.RecordsChanged, match=r"status.relocations\[1\] is no longer demo/train-worker-1"):
        eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]
