"""The last checks before an Eviction call, and how long that call may take (security review,
finding 11): cancel, vet, the execution deadline and the execute Lease are asked after the
write-ahead record (InProgress) is written, so nothing that happened while that write was in
flight is missed; and one Eviction call cannot outlive the Lease's confirmation margin."""
from __future__ import annotations

import datetime as dt

import pytest

from kubectl_repack.engine import executor, mutex
from kubectl_repack.kube import objects
from kubectl_repack.kube.client import Overrides, connect
from tests.transport import use_transport
from tests.unit.engine.fakes import FakeClock, FakeCluster, FakeRuns, planned_nodes, seed_objects, started, \
    execute_run

PLANNED = {"train-worker-0": "n2", "train-worker-1": "n3"}
W0, W1 = "train-worker-0", "train-worker-1"


def _setup(**opts):
    clock = FakeClock()
    cluster = FakeCluster(seed_objects(), rebind=PLANNED, clock=clock)
    runs = FakeRuns([execute_run()])
    eng, plan = started(cluster, runs, clock, **opts)
    assert planned_nodes(plan) == PLANNED
    return clock, cluster, runs, eng


def _during_write_ahead(runs, happen):
    """Run `happen()` while the first write-ahead record (record 0 InProgress) is being written: the
    write lands, and by the time it returns the world has moved on (the object it returns, like a
    read right after it, shows what `happen` changed)."""
    real, done = runs.update_status, []

    def update_status(name, mutate, uid=None):
        out = real(name, mutate, uid)
        if not done and ((out.get("status") or {}).get("relocations") or [{}])[0].get("eviction", {}).get(
                "phase") == "InProgress":
            done.append(True)
            happen()
            out = runs.get(name)
        return out
    runs.update_status = update_status
    return done


def _eviction(run, i):
    return run["status"]["relocations"][i]["eviction"]


def test_a_cancel_that_lands_while_the_write_ahead_is_written_stops_the_eviction():
    clock, cluster, runs, eng = _setup()
    eng.cancelled = lambda run: ("the run was cancelled (repack.volcano.sh/cancel)"
                                 if (run["metadata"].get("annotations") or {}).get("cancel") else "")
    seen = _during_write_ahead(runs, lambda: runs.runs["run-1"]["metadata"].setdefault("annotations", {})
                               .update(cancel="true"))
    run = eng.execute("run-1")
    assert seen
    assert cluster.calls == []                      # before the fix: the first victim was evicted
    first = _eviction(run, 0)
    assert first == {"phase": "Pending", "message": "not evicted: the run was cancelled (repack.volcano.sh/cancel)"}
    assert _eviction(run, 1)["phase"] == "Pending"
    assert run["status"]["phase"] == "Failed"


def test_vet_is_asked_after_the_write_ahead_like_cancel():
    clock, cluster, runs, eng = _setup()
    asked = []

    def vet(run, record):
        if record is not None:
            asked.append(_eviction(run, 0)["phase"])     # what the record says when vet is asked
        if (run["metadata"].get("annotations") or {}).get("revoked"):
            return "EvictionNotAuthorized", "the creator may no longer evict pods in demo"
        return None
    eng.vet = vet
    _during_write_ahead(runs, lambda: runs.runs["run-1"]["metadata"].setdefault("annotations", {})
                        .update(revoked="true"))
    run = eng.execute("run-1")
    assert asked[0] == "InProgress"                 # before the fix: Pending (asked before the write-ahead)
    assert cluster.calls == []
    assert _eviction(run, 0) == {"phase": "Pending",
                                 "message": "not evicted: the creator may no longer evict pods in demo"}
    status = run["status"]
    assert status["phase"] == "Failed"
    assert next(c["reason"] for c in status["conditions"] if c["type"] == "Failed") == "EvictionNotAuthorized"


def test_a_deadline_that_passes_while_the_write_ahead_is_written_stops_the_eviction():
    clock, cluster, runs, eng = _setup(execution_timeout=dt.timedelta(minutes=10))
    _during_write_ahead(runs, lambda: setattr(clock, "t", clock.t + dt.timedelta(minutes=10, seconds=1)))
    run = eng.execute("run-1")
    assert cluster.calls == []                      # before the fix: evicted after the deadline
    first = _eviction(run, 0)
    assert first["phase"] == "Pending" and "executionDeadline" in first["message"]
    assert next(c["reason"] for c in run["status"]["conditions"] if c["type"] == "Failed") == \
        "ExecutionDeadlineExceeded"


