"""The production server (gunicorn, webhook.admission.worker's event loop) over TLS on 127.0.0.1 under
slow clients: more peers dripping a request a byte at a time than gunicorn's own worker has threads do not
delay a well-behaved review, and each is cut off with a 408 once its request is not whole
READ_DEADLINE_SECONDS after its first byte; one peer address holds at most MAX_PEER_CONNECTIONS
connections; and malformed or oversized requests are answered 4xx from the event loop (SEC-4).

The bounds are functional, not benchmarks (figures: bench/webhook_latency.py --slow/--idle): with
gunicorn's own gthread handling, 16 drippers held all 8 threads for REQUEST_DEADLINE_SECONDS each
and a review waited about twice that, with no 408 for the drippers.
"""
from __future__ import annotations

import http.client
import json
import os
import selectors
import socket
import ssl
import subprocess
import sys
import threading
import time

import pytest

from kubectl_repack.deploy import certs
from tests.unit.webhook.builders import pod, review_request
from webhook.admission.app import MAX_BODY_BYTES
from webhook.admission.framing import frame_request
from webhook.admission.worker import MAX_BUFFERED_BODY_BYTES, READ_DEADLINE_SECONDS, REQUEST_DEADLINE_SECONDS

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
THREADS = 8  # gunicorn's gthread default here before the event-loop worker: twice as many drippers
DRIPPERS = 2 * THREADS
# A well-behaved review is answered long before any dripper could be (they would need minutes).
PROMPT = 2.0
CAP = 6  # the per-peer cap of the capped server below
CAPPED_CHILD = ("import sys\nimport webhook.admission.worker as s\n"
                f"s.MAX_PEER_CONNECTIONS = {CAP}\n"
                "s.READ_DEADLINE_SECONDS = 5.0\ns.IDLE_SECONDS = 30.0  # no time-outs during a test\n"
                "from tests.unit.webhook.serve_fixture import main\nsys.exit(main(sys.argv[1:]))\n")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, tmp, child_args):
        bundle = certs.generate("repack-webhook", "repack-system", extra_sans=["127.0.0.1"])
        certs.write_pem(tmp, bundle)
        self.ctx = ssl.create_default_context(cadata=bundle.ca_cert_pem.decode())
        self.port = _free_port()
        self.child = subprocess.Popen([sys.executable, *child_args, str(self.port), str(tmp)], cwd=REPO)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if self.get("/readyz")[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        self.stop()
        raise AssertionError("the webhook server did not become ready")

    def connect(self, timeout=5.0):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return self.ctx.wrap_socket(raw, server_hostname="127.0.0.1")

    def get(self, path):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=5)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def review(self, uid, conn=None, body=None):
        """POST one AdmissionReview (a pod no relocation matches); (status, review, seconds)."""
        own = conn is None
        conn = conn or http.client.HTTPSConnection("127.0.0.1", self.port, context=self.ctx, timeout=15)
        t0 = time.monotonic()
        try:
            conn.request("POST", "/mutate", body=body or json.dumps(review_request(pod("p"), uid=uid)),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
        finally:
            if own:
                conn.close()
        return resp.status, json.loads(data), time.monotonic() - t0

    def stop(self):
        self.child.terminate()
        try:
            self.child.wait(10)
        except subprocess.TimeoutExpired:
            self.child.kill()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("tls"), ["-m", "tests.unit.webhook.serve_fixture"])
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    srv = Server(tmp_path_factory.mktemp("tls-capped"), ["-c", CAPPED_CHILD])
    yield srv
    srv.stop()


def _ok(status, review, uid):
    return status == 200 and review["kind"] == "AdmissionReview" and review["response"]["uid"] == uid \
        and review["response"]["allowed"] is True


