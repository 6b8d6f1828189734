"""kube.preflight: the verdicts on canned objects, certificate expiry by the DER walk (checked
against `cryptography`), one check's error never stopping the others, and `kubectl repack doctor`."""
from __future__ import annotations

import base64
import copy
import datetime as dt
import json
from urllib.parse import urlparse

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client

from kubectl_repack.api.versions import TESTED_KUBERNETES, TESTED_VOLCANO
from kubectl_repack.api.installed import SOURCE_ENDPOINTS
from kubectl_repack.deploy import manifests
from kubectl_repack.kube import preflight as pf
from kubectl_repack.kube.preflight import certificates, checks, network, verdicts
from tests.transport import HTTPResponse, use_transport
from kubectl_repack.schema import load_crd

NOW = dt.datetime(2026, 7, 30, 8, 0, 0, tzinfo=dt.timezone.utc)


def make_cert(not_after, cn="repack-webhook.repack-system.svc", days_before=1):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_after - dt.timedelta(days=days_before)).not_valid_after(not_after)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM)


# ---- certificates -------------------------------------------------------------------------------
@pytest.mark.parametrize("not_after", [
    dt.datetime(2027, 1, 5, 9, 34, 43, tzinfo=dt.timezone.utc),     # UTCTime
    dt.datetime(2049, 12, 31, 23, 59, 59, tzinfo=dt.timezone.utc),  # UTCTime, last year it covers
    dt.datetime(2050, 1, 1, 0, 0, 0, tzinfo=dt.timezone.utc),       # GeneralizedTime from 2050 on
    dt.datetime(2126, 7, 30, 8, 0, 0, tzinfo=dt.timezone.utc),
])
def test_not_after_is_what_cryptography_reads(not_after):
    pem = make_cert(not_after)
    assert pf.pem_not_after(pem) == not_after == x509.load_pem_x509_certificate(pem).not_valid_after_utc


def test_a_bundle_is_as_good_as_its_first_expiry():
    early, late = NOW + dt.timedelta(days=40), NOW + dt.timedelta(days=4000)
    assert pf.pem_not_after(make_cert(late) + b"\n" + make_cert(early)) == early


@pytest.mark.parametrize("pem, why", [
    (b"", "no PEM CERTIFICATE block"),
    (b"-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n", "not base64"),
    (b"-----BEGIN CERTIFICATE-----\n" + base64.b64encode(b"\x30\x03\x02\x01\x01") + b"\n-----END CERTIFICATE-----",
     "not an X.509 certificate"),
    (b"-----BEGIN CERTIFICATE-----\n" + base64.b64encode(b"\x30\x82\xff") + b"\n-----END CERTIFICATE-----",
     "DER"),
])
def test_what_is_not_a_certificate_is_a_value_error(pem, why):
    with pytest.raises(ValueError, match=why):
        pf.pem_not_after(pem)


def test_truncated_certificates_never_crash_otherwise():
    der = certificates.pem_certificates(make_cert(NOW))[0]
    for n in range(len(der)):
        try:
            certificates.der_not_after(der[:n])
        except ValueError:
            pass


def test_cert_verdict_thresholds():
    what = "serving certificate"
    assert pf.cert_verdict(NOW + dt.timedelta(days=364), what, NOW).ok is True
    soon = pf.cert_verdict(NOW + dt.timedelta(days=29), what, NOW)
    assert soon.ok is False and "expires in 29d" in soon.detail and "kubectl repack install" in soon.fix
    gone = pf.cert_verdict(NOW - dt.timedelta(hours=3), what, NOW)
    assert gone.ok is False and "expired 3h ago" in gone.detail


