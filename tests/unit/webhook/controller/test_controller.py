"""The RepackRun controller's reconciliation over in-memory ports (the e2e in test_installed.py runs
it in the cluster): what it plans, executes, refuses and leaves alone."""
from __future__ import annotations

import copy
import threading

import datetime as dt

from kubectl_repack.api.control import (EXECUTOR_ANNOTATION, FINALIZER, RECORDS_DIGEST_ANNOTATION, RECORDS_SEAL_ANNOTATION,
                                        Creator, records_digest, seal)
from kubectl_repack.api.times import rfc3339
from tests import builders as b
from tests.unit.engine.fakes import T0, FakeClock, FakeCluster, execute_run, seed_objects
from tests.unit.engine.test_workflow import PLANNED, Mutex, Store
from kubectl_repack.engine.workflow import left_out_line
from webhook.controller.loop import Controller

KEY = b"s" * 32
POLICY_SINCE = T0 - dt.timedelta(days=1)


class Elector:
    duration = 15

    def __init__(self, leader=True):
        self.is_leader = leader
        self.released = False

    def ensure(self):
        return self.is_leader

    def release(self):
        self.released = True


def stamped(run, user="alice", created=T0, groups=("team-a", "system:authenticated")):
    """A run as the admission policy lets it in: the creator annotations of its creating user."""
    run["metadata"].setdefault("annotations", {}).update(Creator(user, f"uid-{user}", tuple(groups)).annotations())
    run["metadata"]["creationTimestamp"] = rfc3339(created)
    return run


def with_plan_and_records(run):
    """`run` with the status a status writer could write into it: a complete, self-consistent plan
    and its records (what the engine itself would persist), but no seal of the controller's."""
    from tests.unit.engine.fakes import engine_for

    scratch = Store([copy.deepcopy(run)])
    clock = FakeClock()
    eng = engine_for(FakeCluster(seed_objects(), rebind=PLANNED, clock=clock), scratch, clock)
    eng.start(run["metadata"]["name"], eng.plan_live(scratch.runs[run["metadata"]["name"]]))
    run["status"] = copy.deepcopy(scratch.runs[run["metadata"]["name"]]["status"])
    return run


def dry_run(name="dry-1"):
    run = execute_run(name)
    run["spec"]["mode"] = "DryRun"
    run["spec"].pop("eviction", None)
    run["metadata"]["uid"] = f"uid-{name}"
    return stamped(run)


def make(runs, leader=True, allowed=True, policy_since=POLICY_SINCE, objects=None, denied_namespaces=()):
    """A controller over in-memory ports. `allowed`: every SubjectAccessReview's answer (or a
    function of how many were asked); `denied_namespaces`: where the creator may never evict."""
    clock = FakeClock()
    cluster = FakeCluster(objects if objects is not None else seed_objects(), rebind=PLANNED, clock=clock)
    store = Store(runs)
    events, patches, asked = [], [], []

    def authorize_as(creator, namespaces):
        asked.append((creator.username, namespaces))
        ok = allowed(len(asked)) if callable(allowed) else allowed
        bad = [ns for ns in namespaces if ns in denied_namespaces] or (namespaces[:1] if not ok else [])
        return f"user {creator.username!r} may not create pods/eviction in namespace {bad[0]!r}" if bad else ""
    ctl = Controller(None, store, cluster, Mutex(), Elector(leader), lambda: KEY,
                     lambda run: (lambda reason, message, warning: events.append((run["metadata"]["name"], reason))),
                     authorize_as, clock=clock, patch_run=lambda name, ops: patch(store, patches, name, ops),
                     policy_since=lambda: policy_since)
    return ctl, store, cluster, events, patches, asked


def patch(store, patches, name, ops, refuse=False):
    """What the API server does with the controller's finalizer patches (unless `refuse`)."""
    patches.append((name, ops))
    for op in ops:
        if op["path"] == "/metadata/finalizers" and op["op"] in ("add", "replace") and name in store.runs \
                and not refuse:
            store.runs[name]["metadata"]["finalizers"] = list(op["value"])


def tick(ctl):
    ctl.tick()
    if ctl.worker is not None:
        ctl.worker.join(timeout=30)


