"""`kubectl repack install --dry-run=server` against the real API server: every object is
sent as a server-side apply with dryRun=All, the server validates and admits it, and nothing is
stored. A namespace that does not exist yet is not created by a server dry run, so the objects
inside it are listed as "would be created in the new namespace" instead of failing NotFound.
Through the plugin's real entry point (`kubectl-repack`)."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from kubectl_repack.deploy import manifests
from tests.e2e.helpers import absent

pytestmark = pytest.mark.e2e

EXE = os.path.join(os.path.dirname(sys.executable), "kubectl-repack")
CRD = "repackruns.repack.volcano.sh"


def _repack(*args):
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120)


def _cluster_state(api):
    """What install would create outside a namespace (and the CRD's resourceVersion, if it exists)."""
    rbac, reg = client.RbacAuthorizationV1Api(api), client.AdmissionregistrationV1Api(api)
    try:
        crd = client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD).metadata.resource_version
    except ApiException as e:
        assert e.status == 404
        crd = None
    return {
        "crd": crd,
        "clusterroles": [n for n in (manifests.NAME, manifests.CONTROLLER_NAME)
                         if not absent(lambda n=n: rbac.read_cluster_role(n))],
        "clusterrolebindings": [n for n in (manifests.NAME, manifests.CONTROLLER_NAME)
                                if not absent(lambda n=n: rbac.read_cluster_role_binding(n))],
        "webhook": not absent(lambda: reg.read_mutating_webhook_configuration(manifests.CONFIG_NAME)),
    }


def test_server_dry_run_into_a_new_namespace_checks_what_it_can_and_creates_nothing(control_plane):
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    namespace = f"repack-dry-{uuid.uuid4().hex[:6]}"
    before = _cluster_state(api)
    r = _repack("install", "--dry-run=server", "--repack-namespace", namespace, "--kubeconfig", control_plane.kubeconfig)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert f"customresourcedefinition.apiextensions.k8s.io/{CRD} serverside-applied (server dry run)" in lines
    assert f"namespace/{namespace} serverside-applied (server dry run)" in lines
    assert "clusterrole.rbac.authorization.k8s.io/repack-controller serverside-applied (server dry run)" in lines
    assert ("mutatingwebhookconfiguration.admissionregistration.k8s.io/repack-placement serverside-applied "
            "(server dry run)") in lines
    for obj in ("deployment.apps/repack-webhook", "deployment.apps/repack-controller", "service/repack-webhook"):
        assert (f"{obj} would be created in the new namespace {namespace} (not checked by the server: a server "
                "dry run does not create the namespace)") in lines, r.stdout
    assert "PRIVATE KEY" not in r.stdout and "secret/" not in r.stdout
    # Nothing was stored.
    assert absent(lambda: core.read_namespace(namespace))
    assert _cluster_state(api) == before


def test_server_dry_run_into_an_existing_namespace_sends_every_object_and_creates_nothing(
        control_plane, make_namespace):
    api = control_plane.api_client
    namespace = make_namespace("repack-dry")
    before = _cluster_state(api)
    r = _repack("install", "--dry-run=server", "--repack-namespace", namespace, "--kubeconfig", control_plane.kubeconfig)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert f"namespace/{namespace} exists, left as it is (not created by install)" in lines
    for obj in ("serviceaccount/repack-webhook", "role.rbac.authorization.k8s.io/repack-controller",
                "deployment.apps/repack-webhook", "deployment.apps/repack-controller", "service/repack-webhook"):
        assert f"{obj} serverside-applied (server dry run)" in lines, r.stdout
    assert "would be created" not in r.stdout
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    assert apps.list_namespaced_deployment(namespace).items == []
    assert core.list_namespaced_service(namespace).items == []
    assert [s.metadata.name for s in core.list_namespaced_service_account(namespace).items] == ["default"]
    assert client.RbacAuthorizationV1Api(api).list_namespaced_role(namespace).items == []
    assert _cluster_state(api) == before
    # -o yaml: the objects as the API server returned them (defaults filled in), still not stored.
    r = _repack("install", "--dry-run=server", "--repack-namespace", namespace, "-o", "yaml", "--kubeconfig", control_plane.kubeconfig)
    assert r.returncode == 0, r.stderr
    assert "serverside-applied" not in r.stdout and "revisionHistoryLimit: 10" in r.stdout   # a server default
    assert apps.list_namespaced_deployment(namespace).items == []


