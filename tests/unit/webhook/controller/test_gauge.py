"""The controller's live gauge and counters (POLICY-3): refreshed from one read of the
cluster per interval on the leader only, never per scrape; a failed refresh keeps the last figures;
served on /metrics next to /healthz; runs counted by mode, phase and reason as the controller ends
them, evictions as it makes them, freed nodes per Execute."""
from __future__ import annotations

import socket
import threading
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

import planner
from kubectl_repack.errors import ClusterAPIError
from planner.gauge import measure
from tests.builders import R
from tests.unit.engine.fakes import execute_run, seed_objects
from tests.unit.planner.test_relief import queue, seed
from tests.unit.webhook.controller.test_controller import dry_run, make, stamped, tick
from webhook.common.metrics import CONTROLLER_METRICS, ControllerMetrics
from webhook.controller.gauge import GaugeRefresher, gauge_resource_list
from webhook.controller.loop import parse_args, serve_health

SEED = seed() + [queue()]       # 3 nodes, all occupied, minimum 2 (33 %); large-pg blocked by fragmentation


class Reads:
    """The cluster as the refresher reads it: counts the reads; `fail` makes the next ones fail."""

    def __init__(self, objects):
        self.objects, self.count, self.fail = objects, 0, False

    def __call__(self):
        self.count += 1
        if self.fail:
            raise ClusterAPIError("the API server answered 503")
        return self.objects