def test_a_new_dry_run_is_planned_with_the_status_plan_save_writes():
    ctl, store, cluster, events, _, _ = make([dry_run()])
    tick(ctl)
    st = store.runs["dry-1"]["status"]
    assert st["phase"] == "Succeeded" and st["plan"]["freedNodes"] == ["n1"]
    assert ("dry-1", "Planned") in events and cluster.calls == []


def test_runs_of_the_plugin_and_finished_runs_are_left_alone():
    local = dry_run("local-1")
    local["metadata"]["annotations"] = {EXECUTOR_ANNOTATION: "local"}
    done = stamped(execute_run("done-1"))
    done["status"] = {"phase": "Succeeded", "conditions": []}
    done["metadata"]["finalizers"] = [FINALIZER]
    before = copy.deepcopy(done["status"])
    ctl, store, cluster, events, patches, _ = make([local, done])
    tick(ctl)
    assert "status" not in store.runs["local-1"]
    assert store.runs["done-1"]["status"] == before and cluster.calls == [] and events == []
    assert [name for name, _ in patches] == ["done-1"]           # only its finalizer is released


def finished(name, ttl, finished_at, finalizer=False):
    run = stamped(execute_run(name))
    run["spec"]["ttlSecondsAfterFinished"] = ttl
    run["status"] = {"phase": "Succeeded", "completionTime": rfc3339(finished_at), "conditions": []}
    if finalizer:
        run["metadata"]["finalizers"] = [FINALIZER]
    return run


def test_every_tick_deletes_finished_runs_past_their_ttl_and_only_those():
    """The controller is the one that deletes expired runs (EXEC-7), on every tick, with no Execute
    under way; a run whose finalizer it still holds is released first and judged on the next tick."""
    expired = finished("old", 60, T0 - dt.timedelta(seconds=61))
    young = finished("young", 60, T0 - dt.timedelta(seconds=30))
    forever = finished("kept", None, T0 - dt.timedelta(days=9))
    forever["spec"].pop("ttlSecondsAfterFinished")
    held = finished("held", 60, T0 - dt.timedelta(seconds=90), finalizer=True)
    ctl, store, cluster, _, patches, _ = make([expired, young, forever, held])
    tick(ctl)
    assert sorted(store.runs) == ["held", "kept", "young"] and cluster.calls == []
    assert [name for name, _ in patches] == ["held"]
    tick(ctl)
    assert sorted(store.runs) == ["kept", "young"]


def test_a_follower_deletes_nothing():
    ctl, store, _, _, _, _ = make([finished("old", 60, T0 - dt.timedelta(seconds=61))], leader=False)
    tick(ctl)
    assert sorted(store.runs) == ["old"]


def test_an_execute_run_of_an_allowed_creator_is_carried_out():
    ctl, store, cluster, events, patches, asked = make([stamped(execute_run())])
    tick(ctl)
    run = store.runs["run-1"]
    st = run["status"]
    assert st["phase"] == "Succeeded" and len(cluster.calls) == 2
    # once for each namespace with movable pods before planning, once for the plan's namespaces
    # before the first eviction, then before each eviction
    assert asked == [("alice", ["demo"])] * 4
    assert patches and patches[0][1][-1]["value"] == [FINALIZER]   # held while it ran
    assert [r for n, r in events if n == "run-1"][:2] == ["Started", "Evicted"]
    assert run["metadata"]["annotations"][RECORDS_SEAL_ANNOTATION] == seal(KEY, "run-uid", st["relocations"])
    # the digest the webhook and the coordinator verify by, written in the same patch (SEC-2)
    assert run["metadata"]["annotations"][RECORDS_DIGEST_ANNOTATION] == records_digest("run-uid", st["relocations"])


def test_a_run_without_a_creator_record_or_with_a_legacy_stamp_is_refused_before_any_eviction():
    legacy = execute_run("legacy")
    legacy["metadata"]["annotations"] = {"repack.volcano.sh/creator": '{"username":"cluster-admin"}',
                                         "repack.volcano.sh/creator-signature": "v1:00"}
    ctl, store, cluster, *_ = make([execute_run("bare"), legacy])
    tick(ctl)
    tick(ctl)
    for name in ("bare", "legacy"):
        st = store.runs[name]["status"]
        assert st["phase"] == "Failed" and "no trustworthy creator record" in st["message"], st
        assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["EvictionNotAuthorized"]
    assert "older kubectl-repack" in store.runs["legacy"]["status"]["message"]
    assert "re-create the run" in store.runs["legacy"]["status"]["message"]
    assert cluster.calls == []


