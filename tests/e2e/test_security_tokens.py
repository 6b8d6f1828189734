"""Stolen tokens of the in-cluster processes on the real API server (SEC-3): the ServiceAccounts,
RBAC and admission policies as install renders them, and tokens the API server issues for those
ServiceAccounts (TokenRequest), used the way whoever stole one would, through a plain client.

* The controller's token may write the pod MutatingWebhookConfiguration and the webhook's
  Deployment (for the certificate manager). The policy `repack-controller-writes` confines it to
  the caBundle and to the pod template's fingerprint annotation: pointing the webhook at another
  URL or Service, changing its rules, or the Deployment's image or ServiceAccount is refused;
  the certificate manager itself (webhook.controller.certmanager), run with that token, still
  creates the Secret, sets the caBundle and rolls the Deployment.
* The coordinator's token may patch every pod and write every run's status. `repack-pod-writes`
  refuses the nodeSelector/affinity of a pod another controller gated; `repack-coordinator-run-status`
  refuses any status change but a relocation record's placement. Its own writes (lifting our
  gate, recording a placement with the coordinator's code) go through.

Nothing here is served by the webhook (no image is needed): its configuration points at a
Service with no pods, called fail-open, in a namespace of this test."""
from __future__ import annotations

import json
import uuid

import pytest
from kubernetes import client

from kubectl_repack.api.control import Creator
from kubectl_repack.api.gates import PLACEMENT_GATE, ungate_patch
from kubectl_repack.api.run import write_placement_fields
from kubectl_repack.deploy import manifests
from kubectl_repack.deploy.controller import TLS_FINGERPRINT_ANNOTATION
from kubectl_repack.deploy.installer import delete_object, server_side_apply
from kubectl_repack.deploy.policies import (CONTROLLER_WRITES_POLICY_NAME, RUN_STATUS_POLICY_NAME,
                                            controller_write_policy, controller_write_policy_binding,
                                            pod_write_policy, pod_write_policy_binding, run_status_policy,
                                            run_status_policy_binding)
from kubectl_repack.errors import ClusterAPIError
from kubectl_repack.kube.client import Overrides, connect, request
from tests.e2e.helpers import wait_for

pytestmark = pytest.mark.e2e

GROUP, VERSION = "repack.volcano.sh", "v1alpha1"
CONFIG_PATH = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{manifests.CONFIG_NAME}"


def _token(control_plane, namespace: str, account: str) -> str:
    """A token the API server issues for the ServiceAccount (what a process's pod mounts)."""
    core = client.CoreV1Api(control_plane.api_client)
    answer = core.create_namespaced_service_account_token(account, namespace,
                                                          {"spec": {"expirationSeconds": 3600}})
    return answer.status.token


