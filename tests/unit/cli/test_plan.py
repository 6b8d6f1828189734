"""`kubectl repack plan`: every output format on its content, exit codes, flags, determinism."""
import json
import os

import pytest
import yaml

from tests.unit.cli.conftest import GUARDED, NOW, R, SEED3, SEED20, SEED20_RUN, as_json, run

SEED_MOVES = [
    ("ascend-batch-training-worker-0", "ascend-node-01", "ascend-node-02", 1),
    ("ascend-batch-training-worker-1", "ascend-node-01", "ascend-node-03", 1),
]
SEED_PG = "ascend-batch-training-2f6c840d-8b14-4e45-a4cf-b43c249acbfd"


def seed_plan(*extra):
    return run("plan", "--snapshot", SEED3, "-f", GUARDED, "--now", NOW, *extra)


# ---------- formats ----------

def test_json_is_the_complete_repackrun_with_the_seed_figures():
    obj = as_json(seed_plan("-o", "json"))
    assert list(obj) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert obj["apiVersion"] == "repack.volcano.sh/v1alpha1" and obj["kind"] == "RepackRun"
    assert obj["metadata"] == {"name": "ascend-guarded-dryrun"}
    assert obj["spec"]["mode"] == "DryRun"
    assert obj["spec"]["maxPerRun"] == {"podGroups": 1, "resources": {R: 4}}
    st = obj["status"]
    assert st["phase"] == "Succeeded"
    assert st["startTime"] == st["completionTime"] == NOW
    assert st["conditions"] == [{"type": "Complete", "status": "True", "reason": "RepackRecommended",
                                 "message": f"frees 1 node(s) by moving 2 {R}: fragmentation 33% -> 0%",
                                 "lastTransitionTime": NOW}]
    assert st["plan"]["summary"] == {"fragBeforePercent": 33, "fragAfterPercent": 0, "freedNodeCount": 1,
                                     "movedCardCount": 2, "resolvedScope": {"podGroupCount": 1, "nodeCount": 3},
                                     "freedCapacity": [{"nodes": 1, "allocatable": 8, "labels": {"accelerator-pool": "ascend-npu"}}]}
    assert st["plan"]["freedNodes"] == ["ascend-node-01"]
    (move,) = st["plan"]["moves"]
    assert move["namespace"] == "repack-demo" and move["podGroupName"] == SEED_PG
    assert move["owner"] == {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "ascend-batch-training"}
    assert move["cards"] == 2
    assert [(p["name"], p["fromNode"], p["toNode"], p["cards"]) for p in move["pods"]] == SEED_MOVES


def test_yaml_parses_to_the_same_object_as_json():
    as_yaml = seed_plan("-o", "yaml")
    assert as_yaml.exit_code == 0, as_yaml.output
    assert as_yaml.stdout.startswith("apiVersion: repack.volcano.sh/v1alpha1\nkind: RepackRun\nmetadata:\n")
    assert yaml.safe_load(as_yaml.stdout) == as_json(seed_plan("-o", "json"))
    assert "  goals:\n  - resource: huawei.com/ascend-1980\n    minFragImprovementPercent: 10\n" in as_yaml.stdout


def test_output_validates_against_the_crd_schema():
    from kubectl_repack import schema

    obj = as_json(seed_plan("-o", "json"))
    schema.validate_run(obj)  # status included: the object could be stored as it is printed


