"""The RepackPolicy reconciler over in-memory ports (POLICY-1, POLICY-2; the e2e in tests/e2e/test_policy.py
runs it in the cluster): what fires, what it creates, what it refuses and why, naming the field."""
from __future__ import annotations

import copy
import datetime as dt

from kubectl_repack.api import policy as P
from kubectl_repack.api.control import Creator
from kubectl_repack.api.times import rfc3339
from tests import builders as b
from tests.unit.engine.fakes import T0, FakeCluster, execute_run, seed_objects
from tests.unit.engine.test_workflow import Store
from webhook.controller.policies import PolicyReconciler

ALICE = Creator("alice", "uid-alice", ("team-a", "system:authenticated"))
POLICY_SINCE = T0 - dt.timedelta(days=1)


class Policies:
    """A PolicyStore in memory."""

    def __init__(self, *objs):
        self.objs = {o["metadata"]["name"]: copy.deepcopy(o) for o in objs}
        self.writes = 0

    def list(self):
        return [copy.deepcopy(o) for o in self.objs.values()]

    def update_status(self, name, uid, mutate):
        obj = self.objs.get(name)
        if obj is None or obj["metadata"]["uid"] != uid:
            return None
        status = copy.deepcopy(obj.get("status") or {})
        mutate(status)
        if status != (obj.get("status") or {}):
            obj["status"] = status
            self.writes += 1
        return copy.deepcopy(obj)

    def status(self, name):
        return self.objs[name].get("status") or {}


def policy(name="auto", created=T0 - dt.timedelta(hours=1), creator=ALICE, **spec):
    template = execute_run()["spec"]
    spec.setdefault("trigger", {"onFragAbovePercent": 20})
    spec.setdefault("runTemplate", {"spec": template})
    meta = {"name": name, "uid": f"uid-{name}", "generation": 1, "creationTimestamp": rfc3339(created)}
    if creator is not None:
        meta["annotations"] = creator.annotations()
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackPolicy", "metadata": meta, "spec": spec}


class Clock:
    def __init__(self, t=T0):
        self.t, self.mono = t, 1000.0

    def now(self):
        return self.t

    def advance(self, seconds):
        self.t += dt.timedelta(seconds=seconds)
        self.mono += seconds


def make(*policies, runs=(), objects=None, policy_since=POLICY_SINCE, interval=60.0):
    clock = Clock()
    store, pols = Store(list(runs)), Policies(*policies)
    cluster = FakeCluster(objects if objects is not None else seed_objects())
    rec = PolicyReconciler(pols, store, cluster, clock.now, lambda: policy_since, interval,
                           monotonic=lambda: clock.mono)

    def tick():
        rec.reconcile(store.list())
    return rec, store, pols, clock, tick


def runs_of(store, name="auto"):
    return sorted(n for n, r in store.runs.items() if r["metadata"].get("labels", {}).get(P.POLICY_LABEL) == name)


def finish(store, name, phase="Succeeded", reason="ExecutionCompleted", at=None):
    st = store.runs[name].setdefault("status", {})
    st.update(phase=phase, completionTime=rfc3339(at or T0),
              conditions=[{"type": "Complete" if phase == "Succeeded" else "Failed", "status": "True", "reason": reason}])


def test_fragmentation_above_the_threshold_creates_one_execute_and_no_second_while_it_runs():
    _, store, pols, clock, tick = make(policy())
    tick()
    created = runs_of(store)
    assert created == [f"auto-{T0:%Y%m%d%H%M%S}"]
    run = store.runs[created[0]]
    assert run["spec"]["mode"] == "Execute"
    assert run["metadata"]["labels"][P.TRIGGER_LABEL] == "onFragAbovePercent"
    assert run["metadata"]["ownerReferences"][0]["uid"] == "uid-auto"
    assert {k: v for k, v in run["metadata"]["annotations"].items() if "creator" in k} == ALICE.annotations()
    st = pols.status("auto")
    assert st["lastEvaluation"]["triggered"] and st["lastEvaluation"]["trigger"] == "onFragAbovePercent"
    assert "fragmentation of " + b.R + " is 33%, above 20%" in st["lastEvaluation"]["message"]
    assert st["inProgress"][0]["name"] == created[0] and st["lastTriggerTime"] == rfc3339(T0)
    assert P.healthy(st)["status"] == "True"
    first_eval = st["lastEvaluationTime"]
    clock.advance(120)
    tick()
    assert runs_of(store) == created                # never two unfinished runs of one policy
    st = pols.status("auto")
    assert st["lastEvaluationTime"] > first_eval
    assert "has not finished" in st["lastEvaluation"]["message"] and not st["lastEvaluation"]["triggered"]


