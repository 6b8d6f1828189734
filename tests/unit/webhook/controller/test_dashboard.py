"""The Grafana dashboard (config/grafana/kubectl-repack.json, POLICY-3): valid JSON whose every
query parses as PromQL and names only metrics the controller serves; the panels the issue asks for
are there. (tests/e2e/test_gauge.py finds the same names in a scrape of the installed controller.)"""
from __future__ import annotations

import time

import pytest

import planner
from bench import hypernodes as bench_hypernodes
from planner.gauge import measure
from tests.grafana import dashboard_metric_names, load, metric_names, queries
from webhook.common.metrics import CONTROLLER_METRICS, ControllerMetrics


def served_sample_names() -> set:
    """The sample names a controller serves once it has refreshed its gauge (on a cluster with
    HyperNodes) and ended one Execute run."""
    from prometheus_client.parser import text_string_to_metric_families

    m = ControllerMetrics()
    m.set_gauge(measure(planner.load_objects(bench_hypernodes.generate(nodes=24, seed=1))), time.time(), 0.1)
    m.evicted()
    m.run_finished({"spec": {"mode": "Execute"},
                    "status": {"phase": "Succeeded", "result": {"freedNodeCount": 1},
                               "conditions": [{"type": "Complete", "status": "True", "reason": "ExecutionCompleted"}]}})
    return {s.name for f in text_string_to_metric_families(m.render()) for s in f.samples}


def test_every_dashboard_query_names_only_metrics_the_controller_serves():
    names = dashboard_metric_names()
    served = served_sample_names()
    assert names and names <= served, sorted(names - served)
    # and only the controller's own (no process_* or another process's counters)
    assert all(any(n == f or n.startswith(f + "_") for f in CONTROLLER_METRICS) for n in names), names


def test_the_dashboard_shows_what_the_issue_asks_for():
    d = load()
    titles = {p["title"] for p in d["panels"]}
    assert {"Fragmentation", "Freed nodes per run", "Evictions", "Pending gangs blocked by fragmentation"} <= titles
    by_title = {p["title"]: {n for t in p["targets"] for n in metric_names(t["expr"])} for p in d["panels"]}
    assert by_title["Fragmentation"] == {"repack_fragmentation_percent"}
    assert by_title["Freed nodes per run"] == {"repack_run_freed_nodes_sum", "repack_run_freed_nodes_count"}
    assert by_title["Evictions"] == {"repack_evictions_total"}
    assert by_title["Pending gangs blocked by fragmentation"] == {"repack_pending_blocked_podgroups"}
    assert all(p["datasource"]["uid"] == "${datasource}" for p in d["panels"])


def test_the_checker_refuses_what_it_must():
    """A query that does not parse, or that names a metric the controller does not serve, fails the check."""
    with pytest.raises(ValueError):
        metric_names("sum by (resource) (repack_fragmentation_percent")
    typo = {"panels": [{"title": "x", "targets": [{"refId": "A", "expr": "max(repack_fragmentaton_percent)"}]}]}
    assert not dashboard_metric_names(typo) <= served_sample_names()
    assert metric_names("increase(repack_runs_total[$__rate_interval])") == {"repack_runs_total"}
    assert [q for _, q in queries(load()) if q == "repack_fragmentation_percent"]   # the $resource variable's