def test_summary_has_figures_and_one_move_line_per_podgroup():
    r = seed_plan()
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "RepackRun:      ascend-guarded-dryrun (DryRun, huawei.com/ascend-1980, " in out
    assert "Outcome:        RepackRecommended" in out
    assert "Fragmentation:  33% -> 0% (33.3 points; required 10)" in out
    assert "Nodes:          3 providers, occupied 3 -> 2, theoretical minimum 2\n" in out
    assert "Scope:          1 PodGroup(s), 3 node(s)" in out
    assert "Freed nodes:    1 (ascend-node-01)" in out
    assert ("Freed nodes:    1 (ascend-node-01)\n"
            "Can host:       1 node(s) with 8 huawei.com/ascend-1980, untainted, labelled accelerator-pool=ascend-npu\n") in out
    assert "Moved:          2 huawei.com/ascend-1980 in 2 pod(s) of 1 PodGroup(s)" in out
    lines = out.splitlines()
    # pools first, then one line per moved PodGroup: its workload, pods, cards, the nodes it leaves and
    # the first node it goes to with how many more
    assert lines.index("POOLS (by label accelerator-pool)") < lines.index("MOVES BY PODGROUP")
    header = lines.index("MOVES BY PODGROUP") + 1
    assert lines[header].split() == ["NAMESPACE", "WORKLOAD", "PODS", "CARDS", "FROM", "TO"]
    assert lines[header + 1].split() == ["repack-demo", "Job/ascend-batch-training", "2", "2", "ascend-node-01",
                                         "ascend-node-02", "+1"]
    assert lines[header + 2] == ""
    # Not in the default summary: the wide-only parts (the card map is one line saying where it is).
    assert "BLOCKED CANDIDATES" not in out and "Rounds:" not in out and "CARDS (" not in out
    assert lines[-1] == "Card map of every node: -o wide"
    assert r.stderr == ""


def test_wide_keeps_every_pod_move_and_the_card_map():
    lines = seed_plan("-o", "wide").stdout.splitlines()
    header = lines.index("MOVES") + 1
    assert lines[header].split() == ["NAMESPACE", "PODGROUP", "OWNER", "POD", "FROM", "TO", "CARDS", "ROUND"]
    rows = [line.split()[:7] for line in lines[header + 1:header + 3]]
    assert rows == [["repack-demo", SEED_PG, "Job/ascend-batch-training", pod, src, dst, str(c)]
                    for pod, src, dst, c in SEED_MOVES]
    assert "ascend-node-01  8  [##......] -> [........]  freed" in lines
    assert "ascend-node-02  8  [#######.] -> [########]  +1" in lines
    assert "ascend-node-03  8  [#######.] -> [########]  +1" in lines


def test_wide_adds_blocked_candidates_and_rounds():
    r = seed_plan("-o", "wide")
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "Rounds:         1" in out
    lines = out.splitlines()
    header = lines.index("BLOCKED CANDIDATES") + 1
    assert lines[header].split() == ["NODE", "REASON", "POD", "FILTER", "MESSAGE"]
    blocked = {line.split()[0]: line.split()[1:3] for line in lines[header + 1:header + 3]}
    assert blocked == {
        "ascend-node-02": ["PodGroupOutOfScope", "repack-demo/ascend-online-serving-critical-0-inference-0"],
        "ascend-node-03": ["PodGroupOutOfScope", "repack-demo/llm-pretrain-critical-worker-0"],
    }
    moves_header = lines[lines.index("MOVES") + 1].split()
    assert moves_header[-1] == "ROUND"
    assert lines[lines.index("MOVES") + 2].split()[-2:] == ["1", "1"]


def test_twenty_node_seed_frees_two_nodes_and_notes_the_restarts():
    obj = as_json(run("plan", "--snapshot", SEED20, "-f", SEED20_RUN, "-o", "json", "--now", NOW))
    summary = obj["status"]["plan"]["summary"]
    assert (summary["fragBeforePercent"], summary["fragAfterPercent"], summary["freedNodeCount"]) == (15, 5, 2)
    assert sorted(obj["status"]["plan"]["freedNodes"]) == ["ascend-node-12", "ascend-node-13"]
    r = run("plan", "--snapshot", SEED20, "-f", SEED20_RUN, "-o", "wide")
    assert "Nodes:          20 providers, occupied 15 -> 13, theoretical minimum 12" in r.stdout
    notes = r.stdout.split("NOTES\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert notes == [
        "- VCJob repack-demo/ascend-batch-training maps PodEvicted to RestartJob: every pod of the job restarts",
        "- ModelServing repack-demo/embedding-serving uses ServingGroupRecreate: the whole ServingGroup "
        "embedding-serving-0 is re-created"]
    assert "ascend-node-15   NotScheduledByVolcano" in r.stdout


