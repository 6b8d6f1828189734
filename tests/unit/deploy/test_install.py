"""`kubectl repack install --dry-run -o yaml` parsed back: the webhook configuration fails open,
no key material or caBundle is rendered (the controller makes them in the cluster) except with
--webhook-url, RBAC cannot evict or delete pods; install/uninstall against a fake API server apply
and delete the right objects in the right order; --dry-run=server applies with dryRun=All only."""
from __future__ import annotations

import base64
import json
import os

import pytest
import yaml
from click.testing import CliRunner

from kubectl_repack.cli import main
from kubectl_repack.deploy import certs
from kubectl_repack.kube.objects import object_path


def invoke(*args):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def dry_run(*extra):
    result = invoke("install", "--dry-run", "-o", "yaml", *extra)
    assert result.exit_code == 0, result.output
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def test_dry_run_renders_every_object_crd_first():
    objs = dry_run()
    assert [o["kind"] for o in objs] == [
        "CustomResourceDefinition", "CustomResourceDefinition",
        *["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] * 6, "Namespace",
        *["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"] * 3,
        "Lease", "Lease", "Lease", "Deployment", "Service", "Deployment", "Service", "Deployment",
        "MutatingWebhookConfiguration"]
    assert [o["metadata"]["name"] for o in objs[:2]] == ["repackruns.repack.volcano.sh",
                                                        "repackpolicies.repack.volcano.sh"]
    commands = {d["metadata"]["name"]: [c["command"] for c in d["spec"]["template"]["spec"]["containers"]]
                for d in by_kind(objs, "Deployment")}
    assert commands["repack-coordinator"] == [["python", "-m", "webhook.coordinator"]]
    assert commands["repack-controller"] == [["python", "-m", "webhook.controller"]]
    assert [c[:3] for c in commands["repack-webhook"]] == [["python", "-m", "webhook"]]


def test_webhook_configuration_fails_open_and_carries_no_ca_bundle_or_key():
    result = invoke("install", "--dry-run", "-o", "yaml", "--namespace", "repack-ops")
    assert result.exit_code == 0, result.output
    assert "PRIVATE KEY" not in result.output and "caBundle:" not in result.output and "tls.key" not in result.output
    objs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert not by_kind(objs, "Secret")      # the controller makes it in the cluster (webhook.controller.certmanager)
    (mwc,) = by_kind(objs, "MutatingWebhookConfiguration")
    hook, stamp = mwc["webhooks"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] <= 5
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    (expr,) = hook["namespaceSelector"]["matchExpressions"]
    assert expr["key"] == "kubernetes.io/metadata.name" and expr["operator"] == "NotIn"
    assert {"kube-system", "repack-ops"} <= set(expr["values"])
    assert hook["clientConfig"] == {"service": {"namespace": "repack-ops", "name": "repack-webhook",
                                                "path": "/mutate", "port": 443}}
    # The webhook's pod mounts the Secret the controller will make.
    dep = [d for d in by_kind(objs, "Deployment") if d["metadata"]["name"] == "repack-webhook"][0]
    assert {"name": "tls", "secret": {"secretName": "repack-webhook-tls"}} in dep["spec"]["template"]["spec"]["volumes"]


def test_install_needs_cryptography_only_for_a_webhook_served_outside_the_cluster(monkeypatch, tmp_path):
    """The krew zipapp has no `cryptography`: install renders and applies without it."""
    monkeypatch.setattr(certs, "x509", None)
    result = CliRunner().invoke(main, ["install", "--dry-run", "-o", "yaml"])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["install", "--dry-run", "--webhook-url", "https://127.0.0.1:9443/mutate"])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "kubectl repack install --webhook-url needs the Python library `cryptography`" in result.output


def test_cert_dir_needs_webhook_url(tmp_path):
    result = CliRunner().invoke(main, ["install", "--dry-run", "--cert-dir", str(tmp_path / "tls")])
    assert result.exit_code == 2
    assert "error: --cert-dir only applies with --webhook-url" in result.output
    assert not (tmp_path / "tls").exists()