def test_a_foreign_run_owning_up_to_the_policy_does_not_stop_it():
    """Policy squatting: a run somebody else created with an ownerReference to the policy, never
    finishing, is not one of the policy's runs (no controller mark), so the policy still creates its own."""
    squatter = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
                "metadata": {"name": "squatter", "uid": "uid-squatter", "creationTimestamp": rfc3339(T0),
                             "ownerReferences": [{"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackPolicy",
                                                  "name": "auto", "uid": "uid-auto"}]},
                "spec": {"mode": "DryRun"}, "status": {"phase": "Pending"}}
    _, store, pols, clock, tick = make(policy(), runs=[squatter])
    tick()
    assert runs_of(store) == [f"auto-{T0:%Y%m%d%H%M%S}"]
    st = pols.status("auto")
    assert st["lastEvaluation"]["triggered"] and [r["name"] for r in st["inProgress"]] == [runs_of(store)[0]]


def test_compact_layout_does_not_trigger_and_says_why():
    objects = seed_objects(eligible_on=("n2", "n2"))   # n2 holds the gang: nothing to gain
    objects = [o for o in objects if not (o.get("kind") == "Pod" and o["metadata"]["name"] == "fixed-n2")]
    _, store, pols, clock, tick = make(policy(), objects=objects)
    tick()
    assert runs_of(store) == []
    assert "not above 20%" in pols.status("auto")["lastEvaluation"]["message"]


def test_evaluations_are_paced_by_the_interval():
    _, store, pols, clock, tick = make(policy(trigger={"onFragAbovePercent": 90}), interval=60)
    tick()
    writes = pols.writes
    first = pols.status("auto")["lastEvaluationTime"]
    clock.advance(30)
    tick()
    assert pols.status("auto")["lastEvaluationTime"] == first and pols.writes == writes
    clock.advance(30)
    tick()
    assert pols.status("auto")["lastEvaluationTime"] > first


def test_invalid_cron_is_reconcile_failed_naming_the_field_and_creates_nothing():
    _, store, pols, clock, tick = make(policy(trigger={"cronSchedule": "61 * * * *", "onFragAbovePercent": 0}))
    tick()
    assert runs_of(store) == []
    cond = P.healthy(pols.status("auto"))
    assert (cond["status"], cond["reason"]) == ("False", "ReconcileFailed")
    assert cond["message"].startswith("spec.trigger.cronSchedule: '61 * * * *' is not a valid cron schedule")


def test_a_template_the_planner_refuses_creates_nothing_until_fixed():
    template = execute_run()["spec"]
    template["scope"] = {"podGroups": {"include": {"selector": {"matchExpressions": [
        {"key": "app", "operator": "In"}]}}}}            # In without values: the planner refuses it
    _, store, pols, clock, tick = make(policy(runTemplate={"spec": template}))
    tick()
    assert runs_of(store) == []
    cond = P.healthy(pols.status("auto"))
    assert cond["status"] == "False" and "spec.runTemplate.spec.scope.podGroups.include.selector" in cond["message"]
    # fixed: the next evaluation (the generation changed) creates the run
    pols.objs["auto"]["spec"]["runTemplate"] = {"spec": execute_run()["spec"]}
    pols.objs["auto"]["metadata"]["generation"] = 2
    tick()
    assert len(runs_of(store)) == 1 and P.healthy(pols.status("auto"))["status"] == "True"