def values(metrics):
    """The controller's own samples (the library's process and GC metrics change between scrapes)."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(metrics.render()) for s in f.samples
            if s.name.startswith("repack_")}


def refresher(reads, leading=lambda: True, interval=60.0, resources=None):
    m = ControllerMetrics()
    return GaugeRefresher(reads, m, interval, leading, threading.Event(), resources, clock=lambda: 1234.5), m


def test_a_refresh_serves_plans_figures_and_scrapes_read_nothing():
    reads = Reads(SEED)
    r, m = refresher(reads)
    assert not any(n.startswith("repack_fragmentation") for n, _ in values(m))   # nothing before the first refresh
    r.refresh()
    for _ in range(3):
        v = values(m)
    assert reads.count == 1
    res = (("resource", R),)
    assert v[("repack_fragmentation_percent", res)] == 33
    assert (v[("repack_provider_nodes", res)], v[("repack_occupied_nodes", res)],
            v[("repack_theoretical_min_nodes", res)]) == (3, 3, 2)
    # no pool label on these nodes: pools by card count, as plan's POOLS table groups them
    assert {k[1]: val for k, val in v.items() if k[0] == "repack_free_whole_nodes"} == {
        (("pool", "8-card"), ("resource", R)): 0}
    assert v[("repack_pending_blocked_podgroups", res)] == 1
    assert v[("repack_gauge_last_refresh_timestamp_seconds", ())] == 1234.5
    p = planner.plan(planner.load_objects(SEED), {"mode": "DryRun", "goals": [{"resource": R}]}).summary()
    assert p["fragBeforePercent"] == 33


def test_the_loop_refreshes_once_per_interval_while_leading_and_clears_when_not():
    reads = Reads(SEED)
    leader = {"now": True}
    r, m = refresher(reads, leading=lambda: leader["now"], interval=3600.0)
    r.refresh()
    assert not r.due()                       # within the interval: no second read
    r.last_refresh -= 3601
    assert r.due()
    leader["now"] = False

    def stop_after_one_pass():
        r.stop_event.set()
        return False
    r.leading = stop_after_one_pass          # one pass of run(): not leading -> figures cleared
    r.run()
    assert not any(n == "repack_fragmentation_percent" for n, _ in values(m)) and r.last_refresh is None
    r.stop_event.clear()

    def lead_once():
        r.stop_event.set()                   # the pass still runs to its end
        return True
    r.leading = lead_once
    r.run()
    assert reads.count == 2 and ("repack_fragmentation_percent", (("resource", R),)) in values(m)


def test_a_failed_refresh_keeps_the_last_figures_and_the_loop_survives():
    reads = Reads(SEED)
    r, m = refresher(reads)
    r.refresh()
    before = values(m)
    reads.fail = True
    with pytest.raises(ClusterAPIError):
        r.refresh()
    r.last_refresh = None

    def lead_once():
        r.stop_event.set()
        return True
    r.leading = lead_once
    r.run()                                   # logs, does not raise
    assert reads.count == 3 and values(m) == before and r.last_refresh is not None


def test_named_resources_only_and_bad_flag_values_name_the_flag():
    reads = Reads(SEED)
    r, m = refresher(reads, resources=("nvidia.com/gpu",))
    g = r.refresh()
    assert [x.resource for x in g.resources] == ["nvidia.com/gpu"] and g.resources[0].providers == 0
    assert gauge_resource_list(" a.com/x, b.com/y ,a.com/x") == ("a.com/x", "b.com/y")
    assert gauge_resource_list("") == ()
    with pytest.raises(ValueError, match="--gauge-resources: 'cpu': a fully-qualified extended resource"):
        gauge_resource_list("a.com/x,cpu")
    with pytest.raises(ValueError, match="--gauge-resources: 9 resources; at most 8"):
        gauge_resource_list(",".join(f"a.com/r{i}" for i in range(9)))
    args = parse_args([])
    assert (args.gauge_interval, args.gauge_resources) == ("1m", "")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_metrics_and_healthz_share_the_health_port():
    ctl, *_ = make([])
    m = ControllerMetrics()
    m.set_gauge(measure(planner.load_objects(SEED)), 1.0, 0.25)
    port = free_port()
    server = serve_health(ctl, port, m)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            body = resp.read().decode()
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as resp:
            assert resp.read() == b"ok\n"
    finally:
        server.shutdown()
    families = {f.name + ("_total" if f.type == "counter" else ""): f
                for f in text_string_to_metric_families(body)}
    assert set(CONTROLLER_METRICS) <= set(families)    # every family is served (HELP and TYPE), samples or not
    assert not families["repack_hypernode_free_whole_nodes"].samples     # no HyperNode in this cluster
    assert families["repack_fragmentation_percent"].samples[0].value == 33
    assert "process_resident_memory_bytes" in families


def counted(m, mode, phase, reason):
    return m.sample("repack_runs_total", {"mode": mode, "phase": phase, "reason": reason}) or 0


def test_the_controller_counts_runs_it_ends_evictions_and_freed_nodes():
    ctl, store, cluster, _, _, _ = make([stamped(execute_run()), dry_run()])
    ctl.metrics = m = ControllerMetrics()
    tick(ctl)
    tick(ctl)
    assert store.runs["run-1"]["status"]["phase"] == "Succeeded"
    assert counted(m, "Execute", "Succeeded", "ExecutionCompleted") == 1
    assert counted(m, "DryRun", "Succeeded", "RepackRecommended") == 1
    assert m.sample("repack_evictions_total") == len(cluster.calls) == 2
    freed = store.runs["run-1"]["status"]["result"]["freedNodeCount"]
    assert (m.sample("repack_run_freed_nodes_count"), m.sample("repack_run_freed_nodes_sum")) == (1, freed) and freed
    tick(ctl)                                  # finished runs are not counted again
    assert counted(m, "Execute", "Succeeded", "ExecutionCompleted") == 1 and m.sample("repack_evictions_total") == 2


def test_a_run_refused_for_its_spec_is_counted_as_failed():
    bad = stamped(execute_run("bad-1"))
    bad["spec"]["goals"] = [{"resource": "cpu"}]
    ctl, store, *_ = make([bad])
    ctl.metrics = m = ControllerMetrics()
    tick(ctl)
    assert store.runs["bad-1"]["status"]["phase"] == "Failed"
    assert counted(m, "Execute", "Failed", "InvalidSpec") == 1 and (m.sample("repack_evictions_total") or 0) == 0
    assert (m.sample("repack_run_freed_nodes_count") or 0) == 0


def test_seed_objects_of_the_engine_fakes_measure_like_plan():
    """The controller's fakes (the engine's seed) measured as the refresher would."""
    reads = Reads(seed_objects())
    r, _ = refresher(reads)
    g = r.refresh()
    snap = planner.load_objects(seed_objects())
    for x in g.resources:
        p = planner.plan(snap, {"mode": "DryRun", "goals": [{"resource": x.resource}]})
        assert (x.frag_percent, x.occupied, x.minimum) == (p.summary()["fragBeforePercent"], p.occupied_before,
                                                           p.minimum)


def test_the_controller_serves_none_of_the_other_processes_counters():
    names = {f.name for f in text_string_to_metric_families(ControllerMetrics().render())}
    assert not any(n.startswith("repack_webhook_") for n in names)
    assert {"repack_runs", "repack_evictions", "repack_run_freed_nodes"} <= names
