"""`kubectl repack plan/snapshot/status` against the real control plane, in the seed's situation.

The seed (steps 2-4): three NPU nodes ascend-node-01..03 labelled accelerator-pool=ascend-npu with
8 cards of huawei.com/ascend-1980; the eligible VCJob ascend-batch-training (2 workers x 1 card)
sits on ascend-node-01; ascend-node-02/03 are 7/8 full with protected workloads. The guarded
DryRun must report 33% -> 0%, free ascend-node-01 by moving 2 cards, and the seed's jsonpath
queries must print that through the real kubectl.

The layout is made by the real vc-scheduler. To get the seed's layout (and not the one binpack
would choose, which fills the single free cards of 02/03), ascend-node-01 is added alone first and
the batch job is scheduled onto it; then 02 and 03 are added and the protected jobs, pinned by
kubernetes.io/hostname, fill them to 7 cards.
"""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import uuid

import pytest
from click.testing import CliRunner
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubectl_repack.cli import main
from tests.harness import NPU_RESOURCE, npu_node
from tests.harness.controlplane import REPO_ROOT
from tests.e2e.helpers import vcjob, wait_for
from tests.e2e.execute_helpers import SCHEDULE_TIMEOUT

pytestmark = pytest.mark.e2e

EXAMPLES = os.path.join(REPO_ROOT, "examples")
GUARDED = os.path.join(EXAMPLES, "guarded-dryrun.yaml")
SCOPED = os.path.join(EXAMPLES, "scoped-dryrun.yaml")
NODES = ("ascend-node-01", "ascend-node-02", "ascend-node-03")
NOW = "2026-07-30T08:00:00Z"
GROUP, VERSION, PLURAL = "repack.volcano.sh", "v1alpha1", "repackruns"
SAVED_RUNS = ("ascend-guarded-dryrun", "ascend-scoped-dryrun")


ELIGIBLE = {"workload-type": "training", "repack.volcano.sh/eligible": "true",
            "repack.volcano.sh/protected": "false"}
PROTECTED = {"workload-type": "training", "repack.volcano.sh/protected": "true"}


def cli(*args, input=None):
    """The CLI in-process; returns the click Result (stdout and stderr separate)."""
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


def _running_on(core, ns, job):
    pods = core.list_namespaced_pod(ns, label_selector=f"volcano.sh/job-name={job}").items
    if pods and all(p.status.phase == "Running" and p.spec.node_name for p in pods):
        return {p.metadata.name: p.spec.node_name for p in pods}
    return None


def _foreign_providers(core):
    return sorted(n.metadata.name for n in core.list_node().items
                  if n.metadata.name not in NODES and (n.status.allocatable or {}).get(NPU_RESOURCE, "0") != "0")


def _leftover_pods(core):
    """Pods of earlier tests still bound to the seed's node names (their namespaces are deleted
    without waiting; the pod GC removes pods of vanished nodes after a quarantine)."""
    return sorted(f"{p.metadata.namespace}/{p.metadata.name}" for node in NODES
                  for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items)


def _delete_runs(custom):
    for name in SAVED_RUNS:
        try:
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException as e:
            if e.status != 404:
                raise