def test_two_hundred_node_example_plans():
    path = os.path.join(os.path.dirname(SEED3), "cluster-200.json")
    run_path = os.path.join(os.path.dirname(SEED3), "cluster-200-dryrun.yaml")
    obj = as_json(run("plan", "--snapshot", path, "-f", run_path, "-o", "json", "--now", NOW))
    st = obj["status"]
    assert st["conditions"][0]["reason"] == "RepackRecommended"
    summary = st["plan"]["summary"]
    assert summary["freedNodeCount"] >= 1
    assert summary["fragBeforePercent"] - summary["fragAfterPercent"] >= 5
    assert len({(m["namespace"], m["podGroupName"]) for m in st["plan"]["moves"]}) <= 8
    assert summary["movedCardCount"] <= 48
    assert all(not n.startswith("infer") for n in st["plan"]["freedNodes"])


# ---------- determinism ----------

@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_same_inputs_give_the_same_bytes(fmt):
    a, b = seed_plan("-o", fmt), seed_plan("-o", fmt)
    assert a.exit_code == b.exit_code == 0
    assert a.stdout == b.stdout


def test_key_order_does_not_depend_on_the_run_file(tmp_path):
    reordered = yaml.safe_load(open(GUARDED))
    reordered["spec"] = dict(reversed(list(reordered["spec"].items())))
    path = tmp_path / "run.json"
    path.write_text(json.dumps(reordered))
    assert run("plan", "--snapshot", SEED3, "-f", path, "--now", NOW, "-o", "json").stdout == \
        seed_plan("-o", "json").stdout


def test_now_comes_from_the_environment_too():
    r = run("plan", "--snapshot", SEED3, "-f", GUARDED, "-o", "json", env={"REPACK_NOW": NOW})
    assert as_json(r)["status"]["startTime"] == NOW
    r = run("plan", "--snapshot", SEED3, "--resource", R, "-o", "json", env={"REPACK_NOW": NOW})
    assert as_json(r)["metadata"]["name"] == "repack-plan-20260730-080000"


def test_now_must_be_rfc3339():
    r = run("plan", "--snapshot", SEED3, "-f", GUARDED, "--now", "yesterday")
    assert r.exit_code == 2
    assert "RFC 3339" in r.stderr


# ---------- quick flags ----------

def test_flags_build_the_same_run_as_the_seed_file():
    r = run("plan", "--snapshot", SEED3, "--now", NOW, "-o", "json", "--name", "ascend-guarded-dryrun",
            "--resource", R, "--min-improvement", "10", "--max-podgroups", "1", "--max-cards", "4",
            "--podgroup-selector", "repack.volcano.sh/eligible=true",
            "--exclude-podgroup-selector", "repack.volcano.sh/protected=true",
            "--node-selector", "accelerator-pool=ascend-npu")
    from_flags = as_json(r)
    from_file = as_json(seed_plan("-o", "json"))
    assert from_flags["status"] == from_file["status"]
    assert from_flags["spec"]["scope"] == from_file["spec"]["scope"]
    assert from_flags["spec"]["maxPerRun"] == from_file["spec"]["maxPerRun"]


def test_flags_override_the_file():
    obj = as_json(seed_plan("-o", "json", "--min-improvement", "50", "--name", "other", "--max-cards", "1"))
    assert obj["metadata"]["name"] == "other"
    assert obj["spec"]["goals"] == [{"resource": R, "minFragImprovementPercent": 50}]
    assert obj["spec"]["maxPerRun"]["resources"] == {R: 1}
    # 1 card of budget cannot move 2 workers: nothing is freed.
    assert obj["status"]["conditions"][0]["reason"] == "InsufficientImprovement"
    # The file's other fields stay.
    assert obj["spec"]["scope"]["podGroups"]["exclude"] == {
        "selector": {"matchLabels": {"repack.volcano.sh/protected": "true"}}}
    assert obj["spec"]["ttlSecondsAfterFinished"] == 86400


