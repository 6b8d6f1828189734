"""Run the production webhook server (gunicorn, webhook.admission.worker) on a synthetic index, in
a child process: `python -m tests.unit.webhook.serve_fixture PORT CERT_DIR`. No cluster needed."""
from __future__ import annotations

import argparse
import sys


def app():
    from tests.unit.webhook.admission.test_app import RUN
    from tests.unit.webhook.builders import PLACEMENT_KEY
    from webhook.admission.app import create_app
    from webhook.common.metrics import WebhookMetrics
    from webhook.admission.relocation_store import RelocationStore

    store = RelocationStore(key=PLACEMENT_KEY)
    store.replace_all([RUN])
    return create_app(store, lambda now: True, WebhookMetrics())


def main(argv=None) -> int:
    port, cert_dir = (argv or sys.argv[1:])[:2]
    from webhook.admission.serve import serve_gunicorn

    serve_gunicorn(argparse.Namespace(host="127.0.0.1", port=int(port), cert_dir=cert_dir,
                                      log_level="warning"), app_factory=app)
    return 0


if __name__ == "__main__":
    sys.exit(main())