def test_creator_record_must_be_vouched_for():
    _, store, pols, clock, tick = make(policy(creator=None), policy(name="old", created=POLICY_SINCE - dt.timedelta(1)))
    tick()
    assert store.runs == {}
    assert "no trustworthy creator record on the policy" in P.healthy(pols.status("auto"))["message"]
    assert "created before the admission policy" in P.healthy(pols.status("old"))["message"]


def test_suspend_and_windows_stop_it():
    closed = [{"schedule": "0 2 * * *", "duration": "1h"}]          # T0 is 08:00 UTC
    _, store, pols, clock, tick = make(policy(suspend=True), policy(name="win", windows=closed))
    tick()
    assert store.runs == {}
    assert pols.status("auto")["lastEvaluation"]["message"].startswith("suspended")
    assert "outside every maintenance window" in pols.status("win")["lastEvaluation"]["message"]
    assert "next opens at 2026-07-31T02:00:00Z" in pols.status("win")["lastEvaluation"]["message"]


def test_an_execute_inside_a_window_carries_its_end():
    open_now = [{"schedule": "0 7 * * *", "duration": "2h"}]
    _, store, pols, clock, tick = make(policy(windows=open_now))
    tick()
    (name,) = runs_of(store)
    assert store.runs[name]["metadata"]["annotations"][P.WINDOW_END_ANNOTATION] == "2026-07-30T09:00:00Z"


def test_cron_history_limit_and_a_missed_slot_once():
    p = policy(trigger={"cronSchedule": "*/1 * * * *"}, successfulRunsHistoryLimit=1, failedRunsHistoryLimit=1,
               created=T0 - dt.timedelta(minutes=30))
    _, store, pols, clock, tick = make(p)
    tick()                      # 30 slots missed since creation: one run, not 30
    assert len(runs_of(store)) == 1
    assert pols.status("auto")["lastScheduleTime"] == rfc3339(T0)
    for i in range(3):
        finish(store, runs_of(store)[-1], at=clock.t)
        clock.advance(60)
        tick()
    names = runs_of(store)
    assert len(names) == 2       # the one just created, and one finished (successfulRunsHistoryLimit 1)
    assert names[-1] == f"auto-{clock.t:%Y%m%d%H%M%S}"
    st = pols.status("auto")
    assert st["lastRunStatus"]["phase"] == "Succeeded" and st["lastSuccessfulTime"]
    assert st["nextTriggerTime"] == rfc3339(clock.t + dt.timedelta(minutes=1))


def test_manual_trigger_creates_one_run_per_value():
    p = policy(trigger={"onFragAbovePercent": 99})
    p["metadata"]["annotations"][P.MANUAL_TRIGGER_ANNOTATION] = "2026-07-30T08:00:00Z"
    _, store, pols, clock, tick = make(p)
    tick()
    (name,) = runs_of(store)
    assert store.runs[name]["metadata"]["labels"][P.TRIGGER_LABEL] == "manual"
    finish(store, name)
    clock.advance(1)
    tick()
    assert runs_of(store) == [name]


def test_moved_workloads_are_left_out_of_the_policys_next_run():
    moved = execute_run("by-hand")
    moved["status"] = {"phase": "Succeeded", "startTime": rfc3339(T0 - dt.timedelta(minutes=5)),
                       "relocations": [{"namespace": "demo", "podGroupName": "train-pg",
                                        "eviction": {"phase": "Accepted"}}],
                       "plan": {"moves": [{"namespace": "demo", "podGroupName": "train-pg",
                                           "owner": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                                     "name": "train"}}]}}
    _, store, pols, clock, tick = make(policy(minWorkloadInterval="1h"), runs=[moved])
    tick()
    (name,) = runs_of(store)
    assert store.runs[name]["spec"]["scope"]["podGroups"]["exclude"]["names"] == ["demo/train-pg"]
    assert pols.status("auto")["recentlyMoved"][0]["owner"]["name"] == "train"
    # the run that moved it is deleted (TTL): the record stays in the policy's status until the interval ends
    del store.runs["by-hand"]
    finish(store, name)
    clock.advance(120)
    tick()
    assert pols.status("auto")["recentlyMoved"][0]["run"] == "by-hand"
    clock.advance(3600)
    tick()
    assert "recentlyMoved" not in pols.status("auto")