class Drippers:
    """TLS clients that send a request (with a body they would need minutes for) a byte every
    `interval` s, each noting when and how the server ended its connection."""

    def __init__(self, server, count, interval=0.25, body=400):
        head = (f"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {body}\r\n\r\n").encode()
        self.data = head + b" " * body
        self.interval = interval
        self.clients = [{"sock": server.connect(), "sent": 0, "first": None, "ended": None, "answer": b""}
                        for _ in range(count)]
        self.all_started = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        sel = selectors.DefaultSelector()
        for c in self.clients:
            c["sock"].setblocking(False)
            sel.register(c["sock"], selectors.EVENT_READ, c)
        limit = time.monotonic() + 30  # bounded whatever the server does
        next_drip = time.monotonic()
        while not self.stop.is_set() and time.monotonic() < limit and any(c["ended"] is None for c in self.clients):
            for key, _ in sel.select(max(0.0, next_drip - time.monotonic())):
                self._readable(sel, key.data)
            if time.monotonic() >= next_drip:
                next_drip += self.interval
                for c in self.clients:
                    if c["ended"] is None and c["sent"] < len(self.data):
                        try:
                            c["sock"].send(self.data[c["sent"]:c["sent"] + 1])
                        except OSError:
                            self._end(sel, c)
                            continue
                        c["sent"] += 1
                        c["first"] = c["first"] or time.monotonic()
                self.all_started.set()
        sel.close()

    def _readable(self, sel, c):
        """The server wrote: TLS session tickets (nothing for the application), an answer, or EOF."""
        while c["ended"] is None or c["answer"]:
            try:
                data = c["sock"].recv(4096)
            except (ssl.SSLWantReadError, BlockingIOError):
                return
            except OSError:
                data = b""
            if not data:
                return self._end(sel, c)
            c["ended"] = c["ended"] or time.monotonic()
            c["answer"] += data

    def _end(self, sel, c):
        c["ended"] = c["ended"] or time.monotonic()
        sel.unregister(c["sock"])
        c["sock"].close()

    def close(self):
        self.stop.set()
        self.thread.join(5)
        for c in self.clients:
            c["sock"].close()


def test_reviews_are_answered_promptly_while_more_slow_clients_than_threads_drip(server):
    drippers = Drippers(server, DRIPPERS)
    try:
        assert drippers.all_started.wait(5)
        time.sleep(0.3)  # every dripper has sent its first bytes and is under way
        for i in range(3):
            status, review, seconds = server.review(f"under-drip-{i}")
            assert _ok(status, review, f"under-drip-{i}")
            # With a thread per dripper the review waits for a thread: REQUEST_DEADLINE_SECONDS at least.
            assert seconds < PROMPT < REQUEST_DEADLINE_SECONDS, seconds
        # Nothing the drippers did has taken a thread: they are all still connected, unanswered.
        assert all(c["ended"] is None or c["ended"] - c["first"] >= READ_DEADLINE_SECONDS - 0.05
                   for c in drippers.clients)
    finally:
        drippers.close()


def test_a_slow_client_is_cut_off_with_a_408_after_the_read_deadline(server):
    drippers = Drippers(server, DRIPPERS)
    try:
        drippers.thread.join(READ_DEADLINE_SECONDS + 10)
        for c in drippers.clients:
            assert c["ended"] is not None, "a dripper was never cut off"
            held = c["ended"] - c["first"]
            assert READ_DEADLINE_SECONDS - 0.05 <= held < READ_DEADLINE_SECONDS + 1.5, held
            assert c["answer"].startswith(b"HTTP/1.1 408 "), c["answer"][:80]
            assert c["sent"] < len(drippers.data)
        status, review, _ = server.review("after-drips")
        assert _ok(status, review, "after-drips")
    finally:
        drippers.close()


def test_a_peer_past_its_cap_with_every_connection_busy_is_refused_more(capped):
    busy = []
    try:
        for _ in range(CAP):
            s = capped.connect()
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # a request under way
            busy.append(s)
        time.sleep(0.3)  # the server has read them all
        with pytest.raises(OSError):  # closed at accept: the TLS handshake fails
            extra = capped.connect()
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert extra.recv(100), "the server answered a connection past the cap"
            raise AssertionError("the server served a connection past the cap")
        for s in busy:  # the busy ones were not touched
            s.setblocking(False)
            with pytest.raises((ssl.SSLWantReadError, BlockingIOError)):
                s.recv(100)
    finally:
        for s in busy:
            s.close()
    _eventually_ok(capped, "after-cap")


