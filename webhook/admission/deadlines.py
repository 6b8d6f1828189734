"""What bounds a worker thread of webhook.admission.worker once it has a connection: kernel
send/receive timeouts on the socket, and one reaper that shuts the connection down when serving
it outlasts its deadline (the application plus writing the response)."""
from __future__ import annotations

import itertools
import socket
import struct
import threading
import time

REAPER_PERIOD_SECONDS = 0.1


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


def set_io_timeouts(sock: socket.socket, seconds: float) -> None:
    """Kernel send/receive timeouts on a connection: they hold whatever Python's blocking mode is
    set to later (gunicorn flips it)."""
    value = struct.pack("ll", int(seconds), int((seconds % 1) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