# ---- verdicts -----------------------------------------------------------------------------------
def established(crd):
    crd = copy.deepcopy(crd)
    crd["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
    return crd


def test_crd_verdicts():
    bundled = load_crd()
    assert pf.crd_verdict(None, bundled).ok is False
    assert "not Established" in pf.crd_verdict(bundled, bundled).detail
    assert pf.crd_verdict(established(bundled), bundled).ok is True
    served = established(bundled)
    served["spec"]["versions"][0]["additionalPrinterColumns"][0]["priority"] = 0   # dropped on the way back
    assert pf.crd_verdict(served, bundled).ok is True
    old = established(bundled)
    old["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"].pop("mode")
    check = pf.crd_verdict(old, bundled)
    assert check.ok is False and "openAPIV3Schema.properties.spec.properties.mode" in check.detail
    cols = established(bundled)
    cols["spec"]["versions"][0]["additionalPrinterColumns"].pop()
    assert "additionalPrinterColumns (length" in pf.crd_verdict(cols, bundled).detail
    other = established(bundled)
    other["spec"]["versions"][0]["name"] = "v1beta9"
    assert "does not serve repack.volcano.sh/v1alpha1" in pf.crd_verdict(other, bundled).detail


def test_webhook_verdicts_and_the_service_it_calls():
    config = manifests.mutating_webhook_configuration("ops", b"pem")
    assert pf.webhook_verdict(None).ok is False
    ok = pf.webhook_verdict(config)
    assert ok.ok is True and "calls Service ops/repack-webhook (failurePolicy Ignore)" in ok.detail
    assert pf.webhook_service(config, "repack-system") == ("ops", "repack-webhook")
    assert pf.webhook_service(None, "repack-system") == ("repack-system", "repack-webhook")
    assert pf.webhook_service(manifests.mutating_webhook_configuration("ops", None, "https://127.0.0.1:1/m"),
                              "ops") is None


def test_ready_endpoints_from_slices_else_endpoints():
    slices = [{"endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}},
                             {"addresses": ["10.0.0.2"]},                       # unset: ready
                             {"addresses": ["10.0.0.3"], "conditions": {"ready": False}}]}]
    assert pf.ready_endpoints(slices, None) == (2, 1)
    eps = {"subsets": [{"addresses": [{"ip": "1"}], "notReadyAddresses": [{"ip": "2"}, {"ip": "3"}]}]}
    assert pf.ready_endpoints([], eps) == (1, 2)
    assert pf.ready_endpoints([], None) == (0, 0)
    assert pf.endpoints_verdict("ns/s", None, 0, 0).ok is False
    none = pf.endpoints_verdict("ns/s", {}, 0, 2)
    assert none.ok is False and "no ready endpoints (2 not ready)" in none.detail and "kubectl -n ns" in none.fix
    assert pf.endpoints_verdict("ns/s", {}, 1, 0).ok is True


def lease(holder, renewed, seconds=15, name="repack-controller", namespace="repack-system"):
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds,
                     "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.000000Z")}}


def test_lease_verdicts():
    ref, what = "repack-system/repack-controller", "in-cluster RepackRun controller"
    missing = pf.lease_verdict("controller", ref, None, NOW, what)
    assert (missing.ok, missing.fix) == (False, "kubectl repack install")
    assert "the in-cluster RepackRun controller is not running" in missing.detail
    assert "is not held" in pf.lease_verdict("controller", ref, lease(None, NOW), NOW, what).detail
    stale = pf.lease_verdict("controller", ref, lease("pod-a", NOW - dt.timedelta(seconds=20)), NOW, what)
    assert stale.ok is False and "held by pod-a but expired (renewed 20s ago)" in stale.detail
    fresh = pf.lease_verdict("controller", ref, lease("pod-a", NOW - dt.timedelta(seconds=3)), NOW, what)
    assert fresh.ok is True and fresh.detail == f"Lease {ref} held by pod-a, renewed 3s ago"


def test_access_verdicts():
    assert pf.access_verdict(checks.CREATE_RUNS, {"status": {"allowed": True}}).ok is True
    denied = pf.access_verdict(checks.PATCH_RUNS, {"status": {"allowed": False}})
    assert denied.ok is False and denied.name == "rbac-patch"
    assert "may not patch repackruns.repack.volcano.sh (needed by kubectl repack cancel)" in denied.detail