def test_a_lease_that_goes_stale_while_the_write_ahead_is_written_stops_the_eviction():
    clock, cluster, runs, eng = _setup()
    stale = []
    eng.guard = lambda: "the execute Lease could not be renewed for 21s" if stale else None
    _during_write_ahead(runs, lambda: stale.append(True))
    with pytest.raises(executor.LeaseLost, match="no further eviction was issued"):
        eng.execute("run-1")
    assert cluster.calls == []                      # before the fix: evicted on a Lease no longer confirmed
    stored = runs.get("run-1")
    assert _eviction(stored, 0) == {"phase": "Pending",
                                    "message": "not evicted: the execute Lease could not be renewed for 21s"}
    assert _eviction(stored, 1)["phase"] == "Pending"


def test_putting_the_record_back_never_overwrites_a_record_that_moved_on():
    clock, cluster, runs, eng = _setup()
    runs.runs["run-1"]["status"]["relocations"][0]["eviction"] = {"phase": "Accepted", "message": "by someone"}
    eng._set_eviction("run-1", 0, "Pending", "not evicted: lost", only_from="InProgress")
    assert _eviction(runs.get("run-1"), 0) == {"phase": "Accepted", "message": "by someone"}
    runs.runs["run-1"]["status"]["relocations"][0]["eviction"] = {"phase": "InProgress"}
    eng._set_eviction("run-1", 0, "Pending", "not evicted: lost", only_from="InProgress")
    assert _eviction(runs.get("run-1"), 0) == {"phase": "Pending", "message": "not evicted: lost"}


def test_the_lease_is_asked_after_the_cancel_read_before_each_retry():
    """The cancel check reads the run (an API call that may hang): the Lease guard comes after it,
    right before the retried Eviction call."""
    clock = FakeClock()
    cluster = FakeCluster(seed_objects(), responses={W0: [429] * 50}, rebind=PLANNED, clock=clock)
    runs = FakeRuns([execute_run()])
    eng, _ = started(cluster, runs, clock)
    stale = []
    eng.guard = lambda: "the execute Lease could not be renewed for 21s" if stale else None

    def cancelled(run):
        if cluster.calls:            # the read before the first retry takes long: the Lease goes stale
            stale.append(True)
        return ""
    eng.cancelled = cancelled
    with pytest.raises(executor.LeaseLost):
        eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == [W0]    # before the fix: retried once more on the stale Lease


# ---- how long one Eviction call may take ----------------------------------------------------------

def test_one_eviction_call_ends_within_the_lease_margin():
    import urllib3

    margin = mutex.LEASE_DURATION_SECONDS - mutex.CONFIRMED_SECONDS
    connect_s, read_s = objects.EVICTION_REQUEST_TIMEOUT
    # urllib3's default Retry (the client's, without --request-timeout) retries a failed connect
    assert urllib3.Retry.DEFAULT.connect is None and urllib3.Retry.DEFAULT.total <= objects.EVICTION_CONNECT_RETRIES
    worst = (objects.EVICTION_CONNECT_RETRIES + 1) * connect_s + read_s
    assert worst < margin, f"an Eviction call may take {worst}s, the Lease leaves {margin}s"   # before: 60s


@pytest.mark.parametrize("flag, sent", [
    pytest.param(None, objects.EVICTION_REQUEST_TIMEOUT, id="no-flag"),
    pytest.param(30, objects.EVICTION_REQUEST_TIMEOUT, id="longer-flag"),
    pytest.param(0, objects.EVICTION_REQUEST_TIMEOUT, id="flag-0-no-timeout"),
    pytest.param(2, (1, 2), id="shorter-flag"),
])
def test_the_eviction_request_carries_the_bound(monkeypatch, tmp_path, flag, sent):
    from tests.unit.kube.fake_server import FakeServer

    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "none"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    server = FakeServer()
    api = use_transport(connect(overrides=Overrides(server="https://fake:6443", request_timeout=flag)), server.send)
    objects.LiveCluster(api).evict("demo", "w-0", "uid-w0", 0)
    evictions = [r for r in server.requests if r[0] == "POST" and r[1].endswith("/eviction")]
    assert [r[3] for r in evictions] == [sent]      # before the fix: REQUEST_TIMEOUT (60 s)
