"""`kubectl repack uninstall --dry-run[=client|server]`: the forms install takes, and a dry run that
says what the real uninstall would do (a namespace install did not create is kept by both)."""
from __future__ import annotations

import pytest

from tests.unit.deploy.test_install import OURS, fake_api, invoke  # noqa: F401 - fixture

GATED = {"metadata": {"name": "w-0", "namespace": "demo",
                      "annotations": {"repack.volcano.sh/placement-gate-owner": "run/uid"}},
         "spec": {"schedulingGates": [{"name": "repack.volcano.sh/placement"}]}}
RUN = {"metadata": {"name": "r1", "finalizers": ["repack.volcano.sh/stop-before-delete"]},
       "status": {"phase": "Running"}}
NAMESPACE_IF_OURS = ("deleted only if install created it (label app.kubernetes.io/part-of=kubectl-repack), "
                     "else kept (dry run)")


@pytest.fixture
def offline(monkeypatch):
    from kubectl_repack.commands import options

    monkeypatch.setattr(options.Settings, "api", lambda self: pytest.fail("client dry run connected"))


@pytest.mark.parametrize("args", [("--dry-run",), ("--dry-run=client",), ("--dry-run", "client")])
def test_client_dry_run_takes_install_s_forms_and_reads_nothing(offline, args):
    result = invoke("uninstall", *args)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "mutatingwebhookconfiguration.admissionregistration.k8s.io/repack-placement deleted (dry run)"
    assert all(line.endswith("(dry run)") for line in lines)
    assert "deployment.apps/repack-controller deleted (dry run)" in lines


def test_client_dry_run_does_not_claim_a_namespace_it_cannot_know_install_created(offline):
    result = invoke("uninstall", "--repack-namespace", "kube-system", "--dry-run")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert "namespace/kube-system deleted (dry run)" not in lines
    assert lines[-1] == f"namespace/kube-system {NAMESPACE_IF_OURS}"


def test_dry_run_takes_client_or_server_only(offline):
    result = invoke("uninstall", "--dry-run=bogus")
    assert result.exit_code == 2
    assert "error: Invalid value for '--dry-run'" in result.output


def test_server_dry_run_sends_every_delete_with_dry_run_all_and_changes_nothing(fake_api):
    fake_api.existing["/api/v1/namespaces/repack-system"] = OURS
    fake_api.existing["/api/v1/pods"] = {"items": [GATED]}
    fake_api.existing["/apis/repack.volcano.sh/v1alpha1/repackruns"] = {"items": [RUN]}
    result = invoke("uninstall", "--dry-run=server")
    assert result.exit_code == 0, result.output
    writes = [c for c in fake_api.calls if c[0] != "GET"]
    assert writes and all(c[0] == "DELETE" and c[3] == {"dryRun": "All"} for c in writes)
    assert writes[-1][1] == "/api/v1/namespaces/repack-system"   # ours: the real uninstall deletes it
    lines = result.output.splitlines()
    assert all(line.endswith("(server dry run)") or "(server dry run) (the run is not finished" in line
               for line in lines)
    assert "pod/demo/w-0 placement gate removed (server dry run)" in lines
    assert any(line.startswith("repackrun.repack.volcano.sh/r1 finalizer removed (server dry run)") for line in lines)
    assert lines[-1] == "namespace/repack-system deleted (server dry run)"


def test_server_dry_run_keeps_a_namespace_install_did_not_create_as_the_real_one_does(fake_api):
    fake_api.existing["/api/v1/namespaces/kube-system"] = {"metadata": {"labels": {}}}
    result = invoke("uninstall", "--repack-namespace", "kube-system", "--dry-run=server")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "namespace/kube-system kept (not created by install) (server dry run)"
    assert not any(c[0] == "DELETE" and c[1] == "/api/v1/namespaces/kube-system" for c in fake_api.calls)


def test_help_says_the_controller_goes_too_and_what_is_kept():
    result = invoke("uninstall", "--help")
    text = " ".join(result.output.split())
    assert "and the RepackRun controller" in text
    assert ("Kept: the RepackRun CRD and every RepackRun (with --include-crd both are deleted), and a namespace "
            "install did not create") in text
    assert "Remove the webhook and coordinator (and" not in text