@pytest.fixture(scope="module")
def seed(control_plane, node_agent):
    """The seed's 3-node layout, made by the real vc-scheduler. Yields (kubeconfig, namespace)."""
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    # Fragmentation is cluster-wide: nodes other tests left behind would change the figures.
    wait_for("NPU nodes of other tests to be gone", lambda: not _foreign_providers(core) or None, timeout=60)
    wait_for("pods of other tests on the seed's nodes to be gone", lambda: not _leftover_pods(core) or None,
             timeout=150, interval=1)
    _delete_runs(custom)
    ns = f"repack-demo-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_for("the default ServiceAccount", lambda: any(
        sa.metadata.name == "default" for sa in core.list_namespaced_service_account(ns).items))
    added = []
    try:
        node_agent.add_node(npu_node(NODES[0], cards=8))
        added.append(NODES[0])
        custom.create_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", ns, "jobs",
            vcjob("ascend-batch-training", ELIGIBLE, [("worker", 2, 1)], {"accelerator-pool": "ascend-npu"}))
        placed = wait_for("ascend-batch-training Running", lambda: _running_on(core, ns, "ascend-batch-training"),
                          timeout=SCHEDULE_TIMEOUT)
        assert set(placed.values()) == {NODES[0]}, placed

        for node, job, tasks in ((NODES[1], "online-serving-critical", [("entry", 1, 4), ("worker", 1, 3)]),
                                 (NODES[2], "llm-pretrain-critical", [("master", 1, 3), ("worker", 1, 4)])):
            node_agent.add_node(npu_node(node, cards=8))
            added.append(node)
            custom.create_namespaced_custom_object(
                "batch.volcano.sh", "v1alpha1", ns, "jobs",
                vcjob(job, PROTECTED, tasks, {"kubernetes.io/hostname": node}))
            placed = wait_for(f"{job} Running", lambda job=job: _running_on(core, ns, job), timeout=SCHEDULE_TIMEOUT)
            assert set(placed.values()) == {node}, placed

        # Every job's PodGroup exists and carries its job's labels (the scope selectors use them).
        def podgroups():
            pgs = custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]
            return pgs if len(pgs) == 3 else None
        pgs = wait_for("3 PodGroups", podgroups)
        batch = [pg for pg in pgs if pg["metadata"]["name"].startswith("ascend-batch-training-")]
        assert len(batch) == 1 and batch[0]["metadata"]["labels"]["repack.volcano.sh/eligible"] == "true"
        yield {"kubeconfig": control_plane.kubeconfig, "ns": ns, "podgroup": batch[0]["metadata"]["name"],
               "kubectl": control_plane.cp.binaries["kubectl"]}
    finally:
        _delete_runs(custom)
        try:
            core.delete_namespace(ns)
        except ApiException:
            pass
        for node in added:
            node_agent.remove_node(node, delete_pods=True)


def test_live_plan_reports_the_seed_figures(seed):
    r = cli("plan", "-f", GUARDED, "--kubeconfig", seed["kubeconfig"], "-o", "json", "--now", NOW)
    assert r.exit_code == 0, r.output + r.stderr
    run = json.loads(r.stdout)
    assert run["apiVersion"] == "repack.volcano.sh/v1alpha1" and run["kind"] == "RepackRun"
    assert run["metadata"] == {"name": "ascend-guarded-dryrun"}
    st = run["status"]
    assert st["phase"] == "Succeeded"
    assert st["conditions"][0]["reason"] == "RepackRecommended"
    assert st["plan"]["summary"] == {"fragBeforePercent": 33, "fragAfterPercent": 0, "freedNodeCount": 1,
                                     "movedCardCount": 2,
                                     "resolvedScope": {"podGroupCount": 1, "nodeCount": 3},
                                     # what the freed node can host: 8 cards, the pool label pods select on
                                     "freedCapacity": [{"nodes": 1, "allocatable": 8,
                                                        "labels": {"accelerator-pool": "ascend-npu"}}]}
    assert st["plan"]["freedNodes"] == ["ascend-node-01"]
    (move,) = st["plan"]["moves"]
    assert move["namespace"] == seed["ns"] and move["podGroupName"] == seed["podgroup"]
    assert move["owner"] == {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                             "name": "ascend-batch-training"}
    assert move["cards"] == 2
    assert sorted((p["name"], p["fromNode"], p["toNode"], p["cards"]) for p in move["pods"]) == [
        ("ascend-batch-training-worker-0", "ascend-node-01", "ascend-node-02", 1),
        ("ascend-batch-training-worker-1", "ascend-node-01", "ascend-node-03", 1)]

    # The human summary from the same live cluster: one line for the moved PodGroup, and with -o wide
    # the node map shows node-01 freed.
    r = cli("plan", "-f", GUARDED, "--kubeconfig", seed["kubeconfig"])
    assert r.exit_code == 0, r.output
    assert "Fragmentation:  33% -> 0%" in r.stdout
    assert "Job/ascend-batch-training   2      2       ascend-node-01   ascend-node-02 +1" in r.stdout
    r = cli("plan", "-f", GUARDED, "--kubeconfig", seed["kubeconfig"], "-o", "wide")
    assert r.exit_code == 0, r.output
    assert "ascend-node-01  8  [##......] -> [........]  freed" in r.stdout
    assert "ascend-node-02  8  [#######.] -> [########]  +1" in r.stdout

    # Quick flags instead of a file give the same plan.
    r = cli("plan", "--kubeconfig", seed["kubeconfig"], "-o", "json", "--now", NOW,
            "--resource", NPU_RESOURCE, "--min-improvement", "10", "--max-podgroups", "1", "--max-cards", "4",
            "--podgroup-selector", "repack.volcano.sh/eligible=true",
            "--exclude-podgroup-selector", "repack.volcano.sh/protected=true",
            "--node-selector", "accelerator-pool=ascend-npu", "--name", "ascend-guarded-dryrun")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["status"] == st