def test_volcano_verdicts():
    assert pf.volcano_crds_verdict({"podgroups.scheduling.volcano.sh": {}, "queues.scheduling.volcano.sh": None}) \
        .detail.startswith("Volcano is not installed: CustomResourceDefinition queues.scheduling.volcano.sh")
    sched = lease("vc-scheduler-abc", NOW - dt.timedelta(seconds=2), name="vc-scheduler", namespace="volcano-system")
    assert pf.scheduler_verdict([sched], [], NOW).ok is True

    def pg(when, ctype="Scheduled"):
        return {"metadata": {"namespace": "a", "name": "pg"},
                "status": {"conditions": [{"type": ctype, "lastTransitionTime": when.strftime("%Y-%m-%dT%H:%M:%SZ")}]}}
    other = lease("x", NOW, name="kube-scheduler", namespace="volcano-system")
    recent = pf.scheduler_verdict([other], [pg(NOW - dt.timedelta(days=3)), pg(NOW - dt.timedelta(minutes=12))], NOW)
    assert recent.ok is True and recent.detail == "last seen 12m ago: PodGroup a/pg condition Scheduled"
    old = pf.scheduler_verdict([lease("x", NOW - dt.timedelta(hours=1), name="vc-scheduler")],
                               [pg(NOW - dt.timedelta(days=3))], NOW)
    assert old.ok is None and "is not held or expired" in old.detail and "is 3d old" in old.detail
    assert pf.scheduler_verdict([], [], NOW).ok is None


def test_a_scheduler_status_write_without_condition_counts():
    """vc-scheduler moves a PodGroup to Inqueue without a condition: its managedFields entry says so."""
    def pg(manager, fields):
        return {"metadata": {"namespace": "a", "name": "pg", "managedFields": [
            {"manager": "kubectl", "operation": "Update", "time": "2026-07-30T07:59:59Z", "fieldsV1": {"f:spec": {}}},
            {"manager": manager, "operation": "Update", "time": "2026-07-30T07:59:30Z", "fieldsV1": fields}]},
            "status": {"phase": "Inqueue"}}
    seen = pf.scheduler_verdict([], [pg("vc-scheduler", {"f:status": {"f:phase": {}}})], NOW)
    assert seen.ok is True and seen.detail == "last seen 30s ago: PodGroup a/pg status written by vc-scheduler"
    assert pf.scheduler_verdict([], [pg("vc-controller-manager", {"f:status": {}})], NOW).ok is None
    assert pf.scheduler_verdict([], [pg("vc-scheduler", {"f:metadata": {}})], NOW).ok is None


def test_guarded_turns_any_error_into_that_checks_fail():
    from kubectl_repack.errors import ClusterAPIError

    def api_error(status):
        def fn():
            raise ClusterAPIError(f"GET /x: no (HTTP {status})", status)
        return fn

    def bug():
        return {}["missing"]
    assert pf.guarded("crd", api_error(500)) == pf.Check("crd", False, "cannot check: GET /x: no (HTTP 500)")
    assert pf.guarded("crd", api_error(403)) == pf.Check(
        "crd", None, "cannot check with your credentials: GET /x: no (HTTP 403)",
        "run kubectl repack doctor as a cluster admin")
    assert pf.guarded("crd", bug).detail == "cannot check: KeyError: 'missing'"


def test_install_names_are_the_ones_checked():
    from kubectl_repack.engine import mutex
    assert (pf.WEBHOOK_CONFIG, verdicts.WEBHOOK_NAME, checks.SERVICE, pf.TLS_SECRET, checks.DEFAULT_NAMESPACE) == (
        manifests.CONFIG_NAME, manifests.WEBHOOK_NAME, manifests.NAME, manifests.SECRET_NAME, manifests.NAMESPACE)
    assert (checks.NAMESPACE_ENV, checks.DEFAULT_NAMESPACE) == (mutex.LEASE_NAMESPACE_ENV, mutex.DEFAULT_LEASE_NAMESPACE)


def test_age():
    assert [checks.age(s) for s in (0, 59, 60, 7199, 7200, 172799, 172800)] == ["0s", "59s", "1m", "119m", "2h", "47h", "2d"]


# ---- the whole preflight over a fake API server ---------------------------------------------------
class Cluster:
    """Answers GETs from `objects` (path -> object or HTTP status) and SelfSubjectAccessReviews."""

    def __init__(self, objects, allowed=True):
        self.objects, self.allowed, self.paths = objects, allowed, []
        self.api = use_transport(client.ApiClient(client.Configuration(host="https://fake:6443")), self.send)

    def send(self, method, url, headers, body, timeout):
        path = urlparse(url).path
        self.paths.append((method, path))
        if method == "POST" and path.endswith("/selfsubjectaccessreviews"):
            answer = dict(body, status={"allowed": self.allowed})
        else:
            answer = self.objects.get(path, 404)
        if isinstance(answer, int):
            return HTTPResponse(answer, json.dumps({"kind": "Status", "message": f"{path}: HTTP {answer}",
                                                    "code": answer}).encode(), "Error")
        return HTTPResponse(200, json.dumps(answer).encode(), "OK")


CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


PLURALS = {"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
           "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}


def installed(now=NOW):
    pem = make_cert(now + dt.timedelta(days=300))
    config = manifests.mutating_webhook_configuration("repack-system", pem)
    renewed = now - dt.timedelta(seconds=1)
    return {
        f"{CRDS}/repackruns.repack.volcano.sh": established(load_crd()),
        f"{CRDS}/podgroups.scheduling.volcano.sh": {}, f"{CRDS}/queues.scheduling.volcano.sh": {},
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/repack-placement": config,
        "/api/v1/namespaces/repack-system/services/repack-webhook": {"spec": {}},
        "/apis/discovery.k8s.io/v1/namespaces/repack-system/endpointslices": {"items": [
            {"endpoints": [{"addresses": ["10.0.0.9"], "conditions": {"ready": True}}]}]},
        "/api/v1/namespaces/repack-system/secrets/repack-webhook-tls": {"data": {
            "tls.crt": base64.b64encode(pem).decode()}},
        "/apis/coordination.k8s.io/v1/namespaces/repack-system/leases/repack-controller": lease("c", renewed),
        "/apis/coordination.k8s.io/v1/namespaces/repack-system/leases/repack-coordinator": lease("w", renewed),
        "/apis/coordination.k8s.io/v1/namespaces/volcano-system/leases": {"items": [
            lease("vc", renewed, name="vc-scheduler", namespace="volcano-system")]},
        "/version": {"major": "1", "minor": "37", "gitVersion": TESTED_KUBERNETES},
        "/apis/apps/v1/namespaces/volcano-system/deployments": {"items": [
            volcano_deployment("volcano-scheduler", f"docker.io/volcanosh/vc-scheduler:{TESTED_VOLCANO}")]},
        **{f"/apis/admissionregistration.k8s.io/v1/{PLURALS[o['kind']]}/{o['metadata']['name']}": o
           for o in manifests.render() if o["kind"] in PLURALS},
        POLICY: manifests.network_policy("repack-system", ["10.0.0.1/32"], SOURCE_ENDPOINTS),
        KUBERNETES_SLICES: {"items": [{"endpoints": [{"addresses": ["10.0.0.1"]}]}]},
    }


POLICY = "/apis/networking.k8s.io/v1/namespaces/repack-system/networkpolicies/repack-webhook"
KUBERNETES_SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
KUBERNETES_ENDPOINTS = "/api/v1/namespaces/default/endpoints/kubernetes"


def test_an_installed_cluster_passes_every_check():
    checks = pf.run_checks(Cluster(installed()).api, now=NOW)
    assert [(c.name, c.verdict) for c in checks] == [
        ("crd", "OK"), ("webhook", "OK"), ("webhook-endpoints", "OK"), ("webhook-cert", "OK"),
        ("controller", "OK"), ("coordinator", "OK"), ("rbac-create", "OK"), ("rbac-patch", "OK"),
        ("volcano-crds", "OK"), ("volcano-scheduler", "OK"), ("volcano-version", "OK"), ("kubernetes", "OK"),
        ("admission-policies", "OK"),
        ("webhook-network-policy", "OK")], checks
    assert checks[3].detail.startswith("serving certificate (Secret repack-system/repack-webhook-tls tls.crt) "
                                       "valid for 300d")


def test_errors_stay_with_their_check():
    objects = installed()
    objects[f"{CRDS}/repackruns.repack.volcano.sh"] = 500
    objects["/api/v1/namespaces/repack-system/secrets/repack-webhook-tls"] = 403   # falls back to the caBundle
    objects["/apis/coordination.k8s.io/v1/namespaces/volcano-system/leases"] = 404
    cluster = Cluster(objects, allowed=False)
    checks = {c.name: c for c in pf.run_checks(cluster.api, now=NOW)}
    assert checks["crd"].ok is False and "HTTP 500" in checks["crd"].detail
    assert checks["webhook-cert"].ok is True and checks["webhook-cert"].detail.startswith(
        "CA in the caBundle of repack-placement (Secret repack-system/repack-webhook-tls not readable (")
    assert checks["rbac-create"].ok is False and checks["rbac-patch"].ok is False
    assert checks["volcano-scheduler"].ok is None          # no Lease, no PodGroup
    assert checks["controller"].ok is True and checks["webhook"].ok is True
    gets = [p for m, p in cluster.paths if m == "GET"]
    assert len(gets) == len(set(gets))                     # each object read once


def test_crds_not_readable_fall_back_on_discovery():
    objects = installed()
    for name in ("repackruns.repack.volcano.sh", "podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh"):
        objects[f"{CRDS}/{name}"] = 403
    objects["/apis/repack.volcano.sh/v1alpha1"] = {"resources": [{"name": "repackruns"}, {"name": "repackruns/status"}]}
    objects["/apis/scheduling.volcano.sh/v1beta1"] = {"resources": [{"name": "podgroups"}, {"name": "queues"}]}
    checks = {c.name: c for c in pf.run_checks(Cluster(objects).api, now=NOW)}
    assert checks["crd"].ok is None and checks["crd"].detail.startswith(
        "repack.volcano.sh/v1alpha1 repackruns is served; the CRD itself is not readable")
    assert checks["volcano-crds"].ok is True
    objects["/apis/coordination.k8s.io/v1/namespaces/volcano-system/leases"] = 403
    objects["/apis/scheduling.volcano.sh/v1beta1/podgroups"] = {"items": [{
        "metadata": {"namespace": "a", "name": "pg", "managedFields": [
            {"manager": "vc-scheduler", "time": "2026-07-30T07:58:00Z", "fieldsV1": {"f:status": {}}}]}}]}
    checks = {c.name: c for c in pf.run_checks(Cluster(objects).api, now=NOW)}
    assert checks["volcano-scheduler"].ok is True and "2m ago" in checks["volcano-scheduler"].detail
    objects.pop("/apis/repack.volcano.sh/v1alpha1")
    objects["/apis/scheduling.volcano.sh/v1beta1"] = {"resources": [{"name": "podgroups"}]}
    checks = {c.name: c for c in pf.run_checks(Cluster(objects).api, now=NOW)}
    assert checks["crd"].ok is False and "is not served" in checks["crd"].detail
    assert checks["volcano-crds"].ok is False and "queues.scheduling.volcano.sh not found" in checks["volcano-crds"].detail


def test_namespace_from_the_environment(monkeypatch):
    monkeypatch.setenv("REPACK_NAMESPACE", "ops")
    cluster = Cluster({})
    checks = {c.name: c for c in pf.run_checks(cluster.api, now=NOW)}
    assert "Lease ops/repack-controller not found" in checks["controller"].detail
    assert "Service ops/repack-webhook not found" in checks["webhook-endpoints"].detail


# ---- kubectl repack doctor ----------------------------------------------------------------------
def test_doctor_prints_one_line_per_check_and_exits_1_on_a_fail(monkeypatch):
    from tests.unit.cli.conftest import run
    from kubectl_repack.kube import client as kclient

    cluster = Cluster(installed(pf.utcnow()))
    monkeypatch.setattr(kclient, "connect", lambda *a, **kw: cluster.api)
    r = run("doctor")
    assert r.exit_code == 0, r.output
    assert [line.split()[:2] for line in r.stdout.splitlines()][:2] == [["OK", "crd"], ["OK", "webhook"]]
    cluster.objects.pop("/apis/coordination.k8s.io/v1/namespaces/repack-system/leases/repack-controller")
    r = run("doctor", "--repack-namespace", "repack-system")
    assert r.exit_code == 1
    assert ("FAIL  controller              Lease repack-system/repack-controller not found: the in-cluster RepackRun "
            "controller is not running — kubectl repack install\n") in r.stdout


def test_doctor_on_an_unreachable_cluster_says_it_once(monkeypatch):
    from urllib3.exceptions import NewConnectionError

    from kubectl_repack.kube import client as kclient
    from tests.unit.cli.conftest import run

    def refuse(*a):
        raise NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")
    api = use_transport(client.ApiClient(client.Configuration(host="https://fake:6443")), refuse)
    monkeypatch.setattr(kclient, "connect", lambda *a, **kw: api)
    r = run("doctor")
    assert r.exit_code == 1 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("error: GET ") and "Connection refused" in r.stderr



def test_kubernetes_before_1_30_fails_and_names_what_is_missing():
    assert pf.kubernetes_verdict({"gitVersion": TESTED_KUBERNETES}).verdict == "OK"
    old = pf.kubernetes_verdict({"gitVersion": "v1.29.9-eks-1"})
    assert old.verdict == "FAIL" and "needs >= 1.30" in old.detail and "ValidatingAdmissionPolicy" in old.detail
    assert pf.kubernetes_verdict({}).verdict == "WARN"


def test_a_kubernetes_minor_ci_does_not_test_is_a_warning_naming_the_tested_version():
    tested = pf.kubernetes_verdict({"gitVersion": TESTED_KUBERNETES.replace(".2", ".9") + "-gke.1200"})
    assert tested.verdict == "OK" and f"CI tests {TESTED_KUBERNETES}" in tested.detail
    for other in ("v1.30.0", "v1.35.4", "v1.38.0"):
        check = pf.kubernetes_verdict({"gitVersion": other})
        assert check.verdict == "WARN", other
        assert check.detail == (f"Kubernetes {other} (>= 1.30) is not tested: CI tests Kubernetes "
                                f"{TESTED_KUBERNETES} only")


def volcano_deployment(name, *images, namespace="volcano-system"):
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": {"containers": [{"name": f"c{i}", "image": image}
                                                          for i, image in enumerate(images)]}}}}


