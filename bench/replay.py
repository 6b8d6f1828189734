"""Trace replay benchmark: does the waiting job start sooner? (kubectl_repack.simulate does the work.)

    python -m bench.replay [--nodes NODE_CSV] [--pods POD_CSV] [--gangs default|none] [--load F]
        [--days D] [--warmup-days W] [--arms a,b,...] [--seed N] [--synthetic] [--plot PNG] --json OUT

The node and pod lists default to ../shared/traces/alibaba-gpu-v2023/ (the FGD paper's openb
trace: research use, cite Weng et al., USENIX ATC 2023; read from there, never copied here) when it
exists; `--synthetic` (or no trace found) replays a synthetic trace made in code. Bad input (a
missing column, a negative time, an unknown arm) is an error naming the file, line and column: exit 2.
The engine lives in the product (kubectl_repack.simulate) because `kubectl repack simulate` replays
the same way; this module only reads flags, writes the JSON and the plot.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace

from kubectl_repack.simulate.arms import ARMS
from kubectl_repack.simulate.engine import BINPACK, LEAST_ALLOCATED, EngineSettings
from kubectl_repack.simulate.run import check_arms, replay_arms
from kubectl_repack.simulate.trace import (TraceError, Workload, read_nodes, read_shapes, synthetic_nodes,
                                           synthetic_shapes)

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# ../shared/traces/... next to the checkout (a worktree one level deeper looks one further up)
TRACE_DIRS = tuple(os.path.normpath(os.path.join(_REPO, *[".."] * up, "shared", "traces", "alibaba-gpu-v2023"))
                   for up in (1, 2))


def trace_dir():
    return next((d for d in TRACE_DIRS if os.path.isdir(d)), None)
NODE_FILE, POD_FILE = "openb_node_list_gpu_node.csv", "openb_pod_list_default.csv"
CITATION = ("Weng et al., Beware of Fragmentation: Scheduling GPU-Sharing Workloads with Fragmentation "
            "Gradient Descent, USENIX ATC 2023 (Alibaba cluster-trace-gpu-v2023)")


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m bench.replay", description=__doc__.split("\n")[0])
    p.add_argument("--nodes")
    p.add_argument("--pods")
    p.add_argument("--synthetic", action="store_true", help="a synthetic trace made in code")
    p.add_argument("--synthetic-nodes", type=int, default=64)
    p.add_argument("--gangs", choices=("default", "none"), default="default")
    p.add_argument("--load", type=float, default=1.0)
    p.add_argument("--days", type=float, default=8.0, help="simulated days, warm-up included")
    p.add_argument("--warmup-days", type=float, default=1.0)
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--node-order", choices=(BINPACK, LEAST_ALLOCATED), default=BINPACK)
    p.add_argument("--checkpoint-s", type=float, default=1800.0)
    p.add_argument("--set", action="append", default=[], metavar="ARM.KEY=VALUE",
                   help="an arm setting, e.g. repack-pending.cooldown=2m, repack-cron.max_podgroups=4")
    p.add_argument("--json", required=True, metavar="OUT")
    p.add_argument("--plot", metavar="PNG")
    p.add_argument("--quiet", action="store_true")
    return p.parse_args(argv)


def load_inputs(args):
    """(nodes, shapes, sources) from flags; TraceError for bad files."""
    if not args.synthetic:
        found = trace_dir()
        nodes_path = args.nodes or (os.path.join(found, NODE_FILE) if found else None)
        pods_path = args.pods or (os.path.join(found, POD_FILE) if found else None)
        if nodes_path and pods_path:
            return (read_nodes(nodes_path), read_shapes(pods_path),
                    {"nodes": nodes_path, "pods": pods_path, "cite": CITATION})
        print(f"warning: no trace at {' or '.join(TRACE_DIRS)} and no --nodes/--pods: replaying a synthetic "
              "trace", file=sys.stderr)
    return (synthetic_nodes(args.synthetic_nodes, args.seed), synthetic_shapes(seed=args.seed),
            {"synthetic": True, "nodes": args.synthetic_nodes})


def parse_sets(items, arms) -> dict:
    """{arm: {key: value}} from ARM.KEY=VALUE items (numbers as numbers)."""
    out = {}
    for item in items:
        target, eq, value = item.partition("=")
        arm, dot, key = target.rpartition(".")
        if not eq or not dot or arm not in arms:
            raise ValueError(f"{item!r}: expected ARM.KEY=VALUE with ARM one of {', '.join(arms)}")
        try:
            value = float(value) if "." in value else int(value)
        except ValueError:
            pass
        out.setdefault(arm, {})[key] = value
    return out


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        arms = check_arms([a.strip() for a in args.arms.split(",") if a.strip()])
    except ValueError as e:
        print(f"error: --arms: {e}", file=sys.stderr)
        return 2
    for flag, value in (("--load", args.load), ("--days", args.days), ("--warmup-days", args.warmup_days + 1)):
        if not value > 0:
            print(f"error: {flag}: must be positive", file=sys.stderr)
            return 2
    if args.warmup_days >= args.days:
        print("error: --warmup-days: must be shorter than --days", file=sys.stderr)
        return 2
    try:
        nodes, shapes, sources = load_inputs(args)
    except TraceError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    try:
        overrides = parse_sets(args.set, arms)
    except ValueError as e:
        print(f"error: --set: {e}", file=sys.stderr)
        return 2
    workload = Workload(load=args.load, days=args.days, warmup_days=args.warmup_days)
    if args.gangs == "none":
        workload = replace(workload, gangs=())
    engine = EngineSettings(node_order=args.node_order, checkpoint_s=args.checkpoint_s)
    started = time.time()
    last = [0.0]

    def progress(arm, t, horizon):
        now = time.time()
        if not args.quiet and now - last[0] > 10:
            last[0] = now
            print(f"{arm}: day {t / 86400:.2f} of {horizon / 86400:.0f} ({now - started:.0f}s)", file=sys.stderr)

    doc = replay_arms(nodes, shapes, workload, arms, args.seed, engine, progress=progress, sources=sources,
                      arm_overrides=overrides)
    doc["settings"]["wall_s"] = round(time.time() - started, 1)
    with open(args.json, "w") as f:
        json.dump(doc, f, indent=1)
    if args.plot:
        from bench.replay_plot import plot
        plot([doc], args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
