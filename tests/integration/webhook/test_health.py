"""The health/metrics server bounds what a peer can hold (SEC-4): idle or dribbling connections
are closed at the deadline and free their thread, at most `max_connections` are served at once,
and a real probe is still answered. Real sockets on loopback; no sleep beyond the deadline (each
wait is a blocking recv with a timeout, which returns as soon as the server closes)."""
from __future__ import annotations

import socket
import time

import pytest

from webhook.common.health import MAX_REQUEST_BYTES, read_request_head, serve

DEADLINE = 0.5


def respond(path):
    return 200, "text/plain", f"ok {path}\n".encode()


@pytest.fixture
def server():
    srv = serve(0, respond, "health-test", host="127.0.0.1", deadline=DEADLINE, max_connections=3)
    yield srv
    srv.shutdown()
    srv.server_close()


def connect(srv):
    s = socket.create_connection(srv.server_address[:2], timeout=5)
    return s


def read_all(s, timeout=5.0):
    s.settimeout(timeout)
    out = b""
    while True:
        chunk = s.recv(4096)
        if not chunk:
            return out
        out += chunk


def get(srv, path="/healthz"):
    with connect(srv) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        return read_all(s)


def test_a_probe_is_answered_and_the_connection_closed(server):
    reply = get(server, "/metrics")
    assert reply.startswith(b"HTTP/1.0 200 OK\r\n") and reply.endswith(b"ok /metrics\n")


def test_an_idle_connection_is_closed_at_the_deadline(server):
    with connect(server) as s:
        started = time.monotonic()
        reply = read_all(s, timeout=DEADLINE + 3)   # returns when the server closes (before: it never did)
        took = time.monotonic() - started
    assert reply.startswith(b"HTTP/1.0 408"), reply
    assert took < DEADLINE + 2


def test_a_dribbling_peer_is_cut_at_the_deadline_however_often_it_sends(server):
    with connect(server) as s:
        started = time.monotonic()
        s.sendall(b"GET /healthz HTTP/1.1\r\n")
        s.settimeout(0.1)
        reply = b""
        while time.monotonic() - started < DEADLINE + 3:   # one header byte every 0.1 s, under any per-read timeout
            try:
                s.sendall(b"X")
                reply += s.recv(4096)
                if reply:
                    break
            except socket.timeout:
                continue
            except OSError:
                break
        took = time.monotonic() - started
    assert took < DEADLINE + 2, took
    assert reply.startswith(b"HTTP/1.0 408") or reply == b"", reply


def test_connections_past_the_cap_get_no_thread_and_the_port_recovers(server):
    idle = [connect(server) for _ in range(3)]     # take every slot
    try:
        with connect(server) as extra:
            extra.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
            assert read_all(extra, timeout=DEADLINE / 2) == b""    # closed at once, unanswered
        for s in idle:   # their deadline frees the slots
            assert read_all(s, timeout=DEADLINE + 3).startswith(b"HTTP/1.0 408")
    finally:
        for s in idle:
            s.close()
    assert get(server).startswith(b"HTTP/1.0 200")


def test_read_request_head_bounds():
    a, b = socket.socketpair()
    with a, b:
        b.sendall(b"GET / HTTP/1.0\r\n" + b"X" * (MAX_REQUEST_BYTES + 10))
        with pytest.raises(ValueError):
            read_request_head(a, time.monotonic() + 5)
    a, b = socket.socketpair()
    with a, b:
        clock = iter([0.0, 10.0]).__next__     # a fake clock: the deadline passes after one read
        b.sendall(b"GET / HT")
        with pytest.raises(TimeoutError):
            read_request_head(a, 1.0, clock=clock)
