"""The one small HTTP server of the leader processes: liveness and metrics on a port of their own.

The coordinator answers /metrics with its registry (anything else: "ok"), the controller /healthz
with whether its loop still ticks. Each process says what a path answers (`respond`); this module
owns the serving: a daemon thread, one thread per request, no access log (the probes would
flood it).
"""
from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

Answer = tuple[int, str, bytes]   # HTTP status, Content-Type, body


def serve(port: int, respond: Callable[[str], Answer], name: str) -> ThreadingHTTPServer:
    """Answer every GET with `respond(path)` on all addresses at `port`, on a daemon thread `name`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            status, content_type, body = respond(self.path)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server