def test_excluding_the_only_eligible_workload_leaves_nothing_to_move():
    obj = as_json(seed_plan("-o", "json", "--exclude-podgroup-selector", "workload-type in (training)"))
    assert obj["spec"]["scope"]["podGroups"]["exclude"]["selector"] == {
        "matchExpressions": [{"key": "workload-type", "operator": "In", "values": ["training"]}]}
    assert obj["status"]["conditions"][0]["reason"] == "InsufficientImprovement"
    assert obj["status"]["plan"]["summary"]["resolvedScope"]["podGroupCount"] == 0


def test_node_selector_flag_keeps_nodes_from_being_vacated():
    obj = as_json(seed_plan("-o", "json", "--node-selector", "kubernetes.io/hostname notin (ascend-node-01)"))
    assert obj["status"]["plan"]["summary"]["resolvedScope"]["nodeCount"] == 2
    assert obj["status"]["plan"]["summary"]["freedNodeCount"] == 0


def test_default_name_is_generated_from_now():
    obj = as_json(run("plan", "--snapshot", SEED3, "--resource", R, "--now", NOW, "-o", "json"))
    assert obj["metadata"]["name"] == "repack-plan-20260730-080000"
    assert obj["spec"] == {"mode": "DryRun", "goals": [{"resource": R}]}


def test_run_from_stdin():
    with open(GUARDED) as f:
        r = run("plan", "--snapshot", SEED3, "-f", "-", "--now", NOW, "-o", "json", input=f.read())
    assert as_json(r)["metadata"]["name"] == "ascend-guarded-dryrun"


def test_snapshot_from_stdin():
    with open(SEED3) as f:
        r = run("plan", "--snapshot", "-", "-f", GUARDED, "--now", NOW, "-o", "json", input=f.read())
    assert as_json(r)["status"]["plan"]["summary"]["fragBeforePercent"] == 33


# ---------- exit codes ----------

def test_exit_code_3_when_not_recommended_and_output_still_printed(tmp_path):
    snap = tmp_path / "packed.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
         "status": {"allocatable": {"cpu": "8", "memory": "8Gi", R: "8"}}}]}))
    r = run("plan", "--snapshot", snap, "--resource", R, "--exit-code", "-o", "json", "--now", NOW)
    assert r.exit_code == 3
    assert json.loads(r.stdout)["status"]["conditions"][0]["reason"] == "NoFragmentation"
    # Without --exit-code any evaluation is a success.
    assert run("plan", "--snapshot", snap, "--resource", R).exit_code == 0


def test_exit_code_3_for_insufficient_improvement():
    r = seed_plan("--min-improvement", "50", "--exit-code")
    assert r.exit_code == 3
    assert "Outcome:        InsufficientImprovement" in r.stdout


def test_exit_code_0_when_recommended():
    assert seed_plan("--exit-code").exit_code == 0


@pytest.mark.parametrize("spec_patch, field", [
    ({"goals": [{"resource": R, "minFragImprovementPercent": 150}]},
     "spec.goals[0].minFragImprovementPercent: 150 is greater than the maximum of 100"),
    ({"mode": "Sometimes"}, "spec.mode: 'Sometimes' is not one of ['DryRun', 'Execute']"),
    ({"maxPerRun": {"podGroups": -1}}, "spec.maxPerRun.podGroups: -1 is less than the minimum of 0"),
    ({"goals": [{"resource": "gpu"}]}, "spec.goals[0].resource"),
    ({"scope": {"nodes": {"include": {"selektor": {}}}}}, "spec.scope.nodes.include.selektor: unknown field"),
], ids=["threshold-too-high", "bad-mode", "negative-budget", "unqualified-resource", "typo"])
def test_invalid_run_exits_2_naming_the_field_and_never_connects(tmp_path, spec_patch, field):
    obj = yaml.safe_load(open(GUARDED))
    obj["spec"].update(spec_patch)
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(obj))
    # No --snapshot: a valid run would read the live cluster, which `no_cluster` forbids.
    unusable = tmp_path / "kubeconfig"
    unusable.write_text("not: a kubeconfig\n")  # any connection attempt would fail on it
    r = run("plan", "-f", path, "--kubeconfig", unusable)
    assert r.exit_code == 2, r.output
    assert field in r.stderr
    assert r.stderr.startswith("error: ")
    assert "Traceback" not in r.output and r.stdout == ""


