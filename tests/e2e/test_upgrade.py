"""Upgrading an install made by an older build: `kubectl repack install` over it is an
upgrade, on the real kubelet node.

The previous release is OLD_COMMIT's tree, taken from git history (`git archive`), installed in
the two ways it offered: its own CLI renders its install set (`install --dry-run -o yaml`, what a
GitOps user committed) and the set is applied with `kubectl apply`, as that user did; or its own
`kubectl repack install` applies it. Under that install a DryRun is saved by the old
CLI (`plan --save`, finished), and a second DryRun is created with `kubectl apply` while the old
controller is scaled to 0, so only the controller of the upgraded install can plan it. Then today's
`kubectl repack install` runs over it and must: exit 0 and say it upgraded, naming what changed and
what it created; leave nothing of the old release that today's does not have (the coordinator
container in the webhook's pod, the webhook Service's metrics port, kubectl's last-applied copy,
the old CRD schema); keep both runs readable with `kubectl get` and `kubectl repack status`, the
finished one as it was; plan the pending one to the end; and `kubectl repack doctor` must be all OK.

The old image: the old manifests name an image, but building OLD_COMMIT's image (buildah, Debian
packages, minutes of CPU) is not feasible inside this test, so the old Deployments run the image
hack/build-image.sh built from today's tree. What is tested is the upgrade of the API objects (RBAC,
Deployments, Services, admission policies, webhook configuration), of the CRD with runs stored
under it, and that today's controller takes over runs created under the old install; the old pods
are shown running (the webhook's with its two containers) before the upgrade.
"""
from __future__ import annotations

import io
import subprocess
import tarfile
import time

import pytest
import yaml
from kubernetes import client

from kubectl_repack.deploy import manifests
from kubectl_repack.deploy.installer import LAST_APPLIED, read_object
from kubectl_repack.schema import CRD_NAME, load_crd
from tests.e2e.helpers import built_image, doctor_all_ok, repack, wait_for
from tests.harness.controlplane import REPO_ROOT
from tests.harness.realnode import NODE_LABEL

pytestmark = pytest.mark.e2e

# The previous release: the last commit whose install ran the placement coordinator inside the
# webhook's pod, as its second container under the webhook's ServiceAccount, and exposed its
# metrics on the webhook's Service (port 9090). The next commit (ca66689, the SEC-3 work
# findings 4 and 10) split it into its own Deployment, ServiceAccount, RBAC and Service, made the
# Leases at install, narrowed the webhook's ClusterRole to reading RepackRuns, and later commits
# added three admission policies and the CRD's spec.target. So the upgrade changes objects
# (Deployment, Service, ClusterRoles, Roles, CRD), removes fields (a container, a port) and creates
# objects, instead of re-applying what is there.
OLD_COMMIT = "6f23ef99c699bf1cce0bc614f8c127286b8a2bbc"
NAMESPACE = "repack-system"
RESOURCE = "huawei.com/ascend-1980"
PART_OF = "app.kubernetes.io/part-of=kubectl-repack"
FIGURES: dict = {}


def old_tree(directory) -> str:
    """OLD_COMMIT's files, extracted from git history into `directory`."""
    out = subprocess.run(["git", "-C", REPO_ROOT, "archive", "--format=tar", OLD_COMMIT], capture_output=True,
                         timeout=120)
    if out.returncode != 0:
        pytest.fail(f"`git archive {OLD_COMMIT}` failed: {out.stderr.decode(errors='replace')} (this test needs "
                    "the repository's history: a clone, not an export, with that commit)", pytrace=False)
    with tarfile.open(fileobj=io.BytesIO(out.stdout)) as tar:
        tar.extractall(directory, filter="data")
    return str(directory)


def rendered(args, tree=REPO_ROOT, kubeconfig="unused") -> list:
    out = repack(kubeconfig, "install", "--dry-run", "-o", "yaml", *args, tree=tree)
    assert out.returncode == 0, out.stdout + out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def by_name(objs, kind, name):
    (found,) = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def get_run(api, name):
    return client.CustomObjectsApi(api).get_cluster_custom_object("repack.volcano.sh", "v1alpha1", "repackruns", name)


