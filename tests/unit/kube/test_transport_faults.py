"""The Kubernetes I/O layer under faults, injected through its transport seam
(`kube.client.use_transport`): 409 Conflicts, 429s, 500s, timeouts and refused connections, for
the RepackRun store, pods and evictions, Leases and the TTL delete."""
from __future__ import annotations

import pytest

from kubectl_repack.errors import ClusterAPIError, Conflict, TooManyRequests
from kubectl_repack.kube.client import CONFLICT_RETRIES, REQUEST_TIMEOUT
from tests.transport import HTTPResponse
from kubectl_repack.kube.lease import LeaseClient
from kubectl_repack.kube.objects import LiveCluster
from kubectl_repack.kube.runs import RunStore
from tests.unit.kube.fake_server import LEASES, RUNS, FakeServer, refused, status_body, timeout


def run_obj(name="run-1", uid="uid-1"):
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
            "metadata": {"name": name, "uid": uid}, "spec": {"mode": "Execute"}, "status": {"phase": "Running"}}


@pytest.fixture
def server():
    s = FakeServer()
    s._store(f"{RUNS}/run-1", run_obj())
    return s


def err(code, message, causes=()):
    return HTTPResponse(code, status_body(code, message, causes), "Error")


# ---- RepackRun store ------------------------------------------------------------------------------

def test_status_write_rereads_and_reapplies_on_409(server):
    server.inject("PUT", r"/repackruns/run-1/status$", err(409, "the object has been modified"), times=2)
    calls = []

    def mutate(st):
        calls.append(dict(st))
        st["message"] = "third time"
    out = RunStore(server.api).update_status("run-1", mutate)
    assert len(calls) == 3 and out["status"]["message"] == "third time"
    assert server.objects[f"{RUNS}/run-1"]["status"]["message"] == "third time"


def test_status_write_gives_up_after_the_retry_budget_with_the_conflict_named(server):
    server.inject("PUT", r"/repackruns/run-1/status$", err(409, "the object has been modified"),
                  times=CONFLICT_RETRIES)
    with pytest.raises(Conflict, match=r"writing the status of repackrun run-1: the object has been modified "
                                       r"\(HTTP 409\)"):
        RunStore(server.api).update_status("run-1", lambda st: st.update(message="x"))
    assert "message" not in server.objects[f"{RUNS}/run-1"]["status"]


@pytest.mark.parametrize("answer, cls, text", [
    pytest.param(err(500, "etcdserver: leader changed"), ClusterAPIError,
                 "reading repackrun run-1: etcdserver: leader changed (HTTP 500)", id="500"),
    pytest.param(err(429, "too many requests, please try again later"), TooManyRequests,
                 "reading repackrun run-1: too many requests", id="429"),
    pytest.param(timeout(), ClusterAPIError, "reading repackrun run-1: cannot reach the API server", id="timeout"),
    pytest.param(refused(), ClusterAPIError, "reading repackrun run-1: cannot reach the API server", id="refused"),
])
def test_a_failed_read_is_one_error_naming_the_object(server, answer, cls, text):
    server.inject("GET", r"/repackruns/run-1$", answer)
    with pytest.raises(cls) as exc:
        RunStore(server.api).get("run-1")
    assert text in str(exc.value)
    assert server.requests[-1][3] == REQUEST_TIMEOUT      # every call carries a timeout


def test_ttl_delete_carries_uid_and_resource_version_preconditions(server):
    store = RunStore(server.api)
    seen = store.get("run-1")
    # the run changed after the TTL decision was made on `seen`: the delete must not go through
    store.update_status("run-1", lambda st: st.update(message="changed"))
    assert not store.delete("run-1", seen["metadata"]["uid"], seen["metadata"]["resourceVersion"])
    assert f"{RUNS}/run-1" in server.objects
    method, path, body, _ = server.requests[-1]
    assert (method, body["preconditions"]) == ("DELETE", {"uid": "uid-1",
                                                          "resourceVersion": seen["metadata"]["resourceVersion"]})
    fresh = store.get("run-1")
    assert store.delete("run-1", fresh["metadata"]["uid"], fresh["metadata"]["resourceVersion"])
    assert f"{RUNS}/run-1" not in server.objects


def test_the_ttl_sweep_passes_both_preconditions(server):
    from kubectl_repack.engine.workflow import sweep_expired
    import datetime as dt

    class Notes:
        lines = []

        def note(self, m):
            self.lines.append(m)

    class Store(RunStore):
        def list(self):
            return [self.get("run-1")]
    server.objects[f"{RUNS}/run-1"].update(spec={"mode": "Execute", "ttlSecondsAfterFinished": 0},
                                          status={"phase": "Succeeded", "completionTime": "2026-01-01T00:00:00Z"})
    sweep_expired(Store(server.api), dt.datetime(2026, 2, 1, tzinfo=dt.timezone.utc), "other", Notes())
    deletes = [r for r in server.requests if r[0] == "DELETE"]
    assert deletes and set(deletes[0][2]["preconditions"]) == {"uid", "resourceVersion"}


