"""`kubectl repack install` over an earlier install is an upgrade: it says which objects
changed and which it created, and it takes over the fields an earlier `kubectl apply` of the
rendered manifests set, so that server-side apply removes what this version no longer sets (the
coordinator container that left the webhook's pod, a Service port). The end-to-end upgrade from a
release in git history is tests/e2e/test_upgrade.py."""
from __future__ import annotations

import copy

from click.testing import CliRunner

from kubectl_repack.cli import main
from kubectl_repack.deploy import installer
from tests.unit.deploy.test_install import READY_DEPLOYMENT, fake_api  # noqa: F401 (fixture)

CSA = {"manager": "kubectl-client-side-apply", "operation": "Update", "apiVersion": "apps/v1",
       "time": "2026-12-01T10:00:00Z", "fieldsType": "FieldsV1",
       "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
           'k:{"name":"webhook"}': {".": {}, "f:image": {}},
           'k:{"name":"coordinator"}': {".": {}, "f:image": {}}}}}},
           "f:metadata": {"f:annotations": {".": {}, "f:kubectl.kubernetes.io/last-applied-configuration": {}}}}}
OURS = {"manager": "kubectl-repack", "operation": "Apply", "apiVersion": "apps/v1", "time": "2026-12-02T10:00:00Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
            'k:{"name":"webhook"}': {".": {}, "f:command": {}}}}}}}}
CONTROLLER = {"manager": "repack-controller", "operation": "Update", "apiVersion": "apps/v1",
              "time": "2026-12-02T10:00:00Z", "fieldsType": "FieldsV1",
              "fieldsV1": {"f:spec": {"f:template": {"f:metadata": {"f:annotations": {"f:fingerprint": {}}}}}}}
STATUS = {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "apps/v1",
          "subresource": "status", "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:replicas": {}}}}


def test_the_fields_kubectl_apply_set_merge_into_installs_own_entry():
    fields, managers = installer.taken_over([copy.deepcopy(m) for m in (CSA, OURS, CONTROLLER, STATUS)])
    assert managers == ["kubectl-client-side-apply"]
    assert [m["manager"] for m in fields] == ["kubectl-repack", "repack-controller", "kube-controller-manager"]
    ours = fields[0]
    assert ours["operation"] == "Apply" and ours["apiVersion"] == "apps/v1" and ours["time"] == OURS["time"]
    containers = ours["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    # install now owns the coordinator container too, so applying a set without it removes it
    assert containers == {'k:{"name":"webhook"}': {".": {}, "f:command": {}, "f:image": {}},
                          'k:{"name":"coordinator"}': {".": {}, "f:image": {}}}
    assert ours["fieldsV1"]["f:spec"]["f:replicas"] == {}
    assert "f:kubectl.kubernetes.io/last-applied-configuration" in ours["fieldsV1"]["f:metadata"]["f:annotations"]
    assert fields[1] == CONTROLLER and fields[2] == STATUS     # other owners keep their fields


def test_without_an_entry_of_its_own_the_earlier_appliers_entry_becomes_installs():
    server_side = dict(CSA, manager="kubectl", operation="Apply")
    fields, managers = installer.taken_over([copy.deepcopy(server_side), copy.deepcopy(CONTROLLER)])
    assert managers == ["kubectl"]
    assert fields[0] == dict(server_side, manager="kubectl-repack", operation="Apply")
    assert fields[1] == CONTROLLER


def test_nothing_is_taken_from_other_managers_nor_across_api_versions():
    helm = dict(CSA, manager="helm")
    label = dict(CSA, manager="kubectl-label")
    assert installer.taken_over([helm, label, CONTROLLER, STATUS]) == (None, [])
    assert installer.taken_over([OURS, dict(CSA, apiVersion="apps/v1beta1")]) == (None, [])
    assert installer.taken_over([]) == (None, [])


def test_a_first_install_reports_no_upgrade_and_a_current_one_says_so():
    first = installer.Applied()
    first.record("deployment.apps/repack-webhook", "Deployment", None, {"spec": {}})
    assert first.report("repack-system") == []
    # a CRD kept by uninstall is not an install
    kept = installer.Applied()
    kept.record("customresourcedefinition.apiextensions.k8s.io/repackruns.repack.volcano.sh",
                "CustomResourceDefinition", {"spec": {"a": 1}}, {"spec": {"a": 2}})
    assert kept.report("repack-system") == []
    same = installer.Applied()
    before = {"metadata": {"resourceVersion": "1", "labels": {"a": "b"}}, "spec": {"x": 1}, "status": {"r": 1}}
    after = {"metadata": {"resourceVersion": "2", "labels": {"a": "b"}, "annotations": {
        installer.LAST_APPLIED: "{}"}}, "spec": {"x": 1}, "status": {"r": 2}}
    same.record("service/repack-webhook", "Service", before, after)
    assert same.report("repack-system") == ["the install found in namespace repack-system is current: "
                                            "1 object(s) unchanged"]


def test_install_over_an_install_applied_with_kubectl_takes_it_over_and_reports_the_upgrade(fake_api):  # noqa: F811
    path = "/apis/apps/v1/namespaces/repack-system/deployments/repack-webhook"
    fake_api.existing[path] = dict(READY_DEPLOYMENT, metadata={
        "generation": 1, "resourceVersion": "41", "managedFields": [CSA, CONTROLLER, STATUS]})
    result = CliRunner().invoke(main, ["install"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    patches = [c for c in fake_api.calls if c[0] == "PATCH" and c[1] == path]
    (take, apply) = patches
    assert take[2] == "application/json-patch+json" and apply[2] == "application/apply-patch+yaml"
    test, replace = take[4]
    assert test == {"op": "test", "path": "/metadata/resourceVersion", "value": "41"}
    assert replace["op"] == "replace" and replace["path"] == "/metadata/managedFields"
    managers = [m["manager"] for m in replace["value"]]
    assert managers == ["kubectl-repack", "repack-controller", "kube-controller-manager"]
    lines = result.output.splitlines()
    assert any(line.startswith("upgraded the install found in namespace repack-system: ") for line in lines), lines
    changed = next(line for line in lines if line.startswith("changed: "))
    assert "deployment.apps/repack-webhook" in changed
    (taken,) = [line for line in lines if line.startswith("taken over from kubectl-client-side-apply")]
    assert taken.endswith(": deployment.apps/repack-webhook"), taken
    # the report comes before the wait, after every object
    assert lines.index(taken) < lines.index("deployment.apps/repack-webhook Ready")


def test_an_object_changed_meanwhile_is_applied_without_the_take_over(fake_api, monkeypatch):  # noqa: F811
    from kubectl_repack.errors import Invalid

    path = "/apis/apps/v1/namespaces/repack-system/deployments/repack-webhook"
    fake_api.existing[path] = dict(READY_DEPLOYMENT, metadata={
        "generation": 1, "resourceVersion": "41", "managedFields": [CSA]})
    real = installer.request

    def failing_test_op(api, method, p, body=None, **kw):
        if method == "PATCH" and kw.get("content_type") == "application/json-patch+json":
            raise Invalid("the test operation failed")
        return real(api, method, p, body, **kw)

    monkeypatch.setattr(installer, "request", failing_test_op)
    result = CliRunner().invoke(main, ["install"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "taken over from" not in result.output
    assert any(c[0] == "PATCH" and c[1] == path and c[2] == "application/apply-patch+yaml" for c in fake_api.calls)