@pytest.mark.parametrize("args", [("--dry-run=bogus",), ("--dry-run", "maybe")])
def test_dry_run_takes_client_or_server_only(args):
    result = CliRunner().invoke(main, ["install", *args])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "error: Invalid value for '--dry-run'" in result.output


@pytest.mark.parametrize("args", [("--dry-run",), ("--dry-run=client",), ("--dry-run", "client")])
def test_bare_dry_run_is_client_and_never_connects(args, monkeypatch):
    from kubectl_repack.commands import options

    monkeypatch.setattr(options.Settings, "api", lambda self: pytest.fail("client dry run connected"))
    result = CliRunner().invoke(main, ["install", *args])
    assert result.exit_code == 0, result.output
    assert "kind: CustomResourceDefinition" in result.output


def _rules_of(objs, service_account):
    """Every rule bound (by a ClusterRoleBinding or RoleBinding) to `service_account`."""
    roles = {(o["kind"], o["metadata"]["name"]): o["rules"] for o in objs if o["kind"] in ("ClusterRole", "Role")}
    return [r for o in objs if o["kind"] in ("ClusterRoleBinding", "RoleBinding")
            if any(s["name"] == service_account for s in o["subjects"])
            for r in roles[(o["roleRef"]["kind"], o["roleRef"]["name"])]]


def test_rbac_of_the_network_facing_webhook_is_read_only():
    """Finding 4: the webhook's account reads RepackRuns, watches the coordinator's Lease and gets the
    placement key by name (SEC-5: it MACs marks), nothing else; never the records-seal key (SEC-2: it
    verifies records by their digest, so a stolen token of its cannot forge records)."""
    rules = _rules_of(dry_run(), "repack-webhook")
    for rule in rules:
        assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
        assert set(rule["resources"]) <= {"repackruns", "leases", "secrets"}, rule
    (lease_rule,) = [r for r in rules if r["resources"] == ["leases"]]
    assert lease_rule["resourceNames"] == ["repack-coordinator"]
    (secret_rule,) = [r for r in rules if r["resources"] == ["secrets"]]
    assert secret_rule["resourceNames"] == ["repack-placement-key"] and secret_rule["verbs"] == ["get"]


def test_rbac_of_the_coordinator_cannot_evict_or_delete_pods():
    rules = _rules_of(dry_run(), "repack-coordinator")
    for rule in rules:
        resources = set(rule["resources"])
        assert "pods/eviction" not in resources, rule
        if "secrets" in resources:   # the placement key, read only, by name (SEC-5); never the seal key (SEC-2)
            assert rule["resourceNames"] == ["repack-placement-key"] and rule["verbs"] == ["get"], rule
        if rule["apiGroups"] == [""] and resources & {"pods", "pods/status"}:
            assert not {"delete", "deletecollection", "create", "*"} & set(rule["verbs"]), rule
        if "leases" in resources:
            assert rule["resourceNames"] == ["repack-coordinator"] and "create" not in rule["verbs"], rule
    assert any("pods/status" in r["resources"] and "patch" in r["verbs"] for r in rules)


def test_only_the_controller_may_evict_and_it_may_not_delete_pods():
    objs = dry_run()
    evict = {o["subjects"][0]["name"] for o in objs if o["kind"] in ("ClusterRoleBinding", "RoleBinding")
             if any("pods/eviction" in r["resources"] for r in _rules_of([*objs], o["subjects"][0]["name"]))}
    assert evict == {"repack-controller"}
    for rule in _rules_of(objs, "repack-controller"):
        if rule["apiGroups"] == [""] and "pods" in rule["resources"]:
            # patch: lifting expired gates only, as the pod-write policy confines it
            assert set(rule["verbs"]) <= {"get", "list", "watch", "patch"}, rule
    (policy,) = [o for o in objs if o["kind"] == "ValidatingAdmissionPolicy" and o["metadata"]["name"] == "repack-pod-writes"]
    (condition,) = policy["spec"]["matchConditions"]
    assert "system:serviceaccount:repack-system:repack-controller" in condition["expression"]
    assert "system:serviceaccount:repack-system:repack-coordinator" in condition["expression"]


