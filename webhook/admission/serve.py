"""`python -m webhook` / `repack-webhook`: serve the mutating webhook over TLS.

Production runs gunicorn (one worker process, its event loop serving every connection:
webhook.admission.worker; the relocation claims live in that process's memory, so several worker
processes could hand one record out twice). `--server
werkzeug` is a single-process threaded server for tests and loopback e2e runs.
"""
from __future__ import annotations

import argparse
import gc
import logging
import os
import ssl
import sys
from typing import Any, Callable, Optional, Sequence

from kubectl_repack.api import installed
from kubectl_repack.api.gates import COORDINATOR_LEASE_NAME, DEFAULT_REPLACEMENT_CREATORS
from kubectl_repack.deploy.certs import TLS_CRT, TLS_KEY
from webhook.admission.coordinator_liveness import LeaseState
from webhook.common.metrics import WebhookMetrics
from webhook.admission.relocation_store import RelocationStore

log = logging.getLogger("webhook")


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    """Command-line options (every one also readable from a REPACK_WEBHOOK_* variable)."""
    env = os.environ.get
    p = argparse.ArgumentParser(prog="repack-webhook", description=__doc__.splitlines()[0])
    p.add_argument("--host", default=env("REPACK_WEBHOOK_HOST", "0.0.0.0"))
    p.add_argument("--port", type=int, default=int(env("REPACK_WEBHOOK_PORT", "8443")))
    p.add_argument("--cert-dir", default=env("REPACK_WEBHOOK_CERT_DIR", "/etc/repack-webhook/tls"),
                   help=f"directory with {TLS_CRT} and {TLS_KEY} (the mounted Secret)")
    p.add_argument("--lease-namespace", default=env(installed.NAMESPACE_ENV, installed.NAMESPACE))
    p.add_argument("--lease-name", default=env("REPACK_COORDINATOR_LEASE", COORDINATOR_LEASE_NAME))
    p.add_argument("--kubeconfig", default=env("KUBECONFIG"),
                   help="kubeconfig file; in-cluster configuration when absent")
    p.add_argument("--server", choices=("gunicorn", "werkzeug"), default=env("REPACK_WEBHOOK_SERVER", "gunicorn"))
    p.add_argument("--log-level", default=env("REPACK_LOG_LEVEL", "INFO"))
    p.add_argument("--replacement-creators", default=env("REPACK_REPLACEMENT_CREATORS", ",".join(DEFAULT_REPLACEMENT_CREATORS)),
                   help="comma-separated usernames that re-create evicted pods; a pod created by anybody else "
                        "claims no relocation record")
    p.add_argument("--worker-tmp-dir", default=env("REPACK_WEBHOOK_WORKER_TMP_DIR", default_worker_tmp_dir()),
                   help="gunicorn's worker heartbeat directory (default /dev/shm, a tmpfs that stays "
                        "writable under readOnlyRootFilesystem; else Python's temp dir)")
    return p.parse_args(argv)


def default_worker_tmp_dir() -> Optional[str]:
    """/dev/shm when it is a writable directory (a container's always is), else None (gunicorn then
    uses tempfile.gettempdir(), which fails on a read-only root without a writable /tmp)."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def build(args: argparse.Namespace, start_watches: bool = True):
    """The Flask app wired to live watches (started here, in the serving process)."""
    from kubectl_repack.kube.client import connect
    from webhook.admission.app import create_app
    from webhook.admission.watches import LeaseWatcher, RepackRunWatcher, PlacementKeyPoller

    api_client = connect(args.kubeconfig)
    store, lease = RelocationStore(), LeaseState()
    if start_watches:
        PlacementKeyPoller(store, args.lease_namespace, api_client).start()
        RepackRunWatcher(store, api_client).start()
        LeaseWatcher(lease, args.lease_namespace, args.lease_name, api_client).start()
    creators = frozenset(u.strip() for u in args.replacement_creators.split(",") if u.strip())
    return create_app(store, lease.fresh, WebhookMetrics(), replacement_creators=creators)


class _HandshakeInThreadContext(ssl.SSLContext):
    """werkzeug wraps its listening socket, so by default each TLS handshake runs in the accept
    loop: one silent peer would stop every other connection. Deferred, the handshake runs on the
    connection's own thread, at its first read."""

    def wrap_socket(self, sock, *args, **kwargs):
        kwargs["do_handshake_on_connect"] = False
        return super().wrap_socket(sock, *args, **kwargs)