def test_a_peer_at_its_cap_loses_its_oldest_idle_connection_to_a_new_one(capped):
    idle = [socket.create_connection(("127.0.0.1", capped.port)) for _ in range(CAP)]
    try:
        time.sleep(0.3)  # all accepted
        status, review, _ = capped.review("evicts")
        assert _ok(status, review, "evicts")
        idle[0].settimeout(5)
        assert idle[0].recv(10) == b"", "the oldest idle connection was not closed"
        for s in idle[1:]:
            s.settimeout(0)
            with pytest.raises(BlockingIOError):
                s.recv(10)
    finally:
        for s in idle:
            s.close()


def _eventually_ok(srv, uid):
    deadline = time.monotonic() + 5
    while True:
        try:
            status, review, _ = srv.review(uid)
            assert _ok(status, review, uid)
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_large_bodies_are_read_only_while_they_fit_the_shared_buffer_budget(capped):
    holders = MAX_BUFFERED_BODY_BYTES // MAX_BODY_BYTES
    assert holders < CAP
    body = json.dumps({"pad": "a" * (MAX_BODY_BYTES - 11)}).encode()
    assert len(body) == MAX_BODY_BYTES
    head = b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
    conns = [capped.connect(timeout=10) for _ in range(holders + 1)]
    answers = {}

    def finish(i):
        conns[i].sendall(body[1000:])
        answers[i] = conns[i].recv(20)

    try:
        for s in conns[:holders]:
            s.sendall(head + body[:1000])
        time.sleep(0.3)  # these hold the budget
        conns[holders].sendall(head + body[:1000])
        time.sleep(0.3)
        late = threading.Thread(target=finish, args=(holders,), daemon=True)
        late.start()  # its body is not read while the others hold the whole budget
        late.join(1.0)
        assert holders not in answers
        finish(0)  # one completes (the app answers 400: not an AdmissionReview), its share comes back
        late.join(5)
        assert answers[0].startswith(b"HTTP/1.1 400") and answers[holders].startswith(b"HTTP/1.1 400")
    finally:
        for s in conns:
            s.close()


# --- whole requests only: keep-alive, pipelining, large bodies, Expect, malformed input --------
def test_keep_alive_and_pipelined_requests_are_answered_in_order(server):
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=server.ctx, timeout=5)
    try:
        for i in range(3):
            status, review, _ = server.review(f"keepalive-{i}", conn=conn)
            assert _ok(status, review, f"keepalive-{i}")
    finally:
        conn.close()
    bodies = [json.dumps(review_request(pod("p"), uid=f"pipelined-{i}")).encode() for i in range(3)]
    raw = b"".join(b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   b"Content-Length: %d\r\n\r\n%s" % (len(b), b) for b in bodies)
    with server.connect() as s:
        s.sendall(raw)  # three requests in one write: two wait in the buffer (or the SSL object)
        f = s.makefile("rb")
        for i in range(3):
            status = f.readline()
            headers = dict(line.decode().split(":", 1) for line in iter(f.readline, b"\r\n"))
            review = json.loads(f.read(int(headers["Content-Length"])))
            assert status.startswith(b"HTTP/1.1 200 ") and review["response"]["uid"] == f"pipelined-{i}"


