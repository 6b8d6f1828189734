"""kubectl's --request-timeout and repeated --as-group, end to end through the real entry point
against a real HTTP server on 127.0.0.1 that records what it receives (headers as sent on the
wire), and through the transport seam for every kind of call the kube layer makes (each must carry
the flag's timeout). A server that answers late (real time) is in tests/integration/kube."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kubectl_repack.kube import client as kclient
from kubectl_repack.kube.client import REQUEST_TIMEOUT, Overrides, connect
from tests.transport import use_transport
from kubectl_repack.kube.lease import LeaseClient
from kubectl_repack.kube.objects import SNAPSHOT_KINDS, LiveCluster, list_objects
from kubectl_repack.kube.runs import RunStore
from tests.unit.kube.fake_server import FakeServer

EXE = os.path.join(os.path.dirname(sys.executable), "kubectl-repack")


class Recorder:
    """An HTTP API server stand-in: answers 404 to everything once `before_answer()` returns, and
    keeps every request's method, path and headers (all values of a repeated header)."""

    def __init__(self, before_answer=lambda: None):
        self.requests, self.before_answer = [], before_answer
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self):
                recorder.requests.append((self.command, self.path, {
                    k.lower(): self.headers.get_all(k) for k in set(self.headers.keys())}))
                recorder.before_answer()
                body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                   "message": f"{self.path} not found", "code": 404}).encode()
                try:
                    self.send_response(404)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:  # the client gave up first
                    pass

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def api_server():
    servers = []

    def start(before_answer=lambda: None):
        servers.append(Recorder(before_answer))
        return servers[-1]
    yield start
    for s in servers:
        s.close()


def repack(*args, timeout=60):
    env = dict(os.environ, KUBECONFIG="/nonexistent/kubeconfig")
    env.pop("KUBERNETES_SERVICE_HOST", None)
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("command", [["status", "some-run"], ["plan", "--resource", "huawei.com/ascend-1980"],
                                     ["snapshot", "-o", "-"], ["uninstall"]], ids=lambda c: c[0])
def test_each_as_group_is_its_own_impersonate_group_header(api_server, command):
    server = api_server()
    r = repack(*command, "--server", server.url, "--as", "alice", "--as-group", "team-a",
               "--as-group", "system:masters", "--as-group", "x, y")
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert server.requests, "nothing reached the server"
    for method, path, headers in server.requests:
        assert headers["impersonate-user"] == ["alice"], (method, path)
        # Three header lines; a comma inside a group name stays inside that one group.
        assert headers["impersonate-group"] == ["team-a", "system:masters", "x, y"], (method, path)


def test_groups_given_after_the_command_win_and_without_groups_none_are_sent(api_server):
    server = api_server()
    r = repack("--as-group", "before", "status", "x", "--server", server.url, "--as", "alice", "--as-group", "after")
    assert r.returncode == 1
    assert [h["impersonate-group"] for _, _, h in server.requests] == [["after"]]
    server.requests.clear()
    repack("status", "x", "--server", server.url)
    assert all("impersonate-group" not in h and "impersonate-user" not in h for _, _, h in server.requests)


def test_groups_without_a_user_are_refused_before_anything_is_sent(api_server):
    server = api_server()
    r = repack("status", "x", "--server", server.url, "--as-group", "system:masters")
    assert r.returncode == 2 and r.stderr.startswith("error: --as-group needs --as"), r.stderr
    assert server.requests == []


@pytest.mark.parametrize("flag", ["1", "1s", "1000ms", "0.5s"])
def test_request_timeout_gives_up_on_a_server_that_never_answers(api_server, flag):
    """The server holds every answer until the test ends: the command returns (rather than hang
    until the harness kills it) only because the flag's timeout fired."""
    never = threading.Event()
    server = api_server(lambda: never.wait(120))
    try:
        r = repack("status", "some-run", "--server", server.url, "--request-timeout", flag)
    finally:
        never.set()
    assert r.returncode == 1, r.stderr
    assert r.stderr.startswith("error: reading repackrun some-run: cannot reach the API server")
    assert "timed out" in r.stderr and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("value", ["abc", "-1", "-5s", "1.5", "5 m", ""])
def test_an_invalid_request_timeout_is_a_usage_error_naming_the_flag(value):
    r = repack("status", "x", "--request-timeout", value)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: Invalid value for '--request-timeout'"), r.stderr


# ---- every kind of call carries the flag's timeout (transport seam) -------------------------------

@pytest.fixture
def no_kubeconfig(monkeypatch):
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


def _exercise(api):
    """One call of every kind the plugin makes: lists, reads, creates, writes, deletes, patches,
    evictions, Leases and requests by path."""
    store = RunStore(api)
    store.create({"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "r"},
                  "spec": {"mode": "DryRun"}})
    store.get("r")
    store.update_status("r", lambda st: st.update(phase="Succeeded"))
    store.delete("r")
    cluster = LiveCluster(api)
    for step in (store.list, lambda: list_objects(api, SNAPSHOT_KINDS[0]), lambda: cluster.list_pods("ns"), lambda: cluster.get_pod("ns", "p"),
                 lambda: cluster.list_pdbs("ns"), lambda: cluster.patch_pod("ns", "p", []),
                 lambda: cluster.nominate("ns", "p", "n1"), lambda: cluster.evict("ns", "p", "uid", None),
                 lambda: LeaseClient(api, "ns", "l").read()):
        try:
            step()
        except Exception:  # noqa: BLE001 - the fake knows no pods: the request was made, that is enough
            pass
    try:
        kclient.request(api, "GET", "/api/v1/namespaces/ns")
    except Exception:  # noqa: BLE001
        pass


@pytest.mark.parametrize("flag, sent", [(7, 7), (2.5, (2.5, 2.5)), (0, None)])
def test_every_request_carries_the_request_timeout(no_kubeconfig, flag, sent):
    fake = FakeServer()
    api = use_transport(connect(overrides=Overrides(server="https://fake:6443", request_timeout=flag)), fake.send)
    _exercise(api)
    assert len(fake.requests) >= 10
    # the Eviction call keeps its own shorter bound (kube.objects.EVICTION_REQUEST_TIMEOUT): within the
    # execute Lease's margin (tests/unit/engine/test_write_ahead.py checks it with this flag)
    assert {t for m, path, *_, t in fake.requests if not path.endswith("/eviction")} == {sent}, fake.requests


def test_without_the_flag_requests_keep_the_plugins_default(no_kubeconfig):
    fake = FakeServer()
    api = use_transport(connect(overrides=Overrides(server="https://fake:6443")), fake.send)
    _exercise(api)
    assert {t for m, path, *_, t in fake.requests if not path.endswith("/eviction")} == {REQUEST_TIMEOUT}


@pytest.mark.parametrize("flag, sent", [(30, 5), (2, 2), (0, 5)])
def test_a_shorter_bound_of_the_callers_own_is_kept(no_kubeconfig, flag, sent):
    # The Execute Lease's renewals are bounded to 5 s so that a hanging one cannot outlast the Lease.
    fake = FakeServer()
    api = use_transport(connect(overrides=Overrides(server="https://fake:6443", request_timeout=flag)), fake.send)
    fake._store("/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", {"metadata": {"name": "l"}})
    LeaseClient(api, "ns", "l", timeout=5).read()
    assert [t for *_, t in fake.requests] == [sent]
