"""`kubectl repack <TAB>` through the real kubectl: kubectl finds the plugin on PATH, runs
`kubectl_complete-repack` with the words typed, and hands its candidates to the shell. `kubectl
__complete` is the entry point kubectl's shell scripts call, so this is what a user's TAB runs."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

BIN = os.path.dirname(sys.executable)


@pytest.fixture
def kubectl():
    bin_dir = os.environ.get("REPACK_BIN_DIR")
    if not bin_dir or not os.path.exists(os.path.join(bin_dir, "kubectl")):
        pytest.fail("REPACK_BIN_DIR/kubectl is missing: run the tests through hack/test.sh", pytrace=False)
    return os.path.join(bin_dir, "kubectl")


def _complete(kubectl, *words):
    assert shutil.which("kubectl_complete-repack", path=BIN), "pip install -e . installs kubectl_complete-repack"
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    r = subprocess.run([kubectl, "__complete", "repack", *words], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout.splitlines(), r.stderr


def test_kubectl_completes_the_plugins_commands(kubectl):
    out, err = _complete(kubectl, "pl")
    assert "About to call: " in err and "kubectl_complete-repack pl" in err
    assert out == ["plan\tPlan a repack (DryRun): fragmentation...", ":4"]


def test_kubectl_completes_flag_values(kubectl):
    out, _ = _complete(kubectl, "plan", "-o", "")
    assert out == ["yaml", "json", "wide", "name", "jsonpath=", "jsonpath-as-json=", "custom-columns=", ":6"]