def test_webhook_url_replaces_the_service_and_is_a_san(tmp_path):
    objs = dry_run("--webhook-url", "https://127.0.0.1:9443/mutate", "--cert-dir", str(tmp_path))
    assert not by_kind(objs, "Deployment") and not by_kind(objs, "Service")
    (mwc,) = by_kind(objs, "MutatingWebhookConfiguration")
    client_config = mwc["webhooks"][0]["clientConfig"]
    assert client_config["url"] == "https://127.0.0.1:9443/mutate" and "service" not in client_config
    assert "127.0.0.1" in certs.sans_of((tmp_path / "tls.crt").read_bytes())
    assert base64.b64decode(client_config["caBundle"]) == (tmp_path / "ca.crt").read_bytes()


def test_dry_run_json_is_a_list():
    result = invoke("install", "--dry-run", "-o", "json")
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["kind"] == "List" and doc["items"][0]["kind"] == "CustomResourceDefinition"


def test_webhook_url_must_be_https():
    result = CliRunner().invoke(main, ["install", "--dry-run", "--webhook-url", "http://127.0.0.1/mutate"])
    assert result.exit_code == 2 and "https" in result.output


class FakeApi:
    """ApiClient.call_api stand-in: records (method, path, content type, body)."""

    def __init__(self, existing=None):
        self.calls = []
        self.existing = existing or {"/api/v1/pods": {"items": []}}

    @staticmethod
    def param_serialize(method, resource_path, query_params=(), header_params=None, body=None, **kw):
        return method, (resource_path, dict(query_params)), dict(header_params or {}), body, []

    def call_api(self, method, url, header_params=None, body=None, **kw):
        path, query = url
        self.calls.append((method, path, (header_params or {}).get("Content-Type"), query,
                           body))
        status, data = 200, b"{}"
        if method == "GET":
            if path in self.existing:
                data = json.dumps(self.existing[path]).encode()
            else:
                status, data = 404, b'{"message": "not found"}'
        return FakeResponse(status, data)


class FakeResponse:
    def __init__(self, status, data):
        self.status, self.data, self.reason = status, data, "Not Found" if status == 404 else "OK"
        self.headers = {}

    def read(self):
        return self.data

    def getheaders(self):
        return {}


@pytest.fixture
def fake_api(monkeypatch):
    from kubectl_repack.commands import options

    api = FakeApi()
    # install --wait (the default) polls the Deployment: here it is rolled out at once.
    for ns in ("repack-system", "default"):
        for name in ("repack-webhook", "repack-coordinator", "repack-controller"):
            api.existing[f"/apis/apps/v1/namespaces/{ns}/deployments/{name}"] = READY_DEPLOYMENT
    monkeypatch.setattr(options.Settings, "api", lambda self: api)
    return api


READY_DEPLOYMENT = {"metadata": {"generation": 1}, "spec": {"replicas": 1},
                    "status": {"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "readyReplicas": 1,
                               "availableReplicas": 1}}


def test_install_applies_every_object_server_side(fake_api):
    result = invoke("install")
    assert result.exit_code == 0, result.output
    applies = [c for c in fake_api.calls if c[0] == "PATCH"]
    assert len(applies) == 39
    assert all(c[2] == "application/apply-patch+yaml" and c[3] == {"fieldManager": "kubectl-repack", "force": "true"}
               for c in applies)
    paths = [c[1] for c in applies]
    assert paths[0] == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/repackruns.repack.volcano.sh"
    assert not any("/secrets/" in p for p in paths)     # the controller makes the TLS Secret
    assert not any('"caBundle":' in json.dumps(c[4]) for c in applies)
    assert paths[-1] == ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
                         "repack-placement")
    assert "serverside-applied" in result.output