def test_every_violation_is_printed(tmp_path):
    obj = yaml.safe_load(open(GUARDED))
    obj["spec"]["goals"][0]["minFragImprovementPercent"] = -1
    obj["spec"]["ttlSecondsAfterFinished"] = -5
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(obj))
    r = run("plan", "-f", path)
    assert r.exit_code == 2
    assert r.stderr.splitlines() == [
        "error: spec.goals[0].minFragImprovementPercent: -1 is less than the minimum of 0",
        "error: spec.ttlSecondsAfterFinished: -5 is less than the minimum of 0"]


def test_execute_runs_are_refused_by_plan(tmp_path):
    obj = yaml.safe_load(open(GUARDED))
    obj["spec"]["mode"] = "Execute"
    path = tmp_path / "exec.yaml"
    path.write_text(yaml.safe_dump(obj))
    r = run("plan", "-f", path, "--snapshot", SEED3)
    assert r.exit_code == 2
    assert "spec.mode: 'Execute'" in r.stderr and "kubectl repack apply" in r.stderr
    assert "--mode DryRun" in r.stderr


EXECUTE_SAMPLE = os.path.join(os.path.dirname(os.path.dirname(SEED3)), "config", "samples", "ascend-execute-001.yaml")


def test_mode_dry_run_plans_an_execute_file_offline():
    """As `apply --mode Execute` executes a reviewed DryRun file, `plan --mode DryRun` previews an
    Execute file: same spec, mode DryRun, nothing executed."""
    r = run("plan", "-f", EXECUTE_SAMPLE, "--mode", "DryRun", "--snapshot", SEED3, "--now", NOW, "-o", "json")
    obj = as_json(r)
    sample = yaml.safe_load(open(EXECUTE_SAMPLE))
    assert obj["metadata"]["name"] == "ascend-execute-001"
    assert obj["spec"] == dict(sample["spec"], mode="DryRun")
    assert obj["status"]["conditions"][0]["reason"] == "RepackRecommended"
    assert obj["status"]["plan"]["freedNodes"] == ["ascend-node-01"]


def test_mode_takes_dry_run_only():
    r = run("plan", "-f", EXECUTE_SAMPLE, "--mode", "Execute", "--snapshot", SEED3)
    assert r.exit_code == 2
    assert r.stderr.startswith("error: Invalid value for '--mode': 'Execute' is not 'DryRun'.")


