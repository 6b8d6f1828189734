"""Prometheus counters and a latency histogram, rendered by hand in the text exposition format.

Hand-written to avoid a dependency for six counters and one histogram. The webhook and the
coordinator each own an instance; the coordinator increments nominations and lease timeouts.
"""
from __future__ import annotations

import bisect
import threading

PREFIX = "repack_webhook_"

COUNTERS = {
    "admissions_total": "AdmissionReviews answered (every operation and resource).",
    "matches_total": "Pod CREATEs recognised as the replacement of an open relocation.",
    "gates_total": "Replacement pods given the repack.volcano.sh/placement scheduling gate.",
    "nominations_total": "nominatedNodeName hints written through pods/status.",
    "lease_timeouts_total": "Placement gates removed because the placement lease ran out.",
    "errors_total": "Requests answered with an error status (malformed AdmissionReview, internal error).",
}

# Admission latency is expected around a millisecond; the buckets resolve the 5 ms target.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class Metrics:
    """Thread-safe counters plus the admission latency histogram."""

    def __init__(self, buckets: tuple[float, ...] = LATENCY_BUCKETS):
        self._lock = threading.Lock()
        self._counters = {name: 0 for name in COUNTERS}
        self._buckets = tuple(sorted(buckets))
        self._bucket_counts = [0] * len(self._buckets)
        self._latency_sum = 0.0
        self._latency_count = 0

    def inc(self, name: str, by: int = 1) -> None:
        """Add to one of the counters in COUNTERS (unknown names are a programming error)."""
        if name not in self._counters:
            raise KeyError(f"unknown counter {name!r}")
        with self._lock:
            self._counters[name] += by

    def observe_latency(self, seconds: float) -> None:
        """Record one admission's handling time."""
        with self._lock:
            i = bisect.bisect_left(self._buckets, seconds)
            if i < len(self._bucket_counts):
                self._bucket_counts[i] += 1
            self._latency_sum += seconds
            self._latency_count += 1

    def value(self, name: str) -> int:
        """Current value of one counter."""
        with self._lock:
            return self._counters[name]

    def render(self) -> str:
        """The Prometheus text format (version 0.0.4)."""
        with self._lock:
            counters = dict(self._counters)
            bucket_counts = list(self._bucket_counts)
            total, count = self._latency_sum, self._latency_count
        lines: list[str] = []
        for name, help_text in COUNTERS.items():
            lines += [f"# HELP {PREFIX}{name} {help_text}", f"# TYPE {PREFIX}{name} counter",
                      f"{PREFIX}{name} {counters[name]}"]
        hist = PREFIX + "admission_duration_seconds"
        lines += [f"# HELP {hist} Time to answer one AdmissionReview.", f"# TYPE {hist} histogram"]
        cumulative = 0
        for bound, n in zip(self._buckets, bucket_counts):
            cumulative += n
            lines.append(f'{hist}_bucket{{le="{bound:g}"}} {cumulative}')
        lines.append(f'{hist}_bucket{{le="+Inf"}} {count}')
        lines.append(f"{hist}_sum {total:.9f}")
        lines.append(f"{hist}_count {count}")
        return "\n".join(lines) + "\n"
