"""The local control plane is the real thing: Volcano schedules gangs onto fake NPU nodes, and the
API server enforces the RepackRun CRD's schema."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubectl_repack.api.versions import TESTED_KUBERNETES, TESTED_VOLCANO
from tests.harness import NPU_RESOURCE, npu_node
from tests.harness.controlplane import REPO_ROOT
from tests.e2e.helpers import wait_for

pytestmark = pytest.mark.e2e

REPACK_CRD = os.path.join(REPO_ROOT, "config", "crd", "repack.volcano.sh_repackruns.yaml")
GROUP, VERSION, PLURAL = "repack.volcano.sh", "v1alpha1", "repackruns"


def vcjob(name: str, workers: int, cards: int, labels: dict) -> dict:
    """A Volcano Job with the defaults the admission webhook would have set, spelled out."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": "volcano",
            "queue": "default",
            "minAvailable": workers,
            "maxRetry": 3,
            "tasks": [{
                "name": "worker",
                "replicas": workers,
                "minAvailable": workers,
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "schedulerName": "volcano",
                        "restartPolicy": "Never",
                        "nodeSelector": {"accelerator-pool": "ascend-npu"},
                        "containers": [{
                            "name": "worker",
                            "image": "example.invalid/npu-train:1",
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi", NPU_RESOURCE: str(cards)},
                                "limits": {"cpu": "1", "memory": "1Gi", NPU_RESOURCE: str(cards)},
                            },
                        }],
                    },
                },
            }],
        },
    }


def test_the_control_plane_runs_exactly_the_versions_the_support_table_lists(control_plane):
    """README's support table (hack/support_table.py) lists the pins; this is where a green CI shows it
    ran them: the API server, kubectl and vc-scheduler report exactly TESTED_KUBERNETES/TESTED_VOLCANO."""
    info = client.VersionApi(control_plane.api_client).get_code()
    assert info.git_version == TESTED_KUBERNETES and info.major == "1"
    assert info.minor == TESTED_KUBERNETES.split(".")[1]
    out = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert out["clientVersion"]["gitVersion"] == out["serverVersion"]["gitVersion"] == TESTED_KUBERNETES
    done = subprocess.run([control_plane.cp.binaries["vc-scheduler"], "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"Version: {TESTED_VOLCANO}\n" in done.stdout, done.stdout


def test_vcjob_is_gang_scheduled_onto_fake_npu_nodes(control_plane, fake_nodes, make_namespace):
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    nodes = fake_nodes(*[npu_node(f"npu-vcjob-{i}", cards=8) for i in range(3)])
    # A node outside the pool with free cards must not be used (nodeSelector is honoured).
    fake_nodes(npu_node("npu-other-pool", cards=8, pool="other"))
    ns = make_namespace("vcjob")

    labels = {"team": "e2e", "repack.test/workload": "train-a"}
    custom.create_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", ns, "jobs", vcjob("train-a", workers=2, cards=1,
                                                          labels=labels))

    def running_pods():
        pods = core.list_namespaced_pod(ns, label_selector="volcano.sh/job-name=train-a").items
        if len(pods) == 2 and all(p.status.phase == "Running" for p in pods):
            return pods
        return None

    pods = wait_for("both workers of train-a Running", running_pods, timeout=90)
    for pod in pods:
        assert pod.spec.scheduler_name == "volcano"
        assert pod.spec.node_name in nodes, pod.spec.node_name
        ready = {c.type: c.status for c in pod.status.conditions}
        assert ready.get("Ready") == "True"
        assert pod.status.pod_ip and pod.status.host_ip
        assert pod.status.container_statuses[0].state.running is not None
        requested = pod.spec.containers[0].resources.requests[NPU_RESOURCE]
        assert requested == "1"

    # The PodGroup Volcano made for the job carries the job's labels (the planner's scope
    # selectors rely on this) and the gang size.
    pgs = custom.list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]
    owned = [pg for pg in pgs
             if any(o.get("kind") == "Job" and o.get("name") == "train-a"
                    for o in pg["metadata"].get("ownerReferences", []))]
    assert len(owned) == 1, [pg["metadata"]["name"] for pg in pgs]
    pg = owned[0]
    for key, value in labels.items():
        assert pg["metadata"]["labels"].get(key) == value, pg["metadata"].get("labels")
    assert pg["spec"]["minMember"] == 2
    assert pg["spec"]["queue"] == "default"
    group_annotation = pods[0].metadata.annotations.get("scheduling.k8s.io/group-name")
    assert group_annotation == pg["metadata"]["name"]

    def pg_running():
        cur = custom.get_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", ns, "podgroups", pg["metadata"]["name"])
        status = cur.get("status") or {}
        return status if status.get("phase") == "Running" and status.get("running") == 2 else None

    wait_for("PodGroup Running with 2 running members", pg_running, timeout=30)

    def job_running():
        job = custom.get_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs",
                                                  "train-a")
        state = ((job.get("status") or {}).get("state") or {}).get("phase")
        return state if state == "Running" else None

    wait_for("VCJob train-a phase Running", job_running, timeout=30)