class Stolen:
    """One process's token, through the project's own client (kube.client.connect --token)."""

    def __init__(self, control_plane, namespace: str, account: str):
        self.api = connect(control_plane.kubeconfig, overrides=Overrides(token=_token(control_plane, namespace, account)))
        self.user = f"system:serviceaccount:{namespace}:{account}"

    def whoami(self) -> str:
        answer = request(self.api, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                         {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        return answer["status"]["userInfo"]["username"]

    def patch(self, path: str, body, kind: str = "application/merge-patch+json", dry_run: bool = False) -> dict:
        query = [("dryRun", "All")] if dry_run else None
        return request(self.api, "PATCH", path, body, query=query, content_type=kind)


def _refused(fn, policy: str, says: str) -> str:
    with pytest.raises(ClusterAPIError) as e:
        fn()
    assert f"ValidatingAdmissionPolicy '{policy}'" in str(e.value) and says in str(e.value), str(e.value)
    return str(e.value)


@pytest.fixture(scope="module")
def install_set(control_plane):
    """In a namespace of this test: the controller's and coordinator's ServiceAccounts and RBAC, the
    webhook's Deployment (scaled to 0) and configuration, and the admission policies on their
    writes, waited for until they refuse. Removed afterwards."""
    ns = f"repack-tok-{uuid.uuid4().hex[:6]}"
    api = control_plane.api_client
    webhook = manifests.deployment(ns, "registry.invalid/repack:0")
    webhook["spec"]["replicas"] = 0
    objs = ([manifests.namespace_manifest(ns)] + manifests.controller_rbac(ns) + manifests.coordinator_rbac(ns)
            + [webhook, manifests.mutating_webhook_configuration(ns),
               pod_write_policy(ns), pod_write_policy_binding(), controller_write_policy(ns),
               controller_write_policy_binding(), run_status_policy(ns), run_status_policy_binding()])
    for obj in objs:
        server_side_apply(api, obj)
    controller = Stolen(control_plane, ns, manifests.CONTROLLER_NAME)
    assert controller.whoami() == controller.user

    def enforced():
        try:
            controller.patch(CONFIG_PATH, {"metadata": {"labels": {"probe": "x"}}}, dry_run=True)
        except ClusterAPIError as e:
            return CONTROLLER_WRITES_POLICY_NAME in str(e) or None
        return None
    wait_for("the controller-writes policy to be enforced", enforced, timeout=60)
    try:
        yield ns, controller
    finally:
        for obj in reversed(objs):
            delete_object(api, obj)


def test_a_stolen_controller_token_cannot_redirect_admission_but_the_certificate_manager_still_works(
        install_set, control_plane):
    from webhook.controller.certmanager import CertManager
    from kubectl_repack.kube.webhook_tls import WebhookTLSObjects

    ns, controller = install_set
    config = request(control_plane.api_client, "GET", CONFIG_PATH)
    hooks = config["webhooks"]
    # the reported attack: the pod webhook pointed at another URL (server dry run, as reported)
    redirect = [{"op": "replace", "path": "/webhooks/0/clientConfig", "value": {"url": "https://203.0.113.7:443/mutate"}}]
    _refused(lambda: controller.patch(CONFIG_PATH, redirect, "application/json-patch+json", dry_run=True),
             CONTROLLER_WRITES_POLICY_NAME, "may change only the clientConfig.caBundle")
    other_service = dict(hooks[0]["clientConfig"]["service"], name="attacker", namespace="default")
    for what, ops in {
        "another Service": [{"op": "replace", "path": "/webhooks/0/clientConfig/service", "value": other_service}],
        "every namespace": [{"op": "replace", "path": "/webhooks/0/namespaceSelector", "value": {}}],
        "more resources": [{"op": "add", "path": "/webhooks/0/rules/0/resources/-", "value": "secrets"}],
        "fail closed": [{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Fail"}],
        "a webhook removed": [{"op": "remove", "path": "/webhooks/1"}],
    }.items():
        _refused(lambda: controller.patch(CONFIG_PATH, ops, "application/json-patch+json", dry_run=True),
                 CONTROLLER_WRITES_POLICY_NAME, "may change only the clientConfig.caBundle")
    # the caBundle alone is allowed
    ca = [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "Y2EtYnVuZGxl"}]
    assert controller.patch(CONFIG_PATH, ca, "application/json-patch+json", dry_run=True)

    deploy_path = f"/apis/apps/v1/namespaces/{ns}/deployments/{manifests.NAME}"
    container = request(control_plane.api_client, "GET", deploy_path)["spec"]["template"]["spec"]["containers"][0]
    for what, body in {
        "image": {"spec": {"template": {"spec": {"containers": [{"name": container["name"],
                                                                  "image": "registry.invalid/attacker:1"}]}}}},
        "ServiceAccount": {"spec": {"template": {"spec": {"serviceAccountName": manifests.CONTROLLER_NAME}}}},
        "replicas": {"spec": {"replicas": 3}},
        "another template annotation": {"spec": {"template": {"metadata": {"annotations": {"x": "y"}}}}},
    }.items():
        _refused(lambda: controller.patch(deploy_path, body, "application/strategic-merge-patch+json", dry_run=True),
                 CONTROLLER_WRITES_POLICY_NAME, f"may change only the {TLS_FINGERPRINT_ANNOTATION} annotation")

    # what the controller does with these rights, with its own code and the stolen token: all allowed
    objects = WebhookTLSObjects(controller.api, ns, manifests.SECRET_NAME, manifests.CONFIG_NAME, manifests.NAME)
    actions, complete = CertManager(objects, ns).ensure()
    assert complete, actions
    assert any("caBundle set" in a for a in actions) and any("fingerprint" in a for a in actions), actions
    after = request(control_plane.api_client, "GET", CONFIG_PATH)
    assert after["webhooks"][0]["clientConfig"].get("caBundle")
    assert {k: v for k, v in after["webhooks"][0]["clientConfig"].items() if k != "caBundle"} == \
        {k: v for k, v in hooks[0]["clientConfig"].items() if k != "caBundle"}
    template = request(control_plane.api_client, "GET", deploy_path)["spec"]["template"]
    assert template["metadata"]["annotations"].get(TLS_FINGERPRINT_ANNOTATION)


def _pod(name: str, ns: str, gate: str, annotations: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "annotations": dict(annotations or {})},
            "spec": {"schedulingGates": [{"name": gate}],
                     "containers": [{"name": "c", "image": "registry.invalid/x:1"}]}}


def test_a_stolen_coordinator_token_cannot_steer_pods_another_controller_gated(install_set, control_plane):
    from kubectl_repack.api.gates import PLACEMENT_GATE_OWNER_ANNOTATION

    ns, _ = install_set
    coordinator = Stolen(control_plane, ns, manifests.COORDINATOR_NAME)
    core = client.CoreV1Api(control_plane.api_client)
    core.create_namespaced_pod(ns, _pod("quota-gated", ns, "example.com/quota"))
    path = f"/api/v1/namespaces/{ns}/pods/quota-gated"
    node_affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["attacker-node"]}]}]}}}
    _refused(lambda: coordinator.patch(path, {"spec": {"nodeSelector": {"kubernetes.io/hostname": "attacker-node"}}}),
             "repack-pod-writes", "may not change a pod's spec.nodeSelector")
    _refused(lambda: coordinator.patch(path, {"spec": {"affinity": node_affinity}}),
             "repack-pod-writes", "may not change a pod's spec.affinity")
    pod = core.read_namespaced_pod("quota-gated", ns)
    assert pod.spec.node_selector is None and pod.spec.affinity is None

    # its own work: lifting our gate (the coordinator's own patch) goes through
    core.create_namespaced_pod(ns, _pod("ours", ns, PLACEMENT_GATE, {PLACEMENT_GATE_OWNER_ANNOTATION: "run/uid"}))
    ours = request(control_plane.api_client, "GET", f"/api/v1/namespaces/{ns}/pods/ours")
    coordinator.patch(f"/api/v1/namespaces/{ns}/pods/ours", ungate_patch(ours), "application/json-patch+json")
    assert not core.read_namespaced_pod("ours", ns).spec.scheduling_gates


