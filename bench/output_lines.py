"""How much `kubectl repack plan` prints at scale (a screenful by default), not a test.

For each size, a generated cluster (bench.generate, seed 1; with --hypernodes also bench.hypernodes'
3-tier tree) is written to bench/out/ (reused when present), then `kubectl-repack plan --snapshot F
--resource R` runs as a process with COLUMNS=80 (a terminal of 80 columns), without COLUMNS (a
pipe: nothing wrapped or narrowed) and with `-o wide`; it prints lines and the widest line of each.
tests/unit/cli/test_scale_output.py holds the 10,000-node default to 60 lines of 80 columns.

    python -m bench.output_lines                       # 10,000 nodes, with and without HyperNodes
    python -m bench.output_lines --sizes 2000 25000
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
R = "huawei.com/ascend-1980"


def cluster_file(nodes: int, hypernodes: bool) -> Path:
    path = OUT / f"cluster-{nodes}-seed1{'-hypernodes' if hypernodes else ''}.json"
    if not path.exists():
        sys.path.insert(0, str(ROOT))
        if hypernodes:
            from bench.hypernodes import generate
        else:
            from bench.generate import generate
        OUT.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(generate(nodes, 1)), encoding="utf-8")
    return path


def measure(path: Path, columns: str | None, *extra) -> tuple[int, int]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns:
        env["COLUMNS"] = columns
    cli = "import sys; from kubectl_repack.cli import main; sys.argv[0] = 'kubectl-repack'; main()"
    out = subprocess.run([sys.executable, "-c", cli, "plan", "--snapshot", str(path), "--resource", R, *extra], env=env, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    return len(lines), max((len(line) for line in lines), default=0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10000])
    args = ap.parse_args(argv)
    print("| nodes | HyperNodes | default, 80 columns | default, a pipe | -o wide |")
    print("|---:|---|---|---|---|")
    for nodes in args.sizes:
        for hn in (False, True):
            path = cluster_file(nodes, hn)
            cells = [measure(path, "80"), measure(path, None), measure(path, None, "-o", "wide")]
            print(f"| {nodes:,} | {'3 tiers' if hn else 'none'} | "
                  + " | ".join(f"{n} lines, widest {w}" for n, w in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
