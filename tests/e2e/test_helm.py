"""The Helm chart for real: `helm install` of charts/kubectl-repack with the image
hack/build-image.sh built, on the real kubelet node, then `kubectl repack doctor` all OK; `helm
upgrade` with a changed value, applied and still all OK (the caBundle the controller wrote survives
Helm's merge); `helm uninstall`, which keeps the CRD and the RepackRuns, then `kubectl repack
uninstall` for what Helm does not know about (the controller's Secrets, the runs' finalizers); and a
second `helm install` over the kept CRD.

The session's API server was started with the RepackRun CRD (the harness installs config/crd), as
a cluster that `kubectl repack install` set up would have it: the release adopts it the way the
README says (Helm's ownership label and annotations). Everything goes into a namespace of its own,
and the CRD is given back without Helm's metadata, so later modules find the session as it was.
`helm` is the one hack/build-helm.sh builds (REPACK_HELM)."""
from __future__ import annotations

import os
import subprocess
import time

import pytest
import yaml
from kubernetes import client

from kubectl_repack.api.installed import POLICY_SOURCE_ANNOTATION, SOURCE_ENDPOINTS
from kubectl_repack.deploy import manifests
from kubectl_repack.schema import CRD_NAME
from tests.e2e.helpers import absent, built_image_parts, doctor_all_ok, repack, wait_for
from tests.e2e.test_network_policy import advertised, quiet_plane  # noqa: F401  (fixtures)
from tests.harness.realnode import NODE_LABEL
from tests.e2e.test_helm_template import CHART_DIR, helm_binary

pytestmark = pytest.mark.e2e

NAMESPACE = "repack-helm"
RELEASE = "repack"
FIGURES: dict = {}


@pytest.fixture
def gang(control_plane, make_namespace):
    """A PodGroup for vc-scheduler to act on (doctor's volcano-scheduler check looks for its traces)."""
    ns = make_namespace("helm-gang")
    client.CustomObjectsApi(control_plane.api_client).create_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups",
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "helm-e2e"},
         "spec": {"minMember": 1, "queue": "default"}})
    return ns


@pytest.fixture(scope="module")
def helm_cli(control_plane, tmp_path_factory):
    """`helm ARGS` against the session's cluster, with Helm's own dirs in a temporary directory."""
    home = tmp_path_factory.mktemp("helm-home")
    env = dict(os.environ, HELM_CACHE_HOME=str(home / "cache"), HELM_CONFIG_HOME=str(home / "config"),
               HELM_DATA_HOME=str(home / "data"), KUBECONFIG=control_plane.kubeconfig)
    binary = helm_binary()

    def run(*args, timeout=400):
        t0 = time.monotonic()
        done = subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout, env=env)
        FIGURES.setdefault("helm", []).append((args[0], round(time.monotonic() - t0, 1)))
        assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}{done.stderr}"
        return done.stdout

    return run


@pytest.fixture(scope="module")
def adopted_crd(control_plane):
    """The CRDs the harness made (RepackRun, RepackPolicy), handed to the release as the README
    says; given back afterwards."""
    from kubectl_repack.api.policy import CRD_NAME as POLICY_CRD_NAME

    crds = [f"customresourcedefinition/{name}" for name in (CRD_NAME, POLICY_CRD_NAME)]
    control_plane.kubectl("label", *crds, "app.kubernetes.io/managed-by=Helm", "--overwrite")
    control_plane.kubectl("annotate", *crds, f"meta.helm.sh/release-name={RELEASE}",
                          f"meta.helm.sh/release-namespace={NAMESPACE}", "--overwrite")
    yield
    control_plane.kubectl("label", *crds, "app.kubernetes.io/managed-by-", check=False)
    control_plane.kubectl("annotate", *crds, "meta.helm.sh/release-name-", "meta.helm.sh/release-namespace-",
                          "helm.sh/resource-policy-", check=False)


def install_args() -> list:
    """The built image by digest, on the real node (Helm's --set needs the label's dots escaped)."""
    repository, digest = built_image_parts()
    label = NODE_LABEL.replace(".", "\\.")
    return ["--namespace", NAMESPACE, "--create-namespace", "--set", f"image.repository={repository}",
            "--set", f"image.digest={digest}", "--set-string", f"nodeSelector.{label}=true",
            "--wait", "--timeout", "240s"]


