"""A targeted Execute (spec.target, RELIEF-2) watches its target: once it binds, is deleted or
changes minMember, no further eviction starts and the run says why; a target that runs before
the Execute begins ends TargetAlreadyFits without evicting."""
from __future__ import annotations

import pytest

from kubectl_repack.api.run import Reason
from kubectl_repack.engine import executor
from kubectl_repack.engine.workflow import ApplyRequest, apply_run
from tests import builders as b
from tests.unit.engine.fakes import NS, FakeClock, FakeCluster, FakeRuns, engine_for
from tests.unit.engine.test_workflow import Mutex, Notes, Store

TARGET = f"{NS}/big-pg"
REBIND = {"ta-worker-0": "n2", "tb-worker-0": "n3"}


def objects():
    """n1 holds two one-pod gangs (ta, tb); n2 and n3 are 7/8 full with unmovable pods; the big
    gang (1 pod x 8 cards) waits: the plan moves ta and tb away, PodGroup by PodGroup."""
    objs = [b.node("n1"), b.node("n2"), b.node("n3")]
    objs += b.gang("ta", ns=NS, workers=["n1"]) + b.gang("tb", ns=NS, workers=["n1"])
    for n in ("n2", "n3"):
        objs.append(b.pod(f"fixed-{n}", cards=7, on=n, ns=NS, scheduler="default-scheduler",
                          owner=("ReplicaSet", f"fixed-{n}-abc")))
    objs += b.gang("big", ns=NS, workers=[None], cards=8, phase="Pending")
    for o in objs:
        if o["kind"] == "Pod":
            o["metadata"]["creationTimestamp"] = "2026-07-30T07:00:00Z"
    return objs


def targeted_run(name="run-1"):
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name, "uid": "run-uid"},
            "spec": {"mode": "Execute", "target": {"podGroups": [TARGET]}, "eviction": {"gracePeriodSeconds": 0}}}


def _find(cluster, kind, name):
    return next(o for o in cluster.objects if o["kind"] == kind and o["metadata"]["name"] == name)


def bind(cluster):
    _find(cluster, "Pod", "big-worker-0")["spec"]["nodeName"] = "n1"


def run_phase(cluster):
    _find(cluster, "PodGroup", "big-pg")["status"] = {"phase": "Running"}


def delete(cluster):
    cluster.objects = [o for o in cluster.objects if not (o["kind"] == "PodGroup" and o["metadata"]["name"] == "big-pg")]


def resize(cluster):
    _find(cluster, "PodGroup", "big-pg")["spec"]["minMember"] = 2


def started():
    clock = FakeClock()
    cluster = FakeCluster(objects(), rebind=REBIND, clock=clock)
    runs = FakeRuns([targeted_run()])
    eng = engine_for(cluster, runs, clock)
    plan = eng.plan_live(runs.get("run-1"))
    assert plan.outcome == "RepackRecommended", plan.message
    assert len(plan.moves_by_group()) == 2
    eng.start("run-1", plan)
    return clock, cluster, runs, eng


def _cond(run):
    return next((c["type"], c["reason"], c["message"]) for c in run["status"]["conditions"]
                if c["type"] in ("Complete", "Failed"))


def test_a_target_that_still_waits_lets_every_eviction_start():
    clock, cluster, runs, eng = started()
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == ["ta-worker-0", "tb-worker-0"]
    assert run["status"]["phase"] == "Succeeded" and _cond(run)[1] == "ExecutionCompleted"


