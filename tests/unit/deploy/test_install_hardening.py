"""The hardening of the install (NOM-6): placement flags, an image pinned by digest, --wait with a
message naming the container that is not ready, a writable /tmp under a read-only root, probes
and metrics for the coordinator, numeric users, one replica with its reason, no service links."""
from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from kubectl_repack.cli import main
from kubectl_repack.deploy import installer
from tests.unit.deploy.test_install import READY_DEPLOYMENT, fake_api  # noqa: F401 (fixture)
from kubectl_repack.deploy import manifests

DIGEST = "sha256:" + "0123456789abcdef" * 4


def invoke(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def pod_specs(*extra):
    """{Deployment name: pod template spec} of `install --dry-run` (webhook, coordinator, controller)."""
    result = invoke("install", "--dry-run", "-o", "yaml", *extra)
    assert result.exit_code == 0, result.output
    return {d["metadata"]["name"]: d["spec"]["template"]["spec"]
            for d in yaml.safe_load_all(result.stdout) if d and d["kind"] == "Deployment"}


def pod_spec(*extra):
    """The webhook Deployment's pod spec; the coordinator's and the controller's must be placed the same way."""
    specs = pod_specs(*extra)
    assert set(specs) == {"repack-webhook", "repack-coordinator", "repack-controller"}
    for other in ("repack-coordinator", "repack-controller"):
        for key in ("nodeSelector", "tolerations", "priorityClassName"):
            assert specs[other].get(key) == specs["repack-webhook"].get(key), (other, key)
    return specs["repack-webhook"]


def containers(spec):
    return {c["name"]: c for c in spec["containers"]}


# ---- placement flags -------------------------------------------------------------------------
def test_placement_flags_reach_the_pod_template():
    spec = pod_spec("--node-selector", "pool=system,zone=a", "--node-selector", "disk=ssd",
                    "--tolerations", "dedicated=repack:NoSchedule,node-role.kubernetes.io/control-plane",
                    "--priority-class", "system-cluster-critical")
    assert spec["nodeSelector"] == {"pool": "system", "zone": "a", "disk": "ssd"}
    assert spec["tolerations"] == [
        {"key": "dedicated", "operator": "Equal", "value": "repack", "effect": "NoSchedule"},
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]
    assert spec["priorityClassName"] == "system-cluster-critical"


def test_tolerations_as_a_json_list():
    spec = pod_spec("--tolerations", '[{"key": "k", "operator": "Exists", "effect": "NoExecute", '
                                     '"tolerationSeconds": 60}]')
    assert spec["tolerations"] == [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": 60}]


def test_no_placement_flags_no_placement_fields():
    spec = pod_spec()
    assert not {"nodeSelector", "tolerations", "priorityClassName"} & set(spec)


@pytest.mark.parametrize("flag,value,message", [
    ("--node-selector", "pool", "a nodeSelector is KEY=VALUE pairs only"),
    ("--tolerations", "k=v:Sometimes", "effect must be one of"),
    ("--tolerations", '[{"key": "k", "colour": "red"}]', "unknown Toleration field"),
    ("--tolerations", "[1, 2]", "list of Toleration objects"),
    ("--timeout", "soon", "not a duration"),
])
def test_bad_placement_values_are_usage_errors(flag, value, message):
    result = CliRunner().invoke(main, ["install", "--dry-run", flag, value])
    assert result.exit_code == 2 and message in result.output, result.output


# ---- the image ---------------------------------------------------------------------------------
@pytest.mark.parametrize("image", [
    "registry.example:5000/team/repack-webhook:0.1.0",
    f"registry.example/repack-webhook@{DIGEST}",
    f"localhost/kubectl-repack/repack-webhook:0.1.0@{DIGEST}",
])
def test_image_by_tag_or_digest(image):
    assert {c["image"] for c in pod_spec("--image", image)["containers"]} == {image}


@pytest.mark.parametrize("image,message", [
    ("registry.example/repack-webhook@sha256:abc", "sha256:<64 lowercase hex digits>"),
    ("registry.example/repack-webhook@" + DIGEST.upper(), "sha256:<64 lowercase hex digits>"),
    ("Registry Example/x", "is not an image reference"),
])
def test_malformed_image_references_are_refused(image, message):
    result = CliRunner().invoke(main, ["install", "--dry-run", "--image", image])
    assert result.exit_code == 2 and message in result.output, result.output


# ---- the pod as it must run: read-only root, writable /tmp, probes, metrics, users ----------------
def test_both_containers_have_a_writable_tmp_under_a_read_only_root():
    spec = pod_spec()
    (tmp,) = [v for v in spec["volumes"] if v["name"] == "tmp"]
    assert "emptyDir" in tmp
    for c in spec["containers"]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert {"name": "tmp", "mountPath": "/tmp"} in c["volumeMounts"], c["name"]


def test_numeric_non_root_users():
    spec = pod_spec()
    assert spec["securityContext"]["runAsUser"] == manifests.RUN_AS == 65532
    assert spec["securityContext"]["runAsNonRoot"] is True
    for c in spec["containers"]:
        sc = c["securityContext"]
        assert isinstance(sc["runAsUser"], int) and sc["runAsUser"] != 0 and sc["runAsNonRoot"] is True


def test_coordinator_runs_apart_with_its_probes_and_metrics_service():
    """The coordinator has a Deployment, a ServiceAccount and a metrics Service of its own; the
    webhook's pod runs the webhook only (finding 4: no shared token)."""
    objs = manifests.render()
    deps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Deployment"}
    svcs = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Service"}
    assert list(containers(deps["repack-webhook"]["spec"]["template"]["spec"])) == ["webhook"]
    spec = deps["repack-coordinator"]["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "repack-coordinator"
    assert deps["repack-webhook"]["spec"]["template"]["spec"]["serviceAccountName"] == "repack-webhook"
    coordinator = containers(spec)["coordinator"]
    assert coordinator["ports"] == [{"name": "metrics", "containerPort": 9090, "protocol": "TCP"}]
    assert {"name": "REPACK_COORDINATOR_METRICS_PORT", "value": "9090"} in coordinator["env"]
    for probe in ("readinessProbe", "livenessProbe"):
        assert coordinator[probe]["httpGet"]["port"] == "metrics", probe
    ports = {p["name"]: p for p in svcs["repack-coordinator"]["spec"]["ports"]}
    assert ports == {"metrics": {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}}
    assert svcs["repack-coordinator"]["spec"]["selector"] == {"app.kubernetes.io/name": "repack-coordinator"}
    assert [p["port"] for p in svcs["repack-webhook"]["spec"]["ports"]] == [443]


def test_one_replica_with_its_reason_and_no_service_links():
    (dep,) = [o for o in manifests.render() if o["kind"] == "Deployment" and o["metadata"]["name"] == "repack-webhook"]
    assert dep["spec"]["replicas"] == 1
    reason = dep["metadata"]["annotations"]["repack.volcano.sh/replicas"]
    assert "one webhook process" in reason and "PodDisruptionBudget" in reason
    # The Service repack-webhook would otherwise inject REPACK_WEBHOOK_PORT=tcp://..., the
    # webhook's own --port variable, and the webhook would not start.
    assert dep["spec"]["template"]["spec"]["enableServiceLinks"] is False


def test_gunicorn_worker_tmp_dir_defaults_to_dev_shm(monkeypatch):
    from webhook.admission import serve as server

    monkeypatch.delenv("REPACK_WEBHOOK_WORKER_TMP_DIR", raising=False)
    monkeypatch.setattr(server.os.path, "isdir", lambda p: p == "/dev/shm")
    monkeypatch.setattr(server.os, "access", lambda p, mode: p == "/dev/shm")
    assert server.parse_args([]).worker_tmp_dir == "/dev/shm"
    monkeypatch.setattr(server.os.path, "isdir", lambda p: False)
    assert server.parse_args([]).worker_tmp_dir is None
    assert server.parse_args(["--worker-tmp-dir", "/run/x"]).worker_tmp_dir == "/run/x"


# ---- --wait ----------------------------------------------------------------------------------------
class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def crashing_pod():
    return {"metadata": {"name": "repack-webhook-abc"},
            "spec": {"containers": [{"name": "webhook"}, {"name": "coordinator"}]},
            "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}],
                       "containerStatuses": [
                           {"name": "webhook", "ready": True, "restartCount": 0, "state": {"running": {}}},
                           {"name": "coordinator", "ready": False, "restartCount": 4,
                            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                            "lastState": {"terminated": {"reason": "Error", "exitCode": 2}}}]}}


def test_wait_names_the_container_that_is_not_ready(fake_api):  # noqa: F811
    path = "/apis/apps/v1/namespaces/repack-system/deployments/repack-webhook"
    fake_api.existing[path] = {"metadata": {"generation": 2}, "spec": {"replicas": 1},
                               "status": {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1}}
    fake_api.existing["/api/v1/namespaces/repack-system/pods"] = {"items": [crashing_pod()]}
    clock = Clock()
    with pytest.raises(installer.InstallNotReady) as exc:
        installer.wait_for_deployment(fake_api, "repack-system", "repack-webhook", 30, clock=clock,
                                    sleep=clock.sleep)
    message = str(exc.value)
    assert "not Ready after 30s" in message
    assert "container coordinator of pod repack-webhook-abc is not ready" in message
    assert "CrashLoopBackOff" in message and "exit code 2" in message and "4 restarts" in message
    assert "container webhook" not in message
    assert clock.t >= 30


def test_wait_reports_an_unscheduled_pod(fake_api):  # noqa: F811
    fake_api.existing["/apis/apps/v1/namespaces/ns/deployments/repack-webhook"] = {
        "metadata": {"generation": 1}, "spec": {"replicas": 1}, "status": {"observedGeneration": 1}}
    fake_api.existing["/api/v1/namespaces/ns/pods"] = {"items": [{
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "webhook"}]},
        "status": {"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "False", "message": "0/3 nodes are available: 3 node(s) didn't match"}]}}]}
    clock = Clock()
    with pytest.raises(installer.InstallNotReady, match="pod p is not scheduled: 0/3 nodes are available"):
        installer.wait_for_deployment(fake_api, "ns", "repack-webhook", 5, clock=clock, sleep=clock.sleep)


def test_wait_returns_once_rolled_out(fake_api):  # noqa: F811
    clock = Clock()
    dep = installer.wait_for_deployment(fake_api, "repack-system", "repack-webhook", 30, clock=clock, sleep=clock.sleep)
    assert dep == READY_DEPLOYMENT and clock.t == 0


@pytest.mark.parametrize("status,ready", [
    ({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}, True),
    ({"observedGeneration": 0, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}, False),
    ({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1}, False),
    ({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 0, "availableReplicas": 0}, False),
])
def test_deployment_ready(status, ready):
    assert installer.deployment_ready({"metadata": {"generation": 1}, "spec": {"replicas": 1}, "status": status}) is ready


def test_install_fails_with_the_message_when_the_rollout_times_out(fake_api):  # noqa: F811
    fake_api.existing["/apis/apps/v1/namespaces/repack-system/deployments/repack-webhook"] = {
        "metadata": {"generation": 1}, "spec": {"replicas": 1}, "status": {}}
    fake_api.existing["/api/v1/namespaces/repack-system/pods"] = {"items": [crashing_pod()]}
    result = CliRunner().invoke(main, ["install", "--timeout", "0s"])
    assert result.exit_code == 1
    assert "container coordinator of pod repack-webhook-abc is not ready" in result.output


def test_no_wait_does_not_read_the_deployment(fake_api):  # noqa: F811
    result = invoke("install", "--no-wait")
    assert result.exit_code == 0, result.output
    # each object is read once before it is applied (what an upgrade changes), never polled after
    last_apply = max(i for i, c in enumerate(fake_api.calls) if c[0] == "PATCH")
    assert not any(c[0] == "GET" and "/deployments/" in c[1] for c in fake_api.calls[last_apply:])
    result = invoke("install")
    assert "deployment.apps/repack-webhook Ready" in result.output


def test_webhook_url_mode_has_nothing_to_wait_for(fake_api, tmp_path):  # noqa: F811
    result = invoke("install", "--webhook-url", "https://127.0.0.1:9443/mutate", "--cert-dir", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert not any(c[0] == "GET" and "/deployments/" in c[1] for c in fake_api.calls)


# ---- RBAC covers what the coordinator reads ---------------------------------------------------------
def test_cluster_role_lets_the_coordinator_list_everything_its_live_snapshot_reads():
    """The installed coordinator lists these kinds to re-check a planned node; one it may not list
    makes it release every gate as `live state could not be loaded` (found by the real-node e2e)."""
    from kubectl_repack.kube.objects import FILTER_KINDS   # what the coordinator lists (webhook.coordinator)

    assert FILTER_KINDS
    (role,) = [o for o in manifests.render() if o["kind"] == "ClusterRole"
               and o["metadata"]["name"] == manifests.COORDINATOR_NAME]
    for kind in FILTER_KINDS:
        group = kind.api_version.rpartition("/")[0]
        for verb in ("list", "watch"):
            assert any(group in r["apiGroups"] and kind.plural in r["resources"] and verb in r["verbs"]
                       for r in role["rules"]), (kind, verb)



def test_cluster_role_lets_the_controller_list_everything_a_live_plan_reads():
    """The controller plans on the whole snapshot (PDBs and Volcano kinds too), not only the filters'."""
    from kubectl_repack.kube.objects import SNAPSHOT_KINDS

    (role,) = [o for o in manifests.render() if o["kind"] == "ClusterRole"
               and o["metadata"]["name"] == manifests.CONTROLLER_NAME]
    for kind in SNAPSHOT_KINDS:
        group = kind.api_version.rpartition("/")[0]
        assert any(group in r["apiGroups"] and kind.plural in r["resources"] and "list" in r["verbs"]
                   for r in role["rules"]), kind

# ---- the NetworkPolicy (SEC-3; on by default: test_install_network_policy.py) ----------------------
def test_apiserver_cidr_renders_a_policy_that_admits_only_those_to_the_webhook_pod():
    objs = manifests.render(apiserver_cidrs=["10.244.0.1/32", "2001:db8::/64"])
    (policy,) = [o for o in objs if o["kind"] == "NetworkPolicy"]
    (webhook_rule,) = policy["spec"]["ingress"]    # the coordinator's metrics live in its own pod now
    assert webhook_rule == {"from": [{"ipBlock": {"cidr": "10.244.0.1/32"}}, {"ipBlock": {"cidr": "2001:db8::/64"}}],
                            "ports": [{"protocol": "TCP", "port": manifests.CONTAINER_PORT}]}
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": manifests.NAME}}
    assert not [o for o in manifests.render() if o["kind"] == "NetworkPolicy"]  # only given CIDRs (install finds them)


def test_apiserver_cidr_flag_normalises_and_refuses_what_is_not_a_cidr():
    result = invoke("install", "--dry-run", "-o", "json", "--apiserver-cidr", "10.244.0.1")
    assert result.exit_code == 0, result.output
    assert '"cidr": "10.244.0.1/32"' in result.output
    bad = invoke("install", "--dry-run", "--apiserver-cidr", "10.0.0.300/8")
    assert bad.exit_code == 2 and "'10.0.0.300/8' is not a CIDR" in bad.output


def test_a_webhook_pod_waiting_for_its_secret_points_at_the_controller(fake_api):  # noqa: F811
    """The controller makes the TLS Secret; while it does not exist the webhook's pod cannot start."""
    fake_api.existing["/apis/apps/v1/namespaces/repack-system/deployments/repack-webhook"] = {
        "metadata": {"generation": 1}, "spec": {"replicas": 1}, "status": {}}
    fake_api.existing["/api/v1/namespaces/repack-system/pods"] = {"items": [{
        "metadata": {"name": "repack-webhook-abc"}, "spec": {"containers": [{"name": "webhook"}]},
        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}}]}
    result = CliRunner().invoke(main, ["install", "--timeout", "0s"])
    assert result.exit_code == 1
    assert ("its pod waits for the Secret repack-system/repack-webhook-tls, which the controller (deployment "
            "repack-system/repack-controller) makes when it runs") in result.output
    fake_api.existing["/api/v1/namespaces/repack-system/secrets/repack-webhook-tls"] = {"data": {}}
    result = CliRunner().invoke(main, ["install", "--timeout", "0s"])
    assert result.exit_code == 1 and "waits for the Secret" not in result.output
