"""The in-cluster certificate manager's decisions (NOM-5) over an in-memory twin of the three
objects it keeps consistent: missing Secret -> created; valid -> nothing written; near expiry ->
rotated, both CAs trusted during the overlap, then the old one dropped; caBundle drift -> patched;
a new pair -> the webhook Deployment's pod template annotated so its pod is replaced."""
from __future__ import annotations

import base64
import copy
import threading
from datetime import datetime, timedelta, timezone

import pytest
from cryptography import x509

from kubectl_repack.deploy import certs, manifests
from kubectl_repack.errors import Conflict, NotFound
from webhook.controller import certmanager
from webhook.controller.certmanager import FINGERPRINT, PREVIOUS_CA_UNTIL, CertManager

NS = "repack-system"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=timezone.utc)


class Objects:
    """WebhookTLSObjects in memory; records every write."""

    def __init__(self, config=True, deployment=True):
        self.secret = None
        self.config = copy.deepcopy(manifests.mutating_webhook_configuration(NS)) if config else None
        self.deployment = copy.deepcopy(manifests.deployment(NS, "img:1")) if deployment else None
        self.writes: list = []
        self.version = 0

    def read_secret(self):
        return copy.deepcopy(self.secret)

    def create_secret(self, body):
        if self.secret is not None:
            raise Conflict("already exists", 409)
        self.writes.append(("create", body))
        self.version += 1
        self.secret = dict(copy.deepcopy(body), metadata=dict(body["metadata"], resourceVersion=str(self.version)))
        return copy.deepcopy(self.secret)

    def replace_secret(self, body):
        if body["metadata"].get("resourceVersion") != self.secret["metadata"]["resourceVersion"]:
            raise Conflict("the object has been modified", 409)
        self.writes.append(("replace", body))
        self.version += 1
        self.secret = dict(copy.deepcopy(body), metadata=dict(body["metadata"], resourceVersion=str(self.version)))
        return copy.deepcopy(self.secret)

    def read_webhook_config(self):
        return copy.deepcopy(self.config)

    def patch_webhook_config(self, ops):
        self.writes.append(("patch-config", ops))
        for op in ops:
            _, _, index, *rest = op["path"].split("/")
            hook = self.config["webhooks"][int(index)]
            if op["op"] == "test":
                assert hook[rest[0]] == op["value"]
            else:
                hook["clientConfig"]["caBundle"] = op["value"]
        return self.config

    def read_deployment(self):
        return copy.deepcopy(self.deployment)

    def patch_deployment(self, body):
        self.writes.append(("patch-deployment", body))
        meta = self.deployment["spec"]["template"]["metadata"]
        meta.setdefault("annotations", {}).update(body["spec"]["template"]["metadata"]["annotations"])
        return self.deployment


def manager(objects, now=NOW):
    return CertManager(objects, NS, now=lambda: now)


def data(secret, key):
    return base64.b64decode(secret["data"][key])


def ca_bundles(config):
    return [h["clientConfig"].get("caBundle") for h in config["webhooks"]]


def test_missing_secret_is_created_and_the_webhook_configuration_and_deployment_follow_it():
    objects = Objects()
    actions, complete = manager(objects).ensure()
    assert complete
    assert [w[0] for w in objects.writes] == ["create", "patch-config", "patch-deployment"]
    secret = objects.secret
    assert secret["type"] == "kubernetes.io/tls" and secret["metadata"]["name"] == manifests.SECRET_NAME
    cert, ca = data(secret, "tls.crt"), data(secret, "ca.crt")
    x509.load_pem_x509_certificate(cert).verify_directly_issued_by(x509.load_pem_x509_certificate(ca))
    assert set(certs.service_dns_names(manifests.NAME, NS)) <= set(certs.sans_of(cert))
    assert b"PRIVATE KEY" in data(secret, "tls.key") and "ca.key" not in secret["data"]  # the CA key is not kept
    assert ca_bundles(objects.config) == [secret["data"]["ca.crt"]] * 2   # both entries, the Secret's ca.crt
    annotations = objects.deployment["spec"]["template"]["metadata"]["annotations"]
    assert annotations[FINGERPRINT] == certmanager.fingerprint(cert)
    assert any("created secret" in a for a in actions)


def test_a_valid_secret_and_a_matching_configuration_mean_no_write():
    objects = Objects()
    manager(objects).ensure()
    objects.writes.clear()
    actions, complete = manager(objects, NOW + timedelta(days=200)).ensure()
    assert (actions, complete, objects.writes) == ([], True, [])


