"""Rendering helpers, and the CLI as a real process (exit codes and stderr as a shell sees them)."""
import json
import subprocess
import sys

import pytest

from kubectl_repack import render
from tests.unit.cli.conftest import GUARDED, NOW, REPO, SEED3


@pytest.mark.parametrize("total, used, bar", [
    (8, 2, "[##......]"),
    (8, 0, "[........]"),
    (8, 8, "[########]"),
    (16, 5, "[#####...........]"),
    (64, 1, "[#" + "." * 31 + "]"),        # scaled to 32 cells, any use shows
    (64, 32, "[" + "#" * 16 + "." * 16 + "]"),
    (0, 0, "[]"),
])
def test_card_bar(total, used, bar):
    assert render.card_bar(total, used) == bar


def test_table_pads_columns_and_strips_trailing_space():
    out = render.table(["NAME", "X"], [["a", ""], ["long-name", 3]])
    assert out.splitlines() == ["NAME        X", "a", "long-name   3"]


def test_canonical_run_orders_keys_like_the_crd():
    obj = {"status": {"plan": {"freedNodes": [], "summary": {"movedCardCount": 1, "fragBeforePercent": 2}},
                      "phase": "Succeeded"},
           "spec": {"goals": [{"minFragImprovementPercent": 1, "resource": "a/b"}], "mode": "DryRun",
                    "maxPerRun": {"resources": {"z/z": 1, "a/a": 2}, "podGroups": 1}},
           "metadata": {"labels": {"b": "1", "a": "2"}, "name": "n", "managedFields": []},
           "kind": "RepackRun", "apiVersion": "repack.volcano.sh/v1alpha1"}
    out = render.canonical_run(obj)
    assert list(out) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert list(out["metadata"]) == ["name", "labels"] and list(out["metadata"]["labels"]) == ["a", "b"]
    assert list(out["spec"]) == ["mode", "goals", "maxPerRun"]
    assert list(out["spec"]["goals"][0]) == ["resource", "minFragImprovementPercent"]
    assert list(out["spec"]["maxPerRun"]) == ["podGroups", "resources"]
    assert list(out["spec"]["maxPerRun"]["resources"]) == ["a/a", "z/z"]
    assert list(out["status"]) == ["phase", "plan"]
    assert list(out["status"]["plan"]) == ["summary", "freedNodes"]
    assert list(out["status"]["plan"]["summary"]) == ["fragBeforePercent", "movedCardCount"]


def cli(*args):
    return subprocess.run([sys.executable, "-c", "from kubectl_repack.cli import main; main()", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)


def test_real_process_exit_codes_and_messages(tmp_path):
    ok = cli("plan", "--snapshot", SEED3, "-f", GUARDED, "-o", "json", "--now", NOW, "--exit-code")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["status"]["plan"]["summary"]["fragBeforePercent"] == 33

    not_recommended = cli("plan", "--snapshot", SEED3, "-f", GUARDED, "--min-improvement", "90", "--exit-code")
    assert not_recommended.returncode == 3
    assert "InsufficientImprovement" in not_recommended.stdout and not_recommended.stderr == ""

    bad = tmp_path / "bad.yaml"
    bad.write_text(open(GUARDED).read().replace("minFragImprovementPercent: 10", "minFragImprovementPercent: 150"))
    invalid = cli("plan", "-f", bad, "--kubeconfig", tmp_path / "never-read")
    assert invalid.returncode == 2
    assert invalid.stderr == "error: spec.goals[0].minFragImprovementPercent: 150 is greater than the maximum of 100\n"
    assert invalid.stdout == ""

    unreachable = tmp_path / "kubeconfig"
    unreachable.write_text("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'http://127.0.0.1:9'}\n"
                           "users:\n- name: u\n  user: {}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                           "current-context: x\n")
    down = cli("plan", "-f", GUARDED, "--kubeconfig", unreachable)
    assert down.returncode == 1
    assert down.stderr.startswith("error: listing namespaces.core: cannot reach the API server"), down.stderr
    assert "Traceback" not in down.stderr

    usage = cli("plan", "--output", "xml")
    assert usage.returncode == 2 and usage.stderr.startswith("error: Invalid value for '-o' / '--output'")
    assert "See 'kubectl repack plan -h' for help and examples." in usage.stderr


def test_summary_flags_an_unproven_minimum_and_long_freed_lists():
    import dataclasses

    import planner
    import yaml as _yaml

    snap = planner.load_file(SEED3)
    spec = _yaml.safe_load(open(GUARDED))
    p = planner.plan(snap, spec["spec"])
    p = dataclasses.replace(p, minimum_exact=False, freed_nodes=tuple(f"n{i:02d}" for i in range(12)))
    out = render.plan_summary(spec, p, "test")
    assert "theoretical minimum 2 (lower bound, not proven)" in out
    assert "Freed nodes:    12 (n00, n01, n02, n03, n04, n05, n06, n07, n08, n09, and 2 more)" in out


def test_yaml_output_never_writes_anchors_for_shared_sub_objects():
    """A value shared in memory (the same env list in two containers, the same verbs in two rules)
    is written out in full each time, as kubectl prints objects: no `&id001` / `*id001`."""
    from kubectl_repack.deploy import manifests
    from kubectl_repack.render import to_yaml

    shared = ["get", "list", "watch"]
    text = to_yaml({"rules": [{"verbs": shared}, {"verbs": shared}]})
    assert "&id" not in text and "*id" not in text and text.count("- watch") == 2
    rendered = manifests.to_yaml(manifests.render(namespace="repack-system", image="x:1", certs=None, url=None))
    assert "&id" not in rendered and "*id" not in rendered


def test_a_plan_that_is_not_recommended_is_labelled_and_says_what_would_make_it_so():
    from tests.unit.cli.conftest import R, SEED3, run

    r = run("plan", "--snapshot", SEED3, "--resource", R, "--min-improvement", "50")
    assert r.exit_code == 0, r.output
    assert "Outcome:        InsufficientImprovement" in r.stdout
    assert "Freed nodes:    1 (ascend-node-01) (best plan found, not recommended)" in r.stdout
    assert ("Recommendable:  it lowers fragmentation by 33.3 points and the run requires 50: "
            "goals[0].minFragImprovementPercent <= 33 would accept it") in r.stdout
    assert "\nMOVES BY PODGROUP (BEST PLAN FOUND, NOT RECOMMENDED)\n" in r.stdout
    ok = run("plan", "--snapshot", SEED3, "--resource", R, "--min-improvement", "33")
    assert "RepackRecommended" in ok.stdout and "not recommended" not in ok.stdout and "Recommendable" not in ok.stdout


def test_a_plan_above_the_minimum_says_why():
    from tests.unit.cli.conftest import EXAMPLES, run

    r = run("plan", "--snapshot", f"{EXAMPLES}/cluster-200.json", "-f", f"{EXAMPLES}/cluster-200-dryrun.yaml",
            "--max-podgroups", "1")
    assert r.exit_code == 0, r.output
    line = next(line for line in r.stdout.splitlines() if line.startswith("Above minimum:"))
    assert "above the theoretical minimum" in line and "budget spent" in line and "maxPerRun.podGroups is 1" in line
