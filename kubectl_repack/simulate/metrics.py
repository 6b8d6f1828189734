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
        if job.spec.submit < replay.warmup_s or job.spec.kind == "running":
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


def _dur(s):
    if s is None:
        return "-"
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h"


def table(doc) -> str:
    """The arms side by side, one metric a line (what `kubectl repack simulate` prints)."""
    arms = list(doc["arms"])
    rows = [("JOBS (started)", lambda a: f"{a['jobs']} ({a['jobs_started']})")]
    for bucket, label in (("all", "WAIT all"), ("gpus>=8", "WAIT >=8 cards"), ("gang", "WAIT gangs")):
        rows.append((f"{label} p50/p95/p99", lambda a, b=bucket: "/".join(
            _dur(a["wait_s"][b][q]) for q in ("p50", "p95", "p99")) + f" (n={a['wait_s'][b]['n']})"))
    rows += [("ALLOCATION ratio", lambda a: f"{a['allocation_ratio']:.3f}"),
             ("FRAGMENTATION mean", lambda a: "-" if a["fragmentation_percent_mean"] is None
              else f"{a['fragmentation_percent_mean']:.1f}%"),
             ("EVICTED pods/PodGroups", lambda a: f"{a['evicted_pods']}/{a['evicted_podgroups']}"),
             ("EVICTED PodGroups per 100 jobs", lambda a: f"{a['evicted_podgroups_per_100_jobs']:.2f}"),
             ("CARD-hours lost", lambda a: f"{a['gpu_seconds_lost'] / 3600:.1f}"),
             ("RUNS", lambda a: str(a.get("runs", 0))),
             ("PLANNER CPU", lambda a: f"{a.get('planner_cpu_s', 0):.1f}s")]
    cells = [["", *arms]] + [[label, *(fn(doc["arms"][a]) for a in arms)] for label, fn in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    return "".join("   ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() + "\n" for r in cells)
