"""The RepackRun controller's reconciliation over in-memory ports (the e2e in test_installed.py runs
it in the cluster): what it plans, executes, refuses and leaves alone."""
from __future__ import annotations

import copy

from kubectl_repack.api.control import EXECUTOR_ANNOTATION, FINALIZER, Creator, stamp_annotations
from tests.unit.execute.fakes import FakeClock, FakeCluster, execute_run, seed_objects
from tests.unit.execute.test_workflow import PLANNED, Mutex, Store
from webhook.controller import Controller

KEY = b"s" * 32


class Elector:
    duration = 15

    def __init__(self, leader=True):
        self.is_leader = leader
        self.released = False

    def ensure(self):
        return self.is_leader

    def release(self):
        self.released = True


def stamped(run, user="alice"):
    run["metadata"].setdefault("annotations", {}).update(
        stamp_annotations(KEY, run["metadata"]["name"], run["spec"], Creator(user)))
    return run


def dry_run(name="dry-1"):
    run = execute_run(name)
    run["spec"]["mode"] = "DryRun"
    run["spec"].pop("eviction", None)
    run["metadata"]["uid"] = f"uid-{name}"
    return run


def make(runs, leader=True, allowed=True):
    clock = FakeClock()
    cluster = FakeCluster(seed_objects(), rebind=PLANNED, clock=clock)
    store = Store(runs)
    events, patches, asked = [], [], []

    def authorize_as(creator, namespaces):
        asked.append((creator.username, namespaces))
        return "" if allowed else f"user {creator.username!r} may not create pods/eviction in namespace {namespaces[0]!r}"
    ctl = Controller(None, store, cluster, Mutex(), Elector(leader), lambda: KEY,
                     lambda run: (lambda reason, message, warning: events.append((run["metadata"]["name"], reason))),
                     authorize_as, clock=clock, patch_run=lambda name, ops: patches.append((name, ops)))
    return ctl, store, cluster, events, patches, asked


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


def test_an_execute_run_of_an_allowed_creator_is_carried_out():
    ctl, store, cluster, events, patches, asked = make([stamped(execute_run())])
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Succeeded" and len(cluster.calls) == 2
    assert asked == [("alice", ["demo"])]
    assert patches and patches[0][1][-1]["value"] == [FINALIZER]   # held while it ran
    assert [r for n, r in events if n == "run-1"][:2] == ["Started", "Evicted"]


def test_an_unstamped_or_forged_run_is_refused_before_any_eviction():
    forged = stamped(execute_run("forged"), user="alice")
    forged["metadata"]["annotations"]["repack.volcano.sh/creator"] = '{"username":"cluster-admin"}'
    ctl, store, cluster, *_ = make([execute_run("bare"), forged])
    tick(ctl)
    tick(ctl)
    for name in ("bare", "forged"):
        st = store.runs[name]["status"]
        assert st["phase"] == "Failed" and "no trustworthy creator record" in st["message"], st
    assert cluster.calls == []


def test_a_creator_without_eviction_rights_is_refused():
    ctl, store, cluster, _, _, asked = make([stamped(execute_run(), user="bob")], allowed=False)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Failed" and "'bob' may not create pods/eviction in namespace 'demo'" in st["message"]
    assert cluster.calls == [] and asked == [("bob", ["demo"])]


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


def test_leadership_is_renewed_while_a_tick_is_busy():
    import threading
    import time

    ctl, store, *_ = make([])
    ctl.interval = 0.5
    renewals = []
    ctl.elector.ensure = lambda: renewals.append(time.monotonic()) or True
    release = threading.Event()
    store.list = lambda: (release.wait(5), [])[1]      # a tick that takes long (planning a large cluster)
    runner = threading.Thread(target=ctl.run)
    runner.start()
    time.sleep(1.8)
    busy_renewals = len(renewals)
    release.set()
    ctl.stop_event.set()
    runner.join(10)
    assert busy_renewals >= 3, renewals         # every 0.5 s although the first tick had not returned
    assert ctl.elector.released