def test_near_expiry_rotates_and_trusts_both_cas_until_the_old_certificate_expires():
    objects = Objects()
    manager(objects, NOW - timedelta(days=340)).ensure()     # its serving certificate ends in 25 days
    old = copy.deepcopy(objects.secret)
    old_ca, old_cert = data(old, "ca.crt"), data(old, "tls.crt")
    old_end = x509.load_pem_x509_certificate(old_cert).not_valid_after_utc
    objects.writes.clear()
    actions, _ = manager(objects).ensure()
    assert [w[0] for w in objects.writes] == ["replace", "patch-config", "patch-deployment"]
    new = objects.secret
    new_cert = data(new, "tls.crt")
    assert new_cert != old_cert and data(new, "tls.key") != data(old, "tls.key")
    trust = x509.load_pem_x509_certificates(data(new, "ca.crt"))
    assert len(trust) == 2 and trust[1].public_bytes(certs.serialization.Encoding.PEM) == old_ca
    x509.load_pem_x509_certificate(new_cert).verify_directly_issued_by(trust[0])   # current CA first
    assert new["metadata"]["annotations"][PREVIOUS_CA_UNTIL] == old_end.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ca_bundles(objects.config) == [new["data"]["ca.crt"]] * 2   # the API server trusts old and new
    assert objects.deployment["spec"]["template"]["metadata"]["annotations"][FINGERPRINT] == \
        certmanager.fingerprint(new_cert)
    assert any("rotated" in a and "expires within 30 days" in a for a in actions)

    # During the overlap nothing changes; once the old certificate has expired the old CA goes.
    objects.writes.clear()
    assert manager(objects, NOW + timedelta(days=1)).ensure() == ([], True)
    manager(objects, old_end + timedelta(seconds=1)).ensure()
    assert [w[0] for w in objects.writes] == ["replace", "patch-config"]   # same pair: no new rollout
    assert len(x509.load_pem_x509_certificates(data(objects.secret, "ca.crt"))) == 1
    assert data(objects.secret, "tls.crt") == new_cert
    assert PREVIOUS_CA_UNTIL not in objects.secret["metadata"]["annotations"]
    assert ca_bundles(objects.config) == [objects.secret["data"]["ca.crt"]] * 2


def test_ca_bundle_drift_is_patched_and_url_entries_are_left_alone():
    objects = Objects()
    manager(objects).ensure()
    objects.config["webhooks"][0]["clientConfig"].pop("caBundle")       # e.g. a re-install dropped it
    objects.config["webhooks"][1]["clientConfig"]["caBundle"] = base64.b64encode(b"stale").decode()
    objects.writes.clear()
    actions, _ = manager(objects).ensure()
    assert [w[0] for w in objects.writes] == ["patch-config"]
    ops = objects.writes[0][1]
    assert [o["op"] for o in ops] == ["test", "add", "test", "add"]     # guarded by each entry's name
    assert ca_bundles(objects.config) == [objects.secret["data"]["ca.crt"]] * 2
    assert any("caBundle" in a for a in actions)

    url_config = manifests.mutating_webhook_configuration(NS, b"theirs", url="https://127.0.0.1:9/mutate")
    objects.config = copy.deepcopy(url_config)
    objects.writes.clear()
    manager(objects).ensure()
    assert objects.writes == [] and objects.config == url_config


def test_a_secret_that_does_not_name_the_service_or_cannot_be_read_is_replaced():
    objects = Objects()
    other = certs.generate("something-else", NS, now=NOW)
    objects.secret = {"metadata": {"name": manifests.SECRET_NAME, "namespace": NS, "resourceVersion": "7"},
                      "data": {k: base64.b64encode(v).decode() for k, v in other.as_secret_data().items()}}
    actions, _ = manager(objects).ensure()
    assert "does not name repack-webhook" in actions[0]
    assert set(certs.service_dns_names(manifests.NAME, NS)) <= set(certs.sans_of(data(objects.secret, "tls.crt")))
    objects.secret["data"]["tls.crt"] = base64.b64encode(b"garbage").decode()
    actions, _ = manager(objects).ensure()
    assert "cannot be read" in actions[0]
    x509.load_pem_x509_certificate(data(objects.secret, "tls.crt"))


def test_nothing_is_made_without_the_webhook_configuration_and_it_is_retried_soon():
    """Before install applied it, or after uninstall deleted it (a terminating controller must not
    re-create the Secret uninstall just deleted)."""
    objects = Objects(config=False)
    assert manager(objects).ensure() == ([], False)
    assert objects.writes == [] and objects.secret is None


def test_a_missing_deployment_is_incomplete_so_it_is_retried_soon():
    objects = Objects(deployment=False)
    actions, complete = manager(objects).ensure()
    assert not complete and [w[0] for w in objects.writes] == ["create", "patch-config"]


