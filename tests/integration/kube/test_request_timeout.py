"""--request-timeout against a real HTTP server on 127.0.0.1 that answers late: without a short
timeout the plugin waits for the answer (what the flag's absence, 0 and a long value mean), and
with a short one it gives up within the flag's bound, not the server's delay."""
from __future__ import annotations

import time

import pytest

from tests.unit.kube.test_connection_flags import Recorder, repack


@pytest.fixture
def late_server():
    servers = []

    def start(delay):
        servers.append(Recorder(lambda: time.sleep(delay)))
        return servers[-1]
    yield start
    for s in servers:
        s.close()


@pytest.mark.parametrize("flag", [None, "0", "10s"])
def test_without_a_short_request_timeout_a_slow_answer_is_awaited(late_server, flag):
    server = late_server(1.5)
    args = ["status", "some-run", "--server", server.url] + (["--request-timeout", flag] if flag else [])
    r = repack(*args)
    assert r.returncode == 1 and "not found (HTTP 404)" in r.stderr, r.stderr


@pytest.mark.parametrize("flag", ["1s", "0.5s"])
def test_a_short_request_timeout_gives_up_before_the_late_answer(late_server, flag):
    server = late_server(4)
    started = time.monotonic()
    r = repack("status", "some-run", "--server", server.url, "--request-timeout", flag)
    took = time.monotonic() - started
    assert r.returncode == 1 and "timed out" in r.stderr, r.stderr
    assert took < 3.5, f"--request-timeout {flag}: the plugin waited {took:.1f} s"
