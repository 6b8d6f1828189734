"""Regenerate the figures of docs/benchmarks.md and docs/scale.png from bench/out/*.json.

docs/benchmarks.md is written by hand; only the blocks between `<!-- generated:NAME -->` and
`<!-- /generated:NAME -->` are replaced, so prose (and the profile section) survive a rerun.

    python -m bench.report                      # use bench/out/{quality,scale}.json, run what is missing
    python -m bench.report --run                # rerun both benchmarks first (scale: every default size)
    python -m bench.report --run-scale --sizes 10000 25000  # measure these sizes, keep the others
    python -m bench.report --topology-only      # only the network-topology block, from bench/out/topology.json
    python -m bench.report --relief-only        # only the pending-gang block, from bench/out/relief.json
    python -m bench.report --scale-only         # only the scale figures, from bench/out/scale.json

The network-topology block (TOPO-1 to TOPO-4) comes from bench/out/topology.json when it exists
(`python -m bench.topology` writes it; it is never rerun from here: it takes ~25 minutes). The
block of runs aimed at a pending gang (RELIEF-2, RELIEF-3) comes from bench/out/relief.json the same way
(`python -m bench.relief` writes it, ~2 minutes).

Needs the `bench` extra (highspy, matplotlib).
"""
import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import quality, relief, scale, topology  # noqa: E402

DOC = ROOT / "docs" / "benchmarks.md"
PLOT = ROOT / "docs" / "scale.png"
QUALITY_JSON = quality.OUT / "quality.json"
SCALE_JSON = scale.OUT / "scale.json"
TOPOLOGY_JSON = topology.OUT / "topology.json"
RELIEF_JSON = relief.OUT / "relief.json"
TIME_TARGETS = {1000: 0.8, 10000: 5.0, 25000: 15.0}    # seconds, whole `kubectl-repack plan` process
RSS_TARGET_MB = 1024                          # at RSS_TARGET_SIZE nodes
RSS_TARGET_SIZE = 25000
RATIO_TARGET = 2.8                            # time(25k) / time(10k)
QUALITY_TARGET = 0.995                        # net freed / optimum, in total
INSTANCE_TARGET = 0.99                        # instances at the optimum
DISRUPTION_TARGET = 1.05                      # PodGroups disrupted / MILP minimum at the same net freed


def _load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def _plain(doc):
    """The runs without a HyperNode tree (the targets are judged on these)."""
    return [e for e in doc.get("runs", []) if "process_s" in e and not e.get("tree")]


