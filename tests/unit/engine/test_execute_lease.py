"""The execute Lease under clock skew and failed renewals (EXEC-2, EXEC-3, EXEC-9), on the kube layer's
real LeaseClient over the transport seam (an in-memory API server with injected faults), with the
executor's clock swapped for a fake one."""
from __future__ import annotations

import datetime as dt

import pytest

from kubectl_repack.api.run import Reason
from kubectl_repack.api.times import micro_time
from kubectl_repack.engine import executor, mutex
from kubectl_repack.engine.execute_lease import ExecuteLease
from tests.unit.engine.fakes import T0, FakeClock, FakeCluster, FakeRuns, execute_run, seed_objects, started
from tests.unit.kube.fake_server import LEASES, FakeServer, status_body
from tests.transport import HTTPResponse

LEASE = f"{LEASES}/repack-execute"
ME = mutex.holder_identity("run-b", host="h2", pid=7, instance="me")
OTHER = mutex.holder_identity("run-a", host="h1", pid=7, instance="other")
NO_COOLDOWN = dt.timedelta(0)


def held_by(server, holder, renewed):
    """The other executor (on its own clock) writes the Lease as held, renewed at `renewed`."""
    cur = server.objects.get(LEASE) or {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                        "metadata": {"name": "repack-execute", "namespace": "repack-system"}}
    server._store(LEASE, {**cur, "spec": {"holderIdentity": holder, "leaseDurationSeconds": 30,
                                          "renewTime": micro_time(renewed), "leaseTransitions": 0}})


def test_20s_of_clock_skew_does_not_let_a_second_executor_in():
    server, ours = FakeServer(), FakeClock(T0 + dt.timedelta(seconds=20))   # our clock runs 20 s ahead
    theirs = T0
    held_by(server, OTHER, theirs - dt.timedelta(seconds=10))      # renewed 10 s ago, on its clock
    lease = ExecuteLease(server.api, "repack-system", clock=ours)
    # renewTime + 30 s is already past on our clock: the old rule took the Lease here
    got = lease.try_acquire(ME, ours.now(), NO_COOLDOWN)
    assert (got.acquire, got.reason) == (False, Reason.ANOTHER_RUN_ACTIVE)
    assert got.retry_after == pytest.approx(30)
    for _ in range(6):           # the holder keeps renewing every 10 s: we never get in
        ours.t += dt.timedelta(seconds=10)
        theirs += dt.timedelta(seconds=10)
        held_by(server, OTHER, theirs)
        assert not lease.try_acquire(ME, ours.now(), NO_COOLDOWN)
    # the holder dies: we take over once we have seen the same record for 30 s of our own clock
    ours.t += dt.timedelta(seconds=29)
    assert not lease.try_acquire(ME, ours.now(), NO_COOLDOWN)
    ours.t += dt.timedelta(seconds=1)
    assert lease.try_acquire(ME, ours.now(), NO_COOLDOWN)
    assert server.objects[LEASE]["spec"]["holderIdentity"] == ME


def test_a_killed_apply_on_the_same_host_and_pid_is_not_taken_over_while_fresh():
    """Two containers with one hostname and PID 7: the old rule saw 'my run, my host, PID not alive
    here' and took a live run's Lease at once."""
    server, clock = FakeServer(), FakeClock()
    same = mutex.holder_identity("run-b", host="h2", pid=7, instance="their-instance")
    held_by(server, same, T0)
    lease = ExecuteLease(server.api, "repack-system", clock=clock)
    assert not lease.try_acquire(ME, clock.now(), NO_COOLDOWN)
    clock.t += dt.timedelta(seconds=30)
    assert lease.try_acquire(ME, clock.now(), NO_COOLDOWN)


def _holding(clock):
    server = FakeServer()
    lease = ExecuteLease(server.api, "repack-system", clock=clock)
    assert lease.try_acquire(ME, clock.now(), NO_COOLDOWN)
    return server, lease


def _fail_lease_calls(server, times=100):
    server.inject("GET", r"/leases/repack-execute$",
                  HTTPResponse(500, status_body(500, "etcdserver: request timed out"), "Error"), times=times)


def test_a_failed_renewal_is_noticed_and_the_lease_counts_as_lost_once_unconfirmed():
    clock = FakeClock()
    server, lease = _holding(clock)
    _fail_lease_calls(server)
    clock.t += dt.timedelta(seconds=10)
    assert lease.renew_once(ME) and lease.check() is None            # 10 s unconfirmed: still ours
    assert "etcdserver: request timed out" in lease.last_error      # ... and the error is kept, not swallowed
    clock.t += dt.timedelta(seconds=10)
    assert not lease.renew_once(ME)
    why = lease.check()
    assert lease.lost.is_set() and "could not be renewed for 20s" in why and "HTTP 500" in why
    server.faults.clear()                                            # the API server is back
    clock.t += dt.timedelta(seconds=2)
    assert not lease.renew_once(ME) and lease.check() == why         # lost for good, as in client-go


def test_the_guard_stops_the_run_before_its_next_eviction_when_the_lease_cannot_be_confirmed():
    clock = FakeClock()
    server, lease = _holding(clock)
    cluster = FakeCluster(seed_objects(), rebind={"train-worker-0": "n2", "train-worker-1": "n3"}, clock=clock)
    runs = FakeRuns([execute_run()])
    eng, _ = started(cluster, runs, clock)
    eng.guard = lease.check

    def outage(name):        # the API server stops answering Lease calls during the first eviction
        _fail_lease_calls(server)
        for _ in range(11):  # the renew loop retries every 2 s
            clock.t += dt.timedelta(seconds=2)
            lease.renew_once(ME)
    cluster.on_evict = outage
    with pytest.raises(executor.LeaseLost, match="could not be renewed for 2[0-9]s"):
        eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]


def test_a_lease_taken_by_another_holder_is_lost_at_the_next_renewal():
    clock = FakeClock()
    server, lease = _holding(clock)
    held_by(server, OTHER, T0)
    assert not lease.renew_once(ME)
    assert "no longer held by" in lease.check()
