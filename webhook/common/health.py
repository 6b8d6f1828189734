"""The one small HTTP server of the leader processes: liveness and metrics on a port of their own.

The coordinator answers /metrics with its registry (anything else: "ok"), the controller /healthz
with whether its loop still ticks. Each process says what a path answers (`respond`); this module
owns the serving: a daemon thread, one thread per connection, no access log (the probes would
flood it).

Whoever reaches the port cannot hold the process's threads (SEC-4): a connection gets one thread
for at most `deadline` seconds in all (the whole request must be in by then, however slowly it
dribbles; the socket's timeout is the time left, re-set before every read), at most
`max_connections` connections are served at once (past that a new connection is closed at once,
before it gets a thread), and each connection answers one GET and is closed (HTTP/1.0, no
keep-alive). A request line or headers over MAX_REQUEST_BYTES is answered 431.
"""
from __future__ import annotations

import socket
import socketserver
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any, Callable

Answer = tuple[int, str, bytes]   # HTTP status, Content-Type, body

DEFAULT_DEADLINE_SECONDS = 5.0     # a probe's whole request arrives in milliseconds
DEFAULT_MAX_CONNECTIONS = 16       # kubelet probes and one Prometheus scraper need a few
MAX_REQUEST_BYTES = 8192
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
            431: "Request Header Fields Too Large", 503: "Service Unavailable"}


class _Server(ThreadingHTTPServer):
    """ThreadingHTTPServer with a cap on the connections served at once."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 64

    def __init__(self, address: tuple, handler: Any, max_connections: int):
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)    # full: no thread for this one
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


def read_request_head(sock: socket.socket, deadline: float, clock: Callable[[], float] = time.monotonic) -> bytes:
    """The request line and headers (up to the blank line), read before `deadline` (a `clock`
    time); TimeoutError past it, ValueError over MAX_REQUEST_BYTES, b"" if the peer closed first."""
    buf = b""
    while b"\r\n\r\n" not in buf and b"\n\n" not in buf:
        left = deadline - clock()
        if left <= 0:
            raise TimeoutError("request not complete before the deadline")
        sock.settimeout(left)
        try:
            chunk = sock.recv(4096)
        except socket.timeout:
            raise TimeoutError("request not complete before the deadline") from None
        if not chunk:
            return b""
        buf += chunk
        if len(buf) > MAX_REQUEST_BYTES:
            raise ValueError("request head too large")
    return buf


def _answer(sock: socket.socket, status: int, content_type: str, body: bytes) -> None:
    head = (f"HTTP/1.0 {status} {_REASONS.get(status, 'OK')}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode("latin-1")
    sock.sendall(head + body)


def serve(port: int, respond: Callable[[str], Answer], name: str, host: str = "0.0.0.0",
          deadline: float = DEFAULT_DEADLINE_SECONDS,
          max_connections: int = DEFAULT_MAX_CONNECTIONS) -> ThreadingHTTPServer:
    """Answer every GET with `respond(path)` on `host`:`port`, on a daemon thread `name`; bounded
    as the module says. `server.shutdown()` stops it."""

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            sock: socket.socket = self.request
            until = time.monotonic() + deadline
            try:
                head = read_request_head(sock, until)
            except TimeoutError:
                self._send(408, b"request timeout\n", until)
                return
            except ValueError:
                self._send(431, b"request head too large\n", until)
                return
            except OSError:
                return
            if not head:
                return
            parts = head.split(b"\r\n", 1)[0].split(b"\n", 1)[0].split()
            if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
                self._send(400, b"bad request\n", until)
                return
            if parts[0] != b"GET":
                self._send(405, b"only GET\n", until)
                return
            status, content_type, body = respond(parts[1].decode("latin-1"))
            self._send(status, body, until, content_type)

        def _send(self, status: int, body: bytes, until: float, content_type: str = "text/plain") -> None:
            sock: socket.socket = self.request
            try:
                sock.settimeout(max(0.05, until - time.monotonic()))
                _answer(sock, status, content_type, body)
            except OSError:
                pass   # a peer that does not read: closed below

    server = _Server((host, port), Handler, max_connections)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server