@pytest.mark.parametrize("change,phase,says", [
    (bind, "Succeeded", f"the target PodGroup {TARGET} is running (1 of minMember 1 pod(s) bound)"),
    (run_phase, "Succeeded", f"the target PodGroup {TARGET} is running (0 of minMember 1 pod(s) bound, phase Running)"),
    (delete, "Failed", f"the target PodGroup {TARGET} was deleted"),
    (resize, "Failed", f"the target PodGroup {TARGET} changed minMember from 1 to 2"),
], ids=["bound", "phase-running", "deleted", "min-member"])
def test_a_target_change_after_the_first_podgroup_stops_further_evictions(change, phase, says):
    clock, cluster, runs, eng = started()
    events = []
    eng.on_event = lambda reason, message, warning: events.append((reason, message))
    first = []

    def on_evict(name):
        if not first:
            first.append(name)
            change(cluster)
    cluster.on_evict = on_evict
    run = eng.execute("run-1")
    assert len(cluster.calls) == 1                 # the second PodGroup was never evicted
    st = run["status"]
    assert st["phase"] == phase
    ctype, reason, message = _cond(run)
    assert reason == Reason.TARGET_CHANGED == "TargetChanged"
    assert message.startswith(says) and "no further eviction started: 1 of 2 planned eviction(s) done" in message
    kept = [r for r in st["relocations"] if r["eviction"]["phase"] == "Pending"]
    assert len(kept) == 1 and kept[0]["eviction"]["message"].startswith(f"not evicted: {says}")
    assert any(r == "TargetChanged" for r, _ in events)
    # the evicted pod's replacement was still followed
    evicted = [r for r in st["relocations"] if r["eviction"]["phase"] == "Accepted"]
    assert len(evicted) == 1 and evicted[0]["placement"]["phase"] == "Placed"


def test_a_change_before_the_first_eviction_evicts_nothing():
    clock, cluster, runs, eng = started()
    bind(cluster)
    run = eng.execute("run-1")
    assert cluster.calls == []
    assert run["status"]["phase"] == "Succeeded" and _cond(run)[1] == "TargetChanged"


def test_a_resumed_run_compares_minmember_with_what_it_first_sees():
    clock, cluster, runs, _ = started()
    eng = engine_for(cluster, runs, clock)   # a new process: the plan's minMember is not in memory
    first = []

    def on_evict(name):
        if not first:
            first.append(name)
            resize(cluster)
    cluster.on_evict = on_evict
    run = eng.execute("run-1")
    assert len(cluster.calls) == 1 and _cond(run)[1] == "TargetChanged"


def test_an_untargeted_run_never_reads_podgroups(monkeypatch):
    clock, cluster, runs, eng = started()
    st = runs.runs["run-1"]
    st["spec"] = dict(st["spec"], target=None)
    del st["spec"]["target"]
    monkeypatch.setattr(cluster, "get_podgroup", lambda ns, name: pytest.fail("read a PodGroup"))
    run = eng.execute("run-1")
    assert len(cluster.calls) == 2 and run["status"]["phase"] == "Succeeded"


def _apply(cluster, clock):
    store, mutex, notes = Store(), Mutex(), Notes()
    result = apply_run(ApplyRequest("run-1", targeted_run()), store, mutex, cluster, cluster, notes, clock=clock,
                       me="run-1@h/1")
    return result.run, mutex


@pytest.mark.parametrize("change", [bind, run_phase], ids=["bound", "phase-running"])
def test_a_target_running_before_the_execute_began_ends_target_already_fits(change):
    clock = FakeClock()
    cluster = FakeCluster(objects(), rebind=REBIND, clock=clock)
    change(cluster)
    run, mutex = _apply(cluster, clock)
    st = run["status"]
    assert cluster.calls == [] and not st.get("relocations")
    assert st["phase"] == "Succeeded"
    ctype, reason, message = _cond(run)
    assert (ctype, reason) == ("Complete", Reason.TARGET_FITS)
    assert f"the target PodGroup {TARGET} is running" in message and "nothing was evicted" in message
    assert mutex.calls[-1] == ("release", "run-1", None)      # nothing evicted: no cooldown


