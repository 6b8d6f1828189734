"""Prometheus metrics of the in-cluster processes, through the `prometheus_client` library.

Each process exposes its own registry: the webhook its admission counters and latency histogram,
the coordinator its nominations and lease time-outs, the controller its runs, evictions and the
live fragmentation gauge (`ControllerMetrics`), so none shows another's counters as zeros. Every
registry carries the library's process, platform and Python GC collectors (memory, CPU, open
files, collections per generation), which the API server's and the node's own metrics cannot tell
apart per container. The metric names are part of the interface (dashboards, the e2e
tests and the README read them): `repack_webhook_<counter>` as listed below, and the controller's
`CONTROLLER_METRICS`.
"""
from __future__ import annotations

import threading
from typing import Any, Iterator, Mapping, Optional

from prometheus_client import CollectorRegistry, Counter, GCCollector, Histogram, PlatformCollector, ProcessCollector
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import choose_encoder, generate_latest

from kubectl_repack.api.run import MODE_EXECUTE, RunView, as_map

PREFIX = "repack_webhook_"

WEBHOOK_COUNTERS = {
    "admissions_total": "AdmissionReviews answered (every operation and resource).",
    "matches_total": "Pod CREATEs recognised as the replacement of an open relocation.",
    "gates_total": "Replacement pods given the repack.volcano.sh/placement scheduling gate.",
    "errors_total": "Requests answered with an error status (malformed AdmissionReview, internal error).",
}
COORDINATOR_COUNTERS = {
    "nominations_total": "nominatedNodeName hints written through pods/status.",
    "lease_timeouts_total": "Placement gates removed because the placement lease ran out.",
    "nominations_refused_bound_total": "Hints the API server refused because the pod was bound meanwhile "
                                       "(recorded as placed, not retried).",
}
COUNTERS = {**WEBHOOK_COUNTERS, **COORDINATOR_COUNTERS}

# Admission latency is expected around a millisecond; the buckets resolve the 5 ms target.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class Metrics:
    """One process's metrics in a registry of its own (thread-safe: the library's counters are).

    `Metrics()` is the coordinator's (webhook.coordinator.loop builds it so): nominations and lease
    time-outs. The webhook's is `WebhookMetrics`.
    """

    COUNTERS: Mapping[str, str] = COORDINATOR_COUNTERS

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self._counters = {name: Counter(PREFIX + name, help_text, registry=self.registry)
                          for name, help_text in self.COUNTERS.items()}

    def inc(self, name: str, by: int = 1) -> None:
        """Add to one of this process's counters (another process's, or an unknown name, is a
        programming error)."""
        if name not in self._counters:
            raise KeyError(f"unknown counter {name!r} for {type(self).__name__}")
        self._counters[name].inc(by)

    def value(self, name: str) -> int:
        """Current value of one counter."""
        if name not in self._counters:
            raise KeyError(f"unknown counter {name!r} for {type(self).__name__}")
        return int(self.registry.get_sample_value(PREFIX + name) or 0)

    def render(self) -> str:
        """The Prometheus text format (version 0.0.4)."""
        return generate_latest(self.registry).decode()

    def exposition(self, accept: Optional[str] = None) -> tuple[bytes, str]:
        """The body and Content-Type for a scraper's Accept header (text format 0.0.4 by default,
        OpenMetrics when asked), as the library negotiates it."""
        encoder, content_type = choose_encoder(accept or "")
        return encoder(self.registry), content_type


class WebhookMetrics(Metrics):
    """The webhook's: admissions, matches, gates, errors, and the admission latency histogram."""

    COUNTERS = WEBHOOK_COUNTERS

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        super().__init__()
        self._latency = Histogram(PREFIX + "admission_duration_seconds", "Time to answer one AdmissionReview.",
                                  buckets=tuple(sorted(buckets)), registry=self.registry)

    def observe_latency(self, seconds: float) -> None:
        """Record one admission's handling time."""
        self._latency.observe(seconds)


# The controller's metrics (POLICY-3), name -> help. The gauges describe the cluster as of the last
# refresh of the controller's cache (webhook.controller.gauge; planner.gauge computes them); the
# counters count what this controller process did since it started.
CONTROLLER_GAUGES = {
    "repack_fragmentation_percent": "Fragmentation of the resource in percent, as `kubectl repack plan` reports it "
                                    "(fragBeforePercent: (occupied - theoretical minimum) / providers).",
    "repack_provider_nodes": "Nodes with the resource allocatable.",
    "repack_occupied_nodes": "Provider nodes where bound pods request the resource.",
    "repack_theoretical_min_nodes": "Fewest provider nodes that could hold every current request of the resource.",
    "repack_free_whole_nodes": "Provider nodes with none of the resource in use, per node pool (plan's POOLS table).",
    "repack_hypernode_free_whole_nodes": "Provider nodes with none of the resource in use, per HyperNode of the "
                                         "lowest tier.",
    "repack_pending_blocked_podgroups": "Waiting gangs that `kubectl repack why` says are blocked by fragmentation.",
    "repack_gauge_last_refresh_timestamp_seconds": "When the gauges were last computed (Unix time).",
    "repack_gauge_refresh_duration_seconds": "How long the last refresh took (reading the cluster and computing).",
}
CONTROLLER_COUNTERS = {
    "repack_runs_total": "RepackRuns this controller finished, by mode, phase and reason.",
    "repack_evictions_total": "Pods this controller evicted (Eviction API calls accepted).",
}
CONTROLLER_HISTOGRAMS = {
    "repack_run_freed_nodes": "Nodes freed by each Execute run this controller finished "
                              "(status.result.freedNodeCount).",
}
CONTROLLER_METRICS = {**CONTROLLER_GAUGES, **CONTROLLER_COUNTERS, **CONTROLLER_HISTOGRAMS}
FREED_NODES_BUCKETS = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256)


