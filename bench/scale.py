"""Planner at scale: wall time, time split, peak RSS and rounds on generated clusters.

For each size, the cluster file is generated once (`bench.generate`, seeded) and cached under
bench/out/. Each run plans in a fresh Python process, so its peak RSS is its own: the child times
`planner.load_file` (load), `planner.frag.usage` + `theoretical_min` (metric) and `planner.plan`
(which computes the metric again, then plans), and reports its ru_maxrss. The parent keeps the
median of the repeats and merges the results into bench/out/scale.json (a rerun of some sizes
replaces only those entries).

    python -m bench.scale                               # 1000 2000 5000 10000 nodes, both specs, 3 runs
    python -m bench.scale --sizes 1000 --repeats 1 --specs none

Not a test: it prints figures. Keep other work off the machine while it runs.
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
R = "huawei.com/ascend-1980"
SPECS = {   # name -> RepackRun spec
    "none": {"goals": [{"resource": R}]},
    "budget": {"goals": [{"resource": R}], "maxPerRun": {"podGroups": 20, "resources": {R: "160"}}},
}
SPEC_LABELS = {"none": "no budget", "budget": "maxPerRun podGroups 20, 160 cards"}
SIZES = (1000, 2000, 5000, 10000)
SEED = 1


def cluster_file(nodes, seed=SEED):
    """The cached generated cluster of `nodes` nodes (written on first use)."""
    path = OUT / f"cluster-{nodes}-seed{seed}.json"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bench.generate", "--nodes", str(nodes), "--seed", str(seed),
                        "-o", str(tmp)], cwd=ROOT, check=True)
        tmp.rename(path)
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


def child(path, spec_name):
    """One measured run (in its own process); prints one JSON line."""
    t0 = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    import planner
    from planner.frag import theoretical_min, usage
    from planner.gcpause import paused_gc
    t_import = time.perf_counter() - t0

    clock = time.perf_counter, time.process_time     # wall, and CPU of this process

    def timed(f):
        w, c = clock[0](), clock[1]()
        out = f()
        return out, clock[0]() - w, clock[1]() - c

    snap, t_load, c_load = timed(lambda: planner.load_file(str(path)))

    def metric():
        alloc, used, items = usage(snap, R)
        return alloc, items, theoretical_min(items, alloc.values())

    (alloc, items, minimum), t_metric, c_metric = timed(metric)
    with paused_gc():       # as the CLI pauses it around its own work; the planner itself never toggles GC
        p, t_plan, c_plan = timed(lambda: planner.plan(snap, SPECS[spec_name]))

    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss     # kilobytes on Linux
    print(json.dumps({
        "import_s": t_import, "load_s": t_load, "metric_s": t_metric, "plan_s": t_plan,
        "planning_s": max(t_plan - t_metric, 0.0), "total_s": t_load + t_plan,
        "load_cpu_s": c_load, "metric_cpu_s": c_metric, "plan_cpu_s": c_plan, "total_cpu_s": c_load + c_plan,
        "planning_cpu_s": max(c_plan - c_metric, 0.0),
        "peak_rss_mb": rss_kb / 1024, "nodes": len(snap.nodes), "pods": len(snap.pods),
        "r_pods": len(items), "providers": len(alloc), "occupied": p.occupied_before,
        "minimum": p.minimum, "minimum_exact": p.minimum_exact and minimum.exact,
        "candidates": len(p.verdicts), "rounds": p.rounds, "freed": len(p.freed_nodes), "reoccupied": len(p.reoccupied),
        "moves": len(p.moves), "moved_cards": p.moved_cards, "outcome": p.outcome,
        "frag_before": float(p.frag_before), "frag_after": float(p.frag_after)}))


def measure(path, spec_name, timeout):
    """Run one child; returns its figures plus the process wall time."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.scale", "--child", str(path), spec_name], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"child failed ({proc.returncode}) on {path.name} {spec_name}:\n{proc.stderr}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = wall
    return out


def _git_head():
    """The last commit that changed planner/, marked when planner/ has uncommitted changes."""
    try:
        head = subprocess.run(["git", "log", "-1", "--format=%h", "--", "planner"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "planner"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip()
        return head + ("+planner-changes" if dirty else "")
    except OSError:
        return ""


def write_results(doc: dict, md: str, json_path: str, md_path: str) -> None:
    """A benchmark's results: `doc` as JSON at `json_path`, its markdown `md` at `md_path`."""
    for path, text in ((json_path, json.dumps(doc, indent=1) + "\n"), (md_path, md)):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    print(f"wrote {json_path} and {md_path}")


def machine():
    """What the figures were measured on."""
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":")[1].strip()
    except OSError:
        pass
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory": mem, "python": platform.python_version(),
            "platform": platform.platform(), "loadavg_at_start": os.getloadavg()}