def test_helm_install_doctor_upgrade_uninstall(real_node, control_plane, helm_cli, adopted_crd, gang, tmp_path):
    api = control_plane.api_client
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    reg, ext = client.AdmissionregistrationV1Api(api), client.ApiextensionsV1Api(api)
    custom = client.CustomObjectsApi(api)
    kc = control_plane.kubeconfig
    run_name = "helm-e2e-dryrun"
    t_all = time.monotonic()
    try:
        # ---- helm install, then doctor: every check OK (the NetworkPolicy from the advertised address)
        out = helm_cli("install", RELEASE, str(CHART_DIR), *install_args())
        assert "STATUS: deployed" in out, out
        print(out)
        assert "NetworkPolicy repack-webhook: the webhook port admits only the API server (" in out   # the notes
        report = doctor_all_ok(kc, NAMESPACE)
        print(report)
        policy = client.NetworkingV1Api(api).read_namespaced_network_policy(manifests.NAME, NAMESPACE)
        assert policy.metadata.annotations[POLICY_SOURCE_ANNOTATION] == SOURCE_ENDPOINTS
        assert policy.spec.ingress[0]._from[0].ip_block.cidr.endswith("/32")
        _repository, digest = built_image_parts()
        for name in (manifests.NAME, manifests.COORDINATOR_NAME, manifests.CONTROLLER_NAME):
            (pod,) = [p for p in core.list_namespaced_pod(NAMESPACE, label_selector=f"app.kubernetes.io/name={name}")
                      .items if p.metadata.deletion_timestamp is None]
            assert pod.spec.node_name == real_node.name, name
            assert all(cs.ready and cs.image_id.endswith(digest) for cs in pod.status.container_statuses), name
        crd = ext.read_custom_resource_definition(CRD_NAME)
        assert crd.metadata.annotations["helm.sh/resource-policy"] == "keep"
        ca_bundle = reg.read_mutating_webhook_configuration(manifests.CONFIG_NAME).webhooks[0].client_config.ca_bundle
        assert ca_bundle, "the controller did not write the caBundle"

        # a run made through the installed webhook (it stamps the creator), to see it outlive the release
        run = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": run_name},
               "spec": {"mode": "DryRun", "goals": [{"resource": "huawei.com/ascend-1980"}]}}
        path = tmp_path / "run.yaml"
        path.write_text(yaml.safe_dump(run))
        applied = control_plane.kubectl("apply", "-f", str(path), check=False)
        assert applied.returncode == 0, applied.stdout + applied.stderr

        def finished():
            got = custom.get_cluster_custom_object("repack.volcano.sh", "v1alpha1", "repackruns", run_name)
            return got if (got.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None

        planned = wait_for("the installed controller finishing the DryRun", finished, timeout=90)

        # ---- helm upgrade: a changed value reaches the cluster; the controller's caBundle survives
        out = helm_cli("upgrade", RELEASE, str(CHART_DIR), "--reset-then-reuse-values",
                       "--set", "resources.controller.limits.memory=768Mi", "--namespace", NAMESPACE,
                       "--wait", "--timeout", "240s")
        assert "REVISION: 2" in out, out
        dep = apps.read_namespaced_deployment(manifests.CONTROLLER_NAME, NAMESPACE)
        assert dep.spec.template.spec.containers[0].resources.limits["memory"] == "768Mi"
        assert dep.spec.template.spec.node_selector == {NODE_LABEL: "true"}   # the install's value kept
        assert reg.read_mutating_webhook_configuration(manifests.CONFIG_NAME).webhooks[0].client_config.ca_bundle \
            == ca_bundle
        doctor_all_ok(kc, NAMESPACE, timeout=120)   # the new controller pod takes its Lease over

        # ---- helm uninstall: the release's objects go; the CRD and the run stay (resource-policy keep)
        helm_cli("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "120s")
        for what, read in [
            ("MutatingWebhookConfiguration", lambda: reg.read_mutating_webhook_configuration(manifests.CONFIG_NAME)),
            ("ValidatingAdmissionPolicy", lambda: reg.read_validating_admission_policy("repack-run-creator")),
            ("ClusterRole", lambda: client.RbacAuthorizationV1Api(api).read_cluster_role(manifests.CONTROLLER_NAME)),
            ("Deployment", lambda: apps.read_namespaced_deployment(manifests.NAME, NAMESPACE)),
            ("Deployment", lambda: apps.read_namespaced_deployment(manifests.CONTROLLER_NAME, NAMESPACE)),
            ("Lease", lambda: client.CoordinationV1Api(api).read_namespaced_lease("repack-coordinator", NAMESPACE)),
        ]:
            assert absent(read), f"{what} still there after helm uninstall"
        ext.read_custom_resource_definition(CRD_NAME)
        kept = custom.get_cluster_custom_object("repack.volcano.sh", "v1alpha1", "repackruns", run_name)
        assert (kept["metadata"]["uid"], kept["status"]) == (planned["metadata"]["uid"], planned["status"])
        # What the controller made is not the release's: Helm leaves it, `kubectl repack uninstall` removes it.
        core.read_namespaced_secret(manifests.SECRET_NAME, NAMESPACE)
        out = repack(kc, "uninstall", "--repack-namespace", NAMESPACE)
        assert out.returncode == 0, out.stdout + out.stderr
        print(out.stdout)
        assert absent(lambda: core.read_namespaced_secret(manifests.SECRET_NAME, NAMESPACE))
        assert f"namespace/{NAMESPACE} kept (not created by install)" in out.stdout   # helm --create-namespace's

        # ---- a second helm install over the kept CRD (still the release's by its metadata) works
        helm_cli("install", RELEASE, str(CHART_DIR), *install_args())
        doctor_all_ok(kc, NAMESPACE)
    finally:
        FIGURES["seconds"] = round(time.monotonic() - t_all, 1)
        print(f"\nhelm e2e: {FIGURES}")
        subprocess.run([helm_binary(), "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait"],
                       env=dict(os.environ, KUBECONFIG=kc), capture_output=True, timeout=180)
        repack(kc, "uninstall", "--repack-namespace", NAMESPACE)
        control_plane.kubectl("delete", "repackrun", run_name, "--ignore-not-found", "--wait=false", check=False)
        control_plane.kubectl("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=false", check=False)
    wait_for("the namespace gone", lambda: absent(lambda: core.read_namespace(NAMESPACE)) or None, timeout=120)


def _network_policies(objs) -> list:
    return [o for o in objs if o and o["kind"] == "NetworkPolicy"]


def test_helm_reads_the_api_servers_addresses_as_install_does(quiet_plane, advertised, tmp_path):
    """`helm template --dry-run=server` (Helm's `lookup` reads the cluster, as at `helm install`)
    renders the NetworkPolicy that `install --dry-run=server` renders, from the kubernetes Service's
    EndpointSlices (IPv4 in numeric order), else from its Endpoints; with neither, both render none.
    (A loopback address the API server refuses to store: a unit case of install's reader, not
    reachable here.)"""
    kc = quiet_plane.kubeconfig
    namespace = "repack-helm-lookup"      # never created: both dry runs render into it
    env = dict(os.environ, KUBECONFIG=kc, HELM_CACHE_HOME=str(tmp_path / "cache"),
               HELM_CONFIG_HOME=str(tmp_path / "config"), HELM_DATA_HOME=str(tmp_path / "data"))

    def rendered():
        done = subprocess.run([helm_binary(), "template", RELEASE, str(CHART_DIR), "--namespace", namespace,
                               "--dry-run=server"], capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        by_helm = _network_policies(yaml.safe_load_all(done.stdout))
        out = repack(kc, "install", "--repack-namespace", namespace, "--dry-run=server", "-o", "yaml")
        assert out.returncode == 0, out.stdout + out.stderr
        by_install = _network_policies(yaml.safe_load_all(out.stdout))
        assert by_helm == by_install
        return by_helm

    advertised.slice("192.0.2.10", "192.0.2.9")
    (policy,) = rendered()
    assert [p["ipBlock"]["cidr"] for p in policy["spec"]["ingress"][0]["from"]] == ["192.0.2.9/32", "192.0.2.10/32"]
    assert policy["metadata"]["annotations"][POLICY_SOURCE_ANNOTATION] == SOURCE_ENDPOINTS

    advertised.clear()
    advertised.endpoints("192.0.2.20")
    (policy,) = rendered()
    assert [p["ipBlock"]["cidr"] for p in policy["spec"]["ingress"][0]["from"]] == ["192.0.2.20/32"]

    advertised.clear()
    assert rendered() == []
