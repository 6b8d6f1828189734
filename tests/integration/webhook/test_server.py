"""The webhook's servers under idle and slow peers: a real review is answered within the webhook's
own timeout (5 s, the API server's limit) while 16 sockets sit idle, 8 more finished the TLS
handshake and stall, and 4 dribble a request a byte at a time. This is a functional deadline (past
it the API server gives up and admits the pod unsteered), not a benchmark: the latency figures are
in bench/webhook_latency.py (--slow, --idle, --idle-tcp).

Before webhook.admission.worker, gunicorn's gthread worker held a thread per silent connection (for 5 s
each, then without limit once TLS was up) and werkzeug did every TLS handshake in its accept
loop, so these reviews waited 9.5 s and forever respectively.
"""
from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time

import pytest

from kubectl_repack.deploy import certs
from tests.unit.webhook.builders import review_request, rs_pod
from tests.unit.webhook.patching import apply_patch, decode
from webhook.admission.worker import REQUEST_DEADLINE_SECONDS

WEBHOOK_TIMEOUT = 5.0
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def tls(tmp_path):
    bundle = certs.generate("repack-webhook", "repack-system", extra_sans=["127.0.0.1"])
    certs.write_pem(tmp_path, bundle)
    return str(tmp_path), ssl.create_default_context(cadata=bundle.ca_cert_pem.decode())


def _wait_ready(port, ctx, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=2)
            conn.request("GET", "/readyz")
            if conn.getresponse().status == 200:
                conn.close()
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the webhook server did not become ready")


class Hostile:
    """Idle TCP sockets, TLS sessions that stall after the handshake, and slow-drip requests."""

    def __init__(self, port, ctx, idle=16, stalled=8, dripping=4):
        self.port, self.ctx = port, ctx
        self.sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(idle)]
        for _ in range(stalled):
            raw = socket.create_connection(("127.0.0.1", port), timeout=5)
            self.sockets.append(ctx.wrap_socket(raw, server_hostname="127.0.0.1"))
        self.drips = []
        self.stop = threading.Event()
        for _ in range(dripping):
            raw = socket.create_connection(("127.0.0.1", port), timeout=5)
            s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\n")
            self.drips.append({"sock": s, "closed_after": None, "t0": time.monotonic()})
        self.thread = threading.Thread(target=self._drip, daemon=True)
        self.thread.start()

    def _drip(self):
        # One byte every 1.5 s: under any per-read timeout, so only a whole-request deadline stops it.
        while not self.stop.wait(1.5):
            for d in self.drips:
                if d["closed_after"] is None:
                    try:
                        d["sock"].sendall(b"X")
                    except OSError:
                        d["closed_after"] = time.monotonic() - d["t0"]

    def close(self):
        self.stop.set()
        self.thread.join(5)
        for s in self.sockets + [d["sock"] for d in self.drips]:
            try:
                s.close()
            except OSError:
                pass


def _review(port, ctx, uid, gated=False):
    obj = rs_pod("web-7f8d9c", "7f8d9c")
    t0 = time.monotonic()
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=WEBHOOK_TIMEOUT)
    conn.request("POST", "/mutate", body=json.dumps(review_request(obj, uid=uid)),
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    review = json.loads(resp.read())
    conn.close()
    elapsed = time.monotonic() - t0
    assert resp.status == 200 and review["response"]["uid"] == uid and review["response"]["allowed"]
    if gated:  # the first review of the replacement claims its record and gets the gate
        patched = apply_patch(obj, decode(review))
        assert {"name": "repack.volcano.sh/placement"} in patched["spec"]["schedulingGates"]
    return elapsed


def test_gunicorn_answers_within_the_webhook_timeout_while_peers_idle_stall_and_drip(tls):
    cert_dir, ctx = tls
    port = _free_port()
    child = subprocess.Popen([sys.executable, "-m", "tests.unit.webhook.serve_fixture", str(port), cert_dir], cwd=REPO)
    try:
        _wait_ready(port, ctx)
        hostile = Hostile(port, ctx)
        try:
            time.sleep(0.5)  # let the server take every hostile connection in
            elapsed = [_review(port, ctx, f"under-load-{i}", gated=i == 0) for i in range(3)]
            assert max(elapsed) < WEBHOOK_TIMEOUT, elapsed
            # The drips are cut at the request deadline, not left to hold a thread.
            time.sleep(REQUEST_DEADLINE_SECONDS + 2.5)
            closed = [d["closed_after"] for d in hostile.drips]
            assert all(c is not None and c < REQUEST_DEADLINE_SECONDS + 3.5 for c in closed), closed
            assert _review(port, ctx, "after") < WEBHOOK_TIMEOUT
        finally:
            hostile.close()
    finally:
        child.terminate()
        child.wait(10)


def test_werkzeug_answers_while_a_peer_sits_idle_before_its_handshake(tls):
    from tests.unit.webhook.serve_fixture import app
    from webhook.admission.serve import make_tls_server

    cert_dir, ctx = tls
    server = make_tls_server(app(), "127.0.0.1", 0, cert_dir)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    idle = [socket.create_connection(("127.0.0.1", server.server_port)) for _ in range(4)]
    try:
        assert _review(server.server_port, ctx, "werkzeug", gated=True) < WEBHOOK_TIMEOUT
    finally:
        for s in idle:
            s.close()
        server.shutdown()
        thread.join(5)
