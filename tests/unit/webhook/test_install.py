"""`kubectl repack install --dry-run -o yaml` parsed back: the webhook configuration fails open,
its caBundle is the generated CA, RBAC cannot evict or delete pods; and install/uninstall against
a fake API server apply and delete the right objects in the right order."""
from __future__ import annotations

import base64
import json
import os

import pytest
import yaml
from click.testing import CliRunner
from cryptography import x509

from kubectl_repack.cli import main
from kubectl_repack.commands import install
from kubectl_repack.deploy import certs


def invoke(*args):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def dry_run(*extra):
    result = invoke("install", "--dry-run", "-o", "yaml", *extra)
    assert result.exit_code == 0, result.output
    return [d for d in yaml.safe_load_all(result.output) if d]


def by_kind(objs, kind):
    return [o for o in objs if o["kind"] == kind]


def test_dry_run_renders_every_object_crd_first():
    objs = dry_run()
    assert [o["kind"] for o in objs] == [
        "CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
        "RoleBinding", "Secret", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
        "Deployment", "Service", "Deployment", "MutatingWebhookConfiguration"]
    assert objs[0]["metadata"]["name"] == "repackruns.repack.volcano.sh"
    deploy = by_kind(objs, "Deployment")[0]
    commands = [c["command"] for c in deploy["spec"]["template"]["spec"]["containers"]]
    assert ["python", "-m", "webhook.coordinator"] in commands


def test_webhook_configuration_fails_open_and_trusts_the_generated_ca(tmp_path):
    objs = dry_run("--namespace", "repack-ops", "--cert-dir", str(tmp_path))
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
    assert hook["clientConfig"]["service"] == {"namespace": "repack-ops", "name": "repack-webhook",
                                               "path": "/mutate", "port": 443}
    ca = base64.b64decode(hook["clientConfig"]["caBundle"])
    (secret,) = by_kind(objs, "Secret")
    assert base64.b64decode(secret["data"]["ca.crt"]) == ca
    assert (tmp_path / "ca.crt").read_bytes() == ca
    # The serving certificate is signed by that CA and names the Service.
    serving = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    issuer = x509.load_pem_x509_certificate(ca)
    serving.verify_directly_issued_by(issuer)
    assert "repack-webhook.repack-ops.svc" in certs.sans_of(base64.b64decode(secret["data"]["tls.crt"]))


def _rules_of(objs, service_account):
    """Every rule bound (by a ClusterRoleBinding or RoleBinding) to `service_account`."""
    roles = {(o["kind"], o["metadata"]["name"]): o["rules"] for o in objs if o["kind"] in ("ClusterRole", "Role")}
    return [r for o in objs if o["kind"] in ("ClusterRoleBinding", "RoleBinding")
            if any(s["name"] == service_account for s in o["subjects"])
            for r in roles[(o["roleRef"]["kind"], o["roleRef"]["name"])]]


def test_rbac_of_the_webhook_cannot_evict_or_delete_pods():
    rules = _rules_of(dry_run(), "repack-webhook")
    for rule in rules:
        resources = set(rule["resources"])
        assert "pods/eviction" not in resources, rule
        if rule["apiGroups"] == [""] and resources & {"pods", "pods/status"}:
            assert not {"delete", "deletecollection", "create", "*"} & set(rule["verbs"]), rule
    assert any("pods/status" in r["resources"] and "patch" in r["verbs"] for r in rules)


def test_only_the_controller_may_evict_and_it_may_neither_delete_nor_patch_pods():
    objs = dry_run()
    evict = {o["subjects"][0]["name"] for o in objs if o["kind"] in ("ClusterRoleBinding", "RoleBinding")
             if any("pods/eviction" in r["resources"] for r in _rules_of([*objs], o["subjects"][0]["name"]))}
    assert evict == {"repack-controller"}
    for rule in _rules_of(objs, "repack-controller"):
        if rule["apiGroups"] == [""] and "pods" in rule["resources"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule


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
    doc = json.loads(result.output)
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
        for name in ("repack-webhook", "repack-controller"):
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
    assert len(applies) == 17
    assert all(c[2] == "application/apply-patch+yaml" and c[3] == {"fieldManager": "kubectl-repack", "force": "true"}
               for c in applies)
    paths = [c[1] for c in applies]
    assert paths[0] == "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/repackruns.repack.volcano.sh"
    assert "/api/v1/namespaces/repack-system/secrets/repack-webhook-tls" in paths
    assert paths[-1] == ("/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/"
                         "repack-placement")
    assert "serverside-applied" in result.output


def test_reinstall_keeps_a_valid_certificate(fake_api):
    bundle = certs.generate("repack-webhook", "repack-system")
    fake_api.existing["/api/v1/namespaces/repack-system/secrets/repack-webhook-tls"] = {
        "data": {k: base64.b64encode(v).decode() for k, v in bundle.as_secret_data().items()}}
    assert invoke("install").exit_code == 0
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
    assert deletes[-1].endswith("/customresourcedefinitions/repackruns.repack.volcano.sh")


def test_object_paths():
    assert install.object_path({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}) == \
        "/api/v1/namespaces/x"
    assert install.object_path({"apiVersion": "apps/v1", "kind": "Deployment",
                                "metadata": {"name": "d", "namespace": "n"}}) == \
        "/apis/apps/v1/namespaces/n/deployments/d"
    assert os.path.basename(install.object_path({"apiVersion": "v1", "kind": "Secret",
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
    result = invoke("install", "-n", "default")
    assert result.exit_code == 0, result.output
    assert "namespace/default exists, left as it is" in result.output
    assert not any(c[0] == "PATCH" and c[1] == "/api/v1/namespaces/default" for c in fake_api.calls)
    result = invoke("uninstall", "-n", "default")
    assert result.exit_code == 0, result.output
    assert "namespace/default kept" in result.output
    assert not any(c[0] == "DELETE" and c[1] == "/api/v1/namespaces/default" for c in fake_api.calls)
    # The namespaced objects of the install are still removed.
    assert any(c[0] == "DELETE" and c[1] == "/api/v1/namespaces/default/secrets/repack-webhook-tls"
               for c in fake_api.calls)
