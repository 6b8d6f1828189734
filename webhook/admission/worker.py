"""The webhook's HTTP server: gunicorn's gthread worker turned into one event loop, safe against idle
and slow peers.

The API server calls the webhook on every pod creation in the cluster and gives up after the
configuration's timeoutSeconds (5 s; failurePolicy Ignore then admits the pod ungated). A server
whose few threads are tied up by peers that connect and send nothing, or finish the TLS handshake
and then stall, or dribble a request a byte at a time, makes every real review miss that window:
the cluster keeps working, but no replacement pod is steered and a repack fails.

gunicorn 27's gthread worker hands each connection to a thread, which does the TLS handshake and
reads the request with blocking reads: a peer that sends a byte just often enough to beat any
per-read timeout holds that thread for as long as it likes, and 16 of them hold all 8. This
worker does all of its socket I/O on gunicorn's selector loop (one thread), never blocking:

- the loop does the TLS handshake and reads each request, headers and Content-Length body, with
  non-blocking reads; only a whole buffered request is served, so a slow or silent peer costs a
  file descriptor and a buffer, never a thread;
- a whole request is served on the loop itself: gunicorn parses it from that buffer and runs the
  Flask app, whose work is in memory only (the relocation index, the Lease state, the metrics),
  and whatever gunicorn writes is buffered and then sent by the loop with non-blocking writes,
  the headers and body in one TLS record where they fit. Handing each request to a thread and back
  cost two thread wake-ups and a pipe write per review, most of the review's latency on a busy
  2-core machine (SEC-4; measured by bench/webhook_latency.py: p99 8.6 -> 5.1 ms at 300 reviews/s);
- a request must arrive whole within READ_DEADLINE_SECONDS of its first byte (so must a TLS
  handshake); past it the peer gets a 408 and is disconnected. A connection that sends nothing
  is closed after IDLE_SECONDS (new) or the keep-alive timeout (after a handshake or a response);
- a body over MAX_BODY_BYTES (the app's cap) is refused with 413 before it is read, headers over
  framing.MAX_HEADER_BYTES with 431, a request without a usable Content-Length framing with 400 or 411
  (Transfer-Encoding is not accepted: the API server always sends Content-Length). These answers
  come from the event loop and close the connection; none is a 5xx;
- bodies above SMALL_BODY_BYTES are read only while their sizes fit in MAX_BUFFERED_BODY_BYTES
  together (otherwise they wait, unread, under their deadline), so slow peers declaring 3 MiB
  bodies cannot make the process buffer 3 MiB each;
- one peer address holds at most MAX_PEER_CONNECTIONS connections: past it the peer's oldest
  connection that is idle (no request under way) is closed to make room, and if it has none the
  new connection is closed at once;
- a response not all sent REQUEST_DEADLINE_SECONDS after the request was whole (a peer that does
  not read) is given up: the connection is closed.

The Flask app is served unchanged, through gunicorn's own parser and WSGI layer. HTTP/1.1 only
(no HTTP/2, no uwsgi protocol, no PROXY protocol: check_config refuses them). It relies on the
gthread worker's internals (gunicorn >= 27, < 28, pinned in setup.py); the import fails with a
message naming the version otherwise.

The app must not block (no network I/O in a request): while it runs, no other connection is served.

Non-blocking TLS, exactly: `recv` raises SSLWantReadError when the record under way is not all in
yet (wait until the socket is readable) and SSLWantWriteError when OpenSSL must write first (wait
until it is writable, then read again); `do_handshake` likewise. Decrypted bytes can sit in the
SSL object with nothing left on the socket (`pending()`), where the selector cannot see them: the
loop reads until SSLWantReadError whenever it waits for more, and reads again, before waiting,
each time a connection comes back from a thread (it stops reading once one request is complete).
"""
from __future__ import annotations

import heapq
import itertools
import os
import selectors
import ssl
import time
from collections import deque
from functools import partial

import gunicorn
from gunicorn import http as ghttp
from gunicorn import sock as gsock
from gunicorn.workers import gthread

from webhook.admission.app import MAX_BODY_BYTES
from webhook.admission.framing import Frame, error_response, frame_request