MEDIANS = ("load_s", "metric_s", "plan_s", "planning_s", "total_s", "process_s", "import_s",
           "load_cpu_s", "metric_cpu_s", "plan_cpu_s", "planning_cpu_s", "total_cpu_s")


def run(sizes, specs, repeats, timeout=None, output=OUT / "scale.json"):
    """Measure every size x spec; merge into `output`; returns the merged document."""
    doc = {"runs": []}
    if Path(output).exists():
        with open(output, encoding="utf-8") as f:
            doc = json.load(f)
    results = {(r["size"], r["spec"]): r for r in doc.get("runs", [])}
    mach, commit = machine(), _git_head()
    for n in sizes:
        path = cluster_file(n)
        for s in specs:
            load_before = os.getloadavg()
            reps = []
            for i in range(repeats):
                reps.append(measure(path, s, timeout))
                r = reps[-1]
                print(f"{n:>6} nodes  {s:<7} run {i + 1}/{repeats}: total {r['total_s']:.2f} s "
                      f"[CPU {r['total_cpu_s']:.2f} s] (load {r['load_s']:.2f}, "
                      f"metric {r['metric_s']:.2f}, plan {r['plan_s']:.2f}), process {r['process_s']:.2f} s, "
                      f"peak RSS {r['peak_rss_mb']:.0f} MB, rounds {r['rounds']}, freed {r['freed']}", flush=True)
            first = reps[0]
            entry = {"size": n, "spec": s, "repeats": repeats, "file": path.name, "commit": commit,
                     "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                     "loadavg_at_start": load_before,
                     "peak_rss_mb": max(r["peak_rss_mb"] for r in reps), "runs": reps}
            for k in MEDIANS:
                entry[k] = statistics.median(r[k] for r in reps)
            for k in ("nodes", "pods", "r_pods", "providers", "occupied", "minimum", "minimum_exact", "candidates",
                      "rounds", "freed", "moves", "moved_cards", "outcome", "frag_before", "frag_after"):
                entry[k] = first[k]
            # The planner is deterministic: every repeat must produce the same plan.
            assert all((r["rounds"], r["freed"], r["moves"]) == (first["rounds"], first["freed"], first["moves"])
                       for r in reps), f"non-deterministic plan at {n} nodes, {s}"
            results[(n, s)] = entry
    doc = {"machine": mach, "seed": SEED, "specs": SPECS,
           "runs": [results[k] for k in sorted(results, key=lambda k: (k[0], list(SPECS).index(k[1])))]}
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    with open(output, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return doc


def table(doc):
    """The scale table, as markdown: medians, wall / CPU seconds."""
    def wc(e, k):
        cpu = e.get(f"{k}_cpu_s")
        return f"{e[f'{k}_s']:.2f} / {cpu:.2f}" if cpu is not None else f"{e[f'{k}_s']:.2f}"

    lines = ["| nodes | pods | spec | runs | total (load + plan) s, wall / CPU | load s | metric s | planning s "
             "| process wall s | peak RSS MB | rounds | nodes freed | pods moved | frag before → after | planner | load avg |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---:|"]
    for e in doc["runs"]:
        if "planning_cpu_s" not in e and "plan_cpu_s" in e:
            e = dict(e, planning_cpu_s=max(e["plan_cpu_s"] - e["metric_cpu_s"], 0.0))
        lines.append(f"| {e['size']:,} | {e['pods']:,} | {SPEC_LABELS.get(e['spec'], e['spec'])} | {e['repeats']} | "
                     f"**{wc(e, 'total')}** | {wc(e, 'load')} | {wc(e, 'metric')} | {wc(e, 'planning')} | "
                     f"{e['process_s']:.2f} | {e['peak_rss_mb']:.0f} | {e['rounds']} | {e['freed']} | {e['moves']} | "
                     f"{e['frag_before']:.1f} % → {e['frag_after']:.1f} % | {e.get('commit', '')} | "
                     f"{e.get('loadavg_at_start', [float('nan')])[0]:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    ap.add_argument("--specs", nargs="+", choices=list(SPECS), default=list(SPECS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=None, help="seconds per run (default: none)")
    ap.add_argument("-o", "--output", default=str(OUT / "scale.json"))
    ap.add_argument("--child", nargs=2, metavar=("FILE", "SPEC"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(Path(args.child[0]), args.child[1])
        return
    doc = run(args.sizes, args.specs, args.repeats, args.timeout, Path(args.output))
    print()
    print(table(doc))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
