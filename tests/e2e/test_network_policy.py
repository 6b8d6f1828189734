"""The webhook's NetworkPolicy on the real API server (SEC-3): the policy of `install
--apiserver-cidr` is accepted as rendered; without the flag install admits only the addresses the API
servers advertise (Service default/kubernetes: EndpointSlices, else Endpoints), renders none with a
warning when they cannot be known, deletes a stale one on re-install, and doctor says which it is.

These tests need an API server that advertises nothing, so that they can write default/kubernetes
endpoints themselves, as the API servers' reconciler would, and remove them afterwards: the
harness's kube-apiserver with --endpoint-reconciler-type=none. The session's runs that way unless a
real node is attached (then it advertises the bridge's gateway, and its reconciler would put that
back): in such a session they get a control plane of their own (`quiet_plane`, about 10 s). The e2e cluster's CNI (the bridge plugin) does not
enforce NetworkPolicies, so what a policy blocks is not tested here, only what install stores and
doctor reads."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from kubernetes import client

from kubectl_repack.api import installed
from kubectl_repack.deploy import manifests
from tests.e2e.helpers import absent, wait_for

pytestmark = pytest.mark.e2e

EXE = os.path.join(os.path.dirname(sys.executable), "kubectl-repack")
REF = "networkpolicy.networking.k8s.io/repack-webhook"
SLICE = "repack-e2e-kubernetes"      # ours, beside any the API server writes (there are none here)


def repack(kubeconfig, *args):
    return subprocess.run([EXE, *args, "--kubeconfig", kubeconfig], capture_output=True, text=True, timeout=180)


def doctor_line(kubeconfig, namespace):
    """(verdict, detail) of doctor's webhook-network-policy line."""
    out = repack(kubeconfig, "doctor", "--repack-namespace", namespace)
    assert "Traceback" not in out.stderr, out.stderr
    for line in out.stdout.splitlines():
        verdict, name, detail = line.split(None, 2)
        if name == "webhook-network-policy":
            return verdict, detail
    raise AssertionError(f"no webhook-network-policy line in\n{out.stdout}{out.stderr}")


@pytest.fixture(scope="module")
def quiet_plane(control_plane):
    """A control plane whose API server advertises no address: the session's, or one of its own."""
    if control_plane.cp.node_network is None:
        yield control_plane
        return
    from tests.e2e.conftest import Cluster
    from tests.harness import ControlPlane

    cp = ControlPlane().start()
    try:
        yield Cluster(cp=cp, kubeconfig=cp.kubeconfig, api_client=cp.api_client())
    finally:
        cp.stop()


