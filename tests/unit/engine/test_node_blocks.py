"""status.result.nodeBlocks (TOPO-3): after an Execute whose spec has networkTopology the
engine counts the goal's blocks on live state (planner.blocks_on), keeps the plan's `before`, and
a run that leaves fewer blocks than its plan promised fails like one that leaves a planned node in
use (NodesNotFreed)."""
from __future__ import annotations

import copy

from kubectl_repack.engine.outcome import Verification, decide_outcome, verify
from tests import builders as b
from tests.unit.engine.fakes import NS, FakeClock, FakeCluster, FakeRuns, execute_run, seed_objects, started

GOAL = {"hyperNodeTier": 1, "nodeBlockSize": 2, "requiredNodeBlocks": 1}
PLANNED = {"train-worker-0": "n2", "train-worker-1": "n3"}


def topology_objects():
    """The engine's seed (n1 holds the movable gang, n2 and n3 are 7/8 full) plus an idle n4, in two
    tier-1 HyperNodes: s0 = {n1, n4}, s1 = {n2, n3}. Freeing n1 makes s0 one block of 2."""
    return seed_objects() + [b.node("n4"), b.hypernode("s0", 1, nodes=["n1", "n4"]),
                             b.hypernode("s1", 1, nodes=["n2", "n3"])]


def blocks_run():
    run = execute_run()
    run["spec"]["networkTopology"] = dict(GOAL)
    return run


def _setup():
    clock = FakeClock()
    cluster = FakeCluster(topology_objects(), rebind=PLANNED, clock=clock)
    runs = FakeRuns([blocks_run()])
    eng, plan = started(cluster, runs, clock)
    assert plan.node_blocks is not None and (plan.node_blocks.before, plan.node_blocks.after) == (0, 1)
    return cluster, runs, eng


def _cond(run, ctype):
    return next((c["status"], c["reason"], c["message"]) for c in run["status"]["conditions"] if c["type"] == ctype)


def test_a_run_that_leaves_the_promised_blocks_records_them_and_completes():
    cluster, runs, eng = _setup()
    run = eng.execute("run-1")
    st = run["status"]
    assert st["plan"]["summary"]["nodeBlocks"] == {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 1}
    assert st["result"]["nodeBlocks"] == {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 1}
    status, reason, message = _cond(run, "Complete")
    assert (st["phase"], status, reason) == ("Succeeded", "True", "ExecutionCompleted")
    assert "1 block(s) of 2 in tier-1 HyperNodes" in message


def test_a_run_whose_block_is_taken_meanwhile_fails_like_a_node_not_freed():
    cluster, runs, eng = _setup()
    # someone else's pod lands on the idle n4 while the run executes: n1 is freed, the block is not
    cluster.objects.append(b.pod("squatter", cards=1, on="n4", ns=NS, scheduler="default-scheduler"))
    run = eng.execute("run-1")
    st = run["status"]
    assert st["result"]["freedNodes"] == ["n1"]
    assert st["result"]["nodeBlocks"] == {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 0}
    status, reason, message = _cond(run, "Failed")
    assert (st["phase"], status, reason) == ("Failed", "True", "NodesNotFreed")
    assert "0 block(s) of 2 free node(s) in tier-1 HyperNodes on live state, the plan promised 1" in message


def test_a_waiting_job_that_takes_the_freed_node_completes_the_run():
    """The scheduler binds the job the block was freed for as soon as the evictions land, before the
    engine checks: n1 then holds R, but of another PodGroup, not the run's own pods. The run did what
    it promised (TOPO-3's e2e: the pending hard-topology job runs in the freed block): n1 is
    vacated and counts in the block, but it is not free (EXEC-6: freedNodes are nodes no pod uses)."""
    cluster, runs, eng = _setup()
    cluster.objects.append(b.pod("waiting-0", cards=8, on="n1", ns=NS, group="waiting-pg", owner=("Job", "waiting")))
    run = eng.execute("run-1")
    st = run["status"]
    status, reason, message = _cond(run, "Complete")
    assert (st["phase"], status, reason) == ("Succeeded", "True", "ExecutionCompleted")
    assert "freedNodes" not in st["result"] and st["result"]["freedNodeCount"] == 0
    assert st["result"]["vacatedNodes"] == [{"node": "n1", "takenBy": [f"{NS}/waiting"]}]
    assert st["result"]["nodeBlocks"] == {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 1}
    assert f"vacated 1 node(s) now used by waiting workloads (n1: {NS}/waiting)" in message


def test_a_planned_node_still_holding_the_runs_own_pod_is_not_freed():
    objs = topology_objects()
    spec = blocks_run()["spec"]
    # n1 still holds the run's gang (replacements bound back, or victims not gone)
    ver = verify(objs, b.R, ["n1"], spec, run_groups={f"{NS}/train-pg"})
    assert ver.not_freed == ("n1",) and ver.taken == {}
    # the same node held by another PodGroup's pod is vacated and taken, not free
    other = [o for o in objs if not (o["kind"] == "Pod" and o["spec"].get("nodeName") == "n1"
                                     and o["metadata"].get("annotations", {}).get("scheduling.k8s.io/group-name") == "train-pg")]
    other.append(b.pod("waiting-0", cards=8, on="n1", ns=NS, group="waiting-pg", owner=("Job", "waiting")))
    ver = verify(other, b.R, ["n1"], spec, run_groups={f"{NS}/train-pg"})
    assert ver.freed_nodes == () and ver.not_freed == () and ver.taken == {"n1": (f"{NS}/waiting-0",)}
    assert ver.vacated == {"n1": (f"{NS}/waiting",)}
    assert ver.node_blocks["after"] == 1


