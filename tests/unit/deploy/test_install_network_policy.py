"""The webhook's NetworkPolicy, on by default where the API server's source can be known (SEC-3):
install reads the addresses the API servers advertise (Service default/kubernetes: EndpointSlices,
else Endpoints) and admits only them; it renders none and warns when they cannot be known
(no endpoints, not readable, loopback); --apiserver-cidr wins; --no-network-policy opts out; a
re-install that renders none deletes the policy an earlier install made; a client dry run reads
no cluster and says so; a server dry run reads the addresses as install does."""
from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from kubectl_repack.cli import main
from kubectl_repack.api import installed
from kubectl_repack.deploy import manifests
from tests.unit.deploy.test_install import FakeApi, FakeResponse

SLICES = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"
ENDPOINTS = "/api/v1/namespaces/default/endpoints/kubernetes"
POLICY = "/apis/networking.k8s.io/v1/namespaces/repack-system/networkpolicies/repack-webhook"
REF = "networkpolicy.networking.k8s.io/repack-webhook"


def kubernetes_slices(*addresses, address_type="IPv4"):
    return {"items": [{"addressType": address_type, "metadata": {"name": "kubernetes", "namespace": "default",
                                                                 "labels": {"kubernetes.io/service-name": "kubernetes"}},
                       "endpoints": [{"addresses": [a], "conditions": {"ready": True}} for a in addresses]}]}


def kubernetes_endpoints(*addresses):
    return {"metadata": {"name": "kubernetes", "namespace": "default"},
            "subsets": [{"addresses": [{"ip": a} for a in addresses], "ports": [{"port": 6443}]}]}


class Cluster(FakeApi):
    """A FakeApi that keeps what is applied (server-side apply stores the object), deletes what is
    deleted (404 when it is not there) and refuses the paths in `forbidden` with 403."""

    def __init__(self, existing=None, forbidden=()):
        super().__init__(existing)
        self.forbidden = set(forbidden)

    def call_api(self, method, url, header_params=None, body=None, **kw):
        path, query = url
        self.calls.append((method, path, (header_params or {}).get("Content-Type"), query, body))
        if path in self.forbidden:
            return FakeResponse(403, json.dumps({"message": f"{path} is forbidden", "code": 403}).encode())
        if method == "PATCH" and "dryRun" not in query:
            self.existing[path] = body
        if method == "DELETE":
            if path not in self.existing:
                return FakeResponse(404, b'{"message": "not found"}')
            if "dryRun" not in query:
                del self.existing[path]
        if method == "GET" and path not in self.existing:
            return FakeResponse(404, b'{"message": "not found"}')
        return FakeResponse(200, json.dumps(self.existing.get(path, {}) if method == "GET" else {}).encode())

    def applied(self, kind):
        return [c[4] for c in self.calls if c[0] == "PATCH" and isinstance(c[4], dict) and c[4].get("kind") == kind]

    def gets(self, path):
        return [c for c in self.calls if c[0] == "GET" and c[1] == path]


@pytest.fixture
def cluster(monkeypatch):
    from kubectl_repack.commands import options

    api = Cluster()
    monkeypatch.setattr(options.Settings, "api", lambda self: api)
    return api


def install(*args):
    return CliRunner().invoke(main, ["install", "--no-wait", *args], catch_exceptions=False)


def test_install_admits_only_the_addresses_the_api_servers_advertise(cluster):
    cluster.existing[SLICES] = kubernetes_slices("10.0.0.1")
    r = install()
    assert r.exit_code == 0, r.output
    (policy,) = cluster.applied("NetworkPolicy")
    assert policy["spec"]["ingress"] == [{"from": [{"ipBlock": {"cidr": "10.0.0.1/32"}}],
                                          "ports": [{"protocol": "TCP", "port": manifests.CONTAINER_PORT}]}]
    assert policy["metadata"]["annotations"] == {installed.POLICY_SOURCE_ANNOTATION: installed.SOURCE_ENDPOINTS}
    lines = r.stdout.splitlines()
    at = lines.index(f"{REF} serverside-applied")
    assert lines[at + 1] == (f"{REF}: webhook port admits only the API server (10.0.0.1/32, from the kubernetes "
                             "Service's endpoints)")
    assert r.stderr == ""
    (query,) = [c[3] for c in cluster.gets(SLICES)]
    assert query == {"labelSelector": "kubernetes.io/service-name=kubernetes"}
    assert not cluster.gets(ENDPOINTS)      # the slices said it


def test_every_api_server_ready_or_not_and_both_families_one_host_each(cluster):
    slices = kubernetes_slices("10.0.0.2", "10.0.0.1", "10.0.0.2")
    slices["items"][0]["endpoints"][1]["conditions"] = {"ready": False}   # still an API server that calls
    slices["items"] += kubernetes_slices("fd00::1", address_type="IPv6")["items"]
    cluster.existing[SLICES] = slices
    assert install().exit_code == 0
    (policy,) = cluster.applied("NetworkPolicy")
    assert [p["ipBlock"]["cidr"] for p in policy["spec"]["ingress"][0]["from"]] == [
        "10.0.0.1/32", "10.0.0.2/32", "fd00::1/128"]


