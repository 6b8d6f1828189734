"""The two processes' metrics: each in its own prometheus_client registry, with the library's process
and GC collectors, the counter names that dashboards and the e2e tests read, and the coordinator's
served over its own HTTP endpoint."""
from __future__ import annotations

import socket
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from webhook.coordinator.loop import serve_metrics
from webhook.common.metrics import COUNTERS, PREFIX, Metrics, WebhookMetrics

# The names served before the move to prometheus_client (README, dashboards, tests/e2e).
NAMES_BEFORE = {"repack_webhook_admissions_total", "repack_webhook_matches_total", "repack_webhook_gates_total",
                "repack_webhook_nominations_total", "repack_webhook_lease_timeouts_total",
                "repack_webhook_errors_total", "repack_webhook_admission_duration_seconds"}

# Added since: hints refused because the pod was bound meanwhile (Kubernetes >= 1.35).
ADDED = "repack_webhook_nominations_refused_bound_total"


def samples(text):
    return {s.name + (str(sorted(s.labels.items())) if s.labels else ""): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def repack_names(text):
    names = set()
    for family in text_string_to_metric_families(text):
        # *_created: when each series started (the library's, as in OpenMetrics); not a counter of ours
        if family.name.startswith(PREFIX) and not family.name.endswith("_created"):
            names.add(family.name + ("_total" if family.type == "counter" else ""))
    return names


def test_each_process_serves_only_its_own_counters_and_together_the_names_are_unchanged():
    webhook, coordinator = WebhookMetrics(), Metrics()
    assert repack_names(webhook.render()) == {
        "repack_webhook_admissions_total", "repack_webhook_matches_total", "repack_webhook_gates_total",
        "repack_webhook_errors_total", "repack_webhook_admission_duration_seconds"}
    assert repack_names(coordinator.render()) == {"repack_webhook_nominations_total",
                                                  "repack_webhook_lease_timeouts_total", ADDED}
    assert repack_names(webhook.render()) | repack_names(coordinator.render()) == NAMES_BEFORE | {ADDED}
    assert set(COUNTERS) == {n.removeprefix(PREFIX) for n in NAMES_BEFORE | {ADDED} if n.endswith("_total")}


@pytest.mark.parametrize("make", [WebhookMetrics, Metrics], ids=["webhook", "coordinator"])
def test_process_and_gc_metrics_come_with_the_library(make):
    values = samples(make().render())
    assert values["process_resident_memory_bytes"] > 0
    assert values["process_open_fds"] > 0
    assert "process_cpu_seconds_total" in values and "process_start_time_seconds" in values
    assert "python_gc_collections_total[('generation', '0')]" in values
    assert any(k.startswith("python_info") for k in values)


def test_registries_are_per_instance():
    a, b = Metrics(), Metrics()
    a.inc("nominations_total", 2)
    assert (a.value("nominations_total"), b.value("nominations_total")) == (2, 0)
    assert samples(a.render())["repack_webhook_nominations_total"] == 2.0


@pytest.mark.parametrize("make, foreign", [(WebhookMetrics, "nominations_total"), (Metrics, "gates_total"),
                                           (Metrics, "no_such_total")])
def test_a_counter_of_the_other_process_is_a_programming_error(make, foreign):
    m = make()
    with pytest.raises(KeyError):
        m.inc(foreign)
    with pytest.raises(KeyError):
        m.value(foreign)


def test_latency_histogram_keeps_its_buckets():
    m = WebhookMetrics()
    for seconds in (0.0004, 0.003, 2.0):
        m.observe_latency(seconds)
    values = samples(m.render())
    hist = "repack_webhook_admission_duration_seconds"
    assert values[f"{hist}_bucket[('le', '0.0005')]"] == 1
    assert values[f"{hist}_bucket[('le', '0.005')]"] == 2
    assert values[f"{hist}_bucket[('le', '1.0')]"] == 2
    assert values[f"{hist}_bucket[('le', '+Inf')]"] == 3 == values[f"{hist}_count"]
    assert values[f"{hist}_sum"] == pytest.approx(2.0034)


def test_the_coordinator_serves_its_registry():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    m = Metrics()
    serve_metrics(m, port)
    m.inc("lease_timeouts_total")
    # serve() has bound and is listening when it returns: the first connection is queued, no retry
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    values = samples(text)
    assert values["repack_webhook_lease_timeouts_total"] == 1 and values["repack_webhook_nominations_total"] == 0
    assert "repack_webhook_admissions_total" not in values and values["process_open_fds"] > 0