def test_pending_blocked_gang_gets_a_targeted_run_after_for_seconds():
    objects = [b.node("n1"), b.node("n2")]
    objects += b.gang("small", ns="demo", workers=("n1",), cards=4, labels={"tier": "batch"})
    objects += b.gang("mid", ns="demo", workers=("n2",), cards=2, labels={"tier": "batch"})
    objects += b.gang("big", ns="demo", workers=(None,), cards=8, labels={"tier": "big"})
    spec = {"mode": "Execute", "goals": [{"resource": b.R}]}
    p = policy(trigger={"onPendingBlocked": {"forSeconds": 60, "podGroupSelector": {"matchLabels": {"tier": "big"}}}},
               runTemplate={"spec": spec})
    _, store, pols, clock, tick = make(p, objects=objects)
    tick()
    entry = pols.status("auto")["pendingBlocked"][0]
    assert entry["podGroup"] == "demo/big-pg" and entry["blockedSince"] == rfc3339(T0)
    assert store.runs == {}
    clock.advance(60)
    tick()
    (name,) = runs_of(store)
    assert store.runs[name]["spec"]["target"] == {"podGroups": ["demo/big-pg"]}
    assert store.runs[name]["metadata"]["labels"][P.TRIGGER_LABEL] == "onPendingBlocked"
    # it ends TargetCannotFit: the gang waits forSeconds again, counted from the run's end
    finish(store, name, reason="TargetCannotFit", at=clock.t + dt.timedelta(seconds=10))
    clock.advance(60)
    tick()
    assert runs_of(store) == [name]
    assert pols.status("auto")["pendingBlocked"][0]["blockedSince"] == rfc3339(T0 + dt.timedelta(seconds=70))
    clock.advance(60)        # the next evaluation, 110 s after the run's end
    tick()
    assert len(runs_of(store)) == 2


def test_pending_blocked_evaluations_are_capped_per_cycle():
    objects = [b.node("n1"), b.node("n2")]
    objects += b.gang("small", ns="demo", workers=("n1",), cards=4)
    objects += b.gang("mid", ns="demo", workers=("n2",), cards=2)
    for i in range(6):
        objects += b.gang(f"big{i}", ns="demo", workers=(None,), cards=8, labels={"tier": "big"})
    p = policy(trigger={"onPendingBlocked": {"forSeconds": 600, "podGroupSelector": {"matchLabels": {"tier": "big"}}}},
               runTemplate={"spec": {"mode": "DryRun", "goals": [{"resource": b.R}]}})
    rec, store, pols, clock, tick = make(p, objects=objects)
    rec.max_blocked = 4
    tick()
    assert len(pols.status("auto")["pendingBlocked"]) == 4
    assert "(checked 4 this time)" in pols.status("auto")["lastEvaluation"]["message"]
    clock.advance(60)
    tick()
    assert len(pols.status("auto")["pendingBlocked"]) == 6      # the others' turn came


def test_fragmentation_a_run_could_not_improve_does_not_fire_again_until_it_changes():
    _, store, pols, clock, tick = make(policy())
    tick()
    (name,) = runs_of(store)
    finish(store, name, reason="InsufficientImprovement")
    store.runs[name]["status"]["plan"] = {"summary": {"fragBeforePercent": 33}}
    clock.advance(60)
    tick()
    assert runs_of(store) == [name]
    assert f"run {name} moved nothing at 33%" in pols.status("auto")["lastEvaluation"]["message"]
    store.runs[name]["status"]["plan"]["summary"]["fragBeforePercent"] = 50    # it changed since
    clock.advance(60)
    tick()
    assert len(runs_of(store)) == 2
