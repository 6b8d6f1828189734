"""The coordinator's decisions as a table, live re-checks with the planner's filters, and the I/O
order of one tick (record, nominate via pods/status, record, then ungate) against fake APIs."""
from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

import pytest

from tests import builders as kb
from tests.unit.webhook.builders import PLACEMENT_KEY, relocation, run
from kubectl_repack.api.gates import (GATED_AT_ANNOTATION, MAC_COVERED_MARKS, MARKS_MAC_ANNOTATION, PLACEMENT_GATE,
                                      PLACEMENT_GATE_OWNER_ANNOTATION, marks_mac,
                                      PLANNED_NODE_ANNOTATION, RELOCATION_INDEX_ANNOTATION, RELOCATION_RUN_ANNOTATION,
                                      RELOCATION_VICTIM_ANNOTATION, REPLACEMENT_PODGROUP_ANNOTATION)
from kubectl_repack.api.run import ttl_expired
from kubectl_repack.api.times import parse_duration
from kubectl_repack.errors import ClusterAPIError, Conflict, Invalid, NotFound
from kubectl_repack.kube.lease import LeaseClient
from webhook.coordinator.loop import Coordinator, PlacementKey
from webhook.common.election import LeaderElector
from webhook.coordinator.placement import LiveFit, decide, replacement_of

NOW = datetime(2026, 7, 30, 10, 0, 30, tzinfo=timezone.utc)
LEASE = timedelta(seconds=30)
R = kb.R


def the_run(placement="WaitingForReplacement", replacement="", uid="uid-run-1", phase="Running", **extra_placement):
    rel = relocation("train-worker-0", ns="demo", planned="node-b", placement=placement, replacement=replacement)
    rel["placement"].update(extra_placement)
    return run("run-1", relocations=[rel], uid=uid, phase=phase)


def replacement_pod(name="train-worker-0", uid="uid-new", gated=True, gated_at="2026-07-30T10:00:20Z",
                    on=None, nominated="", run_ref="run-1/uid-run-1", index="0", podgroup="", mac=True):
    """A replacement as the webhook marked it: `mac` its marks carry the MAC of PLACEMENT_KEY (the
    coordinator acts on no others); a test that changes the marks afterwards calls `remark`."""
    ann = {RELOCATION_RUN_ANNOTATION: run_ref, RELOCATION_INDEX_ANNOTATION: index,
           RELOCATION_VICTIM_ANNOTATION: "train-worker-0", PLANNED_NODE_ANNOTATION: "node-b"}
    if podgroup:
        ann[REPLACEMENT_PODGROUP_ANNOTATION] = podgroup
    if gated:
        ann[PLACEMENT_GATE_OWNER_ANNOTATION] = run_ref
        if gated_at:
            ann[GATED_AT_ANNOTATION] = gated_at
    p = kb.pod(name, cards=4, ns="demo", on=on, group="train-pg", annotations=ann, uid=uid, phase="Pending",
               node_selector={"pool": "npu"})
    if gated:
        p["spec"]["schedulingGates"] = [{"name": "other.example/gate"}, {"name": PLACEMENT_GATE}]
    if nominated:
        p["status"]["nominatedNodeName"] = nominated
    return remark(p) if mac else p


OWNER_UID = "uid-train"


def remark(pod, key=PLACEMENT_KEY):
    """The marks MAC the webhook writes (over the marks, the namespace and the controlling owner)."""
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train",
                                           "uid": OWNER_UID, "controller": True}]
    ann = pod["metadata"]["annotations"]
    ann[MARKS_MAC_ANNOTATION] = marks_mac(key, "demo", OWNER_UID, {k: ann.get(k) for k in MAC_COVERED_MARKS})
    return pod


def trusting(pod):
    """A marks check that finds nothing wrong: for tests of the decision alone."""
    return ""


FITS = lambda node: None  # noqa: E731
NO_FIT = lambda node: "NodeResourcesFit: Insufficient huawei.com/ascend-1980"  # noqa: E731


def _never(node):
    raise AssertionError("the planned node must not be re-checked here")


