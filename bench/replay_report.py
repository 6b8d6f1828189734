"""The trace replay's section of docs/benchmarks.md from result documents of `python -m bench.replay`.

    python -m bench.replay_report --plot docs/replay-load1.png RESULT.json [RESULT.json ...]

Documents of the same load (one per seed) are pooled: per arm the mean over seeds and a 95 %
confidence interval (Student t over the seeds' values; none with one seed). Prints Markdown.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys

T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}

METRICS = (("p95 wait >=8 cards (h)", lambda a: a["wait_s"]["gpus>=8"]["p95"] / 3600),
           ("p95 wait gangs (h)", lambda a: a["wait_s"]["gang"]["p95"] / 3600),
           ("p95 wait all (min)", lambda a: a["wait_s"]["all"]["p95"] / 60),
           ("p50 wait >=8 cards (min)", lambda a: a["wait_s"]["gpus>=8"]["p50"] / 60),
           ("allocation", lambda a: a["allocation_ratio"]),
           ("frag %", lambda a: a["fragmentation_percent_mean"]),
           ("evicted PodGroups / 100 jobs", lambda a: a["evicted_podgroups_per_100_jobs"]),
           ("GPU-hours lost", lambda a: a["gpu_seconds_lost"] / 3600),
           ("runs", lambda a: a.get("runs", 0)))


def ci(values):
    m = statistics.mean(values)
    if len(values) < 2:
        return m, None
    return m, T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / len(values) ** 0.5


def fmt(m, h):
    if m is None:
        return "-"
    digits = 3 if abs(m) < 10 else 1
    return f"{m:.{digits}f}" + (f" ± {h:.{digits}f}" if h is not None else "")


def by_load(docs):
    groups = {}
    for d in docs:
        groups.setdefault(d["settings"]["workload"]["load"], []).append(d)
    return dict(sorted(groups.items()))


def table(docs) -> str:
    arms = list(docs[0]["arms"])
    lines = ["| arm | " + " | ".join(label for label, _ in METRICS) + " |",
             "|---|" + "---|" * len(METRICS)]
    for arm in arms:
        cells = []
        for _, get in METRICS:
            vals = [get(d["arms"][arm]) for d in docs if arm in d["arms"] and get(d["arms"][arm]) is not None]
            cells.append(fmt(*ci(vals)) if vals else "-")
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.replay_report")
    p.add_argument("results", nargs="+")
    p.add_argument("--plot", metavar="PNG")
    args = p.parse_args(argv)
    docs = [json.load(open(f)) for f in args.results]
    for load, group in by_load(docs).items():
        s = group[0]["settings"]
        seeds = sorted(d["settings"]["seed"] for d in group)
        print(f"Load {load}: seeds {', '.join(map(str, seeds))}; {s['nodes']} nodes, {s['gpus']} GPUs; "
              f"{s['workload']['days'] - s['workload']['warmup_days']:g} days measured after "
              f"{s['workload']['warmup_days']:g} of warm-up; jobs per seed ≈ {s['jobs_generated']:,} "
              f"({s['gang_jobs']:,} gangs).\n")
        print(table(group))
    if args.plot:
        from bench.replay_plot import plot
        loads = by_load(docs)
        plot(loads.get(1.0) or next(iter(loads.values())), args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