# Under the webhook configuration's timeoutSeconds (5): past it the API server has given up.
REQUEST_DEADLINE_SECONDS = 4.0
# Per-read bound of the werkzeug server (webhook.admission.serve), which serves a thread per connection.
IO_SECONDS = 2.0
IDLE_SECONDS = 5.0
# A request (first byte to last) and a TLS handshake must each take no longer than this.
READ_DEADLINE_SECONDS = 1.0
# Bodies up to this size are always read; larger ones share MAX_BUFFERED_BODY_BYTES.
SMALL_BODY_BYTES = 64 * 1024
MAX_BUFFERED_BODY_BYTES = 4 * MAX_BODY_BYTES
# Connections at once from one peer address (the API server needs a handful; 8 threads serve them).
MAX_PEER_CONNECTIONS = 64
# gunicorn's loop touches its heartbeat file on every pass (a utime(2) each, slow on a busy disk);
# the arbiter only needs one within its 30 s timeout.
HEARTBEAT_SECONDS = 1.0
RECV_BYTES = 64 * 1024

if not all(hasattr(gthread.ThreadWorker, name) for name in ("handle_request", "_keepalive_after", "handle_error", "wait_for_and_dispatch_events")) \
        or not hasattr(gthread, "TConn") or not gunicorn.__version__.startswith("27."):
    raise ImportError(f"webhook.admission.worker needs gunicorn's gthread worker of version 27 (found {gunicorn.__version__}); "
                      "install kubectl-repack[webhook] to get a supported version")


# --- the worker ------------------------------------------------------------------------------------
NEW, HANDSHAKE, WAIT, READING, BLOCKED, WRITING, CLOSED = "new", "handshake", "wait", "reading", "blocked", "writing", "closed"
_IDLE_STATES = (NEW, WAIT)  # no request under way: what the per-peer cap may close


class _Conn(gthread.TConn):
    """A connection and its event-loop state."""

    def __init__(self, cfg, sock, client, server, peer, on_ready):
        super().__init__(cfg, sock, client, server)  # makes the socket non-blocking
        self.peer = peer
        self.on_ready = partial(on_ready, self)   # the poller's callback
        self.state = NEW
        self.deadline = 0.0
        self.buf = bytearray()
        self.head = None          # the Frame of the request under way once its headers are in
        self.scanned = 0          # bytes of buf already searched for the end of the headers
        self.events = 0           # what the poller waits for on this socket (0: not registered)
        self.reserved = 0         # bytes of MAX_BUFFERED_BODY_BYTES held by this request's body
        self.continue_sent = False
        self.out = bytearray()    # the response being sent
        self.keep = False         # keep the connection alive once `out` is sent
        self.initialized = True   # gunicorn's TConn.init() (TLS wrap, parser) is done on the loop
        self.data_ready = True