def test_server_dry_run_is_authorized_as_a_real_apply(control_plane):
    """What a client dry run cannot tell: the server refuses the user who may not install."""
    user = f"repack-e2e-nobody-{uuid.uuid4().hex[:4]}"
    r = _repack("install", "--dry-run=server", "--as", user, "--kubeconfig", control_plane.kubeconfig)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.startswith("error: ") and "(HTTP 403)" in r.stderr, r.stderr


def test_the_controllers_cert_manager_with_its_own_rbac_makes_and_rotates_what_install_left_out(control_plane):
    """install renders no Secret and no caBundle; the controller's certificate manager, acting as the
    controller's ServiceAccount (so its RBAC is what is tested), creates the Secret, sets every
    caBundle to its CA and rolls the webhook's pod template; a rotation keeps both CAs trusted."""
    import base64
    from datetime import datetime, timedelta, timezone

    from cryptography import x509

    from kubectl_repack.kube.client import Overrides, connect
    from kubectl_repack.kube.webhook_tls import WebhookTLSObjects
    from webhook.controller.certmanager import FINGERPRINT, CertManager

    namespace = f"repack-certs-{uuid.uuid4().hex[:6]}"
    r = _repack("install", "--repack-namespace", namespace, "--no-wait", "--kubeconfig", control_plane.kubeconfig)
    assert r.returncode == 0, r.stdout + r.stderr
    api = control_plane.api_client
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    reg = client.AdmissionregistrationV1Api(api)
    try:
        assert absent(lambda: core.read_namespaced_secret(manifests.SECRET_NAME, namespace))
        assert all(h.client_config.ca_bundle is None
                   for h in reg.read_mutating_webhook_configuration(manifests.CONFIG_NAME).webhooks)
        as_controller = connect(control_plane.kubeconfig, overrides=Overrides(
            as_user=f"system:serviceaccount:{namespace}:{manifests.CONTROLLER_NAME}"))
        objects = WebhookTLSObjects(as_controller, namespace, manifests.SECRET_NAME, manifests.CONFIG_NAME,
                                    manifests.NAME)

        def converged():
            secret = core.read_namespaced_secret(manifests.SECRET_NAME, namespace)
            hooks = reg.read_mutating_webhook_configuration(manifests.CONFIG_NAME).webhooks
            assert [h.client_config.ca_bundle for h in hooks] == [secret.data["ca.crt"]] * 2   # test_installed's check
            template = apps.read_namespaced_deployment(manifests.NAME, namespace).spec.template.metadata
            assert template.annotations[FINGERPRINT]
            return secret, template.annotations[FINGERPRINT]

        actions, complete = CertManager(objects, namespace).ensure()
        assert complete and len(actions) == 3, actions
        secret, first = converged()
        assert CertManager(objects, namespace).ensure() == ([], True)      # converged: nothing written

        later = datetime.now(timezone.utc) + timedelta(days=340)            # within 30 days of expiry
        actions, _ = CertManager(objects, namespace, now=lambda: later).ensure()
        assert "rotated" in actions[0], actions
        rotated, second = converged()
        assert second != first
        trust = x509.load_pem_x509_certificates(base64.b64decode(rotated.data["ca.crt"]))
        assert len(trust) == 2 and base64.b64decode(secret.data["ca.crt"]) in base64.b64decode(rotated.data["ca.crt"])

        # A re-install (server-side apply, its own field manager) leaves the controller's caBundle and
        # fingerprint alone: they are the controller's fields.
        r = _repack("install", "--repack-namespace", namespace, "--no-wait", "--kubeconfig", control_plane.kubeconfig)
        assert r.returncode == 0, r.stdout + r.stderr
        assert converged() == (rotated, second)
        assert CertManager(objects, namespace, now=lambda: later).ensure() == ([], True)
    finally:
        out = _repack("uninstall", "--repack-namespace", namespace, "--kubeconfig", control_plane.kubeconfig)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "secret/repack-webhook-tls deleted" in out.stdout