def test_a_peer_that_does_not_read_its_answers_stalls_nobody_and_gets_them_all_when_it_reads(server):
    """Answers are written without blocking: a peer that pipelines requests and reads nothing fills
    the socket's buffers, and its connection then waits for the socket to drain while every other
    peer is served; once it reads, it gets every answer, whole and in order."""
    n = 1500    # x 4.7 kB of metrics: more than the kernel buffers on loopback hold (4 MB at most)
    plain = socket.socket()
    plain.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    plain.settimeout(10)
    plain.connect(("127.0.0.1", server.port))
    with server.ctx.wrap_socket(plain, server_hostname="127.0.0.1") as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * n)
        time.sleep(1.0)   # the server has written what fits and waits to write the rest
        status, review, seconds = server.review("while-unread")
        assert _ok(status, review, "while-unread") and seconds < PROMPT, seconds
        f = s.makefile("rb")
        for i in range(n):
            head = f.readline()
            headers = {k.strip().lower(): v.strip() for k, v in
                       (line.decode().split(":", 1) for line in iter(f.readline, b"\r\n"))}
            body = f.read(int(headers["content-length"]))
            assert head.startswith(b"HTTP/1.1 200 ") and b"repack_webhook" in body, (i, head, body[:80])


def test_a_peer_that_never_reads_its_answers_is_closed_after_the_request_deadline(server):
    n = 1500
    plain = socket.socket()
    plain.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    plain.settimeout(10)
    plain.connect(("127.0.0.1", server.port))
    with server.ctx.wrap_socket(plain, server_hostname="127.0.0.1") as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * n)
        time.sleep(REQUEST_DEADLINE_SECONDS + 1.5)
        got, ended = b"", None
        while ended is None:
            try:
                data = s.recv(1 << 20)   # a server still waiting to write would send it all
            except (ssl.SSLError, ConnectionResetError) as exc:   # closed with requests unread: a reset
                ended = repr(exc)
                break
            if not data:
                ended = "EOF"
            got += data
    assert ended and got.count(b"HTTP/1.1 200 ") < n, (ended, got.count(b"HTTP/1.1 200 "))


def test_a_large_body_is_read_whole_across_many_tls_records(server):
    big = pod("p", annotations={"big": "x" * (2 * 1024 * 1024)})
    status, review, _ = server.review("large", body=json.dumps(review_request(big, uid="large")))
    assert _ok(status, review, "large")


def test_expect_100_continue_is_answered_before_the_body(server):
    body = json.dumps(review_request(pod("p"), uid="expect")).encode()
    with server.connect() as s:
        s.sendall(b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Expect: 100-continue\r\nContent-Length: %d\r\n\r\n" % len(body))
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body)
        resp = http.client.HTTPResponse(s)
        resp.begin()  # http.client skips any further 100 (gunicorn sends its own)
        assert resp.status == 200 and json.loads(resp.read())["response"]["uid"] == "expect"


@pytest.mark.parametrize("head, status", [
    (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 3145729\r\n\r\n", 413),
    (b"POST /mutate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", 411),
    (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 12x\r\n\r\n", 400),
    (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nab", 400),
    (b"POST /mutate HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (70 * 1024), 431),
    (b"\x16\x03 not http at all\r\n\r\n", 400),
    (b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{{{{{", 400),
])
def test_malformed_or_oversized_requests_get_a_4xx_not_a_5xx_or_a_wait(server, head, status):
    with server.connect() as s:
        s.sendall(head)
        s.settimeout(READ_DEADLINE_SECONDS / 2)  # answered at once, not at the read deadline
        answer = s.recv(200)
    assert answer.startswith(b"HTTP/1.1 %d " % status), answer[:100]


def test_frame_request_finds_one_whole_request():
    head = b"POST /mutate HTTP/1.1\r\nHost: x\r\ncontent-length:  5 \r\n\r\n"
    assert frame_request(head + b"abc").end == 0 and frame_request(head + b"abc").need == 5
    assert frame_request(head + b"abcdeGET /").end == len(head) + 5
    assert frame_request(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").end == 27
    assert frame_request(b"GET / HTTP/1.1\r\nHost").end == 0 and frame_request(b"GET / HTTP/1.1\r\nHost").error is None
    assert frame_request(b"POST / HTTP/1.1\r\n folded: y\r\n\r\n").error[0] == 400
    assert frame_request(b"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").expect_continue
    assert not frame_request(b"POST / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").expect_continue
