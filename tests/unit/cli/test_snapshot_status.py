"""`kubectl repack snapshot` (round trip through `plan --snapshot`) and `kubectl repack status`."""
import json

import yaml

from tests.unit.cli.conftest import GUARDED, NOW, SEED3, as_json, run


def test_snapshot_to_stdout_is_one_v1_list(fake_cluster):
    r = run("snapshot")
    doc = as_json(r)
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"
    assert doc["items"] == fake_cluster["objects"]
    assert all("apiVersion" in o and "kind" in o for o in doc["items"])
    assert r.stderr == ""


def test_snapshot_file_round_trips_through_plan(fake_cluster, tmp_path):
    out = tmp_path / "cluster.json"
    r = run("snapshot", "-o", out)
    assert r.exit_code == 0, r.output
    assert r.stdout == ""
    assert r.stderr.startswith(f"wrote {out}: {len(fake_cluster['objects'])} objects (")
    assert "3 Node" in r.stderr and "2 Namespace" in r.stderr
    offline = run("plan", "--snapshot", out, "-f", GUARDED, "-o", "json", "--now", NOW)
    from_example = run("plan", "--snapshot", SEED3, "-f", GUARDED, "-o", "json", "--now", NOW)
    assert offline.exit_code == 0 and offline.stdout == from_example.stdout
    live = run("plan", "-f", GUARDED, "-o", "json", "--now", NOW)
    assert live.stdout == offline.stdout


def test_yaml_snapshot_round_trips(fake_cluster, tmp_path):
    out = tmp_path / "cluster.yaml"
    assert run("snapshot", "-o", out, "--format", "yaml").exit_code == 0
    doc = yaml.safe_load(out.read_text())
    assert doc["kind"] == "List" and len(doc["items"]) == len(fake_cluster["objects"])
    r = run("plan", "--snapshot", out, "-f", GUARDED, "-o", "json", "--now", NOW)
    assert as_json(r)["status"]["plan"]["summary"]["fragBeforePercent"] == 33


def test_snapshot_refuses_objects_the_planner_cannot_read(fake_cluster, tmp_path):
    fake_cluster["objects"].append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "broken"},
                                    "status": {"allocatable": {"cpu": "many"}}})
    out = tmp_path / "cluster.json"
    r = run("snapshot", "-o", out)
    assert r.exit_code == 1
    assert r.stderr.startswith("error: Node broken: status.allocatable.cpu:")
    assert not out.exists()


def test_snapshot_into_a_missing_directory_exits_2_before_reading_the_cluster(fake_cluster, tmp_path):
    r = run("snapshot", "-o", tmp_path / "missing-dir" / "cluster.json")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: Invalid value for '-o' / '--output': cannot write ")
    assert "missing-dir does not exist" in r.stderr
    assert fake_cluster["connected"] == []


def _saved(fake_cluster):
    r = run("plan", "-f", GUARDED, "--save", "--now", NOW)
    assert r.exit_code == 0, r.output
    return fake_cluster["store"].runs["ascend-guarded-dryrun"]


def test_status_of_a_saved_dryrun(fake_cluster):
    _saved(fake_cluster)
    r = run("status", "ascend-guarded-dryrun")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "Name:        ascend-guarded-dryrun\nMode:        DryRun\nResource:    huawei.com/ascend-1980\n" \
           "Phase:       Succeeded\n" in out
    assert f"Started:     {NOW}" in out and f"Completed:   {NOW}" in out
    lines = out.splitlines()
    i = lines.index("CONDITIONS")
    assert lines[i + 1].split() == ["TYPE", "STATUS", "REASON", "MESSAGE"]
    assert lines[i + 2].split()[:3] == ["Complete", "True", "RepackRecommended"]
    rows = {line.split("   ")[0].strip(): line for line in lines if line.startswith(("Fragmentation", "Freed", "Moved", "Verified", "Scope"))}
    assert rows["Fragmentation"].split() == ["Fragmentation", "33%", "->", "0%", "-"]
    assert rows["Freed nodes"].split() == ["Freed", "nodes", "1", "-"]
    assert rows["Moved cards"].split() == ["Moved", "cards", "2", "-"]
    assert rows["Freed"].split() == ["Freed", "ascend-node-01", "-"]
    assert "PLANNED MOVES" in out
    assert "ascend-batch-training-worker-1   ascend-node-01   ascend-node-03   1" in out
    assert "RELOCATIONS\n<none> (DryRun runs evict nothing)\n" in out