def test_unparseable_run_file_exits_2_with_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: repack.volcano.sh/v1alpha1\nkind: RepackRun\nspec: [\n")
    r = run("plan", "-f", path, "--snapshot", SEED3)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: {path}:4:1: invalid YAML")


def test_missing_run_file_exits_2():
    r = run("plan", "-f", "/nonexistent/run.yaml", "--snapshot", SEED3)
    assert r.exit_code == 2
    assert r.stderr == "error: /nonexistent/run.yaml: No such file or directory\n"


def test_neither_file_nor_resource_is_a_usage_error():
    r = run("plan", "--snapshot", SEED3)
    assert r.exit_code == 2
    assert "either -f RUN.yaml, --resource NAME or --for KIND/NAME is required" in r.stderr


def test_missing_snapshot_file_exits_2_naming_it():
    r = run("plan", "--snapshot", "/nonexistent/cluster.json", "--resource", R)
    assert r.exit_code == 2
    assert "'/nonexistent/cluster.json' does not exist" in r.stderr


def test_malformed_snapshot_object_exits_2_naming_object_and_field(tmp_path):
    snap = tmp_path / "bad.json"
    snap.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
         "status": {"allocatable": {R: "8"}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "team-a"},
         "spec": {"nodeName": "n1", "containers": [{"name": "c", "resources": {"requests": {R: "lots"}}}]}}]}))
    r = run("plan", "--snapshot", snap, "--resource", R)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"error: {snap}: Pod team-a/p1: spec.containers[0].resources.requests."
                               "huawei.com/ascend-1980")
    assert "lots" in r.stderr and "Traceback" not in r.output


def test_unparseable_snapshot_exits_2_with_position(tmp_path):
    snap = tmp_path / "bad.json"
    snap.write_text('{"apiVersion": "v1", "kind": "List", "items": [}')
    r = run("plan", "--snapshot", snap, "--resource", R)
    assert r.exit_code == 2
    assert r.stderr == f"error: {snap}:1:48: invalid JSON: Expecting value\n"


@pytest.mark.parametrize("args, message", [
    (["--min-improvement", "101"], "101 is not in the range 0<=x<=100"),
    (["--max-podgroups", "-1"], "-1 is not in the range x>=0"),
    (["-o", "table"], "'table' is not one of 'yaml', 'json', 'wide'"),
    (["--bogus"], "No such option '--bogus'"),
], ids=["improvement-range", "podgroups-range", "output", "unknown-flag"])
def test_bad_flags_exit_2(args, message):
    r = run("plan", "--snapshot", SEED3, "--resource", R, *args)
    assert r.exit_code == 2
    assert message in r.stderr


def test_bad_selector_flag_exits_2_naming_the_flag():
    r = run("plan", "--snapshot", SEED3, "--resource", R, "--node-selector", "zone>3")
    assert r.exit_code == 2
    assert r.stderr.startswith("error: --node-selector: 'zone>3': the operators > and < are not supported")


def test_invalid_max_cards_is_a_schema_error():
    r = run("plan", "--snapshot", SEED3, "--resource", R, "--max-cards", "many")
    assert r.exit_code == 2
    assert "spec.maxPerRun.resources[huawei.com/ascend-1980]: 'many' is not a valid quantity" in r.stderr


def test_only_one_input_can_come_from_stdin():
    r = run("plan", "-f", "-", "--snapshot", "-", input="")
    assert r.exit_code == 2
    assert "cannot both read stdin" in r.stderr


def test_save_with_snapshot_is_a_usage_error():
    r = run("plan", "--snapshot", SEED3, "-f", GUARDED, "--save")
    assert r.exit_code == 2
    assert "--save" in r.stderr and "--snapshot" in r.stderr


# ---------- live (fake cluster) ----------

def test_live_plan_reads_the_cluster_with_kubeconfig_and_context(fake_cluster):
    r = run("plan", "-f", GUARDED, "--kubeconfig", "/tmp/kc", "--context", "ascend", "-o", "json", "--now", NOW)
    assert as_json(r)["status"]["plan"]["summary"]["fragBeforePercent"] == 33
    assert fake_cluster["connected"] == [("/tmp/kc", "ascend")]
    assert "live cluster" in run("plan", "-f", GUARDED).stdout


def test_group_level_flags_apply_and_command_level_wins(fake_cluster):
    assert run("--context", "outer", "--kubeconfig", "/tmp/a", "plan", "-f", GUARDED).exit_code == 0
    assert run("--context", "outer", "plan", "-f", GUARDED, "--context", "inner").exit_code == 0
    assert fake_cluster["connected"] == [("/tmp/a", "outer"), (None, "inner")]