def test_reinstall_with_a_webhook_url_keeps_a_valid_certificate(fake_api):
    bundle = certs.generate("repack-webhook", "repack-system", extra_sans=["127.0.0.1"])
    fake_api.existing["/api/v1/namespaces/repack-system/secrets/repack-webhook-tls"] = {
        "data": {k: base64.b64encode(v).decode() for k, v in bundle.as_secret_data().items()}}
    assert invoke("install", "--webhook-url", "https://127.0.0.1:9443/mutate").exit_code == 0
    (mwc,) = [c[4] for c in fake_api.calls if c[0] == "PATCH" and c[4]["kind"] == "MutatingWebhookConfiguration"]
    assert base64.b64decode(mwc["webhooks"][0]["clientConfig"]["caBundle"]) == bundle.ca_cert_pem


OURS = {"metadata": {"labels": {"app.kubernetes.io/part-of": "kubectl-repack"}}}


def test_uninstall_removes_the_webhook_first_and_keeps_the_crd(fake_api):
    fake_api.existing["/api/v1/namespaces/repack-system"] = OURS
    result = invoke("uninstall")
    assert result.exit_code == 0, result.output
    deletes = [c[1] for c in fake_api.calls if c[0] == "DELETE"]
    assert deletes[0].endswith("/mutatingwebhookconfigurations/repack-placement")
    assert deletes[-1] == "/api/v1/namespaces/repack-system"
    assert not any("customresourcedefinitions" in d for d in deletes)
    fake_api.calls.clear()
    assert invoke("uninstall", "--include-crd").exit_code == 0
    deletes = [c[1] for c in fake_api.calls if c[0] == "DELETE"]
    assert [d.rsplit("/", 1)[1] for d in deletes[-2:]] == ["repackruns.repack.volcano.sh",
                                                           "repackpolicies.repack.volcano.sh"]


def test_object_paths():
    assert object_path({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}) == \
        "/api/v1/namespaces/x"
    assert object_path({"apiVersion": "apps/v1", "kind": "Deployment",
                        "metadata": {"name": "d", "namespace": "n"}}) == \
        "/apis/apps/v1/namespaces/n/deployments/d"
    assert os.path.basename(object_path({"apiVersion": "v1", "kind": "Secret",
                                         "metadata": {"name": "s", "namespace": "n"}})) == "s"