EXECUTE = {
    "apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
    "metadata": {"name": "ascend-execute-001", "uid": "u"},
    "spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]},
    "status": {
        "phase": "Succeeded",
        "conditions": [{"type": "Complete", "status": "True", "reason": "ExecutionCompletedWithAlternativePlacement",
                        "message": "goal met; 1 replacement bound elsewhere"}],
        "plan": {"summary": {"fragBeforePercent": 33, "fragAfterPercent": 0, "freedNodeCount": 1,
                             "movedCardCount": 2}, "freedNodes": ["ascend-node-01"]},
        "result": {"fragAfterPercent": 0, "freedNodeCount": 1, "freedNodes": ["ascend-node-01"],
                   "movedCardCount": 2, "metricsVerified": True},
        "relocations": [
            {"namespace": "repack-demo", "victimPodName": "w-0", "podGroupName": "pg", "plannedNodeName": "n2",
             "eviction": {"phase": "Accepted"},
             "placement": {"phase": "Placed", "selectedNodeName": "n2", "actualNodeName": "n2",
                           "replacementPodName": "w-0"}},
            {"namespace": "repack-demo", "victimPodName": "w-1", "podGroupName": "pg", "plannedNodeName": "n3",
             "eviction": {"phase": "Accepted"},
             "placement": {"phase": "Placed", "selectedNodeName": "n3", "actualNodeName": "n2",
                           "replacementPodName": "w-1"}},
        ],
    },
}


def test_status_of_an_execute_run_shows_result_and_relocations(fake_cluster):
    fake_cluster["store"].runs["ascend-execute-001"] = EXECUTE
    r = run("status", "ascend-execute-001")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    assert [ln.split() for ln in lines if ln.startswith("Verified")] == [["Verified", "-", "true"]]
    assert [ln.split() for ln in lines if ln.startswith("Fragmentation")] == [
        ["Fragmentation", "33%", "->", "0%", "0%"]]
    i = lines.index("RELOCATIONS")
    assert lines[i + 1].split() == ["NAMESPACE", "VICTIM", "EVICTION", "PLACEMENT", "PLANNED", "SELECTED",
                                    "ACTUAL", "REPLACEMENT"]
    assert lines[i + 2].split() == ["repack-demo", "w-0", "Accepted", "Placed", "n2", "n2", "n2", "w-0"]
    assert lines[i + 3].split() == ["repack-demo", "w-1", "Accepted", "Placed", "n3", "n3", "n2", "w-1"]
    assert "ExecutionCompletedWithAlternativePlacement" in r.stdout


def test_status_json_and_yaml_print_the_object(fake_cluster):
    fake_cluster["store"].runs["ascend-execute-001"] = EXECUTE
    obj = as_json(run("status", "ascend-execute-001", "-o", "json"))
    assert obj == EXECUTE
    r = run("status", "ascend-execute-001", "-o", "yaml")
    assert yaml.safe_load(r.stdout) == EXECUTE
    assert r.stdout.startswith("apiVersion: repack.volcano.sh/v1alpha1\nkind: RepackRun\n")


def test_status_of_a_pending_run_without_status(fake_cluster):
    fake_cluster["store"].runs["new"] = {k: v for k, v in EXECUTE.items() if k != "status"}
    r = run("status", "new")
    assert r.exit_code == 0
    assert "Phase:       Pending" in r.stdout
    assert "CONDITIONS\n<none>\n" in r.stdout
    assert "RELOCATIONS\n<none>\n" in r.stdout


def test_status_of_a_missing_run_exits_1(fake_cluster):
    r = run("status", "nope")
    assert r.exit_code == 1
    assert r.stderr == 'error: reading repackrun nope: repackruns.repack.volcano.sh "nope" not found (HTTP 404)\n'


def test_status_needs_a_name():
    r = run("status")
    assert r.exit_code == 2
    assert "Missing argument 'NAME'" in r.stderr


def test_json_of_status_is_deterministic(fake_cluster):
    fake_cluster["store"].runs["ascend-execute-001"] = EXECUTE
    a = run("status", "ascend-execute-001", "-o", "json").stdout
    assert a == run("status", "ascend-execute-001", "-o", "json").stdout
    assert json.loads(a)["status"]["relocations"][1]["placement"]["actualNodeName"] == "n2"