def test_save_creates_the_run_then_writes_its_status(fake_cluster):
    r = run("plan", "-f", GUARDED, "--save", "--now", NOW)
    assert r.exit_code == 0, r.output
    assert "Saved:          repackrun.repack.volcano.sh/ascend-guarded-dryrun" in r.stdout
    store = fake_cluster["store"]
    assert [c for c in store.calls if c[0] != "connect"] == [
        ("create", "ascend-guarded-dryrun", True), ("write_status", "ascend-guarded-dryrun")]
    saved = store.runs["ascend-guarded-dryrun"]
    assert saved["status"]["plan"]["summary"]["fragBeforePercent"] == 33
    assert saved["spec"]["mode"] == "DryRun"


def test_save_with_json_prints_the_stored_object(fake_cluster):
    r = run("plan", "-f", GUARDED, "--save", "-o", "json", "--now", NOW)
    obj = as_json(r)
    assert obj["metadata"]["uid"] == "uid-1" and obj["metadata"]["resourceVersion"] == "2"
    assert obj["status"]["plan"]["freedNodes"] == ["ascend-node-01"]
    assert r.stderr == "repackrun.repack.volcano.sh/ascend-guarded-dryrun created\n"


def test_saving_an_existing_name_exits_1(fake_cluster):
    assert run("plan", "-f", GUARDED, "--save").exit_code == 0
    r = run("plan", "-f", GUARDED, "--save")
    assert r.exit_code == 1
    assert r.stderr == "error: repackrun ascend-guarded-dryrun already exists\n"


def test_cluster_errors_exit_1_without_traceback(monkeypatch):
    from kubectl_repack.kube import client as kclient
    from kubectl_repack.kube import objects as kobjects
    from kubectl_repack.errors import ClusterAPIError

    def unreachable(*a, **kw):
        raise ClusterAPIError("listing nodes.core: cannot reach the API server: connection refused")
    monkeypatch.setattr(kclient, "connect", lambda *a, **kw: "api")
    monkeypatch.setattr(kobjects, "read_snapshot", unreachable)
    r = run("plan", "-f", GUARDED)
    assert r.exit_code == 1
    assert r.stderr == "error: listing nodes.core: cannot reach the API server: connection refused\n"
    assert r.stdout == ""


def test_help_documents_flags_override_and_exit_codes():
    r = run("plan", "--help")
    assert r.exit_code == 0
    assert "flags given with -f override the file's fields" in " ".join(r.stdout.split())
    assert "--now TIME" in r.stdout and "for reproducible output" in " ".join(r.stdout.split())
    top = run("--help").stdout
    assert "Usage: kubectl repack" in top
    assert "3 not recommended (with --exit-code)" in top
    for name in ("plan", "snapshot", "status"):
        assert f"  {name} " in top


def test_printed_or_stored_run_can_be_planned_again(fake_cluster, tmp_path):
    assert run("plan", "-f", GUARDED, "--save", "--now", NOW).exit_code == 0
    stored = run("status", "ascend-guarded-dryrun", "-o", "yaml")
    assert "resourceVersion" in stored.stdout and "status:" in stored.stdout
    path = tmp_path / "again.yaml"
    path.write_text(stored.stdout)
    r = run("plan", "-f", path, "--name", "ascend-guarded-dryrun-2", "--save", "-o", "json", "--now", NOW)
    obj = as_json(r)
    assert obj["metadata"]["name"] == "ascend-guarded-dryrun-2"
    created = [c for c in fake_cluster["store"].calls if c[0] == "create"]
    assert created[-1] == ("create", "ascend-guarded-dryrun-2", True)
    # The create succeeded: the file's uid/resourceVersion were not sent (the fake refuses them).
    assert obj["status"]["plan"]["summary"]["fragBeforePercent"] == 33


@pytest.mark.parametrize("run_file, pgs", [("npu-dryrun.yaml", 3), ("scoped-dryrun.yaml", 1),
                                           ("guarded-dryrun.yaml", 1)])