def test_workload_controllers_create_pods_under_their_own_identities(control_plane, fake_nodes, make_namespace):
    """As in a real cluster, and as the replacement-pod admission policy's default list of creators
    (kubectl_repack.api.gates.DEFAULT_REPLACEMENT_CREATORS) expects: a VCJob's pods are created by
    Volcano's controller account, a Deployment's by the replicaset controller's (audit log)."""
    from kubectl_repack.api.gates import DEFAULT_REPLACEMENT_CREATORS

    custom = client.CustomObjectsApi(control_plane.api_client)
    apps = client.AppsV1Api(control_plane.api_client)
    fake_nodes(npu_node("npu-identity-0", cards=8))
    ns = make_namespace("identity")
    custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs",
                                           vcjob("who", workers=1, cards=1, labels={}))
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "c", "image": "registry.invalid/web:1"}]}}}})

    def creators():
        found = {}
        with open(control_plane.cp.audit_log) as f:
            for line in f:
                event = json.loads(line)
                ref = event.get("objectRef") or {}
                if (ref.get("resource") == "pods" and not ref.get("subresource") and ref.get("namespace") == ns
                        and event.get("stage") == "ResponseComplete"
                        and (event.get("responseStatus") or {}).get("code") == 201):
                    found[event["user"]["username"]] = found.get(event["user"]["username"], 0) + 1
        return found if len(found) == 2 else None

    found = wait_for("both pods created", creators, timeout=60)
    assert set(found) == {"system:serviceaccount:volcano-system:volcano-controllers",
                          "system:serviceaccount:kube-system:replicaset-controller"}, found
    assert set(found) <= set(DEFAULT_REPLACEMENT_CREATORS)


def test_graceful_deletion_is_finished_by_the_node_agent(control_plane, fake_nodes,
                                                         make_namespace):
    core = client.CoreV1Api(control_plane.api_client)
    (node,) = fake_nodes(npu_node("npu-delete-0", cards=8))
    ns = make_namespace("delete")
    core.create_namespaced_pod(ns, {
        "metadata": {"name": "bound"},
        "spec": {"nodeName": node, "terminationGracePeriodSeconds": 30,
                 "containers": [{"name": "c", "image": "example.invalid/x:1"}]},
    })
    wait_for("pod Running", lambda: core.read_namespaced_pod("bound", ns).status.phase == "Running")
    core.delete_namespaced_pod("bound", ns)  # graceful: 30 s grace period, kubelet must finish it

    def gone():
        try:
            core.read_namespaced_pod("bound", ns)
            return False
        except ApiException as e:
            return e.status == 404

    wait_for("pod deleted by the node agent", gone, timeout=15)


@pytest.fixture
def repackruns(control_plane):
    """Creates cluster-scoped RepackRuns with unique names; deletes them when the test ends."""
    if not glob.glob(REPACK_CRD):
        pytest.fail(f"{REPACK_CRD} is missing: the RepackRun CRD is part of the product")
    custom = client.CustomObjectsApi(control_plane.api_client)
    made: list[str] = []

    class RepackRuns:
        api = custom

        @staticmethod
        def create(body: dict) -> dict:
            body["metadata"]["name"] += "-" + uuid.uuid4().hex[:6]
            created = custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
            made.append(created["metadata"]["name"])
            return created

        @staticmethod
        def rejected(body: dict) -> ApiException:
            with pytest.raises(ApiException) as exc:
                RepackRuns.create(body)
            assert exc.value.status == 422, exc.value.body
            return exc.value

    yield RepackRuns
    for name in made:
        try:
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except ApiException:
            pass


def repackrun(name: str, **spec) -> dict:
    body = {"mode": "DryRun", "goals": [{"resource": NPU_RESOURCE,
                                          "minFragImprovementPercent": 5}]}
    body.update(spec)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackRun",
            "metadata": {"name": name}, "spec": body}


def test_invalid_repackrun_is_rejected_with_the_field_named(repackruns):
    err = repackruns.rejected(repackrun(
        "too-much", goals=[{"resource": NPU_RESOURCE, "minFragImprovementPercent": 150}]))
    assert "spec.goals[0].minFragImprovementPercent" in err.body, err.body

    err = repackruns.rejected(repackrun("bad-mode", mode="Foo"))
    assert "spec.mode" in err.body and "Foo" in err.body, err.body

    # A valid one is accepted (so the rejections above are about the fields, not the object).
    created = repackruns.create(repackrun("ok"))
    assert created["spec"]["mode"] == "DryRun"