def test_the_volcano_version_is_the_vc_scheduler_images_tag():
    ok = pf.volcano_version_verdict([volcano_deployment("volcano-admission", "volcanosh/vc-webhook-manager:v1.13.0"),
                                     volcano_deployment("volcano-scheduler", f"volcanosh/vc-scheduler:{TESTED_VOLCANO}")])
    assert ok.verdict == "OK" and ok.detail == (f"Volcano {TESTED_VOLCANO} (Deployment volcano-system/volcano-scheduler; "
                                                f"CI tests {TESTED_VOLCANO})")
    newer = pf.volcano_version_verdict([volcano_deployment(
        "vc-sched", "registry.local:5000/mirror/vc-scheduler:v1.15.1@sha256:" + "a" * 64)])
    assert newer.verdict == "WARN" and newer.detail == (
        f"Volcano v1.15.1 (Deployment volcano-system/vc-sched) is not tested: CI tests Volcano {TESTED_VOLCANO} only")
    untagged = pf.volcano_version_verdict([volcano_deployment("s", "volcanosh/vc-scheduler@sha256:" + "b" * 64)])
    assert untagged.verdict == "WARN" and "vc-scheduler (untagged): Volcano's version unknown" in untagged.detail
    none = pf.volcano_version_verdict([volcano_deployment("other", "volcanosh/vc-controller-manager:v1.14.1")])
    assert none.verdict == "WARN" and none.detail == (
        f"no Deployment in volcano-system runs a vc-scheduler image: Volcano's version unknown "
        f"(CI tests Volcano {TESTED_VOLCANO})")