# ---- pods and evictions ---------------------------------------------------------------------------

EVICT = r"/namespaces/demo/pods/w-0/eviction$"


@pytest.mark.parametrize("answer, code, text", [
    pytest.param(HTTPResponse(201, b'{"kind":"Status","status":"Success"}'), 201, "", id="accepted"),
    pytest.param(err(429, "Cannot evict pod as it would violate the pod's disruption budget.",
                     ["The disruption budget web-pdb needs 2 healthy pods and has 2 currently"]), 429,
                 "disruption budget web-pdb needs 2 healthy pods", id="429-names-the-pdb"),
    pytest.param(err(500, "This pod has more than one PodDisruptionBudget"), 500, "more than one", id="500"),
    pytest.param(err(409, "Precondition failed: UID in precondition"), 409, "UID in precondition", id="409-uid"),
    pytest.param(timeout(), 0, "evicting pod demo/w-0: cannot reach the API server", id="timeout"),
    pytest.param(refused(), 0, "Connection refused", id="refused"),
])
def test_evict_answers_with_the_code_and_never_raises(answer, code, text):
    server = FakeServer()
    server.inject("POST", EVICT, answer)
    got = LiveCluster(server.api).evict("demo", "w-0", "uid-w0", 0)
    assert got[0] == code and text in got[1]
    body = server.requests[-1][2]
    assert body["deleteOptions"] == {"preconditions": {"uid": "uid-w0"}, "gracePeriodSeconds": 0}


def test_a_pod_list_whose_continue_token_expired_restarts_from_the_first_page():
    server = FakeServer()
    pages = [HTTPResponse(200, b'{"items":[{"metadata":{"name":"a"}}],"metadata":{"continue":"t1"}}'),
             err(410, "The provided continue parameter is too old"),
             HTTPResponse(200, b'{"items":[{"metadata":{"name":"a"}},{"metadata":{"name":"b"}}],"metadata":{}}')]
    for page in pages:
        server.inject("GET", r"^/api/v1/pods$", page)
    pods = LiveCluster(server.api).list_pods(None)
    assert [p["metadata"]["name"] for p in pods] == ["a", "b"]


def test_a_500_while_listing_is_an_error_naming_the_list():
    server = FakeServer()
    server.inject("GET", r"^/api/v1/pods$", err(500, "etcdserver: request timed out"))
    with pytest.raises(ClusterAPIError, match=r"listing pods.core: etcdserver: request timed out \(HTTP 500\)"):
        LiveCluster(server.api).list_pods(None)


# ---- Leases ---------------------------------------------------------------------------------------

def test_lease_acquire_decides_again_on_409_with_what_the_winner_wrote():
    import datetime as dt

    server = FakeServer()
    leases = LeaseClient(server.api, "repack-system", "repack-execute", timeout=5)
    now = dt.datetime(2026, 7, 30, tzinfo=dt.timezone.utc)
    assert leases.acquire("a", 30, now, lambda rec: True) == (True, True)

    def b_wins():        # b writes between our read and our replace
        lease = server.objects[f"{LEASES}/repack-execute"]
        server._store(f"{LEASES}/repack-execute", {**lease, "spec": {**lease["spec"], "holderIdentity": "b"}})
        return None      # then our replace reaches the server, on a stale resourceVersion
    server.inject("PUT", r"/leases/repack-execute$", b_wins)
    seen = []

    def decide(rec):
        seen.append(rec.holder)
        return rec.holder in ("a", "c")
    assert leases.acquire("c", 30, now, decide) == (False, False)
    assert seen == ["a", "b"] and server.objects[f"{LEASES}/repack-execute"]["spec"]["holderIdentity"] == "b"
    assert all(r[3] == 5 for r in server.requests)      # Lease calls use the Lease's short timeout


def test_lease_renew_errors_propagate_to_the_caller():
    import datetime as dt

    server = FakeServer()
    leases = LeaseClient(server.api, "repack-system", "repack-execute", timeout=5)
    now = dt.datetime(2026, 7, 30, tzinfo=dt.timezone.utc)
    leases.acquire("a", 30, now, lambda rec: True)
    server.inject("PUT", r"/leases/repack-execute$", timeout())
    with pytest.raises(ClusterAPIError, match="updating lease repack-system/repack-execute: cannot reach"):
        leases.renew("a", now)
