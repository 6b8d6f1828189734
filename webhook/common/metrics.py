"""Prometheus metrics of the webhook and the coordinator, through the `prometheus_client` library.

Each process exposes its own registry: the webhook its admission counters and latency histogram,
the coordinator its nominations and lease time-outs, so neither shows the other's counters as
zeros. Both registries carry the library's process, platform and Python GC collectors (memory,
CPU, open files, collections per generation), which the API server's and the node's own metrics
cannot tell apart per container. The metric names are part of the interface (dashboards, the e2e
tests and the README read them): `repack_webhook_<counter>` as listed below.
"""
from __future__ import annotations

from typing import Mapping, Optional

from prometheus_client import CollectorRegistry, Counter, GCCollector, Histogram, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder, generate_latest

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