def test_every_seed_run_on_the_three_node_example(run_file, pgs):
    path = os.path.join(os.path.dirname(SEED3), run_file)
    st = as_json(run("plan", "--snapshot", SEED3, "-f", path, "-o", "json", "--now", NOW))["status"]
    assert st["plan"]["summary"] == {"fragBeforePercent": 33, "fragAfterPercent": 0, "freedNodeCount": 1,
                                     "movedCardCount": 2, "resolvedScope": {"podGroupCount": pgs, "nodeCount": 3},
                                     "freedCapacity": [{"nodes": 1, "allocatable": 8, "labels": {"accelerator-pool": "ascend-npu"}}]}
    assert st["plan"]["freedNodes"] == ["ascend-node-01"]


@pytest.mark.parametrize("fmt, expected", [
    ("name", "repackrun.repack.volcano.sh/ascend-guarded-dryrun\n"),
    ('jsonpath={.status.plan.summary.fragBeforePercent}{"->"}{.status.plan.summary.fragAfterPercent}', "33->0"),
    ("jsonpath-as-json={.status.plan.freedNodes}", '[\n    [\n        "ascend-node-01"\n    ]\n]\n'),
    ("custom-columns=NAME:.metadata.name,FREED:.status.plan.freedNodes",
     "NAME                    FREED\nascend-guarded-dryrun   [ascend-node-01]\n"),
], ids=["name", "jsonpath", "jsonpath-as-json", "custom-columns"])
def test_kubectl_output_formats_of_the_planned_run(fmt, expected):
    r = run("plan", "--snapshot", SEED3, "-f", GUARDED, "-o", fmt)
    assert r.exit_code == 0, r.output
    assert r.stdout == expected


def test_a_template_failing_on_the_run_exits_1_like_kubectl():
    r = run("plan", "--snapshot", SEED3, "-f", GUARDED, "-o", "jsonpath={.status.plan.moves[9]}")
    assert r.exit_code == 1
    assert r.stderr == ('error: error executing jsonpath "{.status.plan.moves[9]}": Error executing template: '
                        "array index out of bounds: index 9, length 1.\n")


def test_missing_keys_fail_only_when_asked():
    fmt = "jsonpath={.status.nothing}"
    assert run("plan", "--snapshot", SEED3, "-f", GUARDED, "-o", fmt).stdout == ""
    r = run("plan", "--snapshot", SEED3, "-f", GUARDED, "-o", fmt, "--allow-missing-template-keys=false")
    assert r.exit_code == 1 and "nothing is not found" in r.stderr


def test_topology_example_frees_a_block_and_keeps_the_hard_gang_in_its_rack():
    """examples/topology-8-nodes.yaml with topology-dryrun.yaml (TOPO-1 to TOPO-4): blocks of 2 free nodes in
    one rack; allreduce-a (hard, tier 1) moves only inside rack-a."""
    path = os.path.join(os.path.dirname(SEED3), "topology-8-nodes.yaml")
    run_path = os.path.join(os.path.dirname(SEED3), "topology-dryrun.yaml")
    obj = as_json(run("plan", "--snapshot", path, "-f", run_path, "-o", "json", "--now", NOW))
    st = obj["status"]
    assert st["conditions"][0]["reason"] == "RepackRecommended"
    blocks = st["plan"]["summary"]["nodeBlocks"]
    assert (blocks["tier"], blocks["nodeBlockSize"], blocks["before"]) == (1, 2, 0) and blocks["after"] >= 1
    rack_a = {f"ascend-node-0{i}" for i in range(1, 5)}
    for group in st["plan"].get("moves", []):
        if group["podGroupName"].startswith("allreduce-a"):
            assert all(p["toNode"] in rack_a for p in group["pods"])
    text = run("plan", "--snapshot", path, "-f", run_path).stdout
    assert "HYPERNODES (tier 1: free nodes and blocks of 2, before -> after)" in text
    assert "Node blocks:    0 -> " in text
