"""The Flask surface: status codes, claims across requests, readiness, metrics."""
from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from tests.unit.webhook.builders import PLACEMENT_KEY, move, owner, pod, relocation, review_request, rs_pod, run
from tests.unit.webhook.patching import apply_patch, decode
from webhook.admission.app import create_app
from webhook.common.metrics import WebhookMetrics
from webhook.admission.relocation_store import RelocationStore

RS = owner("ReplicaSet", "web-7f8d9c")
RUN = run(relocations=[relocation("web-7f8d9c-aaaaa", group="g", planned="node-1"),
                       relocation("web-7f8d9c-bbbbb", group="g", planned="node-2")],
          moves=[move("demo", "g", RS, ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"])])


class Clock:
    def __init__(self):
        self.now = datetime(2026, 7, 30, 10, 0, tzinfo=timezone.utc)

    def __call__(self):
        return self.now


@pytest.fixture
def env():
    store, metrics, clock = RelocationStore(key=PLACEMENT_KEY), WebhookMetrics(), Clock()
    store.replace_all([RUN])
    lease = {"fresh": True}
    app = create_app(store, lambda now: lease["fresh"], metrics, clock=clock)
    return app.test_client(), store, metrics, clock, lease


def post(client, body):
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    return client.post("/mutate", data=data, content_type="application/json")


def victim_of(resp, obj=None):
    """The victim named by the patched pod's annotation (None when unpatched)."""
    result = apply_patch(obj or rs_pod("web-7f8d9c", "7f8d9c"), decode(resp.get_json()))
    return (result["metadata"].get("annotations") or {}).get("repack.volcano.sh/relocation-victim")


def test_match_then_next_record_then_none(env):
    client, *_ = env
    assert victim_of(post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c")))) == "web-7f8d9c-aaaaa"
    assert victim_of(post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c")))) == "web-7f8d9c-bbbbb"
    # Both claimed: a claim never withholds a record (a forged review could make one), so the third
    # pod gets the oldest again; the coordinator records whichever pod it observes first.
    assert victim_of(post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c")))) == "web-7f8d9c-aaaaa"


def test_dry_run_does_not_claim(env):
    client, *_ = env
    post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c"), dry_run=True))
    assert victim_of(post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c")))) == "web-7f8d9c-aaaaa"


def test_claim_expires_after_ttl_and_clears_when_run_records_replacement(env):
    client, store, _, clock, _ = env
    assert victim_of(post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c")))) == "web-7f8d9c-aaaaa"
    clock.now += timedelta(seconds=31)  # the pod never showed up in the run: record reopens
    assert victim_of(post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c")))) == "web-7f8d9c-aaaaa"
    taken = json.loads(json.dumps(RUN))
    taken["status"]["relocations"][0]["placement"]["replacementPodName"] = "web-7f8d9c-zzzzz"
    store.upsert(taken)
    assert victim_of(post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c")))) == "web-7f8d9c-bbbbb"


def test_stale_lease_means_no_gate(env):
    client, _, metrics, _, lease = env
    lease["fresh"] = False
    ops = decode(post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c"))).get_json())
    assert ops and not any(op["path"].startswith("/spec/schedulingGates") for op in ops)
    assert metrics.value("matches_total") == 1 and metrics.value("gates_total") == 0


MALFORMED = [
    ("not-json", b"{not json"),
    ("empty-body", b""),
    ("json-array", [1]),
    ("wrong-version", {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}}),
    ("missing-uid", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}),
    ("object-is-string", review_request("a pod")),
    ("invalid-utf8", b"\xff\xfe\x00"),
]


@pytest.mark.parametrize("body", [m[1] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_review_is_400_with_reason(env, body):
    client, _, metrics, _, _ = env
    resp = post(client, body)
    assert resp.status_code == 400
    assert resp.get_json()["reason"]
    assert metrics.value("errors_total") == 1


def test_internal_failure_fails_open_not_500(env):
    client, store, metrics, _, _ = env

    def boom(now):
        raise RuntimeError("broken index")

    store.snapshot_locked = boom
    resp = post(client, review_request(pod("x"), uid="u-1"))
    assert resp.status_code == 200
    assert resp.get_json()["response"] == {"uid": "u-1", "allowed": True}
    assert metrics.value("errors_total") == 1


def test_get_on_mutate_is_not_a_500(env):
    client, *_ = env
    assert client.get("/mutate").status_code == 405


def test_healthz_and_readyz_follow_sync():
    store = RelocationStore(key=PLACEMENT_KEY)
    client = create_app(store, lambda now: True, WebhookMetrics()).test_client()
    assert client.get("/healthz").status_code == 200
    assert client.get("/readyz").status_code == 503
    store.replace_all([])
    assert client.get("/readyz").status_code == 200


def metric(text: str, name: str) -> float:
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert m, f"{name} missing"
    return float(m.group(1))


def test_metrics_count_requests(env):
    client, *_ = env
    post(client, review_request(rs_pod("web-7f8d9c", "7f8d9c")))
    post(client, review_request(pod("unrelated")))
    post(client, review_request(pod("x"), operation="UPDATE"))
    post(client, b"junk")
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp.mimetype == "text/plain"
    text = resp.get_data(as_text=True)
    assert metric(text, "repack_webhook_admissions_total") == 3
    assert metric(text, "repack_webhook_matches_total") == 1
    assert metric(text, "repack_webhook_gates_total") == 1
    assert metric(text, "repack_webhook_errors_total") == 1
    assert metric(text, "repack_webhook_admission_duration_seconds_count") == 4
    assert metric(text, 'repack_webhook_admission_duration_seconds_bucket{le="+Inf"}') == 4
    buckets = [float(v) for v in re.findall(r'_bucket\{le="[^"]+"\} (\S+)', text)]
    assert buckets == sorted(buckets)  # cumulative
    assert "# TYPE repack_webhook_admission_duration_seconds histogram" in text
    # The coordinator's counters live in the coordinator's registry, not as zeros here.
    assert "repack_webhook_nominations_total" not in text and "repack_webhook_lease_timeouts_total" not in text
    # The library's process and GC collectors come with it.
    for name in ("process_resident_memory_bytes", "process_cpu_seconds_total", "process_open_fds",
                 'python_gc_collections_total{generation="0"}', "python_info"):
        assert re.search(rf"^{re.escape(name)}[ {{]", text, re.M), f"{name} missing"


def test_metrics_negotiate_openmetrics_with_a_scraper_that_asks(env):
    client, *_ = env
    post(client, review_request(pod("unrelated")))
    resp = client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    assert resp.status_code == 200 and resp.mimetype == "application/openmetrics-text"
    text = resp.get_data(as_text=True)
    assert "repack_webhook_admissions_total 1.0" in text and text.endswith("# EOF\n")


def test_serves_admission_over_tls_verified_by_the_generated_ca(tmp_path):
    import http.client
    import ssl
    import threading

    from kubectl_repack.deploy import certs
    from webhook.admission.serve import make_tls_server

    bundle = certs.generate("repack-webhook", "repack-system", extra_sans=["127.0.0.1"])
    certs.write_pem(tmp_path, bundle)
    store = RelocationStore(key=PLACEMENT_KEY)
    store.replace_all([RUN])
    server = make_tls_server(create_app(store, lambda now: True, WebhookMetrics()), "127.0.0.1", 0, str(tmp_path))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        ctx = ssl.create_default_context(cadata=bundle.ca_cert_pem.decode())
        conn = http.client.HTTPSConnection("127.0.0.1", server.server_port, context=ctx, timeout=5)
        obj = rs_pod("web-7f8d9c", "7f8d9c")
        conn.request("POST", "/mutate", body=json.dumps(review_request(obj, uid="tls-1")),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        review = json.loads(resp.read())
        assert resp.status == 200 and review["response"]["uid"] == "tls-1"
        patched_pod = apply_patch(obj, decode(review))
        assert {"name": "repack.volcano.sh/placement"} in patched_pod["spec"]["schedulingGates"]
        conn.close()
    finally:
        server.shutdown()
        thread.join(5)


def test_repack_webhook_without_its_extra_says_which_extra_to_install(tmp_path):
    """A plain `pip install kubectl-repack` has no Flask or gunicorn: repack-webhook says what to
    install instead of a traceback. The child process sees flask and gunicorn as not installed."""
    import subprocess
    import sys

    code = ("import importlib.util, sys\n"
            "real = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda n, *a: None if n in ('flask', 'gunicorn') else real(n, *a)\n"
            "from webhook.__main__ import main\n"
            "sys.exit(main(['--cert-dir', sys.argv[1]]))\n")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr == ("error: repack-webhook needs flask and gunicorn, which come with the webhook extra: "
                        "pip install 'kubectl-repack[webhook]' (the container image has them)\n")
    assert "Traceback" not in r.stderr