def test_budget_on_another_resource_or_negative_is_rejected_by_the_api_server(repackruns):
    """The CEL rule and the pattern in the CRD, enforced by the real API server (a RepackRun made
    with `kubectl apply` never reaches a planner that would silently ignore the budget)."""
    err = repackruns.rejected(repackrun(
        "typo", maxPerRun={"resources": {"huawei.com/ascend1980": 0}}))
    assert "spec.maxPerRun.resources" in err.body, err.body
    assert "may only limit the goal's resource" in err.body, err.body

    err = repackruns.rejected(repackrun("negative", maxPerRun={"resources": {NPU_RESOURCE: "-1"}}))
    assert "spec.maxPerRun.resources" in err.body, err.body

    err = repackruns.rejected(repackrun(
        "two", maxPerRun={"resources": {NPU_RESOURCE: 8, "nvidia.com/gpu": 8}}))
    assert "spec.maxPerRun.resources" in err.body, err.body

    created = repackruns.create(repackrun("goal-budget", maxPerRun={"resources": {NPU_RESOURCE: "8"}}))
    assert created["spec"]["maxPerRun"]["resources"] == {NPU_RESOURCE: "8"}


def test_repackrun_spec_is_immutable(repackruns):
    name = repackruns.create(repackrun("fixed"))["metadata"]["name"]
    with pytest.raises(ApiException) as exc:
        repackruns.api.patch_cluster_custom_object(
            GROUP, VERSION, PLURAL, name, {"spec": {"mode": "Execute"}})
    assert exc.value.status == 422, exc.value.body
    assert "immutable" in exc.value.body and "spec" in exc.value.body, exc.value.body
    cur = repackruns.api.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    assert cur["spec"]["mode"] == "DryRun"


def test_deployment_pdb_and_eviction_api(control_plane, fake_nodes, make_namespace):
    """The pieces a repack Execute relies on: Volcano schedules a plain Deployment (its
    pg-controller makes the PodGroup), the disruption controller keeps the PDB's status, the
    Eviction API honours it, and the ReplicaSet re-creates an evicted pod, which runs again."""
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    apps = client.AppsV1Api(api)
    policy = client.PolicyV1Api(api)
    custom = client.CustomObjectsApi(api)
    nodes = fake_nodes(*[npu_node(f"npu-evict-{i}", cards=8) for i in range(2)])
    ns = make_namespace("evict")
    labels = {"app": "serve"}
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "serve", "labels": labels},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {
                "schedulerName": "volcano",
                "nodeSelector": {"accelerator-pool": "ascend-npu"},
                "terminationGracePeriodSeconds": 5,
                "containers": [{"name": "serve", "image": "example.invalid/serve:1",
                                "resources": {"limits": {NPU_RESOURCE: "1"}}}]}},
        },
    })

    def running(n: int):
        pods = [p for p in core.list_namespaced_pod(ns, label_selector="app=serve").items
                if p.metadata.deletion_timestamp is None]
        ok = len(pods) == n and all(p.status.phase == "Running" for p in pods)
        return pods if ok else None

    pods = wait_for("2 Deployment pods Running", lambda: running(2), timeout=90)
    assert {p.spec.node_name for p in pods} <= set(nodes)
    group = pods[0].metadata.annotations.get("scheduling.k8s.io/group-name")
    assert group, pods[0].metadata.annotations
    custom.get_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", group)

    policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "serve"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": labels}}})

    def pdb_settled(allowed: int):
        pdb = policy.read_namespaced_pod_disruption_budget("serve", ns)
        st = pdb.status
        return (st is not None and st.observed_generation == pdb.metadata.generation
                and st.current_healthy == 2 and st.disruptions_allowed == allowed)

    wait_for("PDB status: 2 healthy, 0 disruptions allowed", lambda: pdb_settled(0), timeout=30)
    victim = pods[0].metadata.name
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": victim, "namespace": ns}}
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod_eviction(victim, ns, eviction)
    assert exc.value.status == 429, exc.value.body
    assert "disruption budget" in exc.value.body

    policy.patch_namespaced_pod_disruption_budget("serve", ns, {"spec": {"minAvailable": 1}})
    wait_for("PDB allows 1 disruption", lambda: pdb_settled(1), timeout=30)
    core.create_namespaced_pod_eviction(victim, ns, eviction)

    def replaced():
        pods = running(2)
        return pods if pods and victim not in {p.metadata.name for p in pods} else None

    pods = wait_for("the evicted pod replaced and Running again", replaced, timeout=60)
    assert {p.spec.node_name for p in pods} <= set(nodes)