def test_kubectl_discovers_the_plugin(seed, tmp_path):
    """`kubectl repack plan` through kubectl's plugin discovery (kubectl-repack on PATH)."""
    exe = tmp_path / "kubectl-repack"
    exe.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {REPO_ROOT!r})\n"
                   "from kubectl_repack.cli import main\nmain()\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    env = dict(os.environ, PATH=f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    out = subprocess.run([seed["kubectl"], "repack", "plan", "-f", GUARDED, "--kubeconfig", seed["kubeconfig"],
                          "--exit-code"], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Outcome:        RepackRecommended" in out.stdout
    assert "33% -> 0%" in out.stdout
    out = subprocess.run([seed["kubectl"], "repack", "status", "no-such-run", "--kubeconfig", seed["kubeconfig"]],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 1
    assert out.stderr.startswith("error: reading repackrun no-such-run:"), out.stderr
    assert "not found" in out.stderr and "Traceback" not in out.stderr


def kubectl_jsonpath(seed, name, template):
    out = subprocess.run([seed["kubectl"], f"--kubeconfig={seed['kubeconfig']}", "get", "repackrun", name,
                          "-o", f"jsonpath={template}"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_saved_dryruns_answer_the_seed_jsonpath_queries(seed):
    for path in (SCOPED, GUARDED):
        r = cli("plan", "-f", path, "--kubeconfig", seed["kubeconfig"], "--save")
        assert r.exit_code == 0, r.output
        assert "Saved:          repackrun.repack.volcano.sh/" in r.stdout

    # Step 3, verbatim.
    assert kubectl_jsonpath(seed, "ascend-scoped-dryrun",
                            'podGroups={.status.plan.summary.resolvedScope.podGroupCount}, '
                            'nodes={.status.plan.summary.resolvedScope.nodeCount}{"\\n"}') \
        == "podGroups=1, nodes=3\n"
    moves = kubectl_jsonpath(
        seed, "ascend-scoped-dryrun",
        '{range .status.plan.moves[*]}{.owner.kind}{"/"}{.owner.name}{"\\t"}{.namespace}{"/"}{.podGroupName}'
        '{"\\t"}{.cards}{" cards\\n"}{range .pods[*]}{"  "}{.name}{": "}{.fromNode}{" -> "}{.toNode}{"\\n"}{end}{end}')
    assert moves == (f"Job/ascend-batch-training\t{seed['ns']}/{seed['podgroup']}\t2 cards\n"
                     "  ascend-batch-training-worker-0: ascend-node-01 -> ascend-node-02\n"
                     "  ascend-batch-training-worker-1: ascend-node-01 -> ascend-node-03\n")
    assert kubectl_jsonpath(seed, "ascend-scoped-dryrun", '{.status.plan.freedNodes}{"\\n"}') \
        == '["ascend-node-01"]\n'

    # Step 4, verbatim.
    assert kubectl_jsonpath(
        seed, "ascend-guarded-dryrun",
        'fragmentation={.status.plan.summary.fragBeforePercent}% -> {.status.plan.summary.fragAfterPercent}%, '
        'freedNodes={.status.plan.summary.freedNodeCount}, movedCards={.status.plan.summary.movedCardCount}{"\\n"}') \
        == "fragmentation=33% -> 0%, freedNodes=1, movedCards=2\n"

    # Step 6's conditions query works on a DryRun too.
    conds = kubectl_jsonpath(seed, "ascend-guarded-dryrun",
                             '{range .status.conditions[*]}{.type}{"\\t"}{.status}{"\\t"}{.reason}{"\\t"}'
                             '{.message}{"\\n"}{end}')
    assert conds.startswith("Complete\tTrue\tRepackRecommended\tfrees 1 node(s) by moving 2 huawei.com/ascend-1980")

    # The CRD's printer columns read the stored status.
    out = subprocess.run([seed["kubectl"], f"--kubeconfig={seed['kubeconfig']}", "get", "repackrun",
                          "ascend-guarded-dryrun", "--no-headers"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[:4] == ["ascend-guarded-dryrun", "DryRun", NPU_RESOURCE, "Succeeded"], out.stdout

    # Saving the same name again is a clear runtime error, not a traceback.
    r = CliRunner().invoke(main, ["plan", "-f", GUARDED, "--kubeconfig", seed["kubeconfig"], "--save"])
    assert r.exit_code == 1
    assert "repackrun ascend-guarded-dryrun already exists" in r.stderr


def test_status_prints_the_saved_run(seed):
    r = cli("status", "ascend-guarded-dryrun", "--kubeconfig", seed["kubeconfig"])
    if r.exit_code == 1 and "not found" in r.stderr:  # run alone: save it first
        assert cli("plan", "-f", GUARDED, "--kubeconfig", seed["kubeconfig"], "--save").exit_code == 0
        r = cli("status", "ascend-guarded-dryrun", "--kubeconfig", seed["kubeconfig"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "Name:        ascend-guarded-dryrun" in out
    assert "Phase:       Succeeded" in out
    assert "Complete   True     RepackRecommended" in out
    assert "Fragmentation   33% -> 0%" in out
    assert "Freed           ascend-node-01" in out
    assert "ascend-batch-training-worker-0   ascend-node-01   ascend-node-02   1" in out
    assert "RELOCATIONS\n<none> (DryRun runs evict nothing)" in out

    r = cli("status", "ascend-guarded-dryrun", "--kubeconfig", seed["kubeconfig"], "-o", "json")
    assert r.exit_code == 0, r.output
    obj = json.loads(r.stdout)
    assert obj["metadata"]["uid"] and obj["spec"]["mode"] == "DryRun"
    assert obj["status"]["plan"]["freedNodes"] == ["ascend-node-01"]


def test_live_snapshot_round_trips_through_offline_planning(seed, tmp_path):
    snap = tmp_path / "cluster.json"
    r = cli("snapshot", "-o", str(snap), "--kubeconfig", seed["kubeconfig"])
    assert r.exit_code == 0, r.output
    assert f"wrote {snap}:" in r.stderr
    doc = json.loads(snap.read_text())
    assert doc["apiVersion"] == "v1" and doc["kind"] == "List"
    kinds = {(o["apiVersion"], o["kind"]) for o in doc["items"]}
    assert {("v1", "Node"), ("v1", "Pod"), ("v1", "Namespace"), ("scheduling.volcano.sh/v1beta1", "PodGroup"),
            ("batch.volcano.sh/v1alpha1", "Job")} <= kinds
    assert not any("managedFields" in o["metadata"] for o in doc["items"])
    names = {o["metadata"]["name"] for o in doc["items"] if o["kind"] == "Node"}
    assert set(NODES) <= names

    offline = cli("plan", "--snapshot", str(snap), "-f", GUARDED, "-o", "json", "--now", NOW)
    live = cli("plan", "-f", GUARDED, "--kubeconfig", seed["kubeconfig"], "-o", "json", "--now", NOW)
    assert offline.exit_code == 0 and live.exit_code == 0, offline.output + live.output
    assert offline.stdout == live.stdout
    assert json.loads(offline.stdout)["status"]["plan"]["summary"]["fragBeforePercent"] == 33

    # YAML snapshots round-trip as well.
    snap_yaml = tmp_path / "cluster.yaml"
    assert cli("snapshot", "-o", str(snap_yaml), "--format", "yaml", "--kubeconfig",
               seed["kubeconfig"]).exit_code == 0
    again = cli("plan", "--snapshot", str(snap_yaml), "-f", GUARDED, "-o", "json", "--now", NOW)
    assert again.exit_code == 0 and again.stdout == offline.stdout


def test_paginated_lists_see_every_object(seed):
    """limit/continue against the real API server: tiny pages give the same objects as one list."""
    from kubectl_repack.kube import client as kclient
    from kubectl_repack.kube import objects as kobjects

    api = kclient.connect(seed["kubeconfig"])
    for kind in kobjects.SNAPSHOT_KINDS:
        whole = kobjects.list_objects(api, kind)
        paged = kobjects.list_objects(api, kind, page_size=2)
        key = [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in whole]
        assert [(o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in paged] == key, kind
    pods = kobjects.list_objects(api, kobjects.Kind("v1", "Pod", "pods"), page_size=1)
    assert {p["metadata"]["name"] for p in pods if p["metadata"]["namespace"] == seed["ns"]} == {
        "ascend-batch-training-worker-0", "ascend-batch-training-worker-1",
        "online-serving-critical-entry-0", "online-serving-critical-worker-0",
        "llm-pretrain-critical-master-0", "llm-pretrain-critical-worker-0"}
    # ModelServing's CRD is not installed on this control plane: the list is empty, not an error.
    assert kobjects.list_objects(api, kobjects.KINDS_BY_NAME["ModelServing"]) == []