def test_uninstall_releases_pods_left_gated(fake_api):
    gated = {"metadata": {"name": "w-0", "namespace": "demo",
                          "annotations": {"repack.volcano.sh/placement-gate-owner": "run/uid"}},
             "spec": {"schedulingGates": [{"name": "repack.volcano.sh/placement"}, {"name": "x/y"}]}}
    plain = {"metadata": {"name": "p", "namespace": "demo"}, "spec": {}}
    fake_api.existing["/api/v1/pods"] = {"items": [plain, gated]}
    result = invoke("uninstall")
    assert result.exit_code == 0, result.output
    assert "pod/demo/w-0 placement gate removed" in result.output
    methods = [c[0] for c in fake_api.calls]
    first_delete = methods.index("DELETE")
    (patch,) = [c for c in fake_api.calls if c[0] == "PATCH"]
    assert fake_api.calls.index(patch) > first_delete  # after the webhook configuration is gone
    assert patch[1] == "/api/v1/namespaces/demo/pods/w-0" and patch[2] == "application/json-patch+json"
    assert patch[4] == [
        {"op": "test", "path": "/spec/schedulingGates", "value": gated["spec"]["schedulingGates"]},
        {"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "x/y"}]},
        {"op": "remove", "path": "/metadata/annotations/repack.volcano.sh~1placement-gate-owner"}]


def test_an_existing_namespace_is_neither_labelled_nor_deleted(fake_api):
    fake_api.existing["/api/v1/namespaces/default"] = {"metadata": {"labels": {"team": "x"}}}
    result = invoke("install", "--repack-namespace", "default")
    assert result.exit_code == 0, result.output
    assert "namespace/default exists, left as it is" in result.output
    assert not any(c[0] == "PATCH" and c[1] == "/api/v1/namespaces/default" for c in fake_api.calls)
    result = invoke("uninstall", "--namespace", "default")
    assert result.exit_code == 0, result.output
    assert "namespace/default kept" in result.output
    assert not any(c[0] == "DELETE" and c[1] == "/api/v1/namespaces/default" for c in fake_api.calls)
    # The namespaced objects of the install are still removed.
    assert any(c[0] == "DELETE" and c[1] == "/api/v1/namespaces/default/secrets/repack-webhook-tls"
               for c in fake_api.calls)


def test_server_dry_run_sends_every_object_with_dry_run_all_and_stores_nothing(fake_api):
    fake_api.existing["/api/v1/namespaces/repack-system"] = OURS
    result = invoke("install", "--dry-run=server")
    assert result.exit_code == 0, result.output
    writes = [c for c in fake_api.calls if c[0] != "GET"]
    assert len(writes) == 39
    assert all(c[0] == "PATCH" and c[3] == {"fieldManager": "kubectl-repack", "force": "true", "dryRun": "All"}
               for c in writes)
    lines = result.output.splitlines()
    assert lines[0] == ("customresourcedefinition.apiextensions.k8s.io/repackruns.repack.volcano.sh "
                        "serverside-applied (server dry run)")
    assert "deployment.apps/repack-webhook serverside-applied (server dry run)" in lines
    assert not any("waiting" in line for line in lines)   # nothing to wait for


def test_server_dry_run_lists_objects_of_a_new_namespace_without_sending_them(fake_api):
    result = invoke("install", "--dry-run=server", "--repack-namespace", "fresh")
    assert result.exit_code == 0, result.output
    sent = [c[1] for c in fake_api.calls if c[0] == "PATCH"]
    assert "/api/v1/namespaces/fresh" in sent                       # the Namespace itself is checked
    assert not any(p.startswith("/api/v1/namespaces/fresh/") or "/namespaces/fresh/" in p for p in sent)
    assert ("deployment.apps/repack-webhook would be created in the new namespace fresh (not checked by the "
            "server: a server dry run does not create the namespace)") in result.output.splitlines()
    assert "clusterrole.rbac.authorization.k8s.io/repack-webhook serverside-applied (server dry run)" in result.output


def test_server_dry_run_leaves_a_foreign_namespace_alone_and_prints_the_answers_with_output(fake_api):
    fake_api.existing["/api/v1/namespaces/default"] = {"metadata": {"labels": {"team": "x"}}}
    result = invoke("install", "--dry-run=server", "--repack-namespace", "default", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["kind"] == "List" and len(doc["items"]) == 38     # the fake server answers {} for each
    assert not any(c[0] == "PATCH" and c[1] == "/api/v1/namespaces/default" for c in fake_api.calls)
    assert any(c[0] == "PATCH" and c[1] == "/api/v1/namespaces/default/serviceaccounts/repack-webhook"
               for c in fake_api.calls)


def test_output_without_dry_run_is_refused(fake_api):
    result = invoke("install", "-o", "yaml")
    assert result.exit_code == 2 and "-o/--output only applies with --dry-run" in result.output
    assert fake_api.calls == []


def test_only_the_controller_reads_hypernodes_and_only_reads_them():
    """TOPO-1: a live plan reads HyperNodes (topology.volcano.sh), so the controller may get, list
    and watch them; nothing more, and no other account gains them."""
    objs = dry_run()
    for account in ("repack-webhook", "repack-coordinator", "repack-controller"):
        rules = [r for r in _rules_of(objs, account) if "topology.volcano.sh" in r["apiGroups"]]
        if account != "repack-controller":
            assert rules == [], account
            continue
        assert rules == [{"apiGroups": ["topology.volcano.sh"], "resources": ["hypernodes"],
                          "verbs": ["get", "list", "watch"]}]