CASES = [
    # id, pod, run, check, expected (record, nominate, after, ungate, timed_out)
    ("fits: nominate then ungate", replacement_pod(), the_run(), FITS,
     ({"replacementPodName": "train-worker-0", "replacementPodUID": "uid-new", "phase": "WaitingForNodeSelection"},
      "node-b", {"selectedNodeName": "node-b", "phase": "Nominated"}, True, False)),
    ("replacement already recorded, fits", replacement_pod(),
     the_run("WaitingForNodeSelection", replacement="train-worker-0", replacementPodUID="uid-new"), FITS,
     ({}, "node-b", {"selectedNodeName": "node-b", "phase": "Nominated"}, True, False)),
    ("does not fit: ungate with no hint", replacement_pod(), the_run(), NO_FIT,
     ({"replacementPodName": "train-worker-0", "replacementPodUID": "uid-new", "phase": "WaitingForNodeSelection"},
      "", {}, True, False)),
    ("past the placement lease: TimedOut, ungate", replacement_pod(gated_at="2026-07-30T09:59:59Z"), the_run(),
     _never,
     ({"replacementPodName": "train-worker-0", "replacementPodUID": "uid-new", "phase": "TimedOut"},
      "", {}, True, True)),
    ("gated without a gated-at time: fail open", replacement_pod(gated_at=""), the_run(), _never,
     ({"replacementPodName": "train-worker-0", "replacementPodUID": "uid-new", "phase": "TimedOut"},
      "", {}, True, True)),
    ("bound: Placed with actualNodeName", replacement_pod(gated=False, on="node-b"),
     the_run("Nominated", replacement="train-worker-0", replacementPodUID="uid-new", selectedNodeName="node-b"),
     _never, ({"actualNodeName": "node-b", "phase": "Placed"}, "", {}, False, False)),
    ("bound elsewhere after a time-out: Placed, actual recorded", replacement_pod(gated=False, on="node-c"),
     the_run("TimedOut", replacement="train-worker-0", replacementPodUID="uid-new"), _never,
     ({"actualNodeName": "node-c", "phase": "Placed"}, "", {}, False, False)),
    ("placed and recorded: nothing to do", replacement_pod(gated=False, on="node-b"),
     the_run("Placed", replacement="train-worker-0", replacementPodUID="uid-new", actualNodeName="node-b"), _never,
     ({}, "", {}, False, False)),
    ("not gated (stale Lease at admission): record only", replacement_pod(gated=False), the_run(), _never,
     ({"replacementPodName": "train-worker-0", "replacementPodUID": "uid-new", "phase": "WaitingForNodeSelection"},
      "", {}, False, False)),
    ("ModelServing: the new PodGroup is recorded", replacement_pod(gated=False, podgroup="serve-0-gen2"), the_run(),
     _never,
     ({"replacementPodName": "train-worker-0", "replacementPodUID": "uid-new", "replacementPodGroupName": "serve-0-gen2",
       "phase": "WaitingForNodeSelection"}, "", {}, False, False)),
    ("record owned by another run (same name, new uid): ignore, release", replacement_pod(),
     the_run(uid="uid-other"), _never, ({}, "", {}, True, False)),
    ("record owned by another pod: ignore, release", replacement_pod(uid="uid-second"),
     the_run("WaitingForNodeSelection", replacement="train-worker-0", replacementPodUID="uid-new"), _never,
     ({}, "", {}, True, False)),
    ("run gone: release the gate", replacement_pod(), None, _never, ({}, "", {}, True, False)),
    ("run finished: release, record nothing", replacement_pod(), the_run(phase="Succeeded"), _never,
     ({}, "", {}, True, False)),
    ("not ours and not gated: nothing", replacement_pod(gated=False), the_run(uid="uid-other"), _never,
     ({}, "", {}, False, False)),
    ("nominated before a restart: finish without re-checking", replacement_pod(nominated="node-b"),
     the_run("Nominated", replacement="train-worker-0", replacementPodUID="uid-new", selectedNodeName="node-b"),
     _never, ({}, "", {}, True, False)),
]