def test_another_replica_creating_the_secret_first_is_used():
    objects = Objects()
    theirs = certs.generate(manifests.NAME, NS, now=NOW)
    body = CertManager(objects, NS)._secret_body(theirs, [theirs.ca_cert_pem], None)

    class Racing(Objects):
        def read_secret(self):
            return None if not hasattr(self, "raced") else super().read_secret()

        def create_secret(self, b):
            self.raced = True
            super().create_secret(body)
            return super().create_secret(b)      # ours: 409

    racing = Racing()
    manager(racing).ensure()
    assert data(racing.secret, "tls.crt") == theirs.cert_pem
    assert ca_bundles(racing.config) == [racing.secret["data"]["ca.crt"]] * 2


def test_run_forever_retries_soon_after_a_failure_and_stops():
    calls = []

    class Failing:
        def ensure(self):
            calls.append(1)
            if len(calls) == 1:
                raise NotFound("secrets is forbidden", 403)
            stop.set()
            return [], True

    stop = threading.Event()
    certmanager.run_forever(Failing(), stop, interval=60, retry=0.01)
    assert len(calls) == 2


@pytest.mark.parametrize("verb,resource,name", [
    ("get", "secrets", manifests.SECRET_NAME), ("update", "secrets", manifests.SECRET_NAME),
    ("get", "deployments", manifests.NAME), ("patch", "deployments", manifests.NAME)])
def test_the_controller_role_grants_what_the_cert_manager_needs_by_name(verb, resource, name):
    rules = manifests.controller_role_rules()
    assert any(resource in r["resources"] and verb in r["verbs"] and name in r.get("resourceNames", [])
               for r in rules)
    # by name only: no rule grants the verb on every object of the kind
    assert not any(resource in r["resources"] and verb in r["verbs"] and not r.get("resourceNames") for r in rules)


def test_only_create_of_secrets_is_unnamed_as_kubernetes_cannot_limit_create_by_name():
    unnamed = [r for r in manifests.controller_role_rules() if "secrets" in r["resources"] and not r.get("resourceNames")]
    assert [r["verbs"] for r in unnamed] == [["create"]]


@pytest.mark.parametrize("verb", ["get", "patch"])
def test_the_controller_may_read_and_patch_only_its_webhook_configuration(verb):
    rules = [r for r in manifests.controller_cluster_role_rules() if "mutatingwebhookconfigurations" in r["resources"]]
    assert rules and all(r["resourceNames"] == [manifests.CONFIG_NAME] for r in rules)
    assert any(verb in r["verbs"] for r in rules)
    assert not any({"create", "delete", "update", "list", "watch"} & set(r["verbs"]) for r in rules)


def test_the_controller_process_starts_the_cert_manager_in_its_namespace(monkeypatch):
    from kubectl_repack.kube import client, incluster
    from webhook.controller import loop as controller

    started = []
    monkeypatch.setattr(client, "connect", lambda kubeconfig=None: "api")
    created = []
    monkeypatch.setattr(incluster, "ensure_key", lambda api, ns: b"k")
    monkeypatch.setattr(incluster, "create_key", lambda api, ns, name: created.append((api, ns, name)))
    monkeypatch.setattr(controller.Controller, "run", lambda self: None)
    monkeypatch.setattr(certmanager, "start", lambda api, ns, stop: started.append((api, ns, stop)))
    assert controller.main(["--namespace", "ops", "--health-port", "0"]) == 0
    assert [(api, ns) for api, ns, _ in started] == [("api", "ops")]
    assert created == [("api", "ops", "repack-placement-key")]   # made at start, never read by the controller
    assert isinstance(started[0][2], threading.Event)


def test_the_kube_layer_reads_and_writes_the_three_objects_by_name():
    from kubectl_repack.kube.webhook_tls import WebhookTLSObjects
    from tests.unit.deploy.test_install import FakeApi

    api = FakeApi(existing={})
    objects = WebhookTLSObjects(api, NS, manifests.SECRET_NAME, manifests.CONFIG_NAME, manifests.NAME)
    assert objects.read_secret() is None and objects.read_webhook_config() is None and objects.read_deployment() is None
    objects.create_secret({"metadata": {}})
    objects.replace_secret({"metadata": {}})
    objects.patch_webhook_config([])
    objects.patch_deployment({})
    writes = [(m, p, ct) for m, p, ct, _q, _b in api.calls if m != "GET"]
    assert writes == [
        ("POST", f"/api/v1/namespaces/{NS}/secrets", None),
        ("PUT", f"/api/v1/namespaces/{NS}/secrets/repack-webhook-tls", None),
        ("PATCH", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/repack-placement",
         "application/json-patch+json"),
        ("PATCH", f"/apis/apps/v1/namespaces/{NS}/deployments/repack-webhook", "application/merge-patch+json")]
