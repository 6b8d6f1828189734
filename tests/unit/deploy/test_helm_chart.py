"""The Helm chart charts/kubectl-repack as files: the committed chart is the generator's output
(kubectl_repack.deploy.chart), and the generator refuses what it cannot template. What the pinned
`helm` makes of it (lint, template against `install --dry-run`) is tests/e2e/test_helm_template.py:
that helm is built from Go source, which no unit test does."""
from __future__ import annotations

from pathlib import Path

import pytest

from kubectl_repack.deploy import chart, manifests

ROOT = Path(__file__).resolve().parents[3]
CHART_DIR = ROOT / "charts" / chart.CHART


def test_the_committed_chart_is_the_generators_output():
    """So a change to the install set (a new policy, a new rule) reaches the chart by one command."""
    want = chart.chart_files()
    have = {p.relative_to(CHART_DIR).as_posix(): p.read_text(encoding="utf-8")
            for p in CHART_DIR.rglob("*") if p.is_file()}
    fix = f"run `{chart.COMMAND}` and commit"
    assert set(have) == set(want), f"{sorted(set(have) ^ set(want))}: {fix}"
    for name, text in want.items():
        assert have[name] == text, f"{name} is stale: {fix}"


def test_the_generator_refuses_a_value_it_cannot_template(monkeypatch):
    """A parameter of the install set used where the generator has no Helm expression for it stops
    the generator, instead of writing a chart that silently renders the sentinel."""
    render = manifests.render

    def with_priority_in_a_string(**kw):
        objs = render(**kw)
        objs[-1]["metadata"]["annotations"] = {"example": f"priority {kw['priority_class']}"}
        return objs

    monkeypatch.setattr(manifests, "render", with_priority_in_a_string)
    with pytest.raises(ValueError, match="cannot template"):
        chart.chart_files()