@pytest.mark.parametrize("slices", [None, {"items": []}, 403])
def test_the_endpoints_object_when_the_slices_do_not_tell(cluster, slices):
    if slices == 403:
        cluster.forbidden.add(SLICES)
    elif slices is not None:
        cluster.existing[SLICES] = slices
    cluster.existing[ENDPOINTS] = kubernetes_endpoints("192.168.1.10")
    r = install()
    assert r.exit_code == 0, r.output
    (policy,) = cluster.applied("NetworkPolicy")
    assert policy["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "192.168.1.10/32"}}]
    assert "admits only the API server (192.168.1.10/32, from the kubernetes Service's endpoints)" in r.stdout


@pytest.mark.parametrize("setup, why", [
    (lambda c: None, "the Service default/kubernetes has no endpoints (no EndpointSlice, no Endpoints)"),
    (lambda c: c.forbidden.update({SLICES, ENDPOINTS}), "the endpoints of the Service default/kubernetes are not "
                                                        "readable ("),
    (lambda c: c.existing.update({SLICES: kubernetes_slices("127.0.0.1")}),
     "the Service default/kubernetes lists only loopback or unspecified addresses (127.0.0.1)"),
    (lambda c: c.existing.update({ENDPOINTS: kubernetes_endpoints("::1")}), "(::1)"),
    (lambda c: c.existing.update({SLICES: kubernetes_slices("10.0.0.1", "127.0.0.1")}),
     "lists loopback or unspecified addresses (127.0.0.1) besides 10.0.0.1: where those API servers call from"),
])
def test_no_policy_and_a_warning_when_the_source_cannot_be_known(cluster, setup, why):
    setup(cluster)
    r = install()
    assert r.exit_code == 0, r.output
    assert not cluster.applied("NetworkPolicy")
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("warning: no NetworkPolicy: the API server's addresses "
                                                             "cannot be known (")
    assert why in r.stderr
    assert (f"the webhook port ({manifests.CONTAINER_PORT}) is reachable from every pod; close it with "
            "--apiserver-cidr CIDR") in r.stderr
    assert "--no-network-policy" in r.stderr
    assert "serverside-applied" in r.stdout and REF not in r.stdout


def test_apiserver_cidr_wins_and_nothing_is_read_for_it(cluster):
    cluster.existing[SLICES] = kubernetes_slices("10.0.0.1")
    r = install("--apiserver-cidr", "10.20.0.0/16")
    assert r.exit_code == 0, r.output
    (policy,) = cluster.applied("NetworkPolicy")
    assert policy["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.20.0.0/16"}}]
    assert policy["metadata"]["annotations"] == {installed.POLICY_SOURCE_ANNOTATION: installed.SOURCE_FLAG}
    assert f"{REF}: webhook port admits only the API server (10.20.0.0/16, from --apiserver-cidr)" in r.stdout
    assert not cluster.gets(SLICES) and not cluster.gets(ENDPOINTS)


def test_no_network_policy_opts_out_and_says_what_that_means(cluster):
    cluster.existing[SLICES] = kubernetes_slices("10.0.0.1")
    r = install("--no-network-policy")
    assert r.exit_code == 0, r.output
    assert not cluster.applied("NetworkPolicy") and not cluster.gets(SLICES)
    assert (f"no NetworkPolicy (--no-network-policy): the webhook port ({manifests.CONTAINER_PORT}) is reachable "
            "from every pod") in r.stdout.splitlines()
    assert r.stderr == ""
    both = install("--no-network-policy", "--apiserver-cidr", "10.0.0.1")
    assert both.exit_code == 2 and "--no-network-policy renders no NetworkPolicy" in both.output
    help_text = " ".join(CliRunner().invoke(main, ["install", "--help"]).output.split())
    assert "managed clusters" in help_text and "client --dry-run reads no cluster" in help_text


def test_a_reinstall_that_renders_no_policy_deletes_the_one_an_earlier_install_made(cluster):
    cluster.existing[SLICES] = kubernetes_slices("10.0.0.1")
    assert install().exit_code == 0
    assert cluster.existing[POLICY]["kind"] == "NetworkPolicy"
    # The API server's address is no longer known (here: gone from the endpoints): the old policy
    # would admit an address that may not be the API server's any more, so it goes.
    del cluster.existing[SLICES]
    cluster.calls.clear()
    r = install()
    assert r.exit_code == 0, r.output
    assert POLICY not in cluster.existing
    assert [c[1] for c in cluster.calls if c[0] == "DELETE"][0] == POLICY
    assert f"{REF} deleted (an earlier install's; this one renders none)" in r.stdout.splitlines()
    assert "warning: no NetworkPolicy" in r.stderr
    # Again: nothing to delete, nothing said about it.
    r = install("--no-network-policy")
    assert r.exit_code == 0 and "deleted (an earlier" not in r.stdout