def make_tls_server(app: Any, host: str, port: int, cert_dir: str) -> Any:
    """A threaded werkzeug server over TLS (call `serve_forever`; port 0 picks a free one).
    Each connection is served on its own thread with the same per-read bound as production."""
    from werkzeug.serving import WSGIRequestHandler, make_server

    from webhook.admission.worker import IO_SECONDS

    class _Handler(WSGIRequestHandler):
        timeout = IO_SECONDS  # socketserver applies it to the connection before the first read

    ctx = _HandshakeInThreadContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(os.path.join(cert_dir, TLS_CRT), os.path.join(cert_dir, TLS_KEY))
    return make_server(host, port, app, threaded=True, ssl_context=ctx, request_handler=_Handler)


def serve_werkzeug(app: Any, host: str, port: int, cert_dir: str) -> None:
    """Serve with werkzeug over TLS until interrupted (tests, loopback e2e)."""
    server = make_tls_server(app, host, port, cert_dir)
    log.info("serving on https://%s:%d", host, server.server_port)
    server.serve_forever()


def serve_gunicorn(args: argparse.Namespace, app_factory: Optional[Callable[[], Any]] = None) -> None:
    """gunicorn over TLS, one worker process (webhook.admission.worker); the app is built inside the worker.

    `app_factory` replaces the live-cluster wiring (benchmarks serve a synthetic index).
    """
    from gunicorn.app.base import BaseApplication

    from webhook.admission.worker import WORKER_CLASS

    class _App(BaseApplication):
        def load_config(self) -> None:
            self.cfg.set("bind", f"{args.host}:{args.port}")
            self.cfg.set("workers", 1)
            self.cfg.set("worker_class", WORKER_CLASS)  # gthread, bounded against idle and slow peers
            self.cfg.set("threads", 1)   # unused: the worker serves every request on its event loop
            self.cfg.set("certfile", os.path.join(args.cert_dir, TLS_CRT))
            self.cfg.set("keyfile", os.path.join(args.cert_dir, TLS_KEY))
            self.cfg.set("timeout", 30)
            self.cfg.set("graceful_timeout", 10)
            self.cfg.set("accesslog", None)
            self.cfg.set("loglevel", args.log_level.lower())
            if getattr(args, "worker_tmp_dir", None):
                self.cfg.set("worker_tmp_dir", args.worker_tmp_dir)

        def load(self) -> Any:
            app = app_factory() if app_factory else build(args)
            # Long-lived objects built so far never become garbage; keeping them out of the
            # collector and collecting young objects less often takes GC pauses off the p99.
            gc.collect()
            gc.freeze()
            gc.set_threshold(20_000, 20, 20)
            return app

    _App().run()


def missing_extra(server: str) -> str:
    """What to install when the webhook extra is missing ("" when it is there): pip installs the
    plugin without a web server unless asked."""
    import importlib.util

    needed = ["flask", "prometheus_client"] + (["gunicorn"] if server == "gunicorn" else [])
    missing = [name for name in needed if importlib.util.find_spec(name) is None]
    if not missing:
        return ""
    return (f"repack-webhook needs {' and '.join(missing)}, which come with the webhook extra: "
            "pip install 'kubectl-repack[webhook]' (the container image has them)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Entry point of `repack-webhook`."""
    args = parse_args(argv)
    problem = missing_extra(args.server)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    for name in (TLS_CRT, TLS_KEY):
        if not os.path.exists(os.path.join(args.cert_dir, name)):
            log.error("missing %s in --cert-dir %s", name, args.cert_dir)
            return 2
    if args.server == "werkzeug":
        serve_werkzeug(build(args), args.host, args.port, args.cert_dir)
    else:
        serve_gunicorn(args)
    return 0