def test_an_idle_node_of_the_block_taken_by_a_pod_scheduled_since_the_start_counts_as_free():
    """The waiting job takes the whole block: the freed n1 and the idle n4. n4 counts as free for the
    blocks only when its pod was scheduled at or after the run's start (a pod of unknown or earlier
    scheduling time is any other workload's)."""
    import datetime as dt
    start = dt.datetime(2026, 12, 2, 5, 0, tzinfo=dt.timezone.utc)

    def waiting(name, node, at):
        p = b.pod(name, cards=8, on=node, ns=NS, group="waiting-pg", owner=("Job", "waiting"))
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": "True", "lastTransitionTime": at}]
        return p
    base = [o for o in topology_objects() if not (o["kind"] == "Pod" and o["spec"].get("nodeName") == "n1"
                                                  and o["spec"].get("schedulerName") == "volcano")]
    spec, groups = blocks_run()["spec"], {f"{NS}/train-pg"}
    after = base + [waiting("w-0", "n1", "2026-12-02T05:00:07Z"), waiting("w-1", "n4", "2026-12-02T05:00:07Z")]
    ver = verify(after, b.R, ["n1"], spec, groups, start)
    assert ver.node_blocks["after"] == 1 and set(ver.taken) == {"n1", "n4"}
    before = base + [waiting("w-0", "n1", "2026-12-02T05:00:07Z"), waiting("w-1", "n4", "2026-12-02T04:59:00Z")]
    ver = verify(before, b.R, ["n1"], spec, groups, start)
    assert ver.node_blocks["after"] == 0 and set(ver.taken) == {"n1"}


def test_without_a_block_goal_the_result_has_no_node_blocks():
    clock = FakeClock()
    cluster = FakeCluster(topology_objects(), rebind=PLANNED, clock=clock)
    runs = FakeRuns([execute_run()])
    eng, plan = started(cluster, runs, clock)
    run = eng.execute("run-1")
    assert run["status"]["phase"] == "Succeeded"
    assert "nodeBlocks" not in run["status"]["result"] and "nodeBlocks" not in run["status"]["plan"]["summary"]


def test_verify_counts_blocks_only_for_a_spec_with_network_topology():
    objs = topology_objects()
    spec = blocks_run()["spec"]
    assert verify(objs, b.R, ["n1"]).node_blocks is None
    assert verify(objs, b.R, ["n1"], execute_run()["spec"]).node_blocks is None
    ver = verify(objs, b.R, ["n1"], spec)
    # on the state before the plan: only n4 of s0 is idle, no block of 2 yet
    assert ver.node_blocks == {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 0} and ver.blocks_problem == ""


def test_hypernodes_gone_from_live_state_count_no_block_and_say_why():
    objs = [o for o in topology_objects() if o["kind"] != "HyperNode"]
    ver = verify(objs, b.R, [], blocks_run()["spec"])
    assert ver.node_blocks is None and "spec.networkTopology.hyperNodeTier" in ver.blocks_problem
    status = {"plan": {"summary": {"fragBeforePercent": 50, "nodeBlocks": {"tier": 1, "nodeBlockSize": 2,
                                                                           "before": 0, "after": 1}}}}
    out = decide_outcome(status, ver, timed_out=False)
    assert out.reason == "NodesNotFreed"
    assert out.result["nodeBlocks"] == {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 0}
    assert "the plan promised 1 (spec.networkTopology.hyperNodeTier" in out.message
    # a planned node still in use and the blocks short: one failure that says both
    ver = verify(objs, b.R, ["n1"], blocks_run()["spec"])
    out = decide_outcome(dict(status, plan=dict(status["plan"], freedNodes=["n1"])), ver, timed_out=False)
    assert out.reason == "NodesNotFreed" and "planned node(s) n1 still hold" in out.message
    assert "; 0 block(s) of 2 free node(s) in tier-1 HyperNodes on live state, the plan promised 1" in out.message


def test_more_blocks_than_promised_is_fine_and_keeps_the_plans_before():
    status = {"plan": {"summary": {"fragBeforePercent": 50, "nodeBlocks": {"tier": 1, "nodeBlockSize": 2,
                                                                           "before": 1, "after": 2}},
                       "freedNodes": []}}
    ver = Verification(0, (), (), 1, 1, True, node_blocks={"tier": 1, "nodeBlockSize": 2, "before": 3, "after": 3})
    out = decide_outcome(copy.deepcopy(status), ver, timed_out=False)
    assert out.reason == "ExecutionCompleted"
    assert out.result["nodeBlocks"] == {"tier": 1, "nodeBlockSize": 2, "before": 1, "after": 3}