def test_a_target_gone_before_the_execute_began_fails_saying_so():
    clock = FakeClock()
    cluster = FakeCluster(objects(), rebind=REBIND, clock=clock)
    delete(cluster)
    run, _ = _apply(cluster, clock)
    assert cluster.calls == [] and run["status"]["phase"] == "Failed"
    assert _cond(run)[1:] == ("TargetChanged", f"the target PodGroup {TARGET} was deleted before the Execute "
                                                "began; nothing was evicted")


def test_a_target_that_starts_running_between_the_check_and_the_plan_still_ends_target_already_fits(monkeypatch):
    clock = FakeClock()
    cluster = FakeCluster(objects(), rebind=REBIND, clock=clock)
    snapshot_objects = cluster.snapshot_objects

    def bound_by_then():   # the planner's snapshot is read after the target check: it binds in between
        bind(cluster)
        return snapshot_objects()
    monkeypatch.setattr(cluster, "snapshot_objects", bound_by_then)
    run, _ = _apply(cluster, clock)
    assert cluster.calls == [] and run["status"]["phase"] == "Succeeded"
    assert _cond(run)[1] == Reason.TARGET_FITS


def test_the_workflow_runs_a_waiting_target_to_completion():
    clock = FakeClock()
    cluster = FakeCluster(objects(), rebind=REBIND, clock=clock)
    run, _ = _apply(cluster, clock)
    assert len(cluster.calls) == 2 and run["status"]["phase"] == "Succeeded"


def test_target_change_is_pure_and_reads_only_what_it_is_given():
    pg = b.podgroup("big-pg", ns=NS, min_member=2)
    pods = [b.pod("w0", group="big-pg", ns=NS, on="n1"), b.pod("w1", group="big-pg", ns=NS, on=None),
            b.pod("w2", group="big-pg", ns=NS, on="n1", phase="Failed"), b.pod("x", group="other-pg", ns=NS, on="n1")]
    assert executor.target_change(TARGET, pg, pods, 2) == ("", "")
    assert executor.target_change(TARGET, pg, pods, None) == ("", "")
    assert executor.target_change(TARGET, pg, pods + [b.pod("w3", group="big-pg", ns=NS, on="n2")], 2)[0] == "bound"
    assert executor.target_change(TARGET, pg, pods, 3)[0] == "resized"
    assert executor.target_change(TARGET, None, pods, 2)[0] == "deleted"


# --- RELIEF-3: once the planned nodes are vacated, wait (bounded) for the target; report, never fail --
class HookClock(FakeClock):
    """A clock whose first sleep after `arm()` runs `hook` (the coordinator and vc-scheduler acting
    while the executor waits for the target)."""

    def __init__(self):
        super().__init__()
        self.hook = None

    def sleep(self, seconds):
        super().sleep(seconds)
        if self.hook:
            hook, self.hook = self.hook, None
            hook()


def nominate_and_bind(cluster, clock, nominate=True, after=3):
    """What the coordinator and vc-scheduler would do: mark and hint big-worker-0 to n1, then bind
    it there `after` seconds later (its PodScheduled condition says when)."""
    from kubectl_repack.api.gates import TARGET_NODE_ANNOTATION, TARGET_RUN_ANNOTATION
    from kubectl_repack.api.times import rfc3339
    import datetime as dt

    pod = _find(cluster, "Pod", "big-worker-0")
    if nominate:
        pod["metadata"]["annotations"].update({TARGET_RUN_ANNOTATION: "run-1/run-uid", TARGET_NODE_ANNOTATION: "n1"})
    pod["spec"]["nodeName"] = "n1"
    pod["status"] = {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(clock.now() + dt.timedelta(seconds=after))}]}


def started_with(clock):
    cluster = FakeCluster(objects(), rebind=REBIND, clock=clock)
    runs = FakeRuns([targeted_run()])
    eng = engine_for(cluster, runs, clock)
    eng.start("run-1", eng.plan_live(runs.get("run-1")))
    return cluster, runs, eng