def test_a_stale_creator_record_is_refused_when_the_run_would_start():
    """Groups are read at creation only: an Execute whose record is older than the bound when it
    starts is refused, saying how old and what to do."""
    ctl, store, cluster, *_ = make([stamped(execute_run(), created=T0 - dt.timedelta(hours=2))])
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Failed" and cluster.calls == []
    assert "2h00m old, older than the 1h00m" in st["message"] and "re-create the run" in st["message"], st["message"]


def test_a_run_the_admission_policy_did_not_check_is_refused():
    for since, words in ((None, "is not installed"), (T0 + dt.timedelta(minutes=1), "created before the admission")):
        ctl, store, cluster, *_ = make([stamped(execute_run())], policy_since=since)
        tick(ctl)
        st = store.runs["run-1"]["status"]
        assert st["phase"] == "Failed" and words in st["message"], st["message"]
        assert cluster.calls == []


def test_a_creator_without_eviction_rights_is_refused():
    ctl, store, cluster, _, _, asked = make([stamped(execute_run(), user="bob")], allowed=False)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Failed" and "'bob' (the run's creator) may create pods/eviction in none" in st["message"]
    assert cluster.calls == [] and asked == [("bob", ["demo"])]


def test_a_creator_who_loses_the_right_mid_run_stops_the_run_before_the_next_eviction():
    ctl, store, cluster, _, _, asked = make([stamped(execute_run())], allowed=lambda n: n <= 3)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert len(cluster.calls) == 1 and st["phase"] == "Failed", st
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["EvictionNotAuthorized"]
    assert st["relocations"][1]["eviction"]["phase"] == "Pending"
    assert "may not create pods/eviction" in st["relocations"][1]["eviction"]["message"]


def test_records_written_by_a_status_writer_evict_nothing():
    """Finding 3: someone who may write repackruns/status puts records (and a matching plan) into a
    Pending Execute of an allowed creator; the controller does not take them as its own."""
    victim = with_plan_and_records(stamped(execute_run()))
    forged_seal = copy.deepcopy(victim)
    forged_seal["metadata"]["name"] = "run-2"
    forged_seal["metadata"]["annotations"][RECORDS_SEAL_ANNOTATION] = seal(b"guess" * 8, "run-uid",
                                                                           victim["status"]["relocations"])
    ctl, store, cluster, *_ = make([victim, forged_seal])
    tick(ctl)
    tick(ctl)
    for name in ("run-1", "run-2"):
        st = store.runs[name]["status"]
        assert st["phase"] == "Failed", st
        assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["RelocationRecordsInvalid"]
        assert "nothing was evicted" in st["message"], st["message"]
    assert "carry no seal" in store.runs["run-1"]["status"]["message"]
    assert "do not match their seal" in store.runs["run-2"]["status"]["message"]
    assert cluster.calls == []


def test_a_record_swapped_after_the_seal_is_not_evicted():
    """The seal is checked before every eviction: a record changed between two evictions stops the run."""
    ctl, store, cluster, *_ = make([stamped(execute_run())])

    def swap(pod_name):
        if pod_name == "train-worker-0":
            store.runs["run-1"]["status"]["relocations"][1]["plannedNodeName"] = "n1"
    cluster.on_evict = swap
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert [c for c in cluster.calls] and len(cluster.calls) == 1, cluster.calls
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["RelocationRecordsInvalid"]


def test_a_bad_timeout_annotation_is_an_invalid_spec():
    run = stamped(execute_run())
    run["metadata"]["annotations"]["repack.volcano.sh/execution-timeout"] = "soon"
    ctl, store, cluster, *_ = make([run])
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Failed" and "repack.volcano.sh/execution-timeout" in st["message"]
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["InvalidSpec"]


def test_nothing_happens_without_leadership():
    ctl, store, cluster, events, patches, _ = make([dry_run(), stamped(execute_run())], leader=False)
    tick(ctl)
    assert all("status" not in r for r in store.runs.values()) and cluster.calls == [] and not patches


def test_a_spec_the_crd_accepts_but_the_planner_refuses_ends_invalid_spec_naming_the_field():
    bad_selector = {"include": {"selector": {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}}}
    execute = execute_run("exec-bad")
    execute["spec"]["scope"] = {"nodes": bad_selector}
    dry = dry_run("dry-bad")
    dry["spec"]["scope"] = {"nodes": copy.deepcopy(bad_selector)}
    ctl, store, cluster, *_ = make([stamped(execute), dry])
    tick(ctl)
    for name in ("exec-bad", "dry-bad"):
        st = store.runs[name]["status"]
        assert st["phase"] == "Failed", st
        assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["InvalidSpec"]
        assert "spec.scope.nodes.include.selector.matchExpressions[0].values" in st["message"], st["message"]
    assert cluster.calls == []


class InstantStop(threading.Event):
    """The loop's stop event with waits that return at once, recording (thread name, seconds):
    the renewal period is read from what the loop asked for, not from the wall clock."""

    def __init__(self):
        super().__init__()
        self.waits = []

    def wait(self, timeout=None):
        self.waits.append((threading.current_thread().name, timeout))
        return self.is_set()


def test_leadership_is_renewed_while_a_tick_is_busy():
    """The first tick blocks (planning a large cluster) until the Lease has been renewed three
    times: it returns only because renewals go on beside it, every min(interval, duration/3)."""
    ctl, store, *_ = make([])
    ctl.interval = 0.5
    ctl.stop_event = InstantStop()
    renewals, first_tick_done = [], threading.Event()
    renewed_thrice = threading.Event()

    def ensure():
        renewals.append(first_tick_done.is_set())
        if len(renewals) >= 3:
            renewed_thrice.set()
            first_tick_done.wait(30)       # no spinning once the point is made
        return True

    def busy_list():
        held = renewed_thrice.wait(30)     # 30 s: only a safety net for a broken loop
        first_tick_done.set()
        ctl.stop_event.set()
        return [] if held else None

    ctl.elector.ensure = ensure
    store.list = busy_list
    runner = threading.Thread(target=ctl.run)
    runner.start()
    runner.join(60)
    assert not runner.is_alive()
    assert renewed_thrice.is_set() and renewals[:3] == [False, False, False], renewals
    assert ("leader-election", 0.5) in ctl.stop_event.waits, ctl.stop_event.waits
    assert ctl.elector.released


# ---- poison runs end once (finding 7) and an unauthorized run sets nothing (finding 8) -------------
def test_durations_past_their_bound_end_the_run_as_invalid_spec_instead_of_retrying_forever():
    for annotation, value in (("repack.volcano.sh/execution-timeout", "876000000h"),
                              ("repack.volcano.sh/execute-cooldown", "876000000h"),
                              ("repack.volcano.sh/execute-cooldown", "25h" * 1000)):
        run = stamped(execute_run())
        run["metadata"]["annotations"][annotation] = value
        ctl, store, cluster, *_ = make([run])
        tick(ctl)
        st = store.runs["run-1"]["status"]
        assert st["phase"] == "Failed" and annotation in st["message"], st
        assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["InvalidSpec"]
        assert len(st["message"]) < 400 and cluster.calls == []


def test_a_seal_that_is_not_ascii_is_refused_not_a_crash():
    run = with_plan_and_records(stamped(execute_run()))
    run["metadata"]["annotations"][RECORDS_SEAL_ANNOTATION] = "v1:ä" * 40
    ctl, store, cluster, *_ = make([run])
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Failed" and "do not match their seal" in st["message"] and cluster.calls == []


def test_the_cooldown_of_an_unauthorized_run_is_not_stored():
    run = stamped(execute_run(), user="mallory")
    run["metadata"]["annotations"]["repack.volcano.sh/execute-cooldown"] = "168h"
    ctl, store, cluster, *_ = make([run], allowed=False)
    tick(ctl)
    assert store.runs["run-1"]["status"]["phase"] == "Failed"
    assert all(c[2] is None for c in ctl.lease.calls if c[0] == "try"), ctl.lease.calls
    assert all(len(c) == 3 for c in ctl.lease.calls if c[0] == "release"), ctl.lease.calls   # nothing stored
    # an authorized run's cooldown becomes the setting, when its Lease is released
    run = stamped(execute_run(), user="alice")
    run["metadata"]["annotations"]["repack.volcano.sh/execute-cooldown"] = "20m"
    ctl, store, cluster, *_ = make([run])
    tick(ctl)
    assert store.runs["run-1"]["status"]["phase"] == "Succeeded"
    assert [c[-1] for c in ctl.lease.calls if c[0] == "release"] == [dt.timedelta(minutes=20)], ctl.lease.calls


def test_the_leader_lifts_expired_gates_every_sweep_and_a_follower_does_not():
    for leader, expected in ((True, 1), (False, 0)):
        ctl, *_ = make([], leader=leader)
        calls = []
        ctl.lift_gates = lambda now: calls.append(now) or ["demo/p"]
        ctl.tick()
        ctl.tick()                      # within the sweep interval: not again
        assert len(calls) == expected
        if leader:
            assert calls == [T0]
            ctl._last_gate_sweep -= ctl.gate_sweep_seconds
            ctl.tick()
            assert len(calls) == 2



def test_no_eviction_while_the_finalizer_has_not_landed():
    """Finding 11: a refused finalizer patch (the run changed meanwhile) was swallowed and the run
    went on; now nothing is evicted until the finalizer is on the stored run."""
    ctl, store, cluster, _, patches, _ = make([stamped(execute_run())])
    ctl.patch_run = lambda name, ops: patch(store, patches, name, ops, refuse=True)
    tick(ctl)
    assert cluster.calls == [] and "status" not in store.runs["run-1"] and patches
    ctl.patch_run = lambda name, ops: patch(store, patches, name, ops)
    tick(ctl)
    assert store.runs["run-1"]["status"]["phase"] == "Succeeded" and len(cluster.calls) == 2


def test_dry_runs_are_planned_at_most_so_many_a_minute():
    ctl, store, cluster, *_ = make([dry_run(f"dry-{i}") for i in range(3)])
    ctl.dry_runs_per_minute = 2
    tick(ctl)
    assert sorted(n for n, r in store.runs.items() if "status" in r) == ["dry-0", "dry-1"]
    tick(ctl)
    assert "status" not in store.runs["dry-2"]               # still within the minute
    ctl.clock.t += dt.timedelta(seconds=61)
    tick(ctl)
    assert store.runs["dry-2"]["status"]["phase"] == "Succeeded"


def test_each_eviction_leaves_an_event_on_the_victims_pod_group_and_owner_naming_the_run_and_its_creator():
    ctl, store, cluster, *_ = make([stamped(execute_run(), user="alice")])
    seen = []
    ctl.audit_event = lambda ns, group, owner, reason, message: seen.append((ns, group, owner, reason, message))
    tick(ctl)
    assert store.runs["run-1"]["status"]["phase"] == "Succeeded"
    assert len(seen) == 2 == len(cluster.calls)
    # the victim's controlling owner, as read right before its eviction (the Volcano Job)
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": "uid-train"}
    for (ns, group, owner, reason, message), rec in zip(seen, store.runs["run-1"]["status"]["relocations"]):
        assert (ns, group, owner, reason) == (rec["namespace"], rec["podGroupName"], job, "RepackEvicted")
        assert message == (f"pod {rec['victimPodName']} evicted by RepackRun run-1 (created by alice) to move it to "
                           f"{rec['plannedNodeName']}")


def test_unsealed_records_that_claim_evictions_end_the_run_at_once_instead_of_waiting_for_replacements():
    """Records the controller did not seal that say some pods were already evicted (a status
    writer's, or an older version's) are not tracked until the deadline: the run ends at once, so
    it holds no other run queued behind it."""
    run = with_plan_and_records(stamped(execute_run()))
    run["status"]["relocations"][0]["eviction"] = {"phase": "Accepted"}
    ctl, store, cluster, *_ = make([run])
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Failed" and cluster.calls == [] and ctl.clock.slept == []
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["RelocationRecordsInvalid"]
    assert "nothing further was evicted (the records say 1 pod(s) were: demo/train-worker-0)" in st["message"]


# ---- plan only pods the creator may evict, and say which were left out (SEC-1) ------------------
def two_namespaces():
    """The seed plus team `other`'s one-card gang alone on n4. Unconstrained the plan moves that gang
    (onto n2); without it the training gang in `demo` moves off n1 instead (as PLANNED)."""
    objs = seed_objects() + [b.node("n4")] + b.gang("side", ns="other", workers=["n4"], labels={"app": "side"})
    for o in objs:
        if o["kind"] == "Pod":
            o["metadata"]["creationTimestamp"] = "2026-07-30T07:00:00Z"
    return objs


def recorded(ctl):
    """Every Event the controller posts on a run, as (reason, message)."""
    seen = []
    ctl.events = lambda run: (lambda reason, message, warning: seen.append((reason, message)))
    return seen


def test_a_new_start_plans_only_pods_the_creator_may_evict_and_says_which_were_left_out():
    ctl, store, cluster, _, _, asked = make([stamped(execute_run())], objects=two_namespaces(),
                                            denied_namespaces={"other"})
    seen = recorded(ctl)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    # before: the plan moved other/side-worker-0 and the whole run was refused for it
    assert st["phase"] == "Succeeded", st
    assert [c[0] for c in cluster.calls] == ["train-worker-0", "train-worker-1"]
    assert {r["namespace"] for r in st["relocations"]} == {"demo"}
    # one review per namespace with movable pods, before planning, then as before
    assert asked[:2] == [("alice", ["demo"]), ("alice", ["other"])] and asked[2:] == [("alice", ["demo"])] * 3
    line = left_out_line(["other"], "alice")
    assert ("PodsLeftOut", line) in seen
    assert any(r == "Started" and m.endswith(line) for r, m in seen), seen     # the executing message
    assert st["message"].endswith(line) and any(r == "Completed" and line in m for r, m in seen), st["message"]
    assert store.runs["run-1"]["metadata"]["annotations"][RECORDS_SEAL_ANNOTATION] == seal(
        KEY, "run-uid", st["relocations"])


def test_only_namespaces_with_pods_the_plan_could_move_are_asked_about():
    """The seed's training gang pinned by its owners: only `other` is asked about; denied, the run
    may evict nowhere and ends as before, without a plan."""
    objs = two_namespaces()
    for o in objs:
        if o["kind"] == "PodGroup" and o["metadata"]["name"] == "train-pg":
            o["metadata"]["annotations"] = {"repack.volcano.sh/do-not-disrupt": "true"}
    ctl, store, cluster, _, _, asked = make([stamped(execute_run())], objects=objs, denied_namespaces={"other"})
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert asked == [("alice", ["other"])]
    assert st["phase"] == "Failed" and cluster.calls == [] and "plan" not in st
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["EvictionNotAuthorized"]


def test_a_run_left_with_nothing_to_move_says_which_namespaces_were_left_out():
    """`demo`'s 4-card pods fit nowhere; only moving `other`'s would free a node: left out, the live
    plan recommends nothing, and the message says why."""
    objs = [o for o in two_namespaces() if not o["metadata"]["name"].startswith("train")]
    objs += b.gang("train", ns="demo", workers=["n1", "n1"], cards=4, labels={"app": "train"})
    ctl, store, cluster, _, _, asked = make([stamped(execute_run())], objects=objs, denied_namespaces={"other"})
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Succeeded" and cluster.calls == [] and "relocations" not in st
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Complete"] == ["InsufficientImprovement"]
    assert "1 EvictionNotAuthorized" in st["message"], st["message"]
    assert st["message"].endswith(f"; {left_out_line(['other'], 'alice')}; nothing was evicted"), st["message"]
    assert "namespace other" not in st["message"] and "other/" not in st["message"]


def test_when_the_creator_may_evict_in_none_of_the_namespaces_with_movable_pods_nothing_is_planned():
    ctl, store, cluster, _, _, asked = make([stamped(execute_run(), user="bob")], objects=two_namespaces(),
                                            denied_namespaces={"demo", "other"})
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Failed" and cluster.calls == [] and "relocations" not in st and "plan" not in st
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["EvictionNotAuthorized"]
    assert asked == [("bob", ["demo"]), ("bob", ["other"])]
    assert ("user 'bob' (the run's creator) may create pods/eviction in none of the 2 namespace(s) holding pods "
            "this run could move") in st["message"], st["message"]
    assert "demo" not in st["message"] and "other" not in st["message"]


def test_a_creator_record_that_cannot_authorize_is_refused_before_any_subject_access_review():
    stale = stamped(execute_run("stale"), created=T0 - dt.timedelta(hours=2))
    ctl, store, cluster, _, _, asked = make([execute_run("bare"), stale], objects=two_namespaces())
    tick(ctl)
    tick(ctl)
    for name, words in (("bare", "no trustworthy creator record"), ("stale", "older than the 1h00m")):
        st = store.runs[name]["status"]
        assert st["phase"] == "Failed" and words in st["message"] and st["message"].endswith("nothing was evicted")
    assert asked == [] and cluster.calls == []


def test_a_continued_run_is_not_screened_again():
    """A run with records (e.g. after a fail-over) goes on with its own plan: no review before
    planning, the namespaces still to evict asked once, then each eviction's."""
    ctl, store, cluster, _, _, asked = make([stamped(execute_run())], objects=two_namespaces(),
                                            denied_namespaces={"other"})
    leading = iter([True] * 2 + [False])    # leadership lost after the first eviction (asked twice for each)
    ctl.leading = lambda: None if next(leading, False) else "this controller is no longer the leader"
    tick(ctl)
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]
    asked.clear()
    ctl.leading = lambda: None
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Succeeded", st["message"]
    assert [c[0] for c in cluster.calls] == ["train-worker-0", "train-worker-1"]
    assert asked == [("alice", ["demo"])] * 2


