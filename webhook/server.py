"""The webhook's HTTP server: gunicorn's threaded worker, made safe against idle and slow peers.

The API server calls the webhook on every pod creation in the cluster and gives up after the
configuration's timeoutSeconds (5 s; failurePolicy Ignore then admits the pod ungated). A server
whose few threads are tied up by peers that connect and send nothing, or finish the TLS handshake
and then stall, or dribble a request a byte at a time, makes every real review miss that window:
the cluster keeps working, but no replacement pod is steered and a repack fails.

gunicorn 27's gthread worker hands each new connection to a thread at once; the thread waits up to
5 s for a first byte, then does the TLS handshake and reads the request without a time limit. This
worker changes three things, and nothing else:

- a new connection waits on the worker's event loop, not in a thread, until it is readable
  (an idle peer costs a file descriptor), and is closed after IDLE_SECONDS if it stays silent;
  after the TLS handshake it goes back to the event loop if its request does not follow at once;
- every socket gets kernel send/receive timeouts (IO_SECONDS), so no single read or write waits
  longer than that;
- one reaper thread shuts down any connection still being served REQUEST_DEADLINE_SECONDS after
  its thread picked it up (handshake + request + response), which is what stops a peer that
  sends a byte just often enough to beat the per-read timeout.

It relies on the gthread worker's pending-connection machinery (gunicorn >= 27, < 28, pinned in
setup.py); the import fails with a message naming the version otherwise.
"""
from __future__ import annotations

import itertools
import selectors
import socket
import struct
import threading
import time
from functools import partial

import gunicorn
from gunicorn.workers import gthread

# Under the webhook configuration's timeoutSeconds (5): past it the API server has given up.
REQUEST_DEADLINE_SECONDS = 4.0
IO_SECONDS = 2.0
IDLE_SECONDS = 5.0
# After the handshake a client sends its request at once; a thread waits this long for it.
FIRST_REQUEST_WAIT_SECONDS = 0.05
REAPER_PERIOD_SECONDS = 0.1

if not all(hasattr(gthread.ThreadWorker, name) for name in ("on_pending_socket_readable", "murder_pending")):
    raise ImportError(f"webhook.server needs gunicorn's gthread worker of version 27 (found {gunicorn.__version__}); "
                      "install kubectl-repack[webhook] to get a supported version")


def _shutdown(fd: int) -> None:
    """Shut a connection down by descriptor, leaving the descriptor to its owner to close."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError:
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.detach()


class DeadlineReaper:
    """One thread that shuts down connections still being served past their deadline.

    Shutting down (not closing) wakes the serving thread from whatever read or write it is
    blocked in; that thread then fails the request and closes the socket as usual. watch/release
    and the shutdown share one lock, so a released connection is never shut down afterwards
    (its descriptor number may already belong to a new connection)."""

    def __init__(self, period: float = REAPER_PERIOD_SECONDS):
        self._lock = threading.Lock()
        self._live: dict[int, tuple[float, int]] = {}
        self._tokens = itertools.count()
        self._period = period
        self.reaped = 0
        threading.Thread(target=self._run, name="repack-request-deadlines", daemon=True).start()

    def watch(self, fd: int, seconds: float) -> int:
        token = next(self._tokens)
        with self._lock:
            self._live[token] = (time.monotonic() + seconds, fd)
        return token

    def release(self, token: int) -> None:
        with self._lock:
            self._live.pop(token, None)

    def _run(self) -> None:
        while True:
            time.sleep(self._period)
            now = time.monotonic()
            with self._lock:
                for token in [t for t, (deadline, _) in self._live.items() if deadline <= now]:
                    _, fd = self._live.pop(token)
                    _shutdown(fd)
                    self.reaped += 1


def _set_io_timeouts(sock: socket.socket, seconds: float) -> None:
    # Kernel timeouts hold whatever Python's blocking mode is set to later (gunicorn flips it).
    value = struct.pack("ll", int(seconds), int((seconds % 1) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


class BoundedThreadWorker(gthread.ThreadWorker):
    """gthread, with idle connections kept off the threads and every request bounded in time."""

    def init_process(self):
        self.reaper = DeadlineReaper()
        super().init_process()

    def accept(self, listener):
        try:
            client_sock, client_addr = listener.accept()
        except BlockingIOError:
            return
        except OSError:
            return  # the peer went away between readiness and accept
        self.nr_conns += 1
        _set_io_timeouts(client_sock, IO_SECONDS)
        conn = gthread.TConn(self.cfg, client_sock, client_addr, listener.getsockname())
        conn.timeout = time.monotonic() + IDLE_SECONDS
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    def handle(self, conn):
        token = self.reaper.watch(conn.sock.fileno(), REQUEST_DEADLINE_SECONDS)
        try:
            if not conn.initialized:
                conn.sock.setblocking(True)
                conn.init()  # the TLS handshake, bounded by the I/O timeouts and the deadline
                if not conn.is_http2 and not _readable(conn.sock, FIRST_REQUEST_WAIT_SECONDS):
                    # Handshake done, no request yet: wait on the event loop, not in this thread.
                    conn.data_ready = False
                    return gthread._DEFER
            return super().handle(conn)
        finally:
            self.reaper.release(token)


def _readable(sock, seconds: float) -> bool:
    """Whether a request is there to read within `seconds` (TLS may hold decrypted bytes already)."""
    if getattr(sock, "pending", None) and sock.pending():
        return True
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_READ)
        return bool(sel.select(timeout=seconds))


WORKER_CLASS = f"{__name__}.BoundedThreadWorker"

__all__ = ["BoundedThreadWorker", "DeadlineReaper", "WORKER_CLASS", "REQUEST_DEADLINE_SECONDS",
           "IO_SECONDS", "IDLE_SECONDS"]
