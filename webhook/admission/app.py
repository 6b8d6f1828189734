"""The webhook's HTTP surface: thin Flask views over the pure `admission.review_outcome`.

Views parse JSON, map `AdmissionReviewError` to 400 with a JSON reason, and never answer 500:
an unexpected failure on a request whose uid is known is answered `allowed: true` without a
patch (fail open), anything else with 400. Records are claimed under the store's lock in the
same critical section as the decision, so two concurrent pods get different records where there
are enough; a claim never withholds a record (kubectl_repack.api.matching.match), so forged
reviews cannot keep genuine replacements from theirs (SEC-5).
"""
from __future__ import annotations

import json
import logging
import time
from datetime import datetime, timezone
from typing import Any, Callable, Optional, Protocol

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import HTTPException

from kubectl_repack.api import installed
from webhook.admission.review import AdmissionReviewError, record_creator, review_outcome
from kubectl_repack.api.matching import DEFAULT_SCHEDULER_NAMES
from kubectl_repack.api.relocations import RecordKey, RelocationIndex
from webhook.common.metrics import WebhookMetrics

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 3 * 1024 * 1024   # the API server caps admission bodies near this size too
RUN_CREATOR_PATH = "/run-creator"  # kubectl_repack.deploy.manifests points the RepackRun webhook here


class IndexProvider(Protocol):
    """What the app needs from the relocation store (see `relocation_store.RelocationStore`)."""

    @property
    def lock(self) -> Any: ...

    @property
    def synced(self) -> bool: ...

    def snapshot_locked(self, now: datetime) -> RelocationIndex: ...

    def claim_locked(self, key: RecordKey, now: datetime) -> None: ...

    @property
    def key(self) -> Optional[bytes]: ...


def _utcnow() -> datetime:
    return datetime.now(timezone.utc)


def _fail_open(uid: str) -> dict:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "response": {"uid": uid, "allowed": True}}


def create_app(index_provider: IndexProvider, lease_provider: Callable[[datetime], bool],
               metrics: Optional[WebhookMetrics] = None, clock: Callable[[], datetime] = _utcnow,
               scheduler_names: frozenset[str] = DEFAULT_SCHEDULER_NAMES,
               replacement_creators: Optional[frozenset[str]] = None) -> Flask:
    """Build the Flask app: /mutate and /run-creator (POST), /healthz, /readyz, /metrics.

    /run-creator signs nothing: it only fills in annotations that the API server's admission policy
    checks (webhook.admission.record_creator). /mutate MACs the marks it adds with the key the
    store holds (the placement key, `index_provider.key`). `replacement_creators`: who may re-create an
    evicted pod (a pod created by anybody else claims no record; None: no check)."""
    app = Flask(installed.WEBHOOK)
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    metrics = metrics if metrics is not None else WebhookMetrics()
    app.extensions["repack_metrics"] = metrics

    def bad_request(reason: str, status: int = 400) -> Response:
        metrics.inc("errors_total")
        resp = jsonify({"reason": reason})
        resp.status_code = status
        return resp

    def failed_open(body: Any) -> Response:
        """An unexpected failure: `allowed` without a patch when the review's uid is known, else 400."""
        request_ = body.get("request") if isinstance(body, dict) else None
        uid = request_.get("uid") if isinstance(request_, dict) else None
        if isinstance(uid, str) and uid:
            metrics.inc("errors_total")
            return jsonify(_fail_open(uid))
        return bad_request("internal error while reviewing the request")

    @app.post("/mutate")
    def mutate() -> Response:
        started = time.perf_counter()
        try:
            body, problem = _json_body()
            if problem:
                return bad_request(problem)
            now = clock()
            gate_allowed = bool(lease_provider(now))
            try:
                with index_provider.lock:
                    index = index_provider.snapshot_locked(now)
                    outcome = review_outcome(body, index, gate_allowed, now, scheduler_names=scheduler_names,
                                             creators=replacement_creators, mac_key=index_provider.key)
                    if outcome.match is not None and not outcome.dry_run:
                        index_provider.claim_locked(outcome.match.record.key, now)
            except AdmissionReviewError as exc:
                return bad_request(str(exc))
            except Exception:  # noqa: BLE001 - fail open, never 500
                log.exception("admission review failed; answering allowed without a patch")
                return failed_open(body)
            metrics.inc("admissions_total")
            if outcome.match is not None:
                metrics.inc("matches_total")
                record = outcome.match.record
                log.info("pod %s/%s replaces %s/%s of run %s (record %d, rule %s, gated %s)",
                         record.namespace, _pod_name(body) or "<generated>", record.namespace,
                         record.victim_pod_name, record.run_name, record.index, outcome.match.rule,
                         outcome.gated)
            if outcome.gated:
                metrics.inc("gates_total")
            return jsonify(outcome.response)
        finally:
            metrics.observe_latency(time.perf_counter() - started)

    @app.post(RUN_CREATOR_PATH)
    def run_creator() -> Response:
        """RepackRun CREATE/UPDATE: fill in (or keep) the creator annotations."""
        body, problem = _json_body()
        if problem:
            return bad_request(problem)
        try:
            return jsonify(record_creator(body))
        except AdmissionReviewError as exc:
            return bad_request(str(exc))
        except Exception:  # noqa: BLE001 - never 500; the admission policy decides anyway
            log.exception("run creator review failed; answering allowed without a patch")
            return failed_open(body)

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        if index_provider.synced:
            return Response("ok\n", mimetype="text/plain")
        return Response("relocation index not synced yet\n", status=503, mimetype="text/plain")

    @app.get("/metrics")
    def metrics_view() -> Response:
        body, content_type = metrics.exposition(request.headers.get("Accept"))
        return Response(body, content_type=content_type)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        resp = jsonify({"reason": f"{exc.code} {exc.name}: {exc.description}"})
        resp.status_code = exc.code or 400
        return resp

    return app


def _json_body() -> tuple:
    """(the request's JSON body, '') or (None, why it is not JSON)."""
    try:
        return json.loads(request.get_data(cache=False) or b""), ""
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"body is not valid JSON: {exc}"
    except RecursionError:
        return None, "body is not valid JSON: nested too deeply"


def _pod_name(body: Any) -> str:
    try:
        meta = body["request"]["object"]["metadata"]
        return str(meta.get("name") or "")
    except (KeyError, TypeError, AttributeError):
        return ""