def labelled(api, kind, namespaced):
    """Names of the objects of `kind` (one of the install's kinds) that carry the install's part-of label."""
    from kubectl_repack.kube.client import request
    from kubectl_repack.kube.objects import KINDS_BY_NAME

    path = KINDS_BY_NAME[kind].path(NAMESPACE if namespaced else None)
    items = request(api, "GET", path, query=[("labelSelector", PART_OF)]).get("items") or []
    return sorted(o["metadata"]["name"] for o in items)


def restore_crd(api):
    """Today's CRD, as install applies it (taking over what kubectl applied), so later modules find
    the session's CRD current even when this test stopped before the upgrade."""
    from kubectl_repack.deploy import installer

    crd = load_crd()
    live = installer.read_object(api, crd)
    if live is not None:
        installer.take_over(api, crd, live)
    installer.server_side_apply(api, crd)


# How the previous release was installed: its rendered manifests applied with `kubectl apply` (GitOps;
# kubectl's field managers own the fields, so install must take them over to remove the old ones),
# or its own `kubectl repack install` (server-side apply under install's manager, as today's).
HOW = ("kubectl-apply", "old-install")


@pytest.mark.parametrize("how", HOW)
def test_install_over_the_previous_release_is_an_upgrade(how, real_node, control_plane, make_namespace, tmp_path):
    t_start = time.monotonic()
    api = control_plane.api_client
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    kc = control_plane.kubeconfig
    image = built_image()
    placement = ["--image", image, "--node-selector", f"{NODE_LABEL}=true"]
    runs = {"saved": "upgrade-old-saved", "pending": "upgrade-old-pending"}
    # an earlier module's uninstall may still be deleting the namespace
    wait_for(f"namespace {NAMESPACE} from an earlier module to be gone",
             lambda: not any(n.metadata.name == NAMESPACE for n in core.list_namespace().items), timeout=120)

    # ---- the previous release's manifests, rendered by its own CLI from git history
    tree = old_tree(tmp_path / "old")
    old = rendered(["--namespace", NAMESPACE, *placement], tree=tree)
    old_webhook = by_name(old, "Deployment", manifests.NAME)
    assert [c["name"] for c in old_webhook["spec"]["template"]["spec"]["containers"]] == ["webhook", "coordinator"]
    assert [p["port"] for p in by_name(old, "Service", manifests.NAME)["spec"]["ports"]] == [443, 9090]
    assert not [o for o in old if o["metadata"]["name"] == manifests.COORDINATOR_NAME]
    new = rendered(["--repack-namespace", NAMESPACE, *placement, "--apiserver-cidr", "192.0.2.1/32"])
    try:
        # The session's API server started with today's CRD; a cluster of the old release has the old
        # one, so it is replaced first (runs outlive CRD updates, as they will here).
        old_crd = tmp_path / "old-crd.yaml"
        old_crd.write_text(yaml.safe_dump(by_name(old, "CustomResourceDefinition", CRD_NAME)))
        exists = read_object(api, load_crd()) is not None
        put = control_plane.kubectl("replace" if exists else "create", "-f", str(old_crd), check=False)
        assert put.returncode == 0, put.stdout + put.stderr
        t_old = time.monotonic()
        if how == "kubectl-apply":
            old_file = tmp_path / "old-install.yaml"
            old_file.write_text(yaml.safe_dump_all(old))
            applied = control_plane.kubectl("apply", "-f", str(old_file), check=False)
            assert applied.returncode == 0, applied.stdout + applied.stderr
        else:
            installed = repack(kc, "install", "--namespace", NAMESPACE, *placement, "--timeout", "180s", tree=tree)
            assert installed.returncode == 0, installed.stdout + installed.stderr
            assert "upgraded the install" not in installed.stdout   # the old build says nothing of the kind

        # ---- the old install runs: the webhook's pod with its coordinator container, on the real node
        def old_webhook_ready():
            pods = [p for p in core.list_namespaced_pod(
                NAMESPACE, label_selector=f"app.kubernetes.io/name={manifests.NAME}").items
                if p.metadata.deletion_timestamp is None and p.status.container_statuses]
            return len(pods) == 1 and sorted(c.name for c in pods[0].status.container_statuses if c.ready) == \
                ["coordinator", "webhook"] and pods[0]
        pod = wait_for("the old install's webhook pod (webhook + coordinator) ready", old_webhook_ready, timeout=180)
        assert pod.spec.node_name == real_node.name
        FIGURES["old_install_ready_seconds"] = round(time.monotonic() - t_old, 1)
        # the old controller stops: whatever is created from now on waits for the upgraded install's
        control_plane.kubectl("-n", NAMESPACE, "scale", f"deployment/{manifests.CONTROLLER_NAME}", "--replicas=0")
        wait_for("the old controller's pod gone", lambda: not core.list_namespaced_pod(
            NAMESPACE, label_selector=f"app.kubernetes.io/name={manifests.CONTROLLER_NAME}").items, timeout=90)

        # ---- runs made under the old install: a finished DryRun saved by the old CLI, a pending one
        saved = repack(kc, "plan", "--resource", RESOURCE, "--save", "--name", runs["saved"], tree=tree)
        assert saved.returncode == 0, saved.stdout + saved.stderr
        assert f"repackrun.repack.volcano.sh/{runs['saved']}" in saved.stdout, saved.stdout
        pending = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
                   "metadata": {"name": runs["pending"]},
                   "spec": {"mode": "DryRun", "goals": [{"resource": RESOURCE}]}}
        pending_file = tmp_path / "pending.yaml"
        pending_file.write_text(yaml.safe_dump(pending))
        made = control_plane.kubectl("apply", "-f", str(pending_file), check=False)
        assert made.returncode == 0, made.stdout + made.stderr
        saved_before = get_run(api, runs["saved"])
        assert saved_before["status"]["phase"] == "Succeeded", saved_before["status"]
        time.sleep(2)
        assert not (get_run(api, runs["pending"]).get("status") or {}).get("phase")   # nobody plans it yet

        # A PodGroup for vc-scheduler to act on: doctor's volcano-scheduler check looks for its traces.
        ns = make_namespace("upgrade")
        custom = client.CustomObjectsApi(api)
        custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", {
            "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "gang"},
            "spec": {"minMember": 1, "queue": "default"}})

        # ---- the upgrade: today's install over the old one
        t0 = time.monotonic()
        out = repack(kc, "install", "--repack-namespace", NAMESPACE, *placement, "--timeout", "240s")
        FIGURES["upgrade_install_seconds"] = round(time.monotonic() - t0, 1)
        print(out.stdout + out.stderr)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "Traceback" not in out.stderr
        lines = out.stdout.splitlines()
        (summary,) = [line for line in lines if line.startswith("upgraded the install found in namespace ")]
        assert summary.startswith(f"upgraded the install found in namespace {NAMESPACE}: "), summary
        (changed,) = [line.removeprefix("changed: ").split(", ") for line in lines if line.startswith("changed: ")]
        (created,) = [line.removeprefix("created: ").split(", ") for line in lines if line.startswith("created: ")]
        for ref in (f"deployment.apps/{manifests.NAME}", f"service/{manifests.NAME}",
                    f"clusterrole.rbac.authorization.k8s.io/{manifests.NAME}",
                    f"customresourcedefinition.apiextensions.k8s.io/{CRD_NAME}"):
            assert ref in changed, (ref, changed)
        for ref in (f"deployment.apps/{manifests.COORDINATOR_NAME}", f"service/{manifests.COORDINATOR_NAME}",
                    f"serviceaccount/{manifests.COORDINATOR_NAME}", "lease.coordination.k8s.io/repack-execute",
                    "validatingadmissionpolicy.admissionregistration.k8s.io/repack-nominations"):
            assert ref in created, (ref, created)
        taken = [line for line in lines if line.startswith("taken over from ")]
        if how == "kubectl-apply":
            assert len(taken) == 1 and taken[0].startswith("taken over from kubectl-client-side-apply"), taken
            assert f"deployment.apps/{manifests.NAME}" in taken[0] and f"service/{manifests.NAME}" in taken[0], taken
        else:   # the old install's own manager applied them: server-side apply removes the old fields itself
            assert not [line for line in taken if f"deployment.apps/{manifests.NAME}" in line], taken
        assert f"{summary.split(': ', 1)[1]}" == (f"{len(changed)} object(s) changed, {len(created)} created, "
                                                  f"{len(new) - len(changed) - len(created)} unchanged"), summary
        for name in (manifests.NAME, manifests.COORDINATOR_NAME, manifests.CONTROLLER_NAME):
            assert f"deployment.apps/{name} Ready" in lines, name

        # ---- nothing of the old release that today's does not have
        webhook = apps.read_namespaced_deployment(manifests.NAME, NAMESPACE)
        assert [c.name for c in webhook.spec.template.spec.containers] == ["webhook"]
        assert [p.port for p in core.read_namespaced_service(manifests.NAME, NAMESPACE).spec.ports] == [443]
        assert webhook.spec.replicas == 1
        for kind, namespaced in (("ServiceAccount", True), ("Role", True), ("RoleBinding", True),
                                 ("Deployment", True), ("Service", True), ("Lease", True), ("NetworkPolicy", True),
                                 ("ClusterRole", False), ("ClusterRoleBinding", False),
                                 ("MutatingWebhookConfiguration", False), ("ValidatingAdmissionPolicy", False),
                                 ("ValidatingAdmissionPolicyBinding", False)):
            want = sorted(o["metadata"]["name"] for o in new if o["kind"] == kind)
            assert labelled(api, kind, namespaced) == want, kind
            for name in want:   # kubectl's copy of the old object went with the fields it held
                live = read_object(api, by_name(new, kind, name))
                assert LAST_APPLIED not in (live["metadata"].get("annotations") or {}), (kind, name)
        secrets = sorted(s.metadata.name for s in core.list_namespaced_secret(NAMESPACE).items
                         if s.type != "kubernetes.io/service-account-token")
        assert secrets == sorted([manifests.SECRET_NAME, "repack-controller-seal-key", "repack-placement-key"]), secrets
        crd = read_object(api, load_crd())
        assert crd["spec"]["versions"] == load_crd()["spec"]["versions"]    # the old schema is gone
        assert crd["status"]["storedVersions"] == ["v1alpha1"]
        assert LAST_APPLIED not in (crd["metadata"].get("annotations") or {})
        def webhook_pods():
            return core.list_namespaced_pod(NAMESPACE, label_selector=f"app.kubernetes.io/name={manifests.NAME}").items
        wait_for("the old webhook pod gone, the new one with one container", lambda: (
            pods := webhook_pods()) and all(len(p.spec.containers) == 1 for p in pods), timeout=90)

        # ---- the runs made under the old install: readable, and the pending one planned by today's controller
        planned = wait_for("the pending run planned by the upgraded controller", lambda: (
            get_run(api, runs["pending"]).get("status") or {}).get("phase") in ("Succeeded", "Failed")
            and get_run(api, runs["pending"]), timeout=120)
        assert planned["status"]["phase"] == "Succeeded", planned["status"]
        assert "fragBeforePercent" in planned["status"]["plan"]["summary"], planned["status"]
        saved_after = get_run(api, runs["saved"])
        assert saved_after["status"] == saved_before["status"]
        assert saved_after["spec"] == saved_before["spec"]
        listed = control_plane.kubectl("get", "repackruns", "-o", "name").stdout.split()
        assert {f"repackrun.repack.volcano.sh/{n}" for n in runs.values()} <= set(listed), listed
        table = control_plane.kubectl("get", "repackruns").stdout
        for name in runs.values():
            (row,) = [line for line in table.splitlines() if line.startswith(name + " ")]
            assert "Succeeded" in row.split(), row
            status = repack(kc, "status", name)
            assert status.returncode == 0, status.stdout + status.stderr
            assert any(line.split() == ["Phase:", "Succeeded"] for line in status.stdout.splitlines()), status.stdout

        # ---- doctor: every check OK
        report = doctor_all_ok(kc, NAMESPACE, timeout=90, interval=3)
        FIGURES["wall_seconds"] = round(time.monotonic() - t_start, 1)
        print(f"\n{report}\n{how}: old install ready in {FIGURES['old_install_ready_seconds']}s; upgrade install "
              f"{FIGURES['upgrade_install_seconds']}s; test {FIGURES['wall_seconds']}s")
    finally:
        for name in runs.values():
            control_plane.kubectl("delete", "repackrun", name, "--ignore-not-found", "--wait=false", check=False)
        repack(kc, "uninstall", "--repack-namespace", NAMESPACE)
        restore_crd(api)
        # the next module may install into the same namespace: not while it is still terminating
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and any(n.metadata.name == NAMESPACE for n in core.list_namespace().items):
            time.sleep(1)