def test_a_missing_or_unenforced_admission_policy_fails_the_doctor():
    objects = installed()
    del objects["/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/repack-run-creator"]
    check = {c.name: c for c in pf.run_checks(Cluster(objects).api, now=NOW)}["admission-policies"]
    assert check.verdict == "FAIL" and "repack-run-creator" in check.detail and check.fix == "kubectl repack install"
    objects = installed()
    path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/repack-pod-writes"
    objects[path] = dict(objects[path], spec={"policyName": "repack-pod-writes", "validationActions": ["Audit"]})
    check = {c.name: c for c in pf.run_checks(Cluster(objects).api, now=NOW)}["admission-policies"]
    assert check.verdict == "FAIL" and "not enforced" in check.detail and "repack-pod-writes" in check.detail


# ---- webhook-network-policy (SEC-3) ----------------------------------------------------------
def sources(*cidrs):
    return network.APIServerSources(tuple(cidrs), "from the kubernetes Service's endpoints" if cidrs else "no endpoints")


def test_api_server_sources_from_slices_else_endpoints():
    slices = [{"endpoints": [{"addresses": ["10.0.0.2"], "conditions": {"ready": False}}, {"addresses": ["10.0.0.1"]}]},
              {"addressType": "IPv6", "endpoints": [{"addresses": ["fd00::1", "fd00::1"]}]}]
    found = network.apiserver_sources(slices, None)
    assert found.known and found.cidrs == ("10.0.0.1/32", "10.0.0.2/32", "fd00::1/128")
    assert found.why == "from the kubernetes Service's endpoints"
    endpoints = {"subsets": [{"addresses": [{"ip": "192.168.0.5"}], "notReadyAddresses": [{"ip": "192.168.0.6"}]}]}
    assert network.apiserver_sources([], endpoints).cidrs == ("192.168.0.5/32", "192.168.0.6/32")
    assert network.apiserver_sources([{"endpoints": []}], endpoints).cidrs == ("192.168.0.5/32", "192.168.0.6/32")