def test_a_stolen_coordinator_token_writes_only_placements_into_a_runs_status(install_set, control_plane):
    from kubectl_repack.kube.runs import RunStore

    ns, _ = install_set
    coordinator = Stolen(control_plane, ns, manifests.COORDINATOR_NAME)
    admin = control_plane.api_client
    me = Creator.from_user_info(json.loads(control_plane.kubectl("auth", "whoami", "-o", "json").stdout)
                                ["status"]["userInfo"])
    name = f"tok-run-{uuid.uuid4().hex[:6]}"
    custom = client.CustomObjectsApi(admin)
    run = custom.create_cluster_custom_object(GROUP, VERSION, "repackruns", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackRun", "metadata": {"name": name, "annotations": me.annotations()},
        "spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]}})
    record = {"namespace": "team-a", "podGroupName": "train", "victimPodName": "train-0", "victimPodUID": "uid-0",
              "plannedNodeName": "node-2", "eviction": {"phase": "Accepted"},
              "placement": {"phase": "WaitingForReplacement"}}
    run["status"] = {"phase": "Running", "executionDeadline": "2030-01-01T00:00:00Z", "relocations": [record]}
    custom.replace_cluster_custom_object_status(GROUP, VERSION, "repackruns", name, run)
    try:
        store = RunStore(coordinator.api)
        # what the coordinator writes (webhook.coordinator.loop.update_record): allowed
        store.update_status(name, lambda st: write_placement_fields(
            st["relocations"][0], {"phase": "Nominated", "selectedNodeName": "node-2",
                                   "replacementPodName": "train-0-new", "replacementPodUID": "uid-new"}))
        store.update_status(name, lambda st: write_placement_fields(st["relocations"][0],
                                                                    {"replacementPodGroupName": "train-2"}))
        stored = custom.get_cluster_custom_object(GROUP, VERSION, "repackruns", name)["status"]
        assert stored["relocations"][0]["placement"]["phase"] == "Nominated"
        assert stored["relocations"][0]["replacementPodGroupName"] == "train-2"

        def change(fn):
            return lambda: store.update_status(name, fn)

        for what, fn in {
            "phase": lambda st: st.update(phase="Pending"),
            "deadline": lambda st: st.update(executionDeadline="2031-01-01T00:00:00Z"),
            "conditions": lambda st: st.update(conditions=[]),
        }.items():
            _refused(change(fn), RUN_STATUS_POLICY_NAME, "may not change a run's status other than")
        for what, fn in {
            "planned node": lambda st: st["relocations"][0].update(plannedNodeName="attacker-node"),
            "eviction": lambda st: st["relocations"][0]["eviction"].update(phase="Pending"),
            "victim": lambda st: st["relocations"][0].update(victimPodName="someone-else"),
            "a record added": lambda st: st["relocations"].append(dict(record, victimPodName="other")),
            "the record removed": lambda st: st.update(relocations=[]),
        }.items():
            _refused(change(fn), RUN_STATUS_POLICY_NAME, "may change only the placement and replacementPodGroupName")
        after = custom.get_cluster_custom_object(GROUP, VERSION, "repackruns", name)["status"]
        assert after == stored
    finally:
        control_plane.kubectl("delete", "repackrun", name, "--ignore-not-found", "--wait=false", check=False)


def test_an_organisations_eviction_policy_written_as_the_readme_says_stops_the_controller_too(
        install_set, control_plane):
    """The limit stated in the README (Safety): an organisation's admission rule on pods/eviction
    sees the controller's ServiceAccount, not a run's creator. Written as the README advises (it
    also matches the repack controller, deciding on the eviction's namespace), it stops the
    controller's evictions there, and leaves other namespaces alone."""
    ns, controller = install_set
    api = control_plane.api_client
    name = f"org-evictions-{uuid.uuid4().hex[:6]}"
    policy = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
              "metadata": {"name": name},
              "spec": {"failurePolicy": "Fail",
                       "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                               "operations": ["CREATE"], "resources": ["pods/eviction"]}]},
                       "validations": [{"expression": f"request.userInfo.username != '{controller.user}' || "
                                                      "!('org.example/protected' in namespaceObject.metadata.labels)",
                                        "message": "org: no automated evictions in protected namespaces"}]}}
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
    core = client.CoreV1Api(api)
    protected = f"org-prot-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": protected, "labels": {"org.example/protected": "true"}}})
    for where in (protected, ns):
        core.create_namespaced_pod(where, {"metadata": {"name": "victim"}, "spec": {
            "containers": [{"name": "c", "image": "registry.invalid/x:1"}]}})
    for obj in (policy, binding):
        server_side_apply(api, obj)

    def evict(where: str) -> dict:
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "victim", "namespace": where}}
        return request(controller.api, "POST", f"/api/v1/namespaces/{where}/pods/victim/eviction", body,
                       query=[("dryRun", "All")])
    try:
        def refused():
            try:
                evict(protected)
            except ClusterAPIError as e:
                return ("no automated evictions in protected namespaces" in str(e)) or None
            return None
        wait_for("the organisation's eviction policy to stop the controller", refused, timeout=60)
        evict(ns)       # elsewhere the controller's eviction (dry run) goes through
    finally:
        for obj in (binding, policy):
            delete_object(api, obj)
        core.delete_namespace(protected)