def test_a_policy_of_that_name_install_did_not_make_is_left_alone(cluster):
    cluster.existing[POLICY] = {"kind": "NetworkPolicy", "metadata": {"name": "repack-webhook", "labels": {"team": "x"}}}
    r = install("--no-network-policy")
    assert r.exit_code == 0, r.output
    assert POLICY in cluster.existing and not [c for c in cluster.calls if c[0] == "DELETE" and c[1] == POLICY]
    assert f"{REF} exists, left as it is (not made by install)" in r.stdout


def test_uninstall_removes_the_policy(cluster):
    cluster.existing[SLICES] = kubernetes_slices("10.0.0.1")
    assert install().exit_code == 0 and POLICY in cluster.existing
    r = CliRunner().invoke(main, ["uninstall"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert POLICY not in cluster.existing
    assert f"{REF} deleted" in r.stdout.splitlines()


def test_client_dry_run_reads_no_cluster_renders_the_policy_from_the_flag_only_and_says_so(monkeypatch):
    from kubectl_repack.commands import options

    monkeypatch.setattr(options.Settings, "api", lambda self: pytest.fail("client dry run connected"))
    r = CliRunner().invoke(main, ["install", "--dry-run", "-o", "yaml"])
    assert r.exit_code == 0, r.output
    kinds = [d["kind"] for d in yaml.safe_load_all(r.stdout) if d]     # stdout: the objects only
    assert "NetworkPolicy" not in kinds
    assert r.stderr.startswith("warning: no NetworkPolicy rendered: a client dry run reads no cluster")
    assert "add --apiserver-cidr CIDR, or use --dry-run=server" in r.stderr
    r = CliRunner().invoke(main, ["install", "--dry-run", "-o", "json", "--apiserver-cidr", "10.0.0.1"])
    assert r.exit_code == 0 and r.stderr == ""
    (policy,) = [o for o in json.loads(r.stdout)["items"] if o["kind"] == "NetworkPolicy"]
    assert policy["spec"]["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]
    r = CliRunner().invoke(main, ["install", "--dry-run", "--no-network-policy"])
    assert r.exit_code == 0 and "NetworkPolicy" not in r.stdout
    assert r.stderr.startswith("no NetworkPolicy (--no-network-policy)")


def test_server_dry_run_reads_the_addresses_as_install_does_and_stores_nothing(cluster):
    cluster.existing["/api/v1/namespaces/repack-system"] = {"metadata": {"labels": {
        "app.kubernetes.io/part-of": "kubectl-repack"}}}
    cluster.existing[SLICES] = kubernetes_slices("10.0.0.1")
    r = CliRunner().invoke(main, ["install", "--dry-run=server"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    at = lines.index(f"{REF} serverside-applied (server dry run)")
    assert lines[at + 1].endswith("admits only the API server (10.0.0.1/32, from the kubernetes Service's endpoints)")
    (patch,) = [c for c in cluster.calls if c[0] == "PATCH" and c[1] == POLICY]
    assert patch[3]["dryRun"] == "All" and POLICY not in cluster.existing
    # A policy left by an earlier install, and none rendered now: deleted with dryRun=All, so kept.
    cluster.existing[POLICY] = manifests.network_policy("repack-system", ["10.0.0.1/32"])
    del cluster.existing[SLICES]
    r = CliRunner().invoke(main, ["install", "--dry-run=server"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    (delete,) = [c for c in cluster.calls if c[0] == "DELETE" and c[1] == POLICY]
    assert delete[3] == {"dryRun": "All"} and POLICY in cluster.existing
    assert f"{REF} would be deleted (server dry run) (an earlier install's; this one renders none)" in r.stdout
    assert r.stderr.startswith("warning: no NetworkPolicy")


def test_a_webhook_served_outside_the_cluster_has_no_pod_to_guard(cluster):
    cluster.existing[SLICES] = kubernetes_slices("10.0.0.1")
    r = install("--webhook-url", "https://127.0.0.1:9443/mutate")
    assert r.exit_code == 0, r.output
    assert not cluster.applied("NetworkPolicy") and not cluster.gets(SLICES) and r.stderr == ""


def test_the_names_install_writes_are_the_ones_doctor_reads():
    from kubectl_repack.kube.preflight import network as pf

    assert (pf.NETWORK_POLICY, pf.WEBHOOK_PORT, pf.POLICY_SOURCE_ANNOTATION, pf.SOURCE_ENDPOINTS, pf.SOURCE_FLAG) == (
        manifests.NAME, manifests.CONTAINER_PORT, installed.POLICY_SOURCE_ANNOTATION, installed.SOURCE_ENDPOINTS,
        installed.SOURCE_FLAG)