@pytest.mark.parametrize("slices, endpoints, unreadable, why", [
    ([], None, "", "the Service default/kubernetes has no endpoints (no EndpointSlice, no Endpoints)"),
    ([], {"subsets": []}, "", "has no endpoints"),
    ([], None, "HTTP 403", "the endpoints of the Service default/kubernetes are not readable (HTTP 403)"),
    ([{"endpoints": [{"addresses": ["127.0.0.1"]}]}], None, "",
     "the Service default/kubernetes lists only loopback or unspecified addresses (127.0.0.1), which are not where"),
    ([], {"subsets": [{"addresses": [{"ip": "::1"}, {"ip": "0.0.0.0"}]}]}, "", "addresses (::1, 0.0.0.0)"),
    ([{"endpoints": [{"addresses": ["10.0.0.1", "127.0.0.1"]}]}], None, "",
     "lists loopback or unspecified addresses (127.0.0.1) besides 10.0.0.1: where those API servers call from is "
     "not known"),
    ([{"addressType": "FQDN", "endpoints": [{"addresses": ["api.example"]}]}], None, "",
     "lists 'api.example', which is not an IP address"),
])
def test_api_server_sources_that_cannot_be_known(slices, endpoints, unreadable, why):
    found = network.apiserver_sources(slices, endpoints, unreadable)
    assert not found.known and found.cidrs == ()
    assert why in found.why


def test_reading_the_sources_falls_back_on_endpoints_and_never_raises_an_api_refusal():
    from kubectl_repack.errors import ClusterAPIError

    seen = []

    def get(answers):
        def fn(path, query):
            seen.append((path, query))
            answer = answers.get(path)
            if isinstance(answer, int):
                raise ClusterAPIError(f"GET {path}: no (HTTP {answer})", answer)
            return answer
        return fn
    ep = {"subsets": [{"addresses": [{"ip": "10.1.1.1"}]}]}
    assert pf.read_apiserver_sources(get({KUBERNETES_SLICES: 403, KUBERNETES_ENDPOINTS: ep})).cidrs == ("10.1.1.1/32",)
    assert seen[0] == (KUBERNETES_SLICES, [("labelSelector", "kubernetes.io/service-name=kubernetes")])
    both = pf.read_apiserver_sources(get({KUBERNETES_SLICES: 403, KUBERNETES_ENDPOINTS: 500}))
    assert not both.known and "not readable" in both.why and "HTTP 403" in both.why and "HTTP 500" in both.why
    seen.clear()
    slices = {"items": [{"endpoints": [{"addresses": ["10.0.0.1"]}]}]}
    assert pf.read_apiserver_sources(get({KUBERNETES_SLICES: slices})).cidrs == ("10.0.0.1/32",)
    assert [p for p, _ in seen] == [KUBERNETES_SLICES]      # the slices told: Endpoints not read


