"""`kubectl repack why` and `plan --for` (RELIEF-1, RELIEF-2) through the CLI, offline."""
import json

import pytest
import yaml

from tests.unit.cli.conftest import run
from tests.unit.planner.test_relief import queue, seed


@pytest.fixture
def snap(tmp_path):
    def write(objs=None):
        path = tmp_path / "snap.yaml"
        path.write_text(yaml.safe_dump_all(objs if objs is not None else seed()))
        return str(path)
    return write


def test_why_names_fragmentation_and_the_command_that_makes_room(snap):
    r = run("why", "podgroup/large-pg", "--snapshot", snap())
    assert r.exit_code == 0, r.output
    assert "Verdict:   Fragmentation:" in r.stdout
    assert "2 node(s): huawei.com/ascend-1980 free 1 < 4 requested (NodeResourcesFit)" in r.stdout
    assert "Fit now:   1 of the 2 pod(s) it needs" in r.stdout
    assert "Repack:    vacate node-01" in r.stdout and "kubectl repack plan --for podgroup/large-pg -n default" in r.stdout


def test_why_as_data(snap):
    r = run("why", "pod/large-worker-0", "-n", "default", "--snapshot", snap(), "-o", "json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    assert d["cause"] == "Fragmentation" and d["podGroup"]["name"] == "default/large-pg" and d["fitNow"] == 1
    y = yaml.safe_load(run("why", "pg/large-pg", "--snapshot", snap(), "-o", "yaml").stdout)
    assert y == d


def test_why_a_closed_queue_suggests_no_repack(snap):
    r = run("why", "podgroup/large-pg", "--snapshot", snap(seed() + [queue(state="Closed")]))
    assert r.exit_code == 0, r.output
    assert "Verdict:   Queue: queue default is Closed" in r.stdout and "Repack:" not in r.stdout


@pytest.mark.parametrize("ref,says", [("podgroup/nope", "error: podgroup default/nope: not found"),
                                      ("deployment/x", "error: Invalid value for 'KIND/NAME': 'deployment/x': expected KIND/NAME"),
                                      ("podgroup/batch-pg", "is not waiting")])
def test_why_of_what_is_no_waiting_gang_is_an_error_or_says_so(snap, ref, says):
    r = run("why", ref, "--snapshot", snap())
    if says.startswith("error:"):
        assert r.exit_code == 2 and r.stderr.startswith(says), r.output
    else:
        assert r.exit_code == 0 and says in r.stdout, r.output


def test_plan_for_makes_room_and_says_where_the_pods_go(snap):
    r = run("plan", "--snapshot", snap(), "--for", "podgroup/large-pg", "-o", "json")
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["spec"]["target"] == {"podGroups": ["default/large-pg"]} and "goals" not in out["spec"]
    assert out["status"]["plan"]["freedNodes"] == ["node-01"]
    target = out["status"]["plan"]["summary"]["target"]
    assert target["fits"] is True and {p["node"] for p in target["placements"]} == {"node-01"}


def test_plan_for_a_job_that_needs_no_move_exits_3_with_exit_code(snap):
    r = run("plan", "--snapshot", snap(seed(large_cards=3)), "--for", "podgroup/large-pg", "--exit-code")
    assert r.exit_code == 3, r.output
    assert "TargetAlreadyFits" in r.stdout and "fits now without any move" in r.stdout


@pytest.mark.parametrize("extra,says", [
    (["--min-improvement", "10"], "spec.goals[0].minFragImprovementPercent"),
    (["--max-cards", "4"], "--max-cards: name the resource it limits with --resource"),
])
def test_plan_for_refuses_what_does_not_go_with_a_target(snap, extra, says):
    r = run("plan", "--snapshot", snap(), "--for", "podgroup/large-pg", *extra)
    assert r.exit_code == 2 and says in r.stderr, r.output