class BoundedThreadWorker(gthread.ThreadWorker):
    """gthread's selector loop serving whole requests itself (see the module docstring)."""

    @classmethod
    def check_config(cls, cfg, log):
        super().check_config(cfg, log)
        if "h2" in cfg.http_protocols or cfg.http2_cleartext != "off":
            raise RuntimeError("webhook.admission.worker serves HTTP/1.1 only: drop h2 from http_protocols and http2_cleartext")
        if cfg.protocol != "http" or cfg.proxy_protocol != "off":
            raise RuntimeError("webhook.admission.worker serves plain HTTP/1.1 requests: no uwsgi protocol, no PROXY protocol")

    def init_process(self):
        self.peers: dict = {}             # peer address -> {conn: None}, in accept order
        self.timers: list = []            # heap of (deadline, seq, conn); superseded entries are skipped
        self.timer_seq = itertools.count()
        self.body_budget = MAX_BUFFERED_BODY_BYTES
        self.blocked: deque = deque()     # connections whose body waits for budget, unread
        self.ssl_ctx = None
        self.ssl_ctx_key = None
        self.stop_capped = False
        self.last_heartbeat = float("-inf")
        super().init_process()

    def notify(self):
        now = time.monotonic()
        if now - self.last_heartbeat >= HEARTBEAT_SECONDS:
            self.last_heartbeat = now
            super().notify()

    # --- connections in and out ------------------------------------------------------------------
    def accept(self, listener):
        try:
            client_sock, client_addr = listener.accept()
        except OSError:
            return  # nothing to accept, or the peer went away between readiness and accept
        peer = client_addr[0] if isinstance(client_addr, tuple) and client_addr else "local"
        mine = self.peers.get(peer)
        if mine is not None and len(mine) >= MAX_PEER_CONNECTIONS:
            idle = next((c for c in mine if c.state in _IDLE_STATES), None)
            if idle is None:
                self.log.debug("peer %s holds %d connections, all busy: refused one more", peer, len(mine))
                client_sock.close()
                return
            self.log.debug("peer %s holds %d connections: closed its oldest idle one", peer, len(mine))
            self._close(idle)
        self.nr_conns += 1
        conn = _Conn(self.cfg, client_sock, client_addr, listener.getsockname(), peer, self._on_ready)
        self.peers.setdefault(peer, {})[conn] = None
        self._set_deadline(conn, NEW, time.monotonic() + IDLE_SECONDS)
        self._watch(conn, selectors.EVENT_READ)

    def _close(self, conn, answer: bytes = b""):
        if conn.state == CLOSED:
            return
        if answer:
            try:
                conn.sock.send(answer)  # best effort, non-blocking: a short answer fits the send buffer
            except (OSError, ValueError):
                pass
        self._watch(conn, 0)
        conn.state = CLOSED
        conn.buf, conn.head = bytearray(), None
        mine = self.peers.get(conn.peer)
        if mine is not None:
            mine.pop(conn, None)
            if not mine:
                del self.peers[conn.peer]
        self.nr_conns -= 1
        conn.close()
        conn.on_ready = None  # no reference cycle to wait for the collector (it holds the SSL object)
        self._release(conn)

    def _watch(self, conn, events: int):
        """Make the poller wait for `events` on the connection (0: not at all)."""
        if events == conn.events:
            return
        try:
            if not events:
                self.poller.unregister(conn.sock)
            elif not conn.events:
                self.poller.register(conn.sock, events, conn.on_ready)
            else:
                self.poller.modify(conn.sock, events, conn.on_ready)
        except (KeyError, ValueError, OSError):
            conn.events = 0
            if events:
                self._close(conn)
            return
        conn.events = events

    def _set_deadline(self, conn, state: str, deadline: float):
        conn.state, conn.deadline = state, deadline
        heapq.heappush(self.timers, (deadline, next(self.timer_seq), conn))

    # --- the event loop --------------------------------------------------------------------------
    def wait_for_and_dispatch_events(self, timeout):
        if self.timers:
            timeout = max(0.0, min(timeout, self.timers[0][0] - time.monotonic()))
        super().wait_for_and_dispatch_events(timeout)
        self._expire()

    def _expire(self):
        now = time.monotonic()
        if not self.alive and not self.stop_capped:
            # Stopping: idle connections get STOP_KEEPALIVE_LINGER at most, as gunicorn's kept-alive ones.
            self.stop_capped = True
            for conn in [c for mine in self.peers.values() for c in mine if c.state in _IDLE_STATES]:
                self._set_deadline(conn, conn.state, min(conn.deadline, now + gthread.STOP_KEEPALIVE_LINGER))
        while self.timers and self.timers[0][0] <= now:
            deadline, _, conn = heapq.heappop(self.timers)
            if conn.deadline != deadline or conn.state == CLOSED:
                continue  # superseded by a later deadline
            if conn.state in (READING, BLOCKED):
                self.log.debug("request from %s not whole after %g s: 408", conn.peer, READ_DEADLINE_SECONDS)
                self._close(conn, error_response(408, f"request not complete within {READ_DEADLINE_SECONDS:g} s"))
            else:
                self._close(conn)  # silent, or a TLS handshake that did not finish in time

    def _on_ready(self, conn, _fileobj):
        try:
            if conn.state == NEW:
                self._start(conn)
            elif conn.state == HANDSHAKE:
                self._handshake(conn)
            elif conn.state in (WAIT, READING):
                self._read(conn)
            elif conn.state == WRITING:
                self._flush(conn)
            # BLOCKED, CLOSED: an earlier event of this batch moved it on; nothing to do
        except Exception:  # noqa: BLE001 - one connection's failure must not stop the loop for all
            self.log.exception("serving a connection from %s failed; closing it", conn.peer)
            self._close(conn)

    def _start(self, conn):
        """First bytes on a new connection: a TLS handshake (or a plain request) begins."""
        if not self.cfg.is_ssl:
            conn.state = WAIT
            return self._read(conn)
        self._watch(conn, 0)  # the TLS socket is a new object on the same descriptor
        try:
            conn.sock = self._ssl_context().wrap_socket(conn.sock, server_side=True, do_handshake_on_connect=False,
                                                        suppress_ragged_eofs=self.cfg.suppress_ragged_eofs)
        except (OSError, ValueError) as exc:
            self.log.debug("TLS setup for %s failed: %s", conn.peer, exc)
            return self._close(conn)
        self._set_deadline(conn, HANDSHAKE, time.monotonic() + READ_DEADLINE_SECONDS)
        self._handshake(conn)

    def _handshake(self, conn):
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            return self._watch(conn, selectors.EVENT_READ)
        except ssl.SSLWantWriteError:
            return self._watch(conn, selectors.EVENT_WRITE)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            self.log.debug("TLS handshake with %s failed: %s", conn.peer, exc)
            return self._close(conn)
        self._set_deadline(conn, WAIT, time.monotonic() + (self.cfg.keepalive or IDLE_SECONDS))
        self._read(conn)  # the request usually follows the handshake at once, maybe decrypted already

    def _ssl_context(self):
        """gunicorn builds a context (and loads the key pair) per connection: this one is reused while
        the certificate and key files stay the same, so a replaced pair is still picked up."""
        try:
            key = tuple((s.st_ino, s.st_mtime_ns, s.st_size) for s in map(os.stat, (self.cfg.certfile, self.cfg.keyfile)))
        except OSError:
            key = self.ssl_ctx_key  # mid-replacement: keep the pair already loaded
        if self.ssl_ctx is None or key != self.ssl_ctx_key:
            self.ssl_ctx, self.ssl_ctx_key = gsock.ssl_context(self.cfg), key
        return self.ssl_ctx

    def _read(self, conn):
        """Read what the socket has, never blocking, until one request is whole; then serve it."""
        if conn.state == WAIT and conn.buf:  # the start of a pipelined request came with the last one
            self._set_deadline(conn, READING, time.monotonic() + READ_DEADLINE_SECONDS)
        while True:
            frame = self._frame(conn)
            if frame.error:
                self.log.debug("request from %s refused: %s %s", conn.peer, *frame.error)
                return self._close(conn, error_response(*frame.error))
            if frame.end:
                return self._dispatch(conn, frame.end)
            if frame.need is not None:
                if not self._reserve(conn, frame.need):
                    conn.state = BLOCKED  # its deadline keeps running
                    self._watch(conn, 0)
                    self.blocked.append(conn)
                    return
                if frame.expect_continue and not conn.continue_sent:
                    conn.continue_sent = True
                    try:
                        conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")
                    except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                        pass  # the client sends its body after a short wait of its own anyway
                    except (OSError, ValueError):
                        return self._close(conn)
            try:
                data = conn.sock.recv(RECV_BYTES)
            except (ssl.SSLWantReadError, BlockingIOError, InterruptedError):
                return self._watch(conn, selectors.EVENT_READ)  # nothing left inside the SSL object either
            except ssl.SSLWantWriteError:
                return self._watch(conn, selectors.EVENT_WRITE)
            except (OSError, ValueError):  # reset, TLS alert or error
                return self._close(conn)
            if not data:
                return self._close(conn)  # the peer closed (or sent close_notify)
            if conn.state == WAIT:
                self._set_deadline(conn, READING, time.monotonic() + READ_DEADLINE_SECONDS)
            conn.buf += data

    def _frame(self, conn) -> Frame:
        buf = conn.buf
        if conn.head is not None:
            end = conn.head.header_end + conn.head.need
            return conn.head if len(buf) < end else Frame(end=end)
        if buf[:2] == b"\r\n":  # RFC 9112 section 2.2: empty lines before a request line are ignored
            skip = 0
            while buf.startswith(b"\r\n", skip):
                skip += 2
            del buf[:skip]
            conn.scanned = 0
        if not buf:
            return Frame()
        frame = frame_request(buf, start=conn.scanned)
        conn.scanned = len(buf)
        if frame.header_end and not frame.end and not frame.error:
            conn.head = frame
        return frame

    def _reserve(self, conn, need: int) -> bool:
        if need <= SMALL_BODY_BYTES or conn.reserved:
            return True
        if need > self.body_budget:
            return False
        self.body_budget -= need
        conn.reserved = need
        return True

    def _release(self, conn):
        """Give a body's share of the budget back, and let waiting bodies in while it lasts."""
        if not conn.reserved:
            return
        self.body_budget += conn.reserved
        conn.reserved = 0
        while self.blocked:
            waiting = self.blocked[0]
            if waiting.state != BLOCKED:
                self.blocked.popleft()
                continue
            if not self._reserve(waiting, waiting.head.need):
                break
            self.blocked.popleft()
            waiting.state = READING
            self._read(waiting)

    def _dispatch(self, conn, end: int):
        """Serve one whole request: gunicorn parses it from these bytes (never the socket) and runs
        the app; the response goes out through `_flush`."""
        request, conn.buf = bytes(conn.buf[:end]), conn.buf[end:]
        conn.head, conn.scanned, conn.continue_sent = None, 0, False
        conn.parser = ghttp.get_parser(self.cfg, [request], conn.client)
        sock, conn.sock = conn.sock, _Buffered(conn.out)   # what gunicorn writes is kept in conn.out
        try:
            conn.keep = self._serve(conn)
        finally:
            conn.sock = sock
            conn.parser = None
        self._release(conn)
        if conn.out:
            self._set_deadline(conn, WRITING, time.monotonic() + REQUEST_DEADLINE_SECONDS)
            self._flush(conn)
        else:
            self._served(conn)

    def _serve(self, conn) -> bool:
        """gunicorn's handling of one request (WSGI environ, the app, the response): keep alive?"""
        req = None
        try:
            req = next(conn.parser)
            if not req:
                return False
            return self._keepalive_after(conn, self.handle_request(req, conn))
        except (StopIteration, ghttp.errors.NoMoreData) as exc:
            self.log.debug("request from %s ended early: %r", conn.peer, exc)
        except Exception as exc:  # noqa: BLE001 - gunicorn answers 400/500 for it, then closes
            self.handle_error(req, conn.sock, conn.client, exc)
        return False

    def _flush(self, conn):
        """Send what is left of the response without blocking; then keep the connection or close it."""
        out = conn.out
        while out:
            try:
                sent = conn.sock.send(out)
            except (ssl.SSLWantWriteError, BlockingIOError, InterruptedError):
                return self._watch(conn, selectors.EVENT_WRITE)
            except ssl.SSLWantReadError:
                return self._watch(conn, selectors.EVENT_READ)
            except (OSError, ValueError):
                return self._close(conn)
            del out[:sent]
        self._served(conn)

    def _served(self, conn):
        """A response is out: wait for the next request on a kept-alive connection, or close it."""
        if not conn.keep or not self.alive:
            return self._close(conn)
        self._set_deadline(conn, WAIT, time.monotonic() + self.cfg.keepalive)
        # A pipelined request may be in conn.buf or decrypted inside the SSL object already
        # (pending()), where the poller cannot see it: read it now. Anything else is on the socket
        # (reading stopped right after a whole record), where the poller sees it.
        if conn.buf or (isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending()):
            self.method_queue.defer(self._on_ready, conn, None)   # on the loop's next pass: no recursion
        else:
            self._watch(conn, selectors.EVENT_READ)


class _Buffered:
    """The socket gunicorn writes a response to while the app runs on the loop: it collects the
    bytes (sent by `BoundedThreadWorker._flush`, which never blocks)."""

    def __init__(self, out: bytearray):
        self.out = out

    def sendall(self, data) -> None:
        self.out += data

    def send(self, data) -> int:
        self.out += data
        return len(data)

    def close(self) -> None:        # gunicorn's error paths close the socket: _served closes it then
        pass

    def shutdown(self, how) -> None:
        pass

    def setblocking(self, flag) -> None:
        pass

    def gettimeout(self) -> float:   # gunicorn's error answers (util.write_nonblock) ask
        return 0.0


WORKER_CLASS = f"{__name__}.BoundedThreadWorker"

__all__ = ["BoundedThreadWorker", "WORKER_CLASS", "REQUEST_DEADLINE_SECONDS", "READ_DEADLINE_SECONDS",
           "IO_SECONDS", "IDLE_SECONDS", "MAX_PEER_CONNECTIONS"]