def plot(doc, path=PLOT):
    """Whole-process time (median) and peak RSS against cluster size, one line per spec, targets marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(11, 4.2))
    markers = {"none": "o", "budget": "s"}
    for spec in scale.SPECS:
        rows = sorted((e for e in _plain(doc) if e["spec"] == spec), key=lambda e: e["size"])
        if not rows:
            continue
        xs = [e["size"] for e in rows]
        label = scale.SPEC_LABELS.get(spec, spec)
        line, = ax_t.plot(xs, [e["process_s"] for e in rows], marker=markers.get(spec, "o"), label=f"{label}: process")
        ax_t.plot(xs, [e["load_s"] for e in rows], marker=markers.get(spec, "o"), linestyle=":",
                  color=line.get_color(), alpha=0.7, label=f"{label}: load")
        ax_m.plot(xs, [e["peak_rss_mb"] for e in rows], marker=markers.get(spec, "o"), label=label)
    for n, secs in TIME_TARGETS.items():
        ax_t.plot([n], [secs], marker="*", markersize=14, color="crimson", linestyle="none")
        ax_t.annotate(f"target {secs:g} s @ {n:,}", (n, secs), textcoords="offset points", xytext=(-60, -16),
                      color="crimson", fontsize=8)
    ax_m.plot([RSS_TARGET_SIZE], [RSS_TARGET_MB], marker="*", markersize=14, color="crimson", linestyle="none")
    ax_m.annotate(f"target 1 GB @ {RSS_TARGET_SIZE:,}", (RSS_TARGET_SIZE, RSS_TARGET_MB), textcoords="offset points",
                  xytext=(-120, -14), color="crimson", fontsize=8)
    for ax in (ax_t, ax_m):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("cluster size (nodes)")
        ax.set_xticks([1000, 10000, 25000, 50000])
        ax.set_xticklabels(["1k", "10k", "25k", "50k"])
        ax.set_xlim(700, 70000)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    ax_t.set_ylabel("seconds (whole process, median)")
    ax_t.set_title("kubectl-repack plan: time")
    ax_m.set_ylabel("peak RSS of the process (MB)")
    ax_m.set_title("kubectl-repack plan: memory")
    cpus = doc.get("machine", {}).get("cpus")
    commits = sorted({e.get("commit", "") for e in doc["runs"]} - {""})
    fig.suptitle(f"kubectl-repack plan on generated clusters ({cpus} cores; planner {', '.join(commits)})", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _fmt_s(v):
    return f"{v:.1f} s"


def targets(qdoc, sdoc):
    """The time and quality targets against what was measured."""
    by = {(e["size"], e["spec"]): e for e in _plain(sdoc or {})}
    lines = ["| target | measured | status |", "|---|---|---|"]

    def verdict(ok):
        return "met" if ok else "**not met**"

    for n, secs in TIME_TARGETS.items():
        got = [(s, by[(n, s)]) for s in scale.SPECS if (n, s) in by]
        what = f"{n:,} nodes ≤ {secs:g} s, whole `kubectl-repack plan` process"
        if got:
            meas = "; ".join(f"{scale.SPEC_LABELS[s]}: {e['process_s']:.2f} s" for s, e in got)
            lines.append(f"| {what} | {meas} | {verdict(all(e['process_s'] <= secs for _, e in got))} |")
        else:
            lines.append(f"| {what} | — | not measured yet |")
    got = [(s, by[(RSS_TARGET_SIZE, s)]) for s in scale.SPECS if (RSS_TARGET_SIZE, s) in by]
    what = f"peak RSS ≤ 1 GB at {RSS_TARGET_SIZE:,} nodes"
    if got:
        meas = "; ".join(f"{scale.SPEC_LABELS[s]}: {e['peak_rss_mb']:.0f} MB" for s, e in got)
        lines.append(f"| {what} | {meas} | {verdict(all(e['peak_rss_mb'] <= RSS_TARGET_MB for _, e in got))} |")
    else:
        lines.append(f"| {what} | — | not measured yet |")
    got = list(scale.ratios(sdoc or {"runs": []}).items())
    what = f"time(25k) / time(10k) ≤ {RATIO_TARGET}"
    if got:
        meas = "; ".join(f"{scale.SPEC_LABELS[s]}: {r:.2f}" for s, r in got)
        lines.append(f"| {what} | {meas} | {verdict(all(r <= RATIO_TARGET for _, r in got))} |")
    else:
        lines.append(f"| {what} | — | not measured yet |")
    if qdoc:
        a = qdoc["aggregate"]["all"]
        pl, sf = a["planner"], a["same_freed"]
        at = pl["at_optimum"] / a["instances"]
        lines.append(f"| net nodes freed = optimum on ≥ 99 % of instances | {pl['at_optimum']} / {a['instances']} = "
                     f"{100 * at:.1f} % | {verdict(at >= INSTANCE_TARGET)} |")
        r = pl["of_optimum"]
        lines.append(f"| net nodes freed ≥ 99.5 % of the optimum in total | {pl['net']} / {a['optimum']} = "
                     f"{100 * r:.1f} % over {a['instances']} instances | {verdict(r >= QUALITY_TARGET)} |")
        pr = sf["planner_podgroups"] / max(sf["least_podgroups"], 1)
        lines.append(f"| PodGroups disrupted ≤ 105 % of the MILP minimum at the same net freed, in total | "
                     f"{sf['planner_podgroups']} / {sf['least_podgroups']} = {100 * pr:.1f} % of the MILP's "
                     f"least-disruption plans (stage 2a) over the {sf['instances']} instances at the optimum; against "
                     f"the fewest PodGroups of any plan (stage 2b, not GANG-3's objective): {sf['planner_podgroups']} / "
                     f"{sf['fewest_podgroups']} = {100 * sf['planner_podgroups'] / max(sf['fewest_podgroups'], 1):.1f} % "
                     f"(GANG-3 weighted: {sf['planner_weighted']:.1f} / "
                     f"{sf['least_weighted']:.1f} = {100 * sf['planner_weighted'] / max(sf['least_weighted'], 1e-9):.1f} %) | "
                     f"{verdict(pr <= DISRUPTION_TARGET)} |")
        # a pass that fills idle nodes its freed nodes do not cover breaks RELIEF-4: not a plan to match
        broke = set(pl.get("ca_uncovered", ()))
        worse = [i for i in pl["worse_than_ca"] if i not in broke]
        lines.append(f"| never below the cluster-autoscaler-style baseline (where its plan fills only idle nodes its "
                     f"freed nodes cover) | below on {len(worse)} instance(s)"
                     f"{' (' + ', '.join(worse) + ')' if worse else ''}"
                     f"{f'; below on {len(broke)} more where it does not' if broke else ''} | {verdict(not worse)} |")
    return "\n".join(lines) + "\n"


def growth(sdoc):
    """How the whole-process time and the load grow between consecutive measured sizes, per spec."""
    parts = []
    for spec in scale.SPECS:
        rows = sorted((e for e in _plain(sdoc) if e["spec"] == spec), key=lambda e: e["size"])
        steps = []
        for a, b in zip(rows, rows[1:]):
            steps.append(f"{a['size']:,} → {b['size']:,} nodes (×{b['size'] / a['size']:g}): "
                         f"process ×{b['process_s'] / a['process_s']:.1f}, load ×{b['load_s'] / a['load_s']:.1f}, "
                         f"plan ×{b['plan_s'] / max(a['plan_s'], 1e-9):.1f}")
        if steps:
            parts.append(f"- {scale.SPEC_LABELS.get(spec, spec)}: " + "; ".join(steps))
    if not parts:
        return ""
    return "Growth between measured sizes (medians):\n\n" + "\n".join(parts) + "\n"


def machine(sdoc, qdoc):
    m = (sdoc or {}).get("machine", {})
    lines = []
    if m:
        runs = [e for e in sdoc.get("runs", []) if "process_s" in e]
        loads = [e["loadavg_at_start"][0] for e in runs if e.get("loadavg_at_start")]
        ratios = sorted(e["process_s"] / e["process_cpu_s"] for e in runs if e.get("process_cpu_s"))
        busy = ""
        if loads and ratios:
            busy = (f" While these figures were taken the 1-minute load average was {min(loads):.1f}–{max(loads):.1f} "
                    f"on {m.get('cpus')} cores and wall time was {ratios[0]:.2f}–{ratios[-1]:.2f}× the process's "
                    f"CPU time")
            if ratios[-1] > 1.2:
                busy += (", so the wall figures overstate what a quiet machine would show; CPU seconds are "
                         "given next to them.")
            else:
                busy += ": the machine was quiet and wall time is what the planner took."
        cals = sorted(e["calibration_s"] for e in runs if e.get("calibration_s"))
        if cals:
            busy += (f" The machine reference (the CPU seconds of a fixed pure-Python workload in a fresh process, "
                     f"bench/scale.py's CALIBRATION, best of 3, taken before every run; lower = faster) ranged "
                     f"{cals[0]:.3f}–{cals[-1]:.3f} s across the rows: this machine's speed drifts between "
                     f"quarter-hours without showing in load average or steal, and a row with a higher reference "
                     f"was measured on a machine slower in about that proportion.")
        lines.append(f"Scale figures: {m.get('cpus')} cores ({m.get('cpu') or 'unknown CPU'}), {m.get('memory')} RAM, "
                     f"Python {m.get('python')}, {m.get('platform')}. The machine is shared with other work; the load "
                     f"average when each size × spec started is in the table and in bench/out/scale.json.{busy}")
    if qdoc:
        reused = qdoc.get("milp_reused_from")
        lines.append(f"Quality figures generated {qdoc['generated']} in {qdoc['seconds']} s (planner {qdoc['commit']}; "
                     f"MILP time limit {qdoc['time_limit']:.0f} s per solve"
                     + (f", MILP solved {reused['generated']} at {reused['commit']} and reused: it depends only on the "
                        f"instances and the model)." if reused else ")."))
    return "\n\n".join(lines) + "\n"


def _block(text, name):
    return re.search(rf"<!-- generated:{name} -->\n(.*?)<!-- /generated:{name} -->", text, re.S).group(1)


def replace_block(text, name, body):
    pat = re.compile(rf"(<!-- generated:{name} -->\n)(.*?)(<!-- /generated:{name} -->)", re.S)
    if not pat.search(text):
        raise SystemExit(f"{DOC}: no <!-- generated:{name} --> block")
    return pat.sub(lambda m: m.group(1) + body + m.group(3), text)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="store_true", help="rerun the quality and scale benchmarks first")
    ap.add_argument("--run-quality", action="store_true")
    ap.add_argument("--run-scale", action="store_true")
    ap.add_argument("--sizes", type=int, nargs="+", default=list(scale.SIZES), help="sizes for a scale run")
    ap.add_argument("--specs", nargs="+", choices=list(scale.SPECS), default=list(scale.SPECS))
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--topology-only", action="store_true",
                    help="regenerate only the network-topology block from bench/out/topology.json")
    ap.add_argument("--relief-only", action="store_true",
                    help="regenerate only the pending-gang (RELIEF-2, RELIEF-3) block from bench/out/relief.json")
    ap.add_argument("--scale-only", action="store_true",
                    help="regenerate only the scale figures from bench/out/scale.json (no quality figures needed)")
    ap.add_argument("--quality-only", action="store_true",
                    help="regenerate only the plan-quality block from bench/out/quality.json (no scale figures needed)")
    args = ap.parse_args(argv)
    if args.quality_only:
        text = DOC.read_text(encoding="utf-8")
        qdoc = _load(QUALITY_JSON)
        text = replace_block(text, "quality", quality.markdown(qdoc))
        # the targets block without scale figures keeps the scale rows it has
        old = re.search(r"<!-- generated:targets -->\n(.*?)<!-- /generated:targets -->", text, re.S).group(1)
        kept = {line.split(" | ")[0]: line for line in old.splitlines()}
        rows = [kept.get(line.split(" | ")[0], line) if line.endswith("| not measured yet |") else line
                for line in targets(qdoc, None).splitlines()]
        DOC.write_text(replace_block(text, "targets", "\n".join(rows) + "\n"), encoding="utf-8")
        print(f"wrote the quality and targets blocks of {DOC.relative_to(ROOT)}")
        return
    if args.scale_only:
        text = DOC.read_text(encoding="utf-8")
        sdoc = _load(SCALE_JSON)
        text = replace_block(text, "scale", scale.table(sdoc) + "\n" + growth(sdoc))
        # the targets and machine blocks keep their quality rows and paragraph
        new = {line.split(" | ")[0]: line for line in targets(None, sdoc).splitlines()}
        old = _block(text, "targets").splitlines()
        rows = [new.pop(line.split(" | ")[0], line) for line in old]
        text = replace_block(text, "targets", "\n".join(rows + list(new.values())) + "\n")
        kept = [part for part in _block(text, "machine").strip().split("\n\n") if part.startswith("Quality figures")]
        text = replace_block(text, "machine", "\n\n".join([machine(sdoc, None).strip(), *kept]) + "\n")
        DOC.write_text(text, encoding="utf-8")
        plot(sdoc)
        print(f"wrote the scale, targets and machine blocks of {DOC.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}")
        return
    if args.relief_only:
        text = DOC.read_text(encoding="utf-8")
        DOC.write_text(replace_block(text, "relief", relief.markdown(_load(RELIEF_JSON))), encoding="utf-8")
        print(f"wrote the relief block of {DOC.relative_to(ROOT)}")
        return
    if args.topology_only:
        text = DOC.read_text(encoding="utf-8")
        DOC.write_text(replace_block(text, "topology", topology.markdown(_load(TOPOLOGY_JSON))), encoding="utf-8")
        print(f"wrote the topology block of {DOC.relative_to(ROOT)}")
        return
    if args.run or args.run_quality or not QUALITY_JSON.exists():
        quality.main([])
    if args.run or args.run_scale or not SCALE_JSON.exists():
        scale.run(args.sizes, args.specs, args.repeats, output=SCALE_JSON)
    qdoc, sdoc = _load(QUALITY_JSON), _load(SCALE_JSON)
    text = DOC.read_text(encoding="utf-8")
    text = replace_block(text, "targets", targets(qdoc, sdoc))
    text = replace_block(text, "quality", quality.markdown(qdoc))
    text = replace_block(text, "scale", scale.table(sdoc) + "\n" + growth(sdoc))
    text = replace_block(text, "machine", machine(sdoc, qdoc))
    if TOPOLOGY_JSON.exists():         # bench.topology writes it (TOPO-1 to TOPO-4); the block stays as it is otherwise
        text = replace_block(text, "topology", topology.markdown(_load(TOPOLOGY_JSON)))
    if RELIEF_JSON.exists():           # bench.relief writes it (RELIEF-2, RELIEF-3)
        text = replace_block(text, "relief", relief.markdown(_load(RELIEF_JSON)))
    DOC.write_text(text, encoding="utf-8")
    plot(sdoc)
    print(f"wrote {DOC.relative_to(ROOT)} and {PLOT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
