"""Build the krew release (hack/release.py) into a directory and run its zipapp the way krew users
do: `python3 -I -S kubectl-repack ...`, without site-packages, so only what the archive vendors is
importable. Shared by the packaging unit tests and the zipapp e2e tests."""
from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RELEASE = REPO / "hack" / "release.py"


def build_release(out: Path):
    """(archive, the krew manifest written next to it, unpacked dir) of a fresh build into `out`."""
    subprocess.run([sys.executable, str(RELEASE), "--dist", str(out)], check=True, cwd=out, timeout=600)
    archive = next(out.glob("kubectl-repack-v*.tar.gz"))
    unpacked = out / "unpacked"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    return archive, out / "krew-manifest.yaml", unpacked


def run_zipapp(zipapp: Path, *args: str, env=None, timeout: float = 300, cwd=None) -> subprocess.CompletedProcess:
    """The zipapp under a bare interpreter (-I: no user site, no PYTHON* variables; -S: no site)."""
    return subprocess.run([sys.executable, "-I", "-S", str(zipapp), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd or REPO)
