"""`kubectl repack simulate` through the CLI's entry point: a policy that unblocks a gang against no
defragmentation on a bundled snapshot, the two history formats, and bad input (exit 2, the file and
the field, line or column named, nothing replayed). Histories are written by the tests."""
import json

import yaml

from .conftest import R, SEED20, run

POLICY = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackPolicy", "metadata": {"name": "unblock"},
          "spec": {"trigger": {"onPendingBlocked": {"forSeconds": 300, "podGroupSelector": {}}},
                   "runTemplate": {"spec": {"mode": "Execute", "goals": [{"resource": R}],
                                            "maxPerRun": {"podGroups": 8}}}}}


def vcjob(name, created, pods, cards, duration="6h"):
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": "team", "creationTimestamp": created},
            "spec": {"minAvailable": pods, "tasks": [{"replicas": pods, "template": {"spec": {"containers": [
                {"name": "c", "resources": {"requests": {R: cards, "cpu": "1", "memory": "1Gi"}}}]}}}]},
            "status": {"runningDuration": duration}}


def files(tmp_path, history, policy=POLICY, name="jobs.yaml"):
    p, h = tmp_path / "policy.yaml", tmp_path / name
    p.write_text(yaml.safe_dump(policy))
    h.write_text(history if isinstance(history, str) else yaml.safe_dump({"apiVersion": "v1", "kind": "List",
                                                                           "items": history}))
    return p, h


def test_the_policy_starts_a_gang_that_fragmentation_blocks(tmp_path):
    # seed-20: 15 of 20 nodes occupied, the pods there run on; a 6x8 gang needs a sixth empty node
    p, h = files(tmp_path, [vcjob("big", "2026-08-01T00:00:00Z", 6, 8)])
    r = run("simulate", "-f", p, "--snapshot", SEED20, "--history", h, "--days", "1", "-o", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    none, policy = doc["arms"]["none"], doc["arms"]["policy/unblock"]
    assert none["jobs_started"] == 0 and none["wait_s"]["gang"]["p50"] >= 86000
    assert policy["jobs_started"] == 1 and policy["wait_s"]["gang"]["p50"] < 1200
    assert policy["runs"] >= 1 and 1 <= policy["evicted_podgroups"] <= 8
    assert doc["settings"]["resource"] == R and doc["settings"]["sources"]["policy"] == "unblock"
    table = run("simulate", "-f", p, "--snapshot", SEED20, "--history", h, "--days", "1")
    assert table.exit_code == 0, table.output
    assert "policy/unblock" in table.stdout and "WAIT gangs p50/p95/p99" in table.stdout


def test_the_pods_the_snapshot_pins_are_not_moved(tmp_path):
    # only pods in the template's scope move: with a scope no PodGroup matches, nothing is evicted
    policy = json.loads(json.dumps(POLICY))
    policy["spec"]["runTemplate"]["spec"]["scope"] = {"podGroups": {"include": {"selector": {
        "matchLabels": {"nobody": "has-this"}}}}}
    p, h = files(tmp_path, [vcjob("big", "2026-08-01T00:00:00Z", 6, 8)], policy)
    r = run("simulate", "-f", p, "--snapshot", SEED20, "--history", h, "--days", "1", "-o", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["arms"]["policy/unblock"]["evicted_pods"] == 0


def test_an_openb_csv_history_replays_on_its_timestamps(tmp_path):
    csv = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
           "scheduled_time\n" + "".join(f"p{i},1000,1024,{1 + i % 4},1000,,LS,Running,{i * 60},{i * 60 + 3600},{i * 60}\n"
                                        for i in range(30)))
    p, h = files(tmp_path, csv, name="pods.csv")
    r = run("simulate", "-f", p, "--snapshot", SEED20, "--history", h, "-o", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["arms"]["none"]["jobs"] == 30 and doc["settings"]["workload"]["warmup_days"] == 0.0


def refused(r, *words):
    assert r.exit_code == 2, r.output
    assert r.stdout == "" and "Traceback" not in r.output
    for w in words:
        assert w in r.stderr, r.stderr


def test_bad_histories_are_refused_naming_file_and_field(tmp_path):
    job = vcjob("big", "2026-08-01T00:00:00Z", 6, 8)
    del job["metadata"]["creationTimestamp"]
    p, h = files(tmp_path, [job])
    refused(run("simulate", "-f", p, "--snapshot", SEED20, "--history", h), "jobs.yaml:Job team/big",
            "metadata.creationTimestamp")
    job = vcjob("big", "2026-08-01T00:00:00Z", 6, 8)
    del job["status"]
    p, h = files(tmp_path, [job])
    refused(run("simulate", "-f", p, "--snapshot", SEED20, "--history", h), "status.runningDuration")
    p, h = files(tmp_path, "name,cpu_milli,num_gpu\nx,1,1\n", name="pods.csv")
    refused(run("simulate", "-f", p, "--snapshot", SEED20, "--history", h), "pods.csv:1: column memory_mib")
    csv = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
           "scheduled_time\np,1,1,1,1000,,LS,Running,100,50,100\n")
    p, h = files(tmp_path, csv, name="pods.csv")
    refused(run("simulate", "-f", p, "--snapshot", SEED20, "--history", h), "pods.csv:2: column deletion_time (10)")


def test_bad_policies_and_flags_are_refused(tmp_path):
    policy = json.loads(json.dumps(POLICY))
    policy["spec"]["trigger"] = {}
    p, h = files(tmp_path, [vcjob("big", "2026-08-01T00:00:00Z", 6, 8)], policy)
    refused(run("simulate", "-f", p, "--snapshot", SEED20, "--history", h), "spec.trigger")
    p, h = files(tmp_path, [vcjob("big", "2026-08-01T00:00:00Z", 6, 8)])
    refused(run("simulate", "-f", p, "--snapshot", SEED20, "--history", h, "--load", "1"), "--load")
    refused(run("simulate", "-f", p, "--snapshot", SEED20, "--history", h, "--days", "1", "--warmup-days", "2"),
            "--warmup-days")


def test_load_samples_a_csv_history_with_the_gang_mix(tmp_path):
    csv = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
           "scheduled_time\n" + "".join(f"p{i},1000,1024,{1 + i % 2},1000,,LS,Running,0,{600 + i * 60},0\n"
                                        for i in range(20)))
    p, h = files(tmp_path, csv, name="pods.csv")
    r = run("simulate", "-f", p, "--snapshot", SEED20, "--history", h, "--load", "0.9", "--days", "0.3",
            "--warmup-days", "0.05", "-o", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["settings"]["workload"]["load"] == 0.9 and doc["settings"]["gang_jobs"] > 0
    assert doc["arms"]["none"]["jobs"] > 20
