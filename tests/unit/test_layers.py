"""The import-linter contracts (.importlinter) hold on the tree, and catch each forbidden edge.

Each planted edge is one the layering removed, one the layers forbid, or one between the
in-cluster processes: it is written into a temporary copy of the three packages, and
`lint-imports` must then fail naming the contract it breaks.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("planner", "kubectl_repack", "webhook")
# `lint-imports` of this interpreter's import-linter, wherever pip put the script.
LINT = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; "
                              "sys.argv[0] = 'lint-imports'; sys.exit(lint_imports_command())"]

LAYERS = "Layers: front ends > engine > Kubernetes I/O > run API > planner"
NO_WEBHOOK = "The plugin never imports the webhook process"
SHARED_ONLY = "The webhook process uses the shared layers of kubectl_repack, not the CLI"
ONLY_KUBE = "Only kubectl_repack.kube imports the kubernetes client"
PURE = "Pure modules (planner, run API, the engine's decisions, admission) import no I/O"
PROCESSES = "The three in-cluster processes (admission webhook, coordinator, controller)"
COMMON = "webhook.common imports none of the three processes"


def lint(root: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(root))   # the copy shadows the installed packages
    return subprocess.run([*LINT, "--config", str(root / ".importlinter"), "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_tree_keeps_every_contract():
    done = lint(REPO)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("tree")
    for package in PACKAGES:
        shutil.copytree(REPO / package, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", root / ".importlinter")
    assert lint(root).returncode == 0   # the copy as it is keeps every contract: failures are the plants'
    return root


PLANTED = [
    # edges the layering removed
    pytest.param("kubectl_repack/engine/tracking.py", "from webhook.coordinator import placement", [NO_WEBHOOK],
                 id="engine-imports-webhook-matching"),
    pytest.param("kubectl_repack/commands/install.py", "from webhook import coordinator", [NO_WEBHOOK],
                 id="install-imports-the-coordinator"),
    pytest.param("webhook/coordinator/loop.py", "from kubectl_repack.commands import snapshot", [SHARED_ONLY],
                 id="coordinator-imports-cli-internals"),
    pytest.param("webhook/admission/review.py", "from kubectl_repack import cli", [SHARED_ONLY],
                 id="admission-imports-the-cli"),
    # layers importing upwards
    pytest.param("planner/scope.py", "from kubectl_repack.api import run", [LAYERS], id="planner-imports-run-api"),
    pytest.param("kubectl_repack/api/run.py", "from kubectl_repack.kube import runs", [LAYERS],
                 id="run-api-imports-kube"),
    pytest.param("kubectl_repack/kube/runs.py", "from kubectl_repack.engine import executor", [LAYERS],
                 id="kube-imports-engine"),
    pytest.param("kubectl_repack/engine/executor.py", "from kubectl_repack.commands import apply", [LAYERS],
                 id="engine-imports-cli"),
    # purity
    pytest.param("webhook/admission/review.py", "import kubernetes", [PURE], id="admission-imports-kubernetes"),
    pytest.param("kubectl_repack/engine/outcome.py", "from kubectl_repack.kube import client", [PURE],
                 id="engine-decision-reaches-kubernetes"),
    pytest.param("webhook/coordinator/placement.py", "import flask", [PURE], id="placement-decision-imports-flask"),
    # one folder per in-cluster process: none imports another; what they share imports none
    pytest.param("webhook/coordinator/loop.py", "from webhook.admission import review", [PROCESSES],
                 id="coordinator-imports-admission"),
    pytest.param("webhook/controller/loop.py", "from webhook.coordinator import placement", [PROCESSES],
                 id="controller-imports-coordinator"),
    pytest.param("webhook/admission/app.py", "from webhook.controller import certmanager", [PROCESSES],
                 id="admission-imports-controller"),
    pytest.param("webhook/common/metrics.py", "from webhook.admission import relocation_store", [COMMON],
                 id="common-imports-a-process"),
    # one Kubernetes I/O layer in fact: nobody but kube imports the client
    pytest.param("kubectl_repack/commands/install.py", "from kubernetes import client", [ONLY_KUBE],
                 id="install-imports-kubernetes"),
    pytest.param("webhook/admission/serve.py", "import kubernetes", [ONLY_KUBE], id="webhook-imports-kubernetes"),
    pytest.param("kubectl_repack/deploy/installer.py", "from kubernetes.client import ApiClient", [ONLY_KUBE],
                 id="installer-imports-kubernetes"),
    # printing (kubectl's output dialects) is pure and the CLI's own
    pytest.param("kubectl_repack/printing/jsonpath.py", "from kubectl_repack.kube import client", [PURE, LAYERS],
                 id="printing-reaches-kubernetes"),
    pytest.param("webhook/controller/loop.py", "from kubectl_repack import printing", [SHARED_ONLY],
                 id="controller-imports-printing"),
]


@pytest.mark.parametrize("module, line, broken", PLANTED)
def test_a_planted_edge_breaks_its_contract(pristine, tmp_path, module, line, broken):
    root = tmp_path / "tree"
    shutil.copytree(pristine, root)
    target = root / module
    target.write_text(target.read_text() + f"\n{line}  # planted\n")
    done = lint(root)
    assert done.returncode != 0, done.stdout
    report = done.stdout.split("Broken contracts", 1)[-1]
    for contract in broken:
        assert contract in report, done.stdout
