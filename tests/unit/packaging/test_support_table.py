"""README's support table is the one CI runs: rendered from the pinned control plane (hack/support_table.py),
and what `doctor` and the chart say agrees with it. tests/e2e/test_control_plane.py checks that the
running binaries report these pins, so a green CI ran exactly the versions the table lists."""
from __future__ import annotations

import sys
from pathlib import Path

import yaml

from kubectl_repack.api import versions
from kubectl_repack.deploy.chart import chart_files

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "hack"))
import support_table  # noqa: E402  (a script in hack/, not a package)


def test_the_readme_table_is_the_one_rendered_from_the_pins():
    assert support_table.render(REPO) in (REPO / "README.md").read_text(), \
        "README's support table is stale: run `python3 hack/support_table.py --write`"


def test_what_doctor_names_as_tested_is_what_ci_builds():
    pins = support_table.versions(REPO)
    assert versions.TESTED_KUBERNETES == pins["kubernetes"]
    assert versions.TESTED_VOLCANO == pins["volcano"]


def test_the_chart_states_the_supported_kubernetes():
    chart = yaml.safe_load(chart_files()["Chart.yaml"])
    assert chart["kubeVersion"] == versions.chart_kube_version() == ">=1.30.0-0"
    committed = yaml.safe_load((REPO / "charts" / "kubectl-repack" / "Chart.yaml").read_text())
    assert committed["kubeVersion"] == chart["kubeVersion"]


def test_minor_of_reads_vendor_versions():
    assert versions.minor_of("v1.37.2-eks-1a2b") == (1, 37)
    assert versions.minor_of("1.30") == (1, 30)
    assert versions.minor_of("") is None and versions.minor_of(None) is None and versions.minor_of("latest") is None
