"""What an arm's replay measured: queueing delay by job size, allocation, fragmentation, lost work.

Queueing delay is submit -> minAvailable bound (the first time). Only jobs submitted after the
warm-up count; a job still waiting at the end counts with its wait so far (censored at the horizon,
so a policy that starves big jobs cannot look good by never starting them).
"""
from __future__ import annotations

import math

BUCKETS = ("all", "gpus=1", "gpus=2-4", "gpus=8", "gpus>8", "gpus>=8", "gang")


def percentile(values, q):
    """Linear-interpolated percentile (q in 0..100) of a list; None when empty."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def _buckets(job):
    g = job.gpus_total
    yield "all"
    yield "gpus=1" if g == 1 else "gpus=2-4" if g <= 4 else "gpus=8" if g == 8 else "gpus>8"
    if g >= 8:
        yield "gpus>=8"
    if job.spec.kind == "gang":
        yield "gang"


def summarize(replay, arm_stats) -> dict:
    """The arm's entry of the result document (JSON-ready)."""
    waits = {b: [] for b in BUCKETS}
    jobs = started = 0
    for job in replay.jobs.values():
        if job.spec.submit < replay.warmup_s:
            continue
        jobs += 1
        end = job.first_start if job.first_start is not None else replay.horizon_s
        started += job.first_start is not None
        for b in _buckets(job):
            waits[b].append(end - job.spec.submit)
    span = replay.horizon_s - replay.warmup_s
    alloc = replay.alloc_integral / (replay.capacity * span) if span > 0 else 0.0
    frags = [f for _, _, f, _ in replay.samples if f is not None]
    admitted = max(started, 1)
    out = {
        "jobs": jobs,
        "jobs_started": started,
        "wait_s": {b: {"n": len(w), "p50": _r(percentile(w, 50)), "p95": _r(percentile(w, 95)),
                       "p99": _r(percentile(w, 99)), "mean": _r(sum(w) / len(w) if w else None)}
                   for b, w in waits.items()},
        "allocation_ratio": round(alloc, 4),
        "fragmentation_percent_mean": _r(sum(frags) / len(frags) if frags else None),
        "evicted_pods": replay.evicted_pods,
        "evicted_podgroups": replay.evicted_podgroups,
        "evicted_pods_per_100_jobs": round(100.0 * replay.evicted_pods / admitted, 3),
        "evicted_podgroups_per_100_jobs": round(100.0 * replay.evicted_podgroups / admitted, 3),
        "gpu_seconds_lost": round(replay.gpu_seconds_lost, 1),
        "sessions": replay.sessions,
        "series": {"t_s": [round(t) for t, _, _, _ in replay.samples],
                   "allocation_ratio": [round(a, 4) for _, a, _, _ in replay.samples],
                   "fragmentation_percent": [_r(f) for _, _, f, _ in replay.samples],
                   "pending_jobs": [p for _, _, _, p in replay.samples]},
    }
    out.update(arm_stats)
    return out


def _r(x):
    return None if x is None else round(x, 1)