@pytest.mark.parametrize("pod,run_obj,check,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_decisions(pod, run_obj, check, expected):
    rep = replacement_of(pod, trusting)
    d = decide(rep, run_obj, NOW, LEASE, check)
    assert (d.record, d.nominate, d.after_nomination, d.ungate, d.timed_out) == expected, d.reason


def test_unannotated_pods_are_not_replacements():
    assert replacement_of(kb.pod("plain", ns="demo"), trusting) is None


def test_a_gated_pod_without_run_annotation_is_released():
    p = kb.pod("orphan", ns="demo", phase="Pending")
    p["spec"]["schedulingGates"] = [{"name": PLACEMENT_GATE}]
    d = decide(replacement_of(p, trusting), None, NOW, LEASE, _never)
    assert d.ungate and not d.nominate and not d.record


@pytest.mark.parametrize("text,seconds", [("30s", 30), ("2m", 120), ("1m30s", 90), ("500ms", 0.5), ("7", 7)])
def test_parse_duration(text, seconds):
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "soon", "30x", "1m 30s"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


# --- live re-check with the planner's filters --------------------------------------------------------
def cluster(*extra):
    return [kb.node("node-a", cards=8, labels={"pool": "npu"}), kb.node("node-b", cards=8, labels={"pool": "npu"}),
            kb.node("node-c", cards=8, labels={"pool": "other"}), *extra]


def test_livefit_uses_the_planner_filters_and_counts_nominations():
    new = replacement_pod()
    busy = kb.pod("busy", cards=2, ns="demo", on="node-b")
    other = replacement_pod(name="train-worker-1", uid="uid-other")
    fit = LiveFit(cluster(busy, new, other), R)
    assert fit.check("demo/train-worker-0", "node-b") is None
    assert fit.check("demo/train-worker-0", "node-c").startswith("NodeAffinity")
    assert fit.check("demo/train-worker-0", "node-z") == "node node-z does not exist"
    fit.reserve("demo/train-worker-0", "node-b")  # 2 + 4 of 8 used: 4 more would not fit... 2 left
    assert "Insufficient" in fit.check("demo/train-worker-1", "node-b")
    assert fit.check("demo/train-worker-1", "node-a") is None


def test_livefit_counts_pods_nominated_earlier_but_not_twice_for_themselves():
    first = replacement_pod(nominated="node-b")
    second = replacement_pod(name="train-worker-1", uid="uid-other")
    fit = LiveFit(cluster(kb.pod("busy", cards=2, ns="demo", on="node-b"), first, second), R)
    assert "Insufficient" in fit.check("demo/train-worker-1", "node-b")
    assert fit.check("demo/train-worker-0", "node-b") is None


def test_ttl():
    finished = run("old", phase="Succeeded")
    finished["spec"]["ttlSecondsAfterFinished"] = 60
    finished["status"]["completionTime"] = "2026-07-30T09:59:00Z"
    assert ttl_expired(finished, NOW)
    assert not ttl_expired(finished, NOW - timedelta(seconds=31))
    running = copy.deepcopy(finished)
    running["status"]["phase"] = "Running"
    assert not ttl_expired(running, NOW)
    no_ttl = copy.deepcopy(finished)
    del no_ttl["spec"]["ttlSecondsAfterFinished"]
    assert not ttl_expired(no_ttl, NOW)
    by_condition = copy.deepcopy(finished)
    del by_condition["status"]["completionTime"]
    by_condition["status"]["conditions"] = [{"type": "Completed", "lastTransitionTime": "2026-07-30T09:58:00Z"}]
    assert ttl_expired(by_condition, NOW)


# --- one tick against fake ports --------------------------------------------------------------------------
class FakeCluster:
    """The coordinator's two ports in memory (LiveCluster for pods, RunStore for RepackRuns);
    records every write in `calls`."""

    def __init__(self, pods, runs, objects=()):
        self.pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
        self.runs = {r["metadata"]["name"]: r for r in runs}
        self.objects = list(objects)
        self.calls = []
        self.record_lists = False
        self.refuse_status = None   # an exception every status write raises
        self.binds_before_hint = {}  # pod name -> node it is bound to just before its hint lands

    # LiveCluster
    def list_pods(self, namespace=None):
        if self.record_lists:
            self.calls.append(("list", namespace))
        return [copy.deepcopy(p) for p in self.pods.values()
                if namespace is None or p["metadata"]["namespace"] == namespace]

    def snapshot_objects(self, kinds=None):
        return self.objects + copy.deepcopy(list(self.pods.values()))

    def nominate(self, ns, name, node):
        self.calls.append(("nominate", name, node))
        pod = self.pods[(ns, name)]
        if name in self.binds_before_hint:   # the scheduler binds it between our read and our hint
            pod["spec"]["nodeName"] = self.binds_before_hint[name]
            pod["spec"]["schedulingGates"] = [g for g in pod["spec"].get("schedulingGates") or ()
                                              if g.get("name") != PLACEMENT_GATE]
        if pod["spec"].get("nodeName"):
            # What the API server answers from 1.35 on (ClearingNominatedNodeNameAfterBinding).
            raise Invalid(f"nominating node {node} for pod {ns}/{name}: Pod \"{name}\" is invalid: "
                          "status.nominatedNodeName: Forbidden: may not be set on pods that are already bound "
                          "to a node (HTTP 422)", 422)
        pod.setdefault("status", {})["nominatedNodeName"] = node

    def get_pod(self, ns, name):
        self.calls.append(("get", name))
        pod = self.pods.get((ns, name))
        return copy.deepcopy(pod) if pod is not None else None

    def patch_pod(self, ns, name, ops):
        from tests.unit.webhook.patching import apply_patch

        pod = self.pods[(ns, name)]
        for op in ops:
            if op["op"] == "test" and pod["spec"].get("schedulingGates") != op["value"]:
                raise ClusterAPIError(f"patching pod {ns}/{name}: test failed (HTTP 422)", 422)
        self.pods[(ns, name)] = apply_patch(pod, [o for o in ops if o["op"] != "test"])
        self.calls.append(("ungate", name))

    # RunStore
    def list(self):
        return copy.deepcopy(list(self.runs.values()))

    def update_status(self, name, mutate, uid=None):
        if self.refuse_status is not None:
            raise self.refuse_status
        if name not in self.runs or (uid and self.runs[name]["metadata"].get("uid") != uid):
            raise NotFound(f"repackrun {name} not found", 404)
        status = copy.deepcopy(self.runs[name].get("status") or {})
        mutate(status)
        self.runs[name]["status"] = status
        self.calls.append(("status", name, copy.deepcopy(status["relocations"][0]["placement"])))
        return copy.deepcopy(self.runs[name])

    def delete(self, name, uid=None, resource_version=None):
        del self.runs[name]
        self.calls.append(("delete", name))
        return True


class FakeElector:
    is_leader = True

    def ensure(self):
        return True

    def release(self):
        pass


@pytest.fixture
def fake_coordinator():
    def make(fake):
        return Coordinator(fake, fake, FakeElector(), clock=lambda: NOW, placement_lease=LEASE,
                           placement_key=PlacementKey(lambda: PLACEMENT_KEY, clock=lambda: 0.0))
    return make


def test_tick_records_nominates_records_then_ungates(fake_coordinator):
    fake = FakeCluster([replacement_pod()], [the_run()], cluster())
    fake_coordinator(fake).tick()
    kinds = [c[0] for c in fake.calls]
    assert kinds == ["status", "nominate", "status", "ungate"], fake.calls
    assert fake.calls[0][2] == {"phase": "WaitingForNodeSelection", "replacementPodName": "train-worker-0",
                                "replacementPodUID": "uid-new"}
    assert fake.calls[2][2]["phase"] == "Nominated" and fake.calls[2][2]["selectedNodeName"] == "node-b"
    pod = fake.pods[("demo", "train-worker-0")]
    assert pod["spec"]["schedulingGates"] == [{"name": "other.example/gate"}]
    assert PLACEMENT_GATE_OWNER_ANNOTATION not in pod["metadata"]["annotations"]
    assert pod["status"]["nominatedNodeName"] == "node-b"
    # Only the coordinator's fields changed; apply's eviction record is untouched.
    rel = fake.runs["run-1"]["status"]["relocations"][0]
    assert rel["eviction"] == {"phase": "Accepted"} and rel["plannedNodeName"] == "node-b"


def test_a_pod_bound_before_its_hint_lands_is_recorded_placed_and_never_hinted_again(fake_coordinator):
    """From Kubernetes 1.35 the API server refuses nominatedNodeName on a bound pod (422): the
    coordinator reads the pod, records it Placed where it is bound, and does not retry the hint."""
    fake = FakeCluster([replacement_pod()], [the_run()], cluster())
    fake.binds_before_hint = {"train-worker-0": "node-b"}
    c = fake_coordinator(fake)
    c.tick()
    assert [x[0] for x in fake.calls] == ["status", "nominate", "get", "status"], fake.calls
    assert fake.calls[-1][2]["phase"] == "Placed" and fake.calls[-1][2]["actualNodeName"] == "node-b"
    assert c.metrics.value("nominations_total") == 0 and c.metrics.value("nominations_refused_bound_total") == 1
    fake.calls.clear()
    c.tick()   # bound: nothing to hint, nothing to lift, the record already says so
    assert [x[0] for x in fake.calls if x[0] in ("nominate", "ungate", "get")] == [], fake.calls


def test_a_refused_hint_on_a_pod_that_is_not_bound_is_not_taken_for_a_placement(fake_coordinator):
    fake = FakeCluster([replacement_pod()], [the_run()], cluster())

    def refuse(ns, name, node):
        fake.calls.append(("nominate", name, node))
        raise Invalid("nominating: some other validation error (HTTP 422)", 422)
    fake.nominate = refuse
    c = fake_coordinator(fake)
    c.tick()   # logged and retried next tick; the gate is kept until then (or the lease ends)
    assert [x[0] for x in fake.calls] == ["status", "nominate", "get"], fake.calls
    placement = fake.runs["run-1"]["status"]["relocations"][0]["placement"]
    assert placement.get("phase") != "Placed" and not placement.get("actualNodeName")
    assert c.metrics.value("nominations_refused_bound_total") == 0


def test_tick_without_fit_ungates_with_no_hint(fake_coordinator):
    full = kb.pod("hog", cards=8, ns="demo", on="node-b")
    fake = FakeCluster([replacement_pod()], [the_run()], cluster(full))
    fake.pods[("demo", "hog")] = full
    fake_coordinator(fake).tick()
    assert [c[0] for c in fake.calls] == ["status", "ungate"]
    pod = fake.pods[("demo", "train-worker-0")]
    assert not pod["status"].get("nominatedNodeName")
    assert "selectedNodeName" not in fake.runs["run-1"]["status"]["relocations"][0]["placement"]


def test_tick_times_out_and_counts(fake_coordinator):
    fake = FakeCluster([replacement_pod(gated_at="2026-07-30T09:59:00Z")], [the_run()], cluster())
    c = fake_coordinator(fake)
    c.tick()
    assert [x[0] for x in fake.calls] == ["ungate", "status"]  # fail open first, then record
    assert fake.runs["run-1"]["status"]["relocations"][0]["placement"]["phase"] == "TimedOut"
    assert c.metrics.value("lease_timeouts_total") == 1 and c.metrics.value("nominations_total") == 0


def test_tick_leaves_finished_runs_past_their_ttl_to_the_controller(fake_coordinator):
    """Expired runs are deleted by the controller only (engine.workflow.sweep_expired, tested there)."""
    old = run("old", phase="Succeeded")
    old["spec"]["ttlSecondsAfterFinished"] = 10
    old["status"]["completionTime"] = "2026-07-30T09:00:00Z"
    assert ttl_expired(old, NOW)
    fake = FakeCluster([], [old, the_run()])
    fake_coordinator(fake).tick()
    assert not [c for c in fake.calls if c[0] == "delete"] and "old" in fake.runs and "run-1" in fake.runs


# --- leader election (the real LeaseClient over a fake CoordinationV1Api) --------------------------------
class FakeCoordinationApi:
    """read/create/replace of one Lease with resourceVersion checks, answering raw JSON like the
    API server (the LeaseClient asks for `_preload_content=False`)."""

    def __init__(self):
        self.lease = None
        self.rv = 0

    class _Resp:
        def __init__(self, obj):
            import json
            self.data = json.dumps(obj).encode()

    @staticmethod
    def _error(status):
        from kubernetes.client.rest import ApiException
        return ApiException(status=status, reason=str(status))

    def read_namespaced_lease(self, name, ns, **kw):
        if self.lease is None:
            raise self._error(404)
        return self._Resp(self.lease)

    def create_namespaced_lease(self, ns, body, **kw):
        if self.lease is not None:
            raise self._error(409)
        return self._store(body)

    def replace_namespaced_lease(self, name, ns, body, **kw):
        if body["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise self._error(409)
        return self._store(body)

    def _store(self, body):
        self.rv += 1
        self.lease = copy.deepcopy(body)
        self.lease["metadata"]["resourceVersion"] = str(self.rv)
        return self._Resp(self.lease)


def lease_client(fake_api):
    client = LeaseClient(None, "repack-system", "repack-coordinator")
    client.coord = fake_api
    return client


def test_leader_election_acquire_exclude_takeover_release():
    clock = {"now": NOW}
    leases = FakeCoordinationApi()
    a = LeaderElector(lease_client(leases), "a", 15, clock=lambda: clock["now"])
    b = LeaderElector(lease_client(leases), "b", 15, clock=lambda: clock["now"])
    assert a.ensure() and a.is_leader
    assert not b.ensure()
    clock["now"] += timedelta(seconds=10)
    assert a.ensure()  # renewed (due after a third of the duration)
    assert leases.lease["spec"]["renewTime"].startswith("2026-07-30T10:00:40")
    assert not b.ensure()  # b observes the renewal now (+10 s): its expiry counts from here
    clock["now"] += timedelta(seconds=14)
    assert not b.ensure()  # still fresh: renewed 14 s ago
    clock["now"] += timedelta(seconds=2)
    assert not a.is_leader  # a did not renew in time: it must stop acting
    assert b.ensure() and leases.lease["spec"]["holderIdentity"] == "b"
    assert leases.lease["spec"]["leaseTransitions"] == 1
    assert not a.ensure()
    b.release()
    assert not leases.lease["spec"].get("holderIdentity")
    assert a.ensure()  # released: taken at once


def test_a_candidate_with_a_skewed_clock_judges_expiry_by_when_it_observed_the_record():
    """b's clock runs 20 s ahead of a's: a's renewTime looks 20 s old to b the moment it is written.
    Before #13 b took a fresh 15 s Lease over at once; client-go's rule (observedTime) keeps it out
    until b has seen the same record for 15 s of its own clock."""
    now = {"a": NOW, "b": NOW + timedelta(seconds=20)}
    leases = FakeCoordinationApi()
    a = LeaderElector(lease_client(leases), "a", 15, clock=lambda: now["a"])
    b = LeaderElector(lease_client(leases), "b", 15, clock=lambda: now["b"])
    assert a.ensure()
    assert not b.ensure() and leases.lease["spec"]["holderIdentity"] == "a"
    for step in range(3):            # a keeps renewing every 5 s: b never gets in
        now["a"] += timedelta(seconds=5)
        now["b"] += timedelta(seconds=5)
        assert a.ensure() and not b.ensure(), step
    now["b"] += timedelta(seconds=16)   # a stopped (dead): b takes over 15 s after it last saw a change
    assert b.ensure() and leases.lease["spec"]["holderIdentity"] == "b"


def test_a_lost_race_for_the_lease_is_decided_again_on_what_the_winner_wrote():
    leases = FakeCoordinationApi()
    a = LeaderElector(lease_client(leases), "a", 15, clock=lambda: NOW)
    real_create = leases.create_namespaced_lease

    def b_wins(ns, body, **kw):   # b creates the Lease between a's read and a's create
        real_create(ns, {"metadata": {"name": "repack-coordinator", "namespace": ns},
                         "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15,
                                  "renewTime": "2026-07-30T10:00:30.000000Z"}})
        leases.create_namespaced_lease = real_create
        return real_create(ns, body)
    leases.create_namespaced_lease = b_wins
    assert not a.ensure() and leases.lease["spec"]["holderIdentity"] == "b"


def test_time_out_ungates_even_when_the_run_cannot_be_written(fake_coordinator):
    fake = FakeCluster([replacement_pod(gated_at="2026-07-30T09:59:00Z")], [the_run()], cluster())
    fake.refuse_status = ClusterAPIError("writing the status of repackrun run-1: invalid (HTTP 422)", 422)
    c = fake_coordinator(fake)
    c.tick()  # the record write fails after the gate is gone; logged, retried next tick
    assert fake.calls == [("ungate", "train-worker-0")]
    assert fake.pods[("demo", "train-worker-0")]["spec"]["schedulingGates"] == [{"name": "other.example/gate"}]
    assert c.metrics.value("lease_timeouts_total") == 1


def test_a_failed_record_write_holds_the_hint_and_the_gate_until_the_next_tick(fake_coordinator):
    fake = FakeCluster([replacement_pod()], [the_run()], cluster())
    fake.refuse_status = Conflict("writing the status of repackrun run-1: still conflicting (HTTP 409)", 409)
    fake_coordinator(fake).tick()
    assert fake.calls == []  # no hint before the replacement is on record


def test_pods_are_listed_per_active_namespace_with_a_periodic_cluster_wide_sweep(fake_coordinator):
    fake = FakeCluster([replacement_pod()], [the_run()], cluster())
    fake.record_lists = True
    c = fake_coordinator(fake)
    c.tick()  # first tick: the cluster-wide sweep
    assert fake.calls[0] == ("list", None)
    fake.calls.clear()
    c.tick()
    assert fake.calls == [("list", "demo")]  # only the namespace the relocations name
    fake.runs["run-1"]["status"]["phase"] = "Succeeded"
    fake.calls.clear()
    c.tick()
    assert fake.calls == []  # nothing active, sweep not due


def test_the_webhook_deployment_never_runs_two_pods_at_once():
    """Record claims live in the webhook process's memory: a second replica, or the old and the new
    pod of a rolling update side by side, would hand the same record to two replacements."""
    from kubectl_repack.deploy.manifests import deployment

    spec = deployment("repack-system", "img:1")["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {"type": "Recreate"}