@pytest.fixture
def advertised(quiet_plane):
    """Writes what the API servers' endpoint reconciler would: `.slice(*ips)` (re)writes an
    EndpointSlice of the kubernetes Service, `.endpoints(*ips)` its Endpoints object (not mirrored
    into a slice); `.clear()` removes both. Nothing is left afterwards. (Neither may hold a
    loopback address: the API server refuses one, so that case is for the unit tests.)"""
    discovery, core = client.DiscoveryV1Api(quiet_plane.api_client), client.CoreV1Api(quiet_plane.api_client)

    def remove_slice():
        if not absent(lambda: discovery.read_namespaced_endpoint_slice(SLICE, "default")):
            discovery.delete_namespaced_endpoint_slice(SLICE, "default")

    def remove_endpoints():
        if not absent(lambda: core.read_namespaced_endpoints("kubernetes", "default")):
            core.delete_namespaced_endpoints("kubernetes", "default")

    def remove():
        remove_slice()
        remove_endpoints()

    class Advertised:
        @staticmethod
        def slice(*ips):
            remove_slice()
            discovery.create_namespaced_endpoint_slice("default", {
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                "metadata": {"name": SLICE, "labels": {"kubernetes.io/service-name": "kubernetes"}},
                "endpoints": [{"addresses": [ip], "conditions": {"ready": True}} for ip in ips],
                "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]})

        @staticmethod
        def endpoints(*ips):
            remove_endpoints()
            core.create_namespaced_endpoints("default", {
                "metadata": {"name": "kubernetes", "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"}},
                "subsets": [{"addresses": [{"ip": ip} for ip in ips],
                             "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]})

        clear = staticmethod(remove)

    slices = discovery.list_namespaced_endpoint_slice("default", label_selector="kubernetes.io/service-name=kubernetes")
    assert not slices.items and absent(lambda: core.read_namespaced_endpoints("kubernetes", "default")), (
        "the harness's API server advertises its address (a real node attached?): these tests expect "
        "--endpoint-reconciler-type=none")
    yield Advertised
    remove()


def test_the_rendered_policy_is_accepted_by_the_api_server(control_plane):
    rendered = subprocess.run([EXE, "install", "--dry-run", "-o", "json", "--repack-namespace", "default",
                               "--apiserver-cidr", "10.244.0.1", "--apiserver-cidr", "fd00::/64"],
                              capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    (policy,) = [o for o in json.loads(rendered.stdout)["items"] if o["kind"] == "NetworkPolicy"]
    out = control_plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(policy))
    stored = json.loads(out.stdout)
    assert stored["kind"] == "NetworkPolicy" and stored["metadata"]["namespace"] == "default"
    assert stored["spec"]["ingress"] == policy["spec"]["ingress"]
    assert stored["spec"]["policyTypes"] == ["Ingress"]


def test_install_admits_only_the_advertised_api_server_and_doctor_follows(quiet_plane, advertised):
    kc = quiet_plane.kubeconfig
    net = client.NetworkingV1Api(quiet_plane.api_client)
    namespace = f"repack-np-{uuid.uuid4().hex[:6]}"
    read = (lambda: net.read_namespaced_network_policy(manifests.NAME, namespace))
    advertised.slice("192.0.2.10")
    try:
        r = repack(kc, "install", "--repack-namespace", namespace, "--no-wait")
        assert r.returncode == 0, r.stdout + r.stderr
        assert (f"{REF}: webhook port admits only the API server (192.0.2.10/32, from the kubernetes Service's "
                "endpoints)") in r.stdout.splitlines(), r.stdout
        assert r.stderr == ""
        policy = read()
        assert [p.ip_block.cidr for p in policy.spec.ingress[0]._from] == ["192.0.2.10/32"]
        assert [p.port for p in policy.spec.ingress[0].ports] == [manifests.CONTAINER_PORT]
        assert policy.spec.pod_selector.match_labels == {"app.kubernetes.io/name": manifests.NAME}
        assert policy.metadata.annotations[installed.POLICY_SOURCE_ANNOTATION] == installed.SOURCE_ENDPOINTS
        assert doctor_line(kc, namespace) == ("OK", f"NetworkPolicy {namespace}/repack-webhook: the webhook port "
                                                    "admits only 192.0.2.10/32, from the kubernetes Service's endpoints")

        # The API server moved: the policy no longer admits it, and doctor says so.
        advertised.slice("192.0.2.11")
        verdict, detail = doctor_line(kc, namespace)
        assert verdict == "WARN" and "admits 192.0.2.10/32, but the API server now advertises 192.0.2.11/32" in detail

        # Its address cannot be known any more: a re-install renders none and deletes the stale one.
        advertised.clear()
        r = repack(kc, "install", "--repack-namespace", namespace, "--no-wait")
        assert r.returncode == 0, r.stdout + r.stderr
        assert f"{REF} deleted (an earlier install's; this one renders none)" in r.stdout.splitlines(), r.stdout
        assert r.stderr.startswith("warning: no NetworkPolicy: the API server's addresses cannot be known (the "
                                   "Service default/kubernetes has no endpoints"), r.stderr
        assert "reachable from every pod; close it with --apiserver-cidr CIDR" in r.stderr
        assert absent(read)
        verdict, detail = doctor_line(kc, namespace)
        assert verdict == "WARN" and detail.startswith(
            f"no NetworkPolicy {namespace}/repack-webhook: the webhook port (8443) is reachable from every pod")
        assert f"kubectl repack install --repack-namespace {namespace} --apiserver-cidr CIDR" in detail

        # --apiserver-cidr wins over what is advertised; uninstall removes the policy.
        advertised.slice("192.0.2.10")
        r = repack(kc, "install", "--repack-namespace", namespace, "--no-wait", "--apiserver-cidr", "198.51.100.0/24")
        assert r.returncode == 0, r.stdout + r.stderr
        assert [p.ip_block.cidr for p in read().spec.ingress[0]._from] == ["198.51.100.0/24"]
        assert doctor_line(kc, namespace)[1].endswith("admits only 198.51.100.0/24, from --apiserver-cidr")
    finally:
        out = repack(kc, "uninstall", "--repack-namespace", namespace)
        assert out.returncode == 0, out.stdout + out.stderr
    assert f"{REF} deleted" in out.stdout.splitlines(), out.stdout
    wait_for("the policy gone", lambda: absent(read), 60)


def test_server_dry_run_reads_the_slices_else_the_endpoints(quiet_plane, advertised):
    kc = quiet_plane.kubeconfig
    namespace = f"repack-np-dry-{uuid.uuid4().hex[:6]}"      # exists: each object is checked by the server
    client.CoreV1Api(quiet_plane.api_client).create_namespace({"metadata": {"name": namespace}})

    def dry_run():
        r = repack(kc, "install", "--dry-run=server", "--repack-namespace", namespace)
        assert r.returncode == 0, r.stdout + r.stderr
        return r

    r = dry_run()
    assert REF not in r.stdout and "has no endpoints" in r.stderr

    advertised.endpoints("192.0.2.20")      # the fallback: no slice lists an address
    r = dry_run()
    lines = r.stdout.splitlines()
    at = lines.index(f"{REF} serverside-applied (server dry run)")     # validated and admitted by the server
    assert lines[at + 1] == (f"{REF}: webhook port admits only the API server (192.0.2.20/32, from the kubernetes "
                             "Service's endpoints)")
    assert r.stderr == ""

    advertised.slice("192.0.2.30", "192.0.2.31")    # the slices, when they list any, are what counts
    r = dry_run()
    assert (f"{REF}: webhook port admits only the API server (192.0.2.30/32, 192.0.2.31/32, from the kubernetes "
            "Service's endpoints)") in r.stdout.splitlines(), r.stdout
    assert absent(lambda: client.NetworkingV1Api(quiet_plane.api_client).read_namespaced_network_policy(
        manifests.NAME, namespace))     # a dry run: nothing stored
    client.CoreV1Api(quiet_plane.api_client).delete_namespace(namespace)