class ControllerMetrics(Metrics):
    """The controller's: runs by outcome, evictions, freed nodes per run, and the gauges of the last
    refresh (`set_gauge`). A scrape only formats what the last refresh stored: nothing is read or
    computed per scrape."""

    COUNTERS: Mapping[str, str] = {}

    def __init__(self) -> None:
        super().__init__()
        self._runs = Counter("repack_runs", CONTROLLER_COUNTERS["repack_runs_total"], ["mode", "phase", "reason"],
                             registry=self.registry)
        self._evictions = Counter("repack_evictions", CONTROLLER_COUNTERS["repack_evictions_total"],
                                  registry=self.registry)
        self._freed = Histogram("repack_run_freed_nodes", CONTROLLER_HISTOGRAMS["repack_run_freed_nodes"],
                                buckets=FREED_NODES_BUCKETS, registry=self.registry)
        self._lock = threading.Lock()
        self._gauge: Any = None
        self._refreshed: Optional[tuple] = None
        self.registry.register(_GaugeCollector(self))

    def run_finished(self, run: Mapping[str, Any]) -> None:
        """Count a run that just ended: its mode, phase and reason, and for an Execute that carried
        out a plan, the nodes it freed."""
        view = RunView(run)
        self._runs.labels(view.mode or "unknown", view.phase or "unknown", view.reason or "unknown").inc()
        result = as_map(view.status.get("result"))
        if view.mode == MODE_EXECUTE and "freedNodeCount" in result:
            self._freed.observe(int(result.get("freedNodeCount") or 0))

    def evicted(self) -> None:
        """Count one accepted eviction."""
        self._evictions.inc()

    def set_gauge(self, gauge: Any, at: float, seconds: float) -> None:
        """Store a planner.gauge.Gauge computed at Unix time `at` in `seconds`: what scrapes serve."""
        with self._lock:
            self._gauge, self._refreshed = gauge, (at, seconds)

    def clear_gauge(self) -> None:
        """Serve no gauges (this process does not lead: the leader's are the cluster's)."""
        with self._lock:
            self._gauge, self._refreshed = None, None

    def sample(self, name: str, labels: Optional[Mapping[str, str]] = None) -> Optional[float]:
        """The current value of one sample (None when not served)."""
        return self.registry.get_sample_value(name, dict(labels or {}))

    def families(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            gauge, refreshed = self._gauge, self._refreshed
        if gauge is None:
            return
        fams = {name: GaugeMetricFamily(name, help_text, labels=_GAUGE_LABELS[name])
                for name, help_text in CONTROLLER_GAUGES.items()}
        for r in gauge.resources:
            res = [r.resource]
            fams["repack_fragmentation_percent"].add_metric(res, r.frag_percent)
            fams["repack_provider_nodes"].add_metric(res, r.providers)
            fams["repack_occupied_nodes"].add_metric(res, r.occupied)
            fams["repack_theoretical_min_nodes"].add_metric(res, r.minimum)
            fams["repack_pending_blocked_podgroups"].add_metric(res, r.pending_blocked)
            for p in r.pools:
                fams["repack_free_whole_nodes"].add_metric(res + [p.pool], p.free)
            for h in r.hypernodes:
                fams["repack_hypernode_free_whole_nodes"].add_metric(res + [h.name, str(h.tier)], h.free_before)
        fams["repack_gauge_last_refresh_timestamp_seconds"].add_metric([], refreshed[0])
        fams["repack_gauge_refresh_duration_seconds"].add_metric([], refreshed[1])
        yield from fams.values()


_GAUGE_LABELS = {name: ["resource"] for name in CONTROLLER_GAUGES}
_GAUGE_LABELS.update({"repack_free_whole_nodes": ["resource", "pool"],
                      "repack_hypernode_free_whole_nodes": ["resource", "hypernode", "tier"],
                      "repack_gauge_last_refresh_timestamp_seconds": [],
                      "repack_gauge_refresh_duration_seconds": []})


class _GaugeCollector:
    """Serves a ControllerMetrics' stored gauges on each scrape (label sets of the last refresh
    only: a node pool or HyperNode that went away is gone from the next scrape)."""

    def __init__(self, metrics: ControllerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return self._metrics.families()

    def describe(self) -> list:
        return []    # no describe-time collect: registering must not compute anything
