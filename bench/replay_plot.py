"""The replay benchmark's figure: large-job p95 wait and GPU-seconds lost per arm (matplotlib, bench extra).

Several result documents (seeds) are averaged per arm, with the spread across seeds as error bars.
"""
from __future__ import annotations

import statistics


def _per_arm(docs, getter):
    out = {}
    for doc in docs:
        for arm, res in doc["arms"].items():
            v = getter(res)
            if v is not None:
                out.setdefault(arm, []).append(v)
    return out


def plot(docs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    wait = _per_arm(docs, lambda r: r["wait_s"]["gpus>=8"]["p95"])
    lost = _per_arm(docs, lambda r: r["gpu_seconds_lost"])
    arms = list(wait)
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, data, label in ((a, wait, "p95 wait of >=8-card jobs (h)"), (b, lost, "GPU-hours lost")):
        means = [statistics.mean(data[x]) / 3600 for x in arms]
        errs = [statistics.stdev(data[x]) / 3600 if len(data[x]) > 1 else 0 for x in arms]
        colors = ["#888" if x == "none" else "#2a6" if x.startswith(("repack", "policy")) else "#a62" for x in arms]
        ax.bar(range(len(arms)), means, yerr=errs, color=colors, capsize=3)
        ax.set_xticks(range(len(arms)))
        ax.set_xticklabels(arms, rotation=35, ha="right", fontsize=8)
        ax.set_ylabel(label)
    s = docs[0]["settings"]
    fig.suptitle(f"trace replay: load {s['workload']['load']}, {s['workload']['days'] - s['workload']['warmup_days']:g} "
                 f"days after {s['workload']['warmup_days']:g} warm-up, {len(docs)} seed(s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