def test_the_result_says_the_target_was_bound_how_long_after_and_what_was_nominated():
    clock = HookClock()
    cluster, runs, eng = started_with(clock)
    interim = []
    events = []
    eng.on_event = lambda reason, message, warning: events.append((reason, message, warning))

    def on_wait():
        interim.append(runs.get("run-1")["status"]["result"]["target"])
        nominate_and_bind(cluster, clock)
    clock.hook = None
    original = eng._update

    def arm_after_vacated(name, mutate):   # the first sleep after the interim write is the wait
        out = original(name, mutate)
        if "target" in (out.status.get("result") or {}) and not interim and clock.hook is None:
            clock.hook = on_wait
        return out
    eng._update = arm_after_vacated
    run = eng.execute("run-1")
    st = run["status"]
    assert interim and interim[0]["bound"] is False and interim[0]["podGroups"] == [TARGET] and interim[0]["vacatedAt"]
    assert st["phase"] == "Succeeded" and _cond(run)[1] == "ExecutionCompleted"
    target = st["result"]["target"]
    assert target["bound"] is True and target["podGroups"] == [TARGET]
    assert target["nominated"] == [{"pod": f"{NS}/big-worker-0", "node": "n1"}]
    assert 3 <= target["boundAfterSeconds"] <= 5, target
    assert target["message"] == f"bound {target['boundAfterSeconds']:g} s after the nodes were vacated " \
                                "(1 pod nominated to n1)"
    assert st["message"].endswith(f"; target {TARGET}: {target['message']}")
    assert ("TargetBound", f"target {TARGET}: {target['message']}", False) in events


def test_a_target_that_is_not_bound_in_time_is_reported_and_the_run_still_succeeds():
    clock = HookClock()
    cluster, runs, eng = started_with(clock)
    t0 = clock.now()
    run = eng.execute("run-1")
    st = run["status"]
    assert st["phase"] == "Succeeded" and _cond(run)[1] == "ExecutionCompleted"   # judged on vacated nodes
    target = st["result"]["target"]
    assert target["bound"] is False and "boundAt" not in target and "nominated" not in target
    assert target["message"].startswith("not bound within 30 s after the nodes were vacated (nothing nominated)")
    assert clock.now() - t0 >= executor.Options().target_wait   # it did wait the placement lease


def test_a_target_bound_on_its_own_before_the_check_says_nothing_was_nominated():
    clock = HookClock()
    cluster, runs, eng = started_with(clock)
    evicted = []

    def on_evict(name):
        evicted.append(name)
        if len(evicted) == 2:   # the last victim leaves: vc-scheduler binds the target at once
            nominate_and_bind(cluster, clock, nominate=False, after=1)
    cluster.on_evict = on_evict
    run = eng.execute("run-1")
    target = run["status"]["result"]["target"]
    assert target["bound"] is True and "nominated" not in target
    assert target["message"].endswith("on its own before any nomination (nothing nominated)"), target
    assert clock.slept.count(1.0) <= 3   # no 30 s wait for a target that is bound


def test_an_untargeted_run_has_no_target_result():
    clock = HookClock()
    cluster, runs, eng = started_with(clock)
    del runs.runs["run-1"]["spec"]["target"]
    run = eng.execute("run-1")
    assert "target" not in run["status"]["result"]


def test_a_resumed_run_keeps_the_moment_the_nodes_were_vacated():
    clock = HookClock()
    cluster, runs, eng = started_with(clock)
    first = eng.execute("run-1")
    vacated_at = first["status"]["result"]["target"]["vacatedAt"]
    runs.runs["run-1"]["status"]["phase"] = "Running"     # as if the process died during the wait
    for c in runs.runs["run-1"]["status"]["conditions"]:
        if c["type"] in ("Complete", "Failed"):
            c["status"] = "False"
    clock.sleep(120)
    again = engine_for(cluster, runs, clock)
    before = clock.now()
    run = again.execute("run-1")
    assert clock.now() - before >= executor.Options().target_wait    # it did wait for the target again
    assert run["status"]["result"]["target"]["vacatedAt"] == vacated_at