def test_a_podgroup_that_opted_out_since_the_plan_was_made_is_not_evicted():
    ctl, store, cluster, *_ = make([stamped(execute_run())])
    asked = []
    ctl.pod_group_opt_out = lambda ns, group: asked.append((ns, group)) or (
        f"PodGroup {ns}/{group} is annotated repack.volcano.sh/do-not-disrupt=true")
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert cluster.calls == [] and asked == [("demo", "train-pg")]
    assert st["phase"] == "Failed" and [r["eviction"]["phase"] for r in st["relocations"]] == ["Rejected"] * 2
    assert st["relocations"][0]["eviction"]["message"].startswith(
        "do-not-disrupt: PodGroup demo/train-pg is annotated repack.volcano.sh/do-not-disrupt=true since the plan "
        "was made; not evicted")


def test_a_policy_execute_ends_its_evictions_with_its_maintenance_window():
    """POLICY-2: a policy's Execute made inside a window carries the window's end; its execution
    deadline is capped there, and one that could only start after it evicts nothing."""
    from kubectl_repack.api.policy import WINDOW_END_ANNOTATION
    from tests.unit.engine.fakes import FakeClock

    now = FakeClock().now()
    inside = stamped(execute_run())
    inside["metadata"]["annotations"][WINDOW_END_ANNOTATION] = rfc3339(now + dt.timedelta(minutes=3))
    ctl, store, cluster, *_ = make([inside])
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Succeeded" and st["executionDeadline"] == rfc3339(now + dt.timedelta(minutes=3))

    late = stamped(execute_run())
    late["metadata"]["annotations"][WINDOW_END_ANNOTATION] = rfc3339(now - dt.timedelta(seconds=1))
    ctl, store, cluster, *_ = make([late])
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Failed" and not cluster.calls and not st.get("relocations")
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["ExecutionDeadlineExceeded"]
    assert "maintenance window ended" in st["message"]

    bad = stamped(execute_run())
    bad["metadata"]["annotations"][WINDOW_END_ANNOTATION] = "tonight"
    ctl, store, cluster, *_ = make([bad])
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["InvalidSpec"]
    assert WINDOW_END_ANNOTATION in st["message"]
