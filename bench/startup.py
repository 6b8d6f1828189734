"""Start-up time of the krew zipapp: `--help` and TAB completion, as a user pays them (not a test).

Builds the release archive with hack/release.py into a temporary directory (or takes `--zipapp
PATH`), then runs `python3 -I -S kubectl-repack ...` (no site-packages: the archive alone, as krew
runs it) `--runs` times per command line and prints the median, min and max wall time. The zipapp
compiles every module it imports from source on each run, so this is what `kubectl repack <TAB>`
costs; tests/unit/cli/test_startup.py checks the imports behind it, never the time.

    python3 bench/startup.py                         # build, then 15 runs per command line
    python3 bench/startup.py --zipapp /tmp/d/kubectl-repack --runs 30
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COMMAND_LINES = (
    ("--help",),
    ("plan", "--help"),
    ("__complete", ""),                       # kubectl repack <TAB>
    ("__complete", "plan", "-f", "ex"),       # kubectl repack plan -f ex<TAB>
    ("__complete", "status", "-o", "j"),
)


def build(scratch: Path) -> Path:
    """The zipapp of a fresh release archive (the manifest is neither checked nor written)."""
    subprocess.run([sys.executable, str(REPO / "hack" / "release.py"), "--dist", str(scratch)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (archive,) = scratch.glob("*.tar.gz")
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if Path(m.name).name == "kubectl-repack")
        tar.extractall(scratch, members=[member])
    return scratch / member.name


def measure(command: list, runs: int) -> list[float]:
    """Wall times of `runs` runs of `command`, in seconds."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t0)
    return times


def row(label: str, times: list) -> str:
    return f"{label:<34} {statistics.median(times):>7.3f}s {min(times):>7.3f}s {max(times):>7.3f}s"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zipapp", type=Path, help="an extracted kubectl-repack zipapp (default: build one)")
    parser.add_argument("--python", default="python3", help="the interpreter krew users run it with")
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="repack-startup-") as scratch:
        zipapp = args.zipapp or build(Path(scratch))
        python = [args.python, "-I", "-S"]
        print(f"{'command line':<34} {'median':>8} {'min':>8} {'max':>8}   ({args.runs} runs, python3 -I -S)")
        print(row("(the interpreter alone)", measure(python + ["-c", "pass"], args.runs)))
        for line in COMMAND_LINES:
            shown = " ".join(repr(a) if a == "" else a for a in line)
            print(row(shown, measure(python + [str(zipapp), *line], args.runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