def test_network_policy_verdicts():
    flag = manifests.network_policy("ops", ["10.20.0.0/16"])
    ok = pf.network_policy_verdict("ops", flag)
    assert ok.verdict == "OK" and ok.detail == ("NetworkPolicy ops/repack-webhook: the webhook port admits only "
                                                "10.20.0.0/16, from --apiserver-cidr")
    made = manifests.network_policy("ops", ["10.0.0.1/32"], SOURCE_ENDPOINTS)
    assert pf.network_policy_verdict("ops", made, sources("10.0.0.1/32")).detail.endswith(
        "admits only 10.0.0.1/32, from the kubernetes Service's endpoints")
    assert pf.network_policy_verdict("ops", made, sources()).verdict == "OK"    # cannot compare now: as made

    missing = pf.network_policy_verdict("ops", None, sources())
    assert missing.verdict == "WARN"     # the webhook fails open: a risk, not a breakage
    assert missing.detail == ("no NetworkPolicy ops/repack-webhook: the webhook port (8443) is reachable from every "
                              "pod (no endpoints)")
    assert missing.fix == ("kubectl repack install --repack-namespace ops --apiserver-cidr CIDR (the address your "
                           "API servers call webhooks from, repeatable; with the options you installed with)")
    knowable = pf.network_policy_verdict("repack-system", None, sources("10.0.0.1/32"))
    assert knowable.detail.endswith("is reachable from every pod")
    assert knowable.fix.startswith("kubectl repack install (with the options you installed with: it reads the API "
                                   "server's addresses, now 10.0.0.1/32, and admits only them)")

    # An endpoints-made policy the API server has moved away from: its calls would be blocked.
    moved = pf.network_policy_verdict("ops", made, sources("10.0.0.1/32", "10.0.0.7/32"))
    assert moved.verdict == "WARN" and "admits 10.0.0.1/32, but the API server now advertises 10.0.0.7/32 too" \
        in moved.detail and "now 10.0.0.1/32, 10.0.0.7/32" in moved.fix
    # What --apiserver-cidr chose is the user's: never compared with the endpoints.
    assert pf.network_policy_verdict("ops", flag, sources("10.0.0.7/32")).verdict == "OK"

    open_rule = manifests.network_policy("ops", [])
    open_rule["spec"]["ingress"] = [{"ports": [{"port": 8443}]}]          # no `from`: every source
    assert "admits every source" in pf.network_policy_verdict("ops", open_rule).detail
    egress_only = dict(flag, spec=dict(flag["spec"], policyTypes=["Egress"]))
    assert pf.network_policy_verdict("ops", egress_only).verdict == "WARN"


def test_doctor_warns_without_the_policy_and_says_how_to_close_the_port(monkeypatch):
    from tests.unit.cli.conftest import run
    from kubectl_repack.kube import client as kclient

    objects = installed(pf.utcnow())
    del objects[POLICY]
    cluster = Cluster(objects)
    monkeypatch.setattr(kclient, "connect", lambda *a, **kw: cluster.api)
    r = run("doctor")
    assert r.exit_code == 0, r.output                       # a WARN, not a FAIL
    (line,) = [x for x in r.stdout.splitlines() if "webhook-network-policy" in x]
    assert line.startswith("WARN  webhook-network-policy  no NetworkPolicy repack-system/repack-webhook: the webhook "
                           "port (8443) is reachable from every pod — kubectl repack install (")
    objects.pop(KUBERNETES_SLICES)
    r = run("doctor")
    (line,) = [x for x in r.stdout.splitlines() if "webhook-network-policy" in x]
    assert "(the Service default/kubernetes has no endpoints" in line and "--apiserver-cidr CIDR" in line


def test_network_policy_check_follows_the_webhook_and_says_what_it_cannot_read():
    objects = installed()
    config = manifests.mutating_webhook_configuration("ops", b"pem")
    objects["/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/repack-placement"] = config
    check = {c.name: c for c in pf.run_checks(Cluster(objects).api, now=NOW)}["webhook-network-policy"]
    assert check.detail.startswith("no NetworkPolicy ops/repack-webhook")          # the namespace it calls
    objects["/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/repack-placement"] = \
        manifests.mutating_webhook_configuration("ops", None, "https://127.0.0.1:1/m")
    check = {c.name: c for c in pf.run_checks(Cluster(objects).api, now=NOW)}["webhook-network-policy"]
    assert check.verdict == "WARN" and "called at URL https://127.0.0.1:1/m" in check.detail
    objects = installed()
    objects[POLICY] = 403
    check = {c.name: c for c in pf.run_checks(Cluster(objects).api, now=NOW)}["webhook-network-policy"]
    assert check.verdict == "WARN" and check.detail.startswith("cannot check with your credentials")
