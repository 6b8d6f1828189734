"""The placement webhook and coordinator on the real control plane: the real kube-apiserver calls
the webhook over TLS (clientConfig.url on loopback, caBundle = the CA `kubectl repack install`
generated), the coordinator (a separate process) nominates through pods/status and ungates, and
vc-scheduler binds. Also: fail open when the webhook or the coordinator is gone.

Setup per module: `kubectl repack install --webhook-url https://127.0.0.1:<port>/mutate
--cert-dir D`, then `python -m webhook --server werkzeug` and `python -m webhook.coordinator`
as subprocesses with short leases (4 s leader Lease, 8 s placement lease) to keep this lean.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.harness import NPU_RESOURCE, npu_node
from tests.harness.controlplane import REPO_ROOT
from kubectl_repack.api.gates import GATED_AT_ANNOTATION, PLACEMENT_GATE, RELOCATION_RUN_ANNOTATION
from kubectl_repack.api.lease import lease_is_fresh
from tests.e2e.helpers import wait_for

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "repack.volcano.sh", "v1alpha1", "repackruns"
NAMESPACE = "repack-system"
LEASE_NAME = "repack-coordinator"
LEADER_LEASE_S = 4
PLACEMENT_LEASE_S = 8


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A child process with its log file; restartable."""

    def __init__(self, name, argv, log_dir):
        self.name, self.argv = name, argv
        self.log_path = os.path.join(log_dir, f"{name}.log")
        self.proc = None

    def start(self):
        env = dict(os.environ, PYTHONPATH=REPO_ROOT, PYTHONUNBUFFERED="1")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        return self

    def signal(self, sig):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def tail(self, n=40):
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


def repack_cli(kubeconfig, *args):
    return subprocess.run([sys.executable, "-m", "kubectl_repack.cli", "--kubeconfig", kubeconfig, *args],
                          cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=REPO_ROOT), capture_output=True,
                          text=True, timeout=120)


class Stack:
    def __init__(self, cluster, tmp):
        self.cluster = cluster
        self.created_runs: list = []   # deleted with the stack: no test leaves a run behind
        self.api = cluster.api_client
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.coord_api = client.CoordinationV1Api(self.api)
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}/mutate"
        self.metrics_port = free_port()
        self.cert_dir = os.path.join(tmp, "tls")
        self.webhook = Proc("webhook", [sys.executable, "-m", "webhook", "--server", "werkzeug", "--host", "127.0.0.1",
                                        "--port", str(self.port), "--cert-dir", self.cert_dir,
                                        "--kubeconfig", cluster.kubeconfig, "--lease-namespace", NAMESPACE], tmp)
        self.coordinator = Proc("coordinator", [
            sys.executable, "-m", "webhook.coordinator", "--kubeconfig", cluster.kubeconfig, "--namespace", NAMESPACE,
            "--lease-name", LEASE_NAME, "--lease-duration", f"{LEADER_LEASE_S}s",
            "--placement-lease", f"{PLACEMENT_LEASE_S}s", "--interval", "0.5s",
            "--metrics-port", str(self.metrics_port)], tmp)

    def webhook_ready(self):
        ctx = ssl.create_default_context(cafile=os.path.join(self.cert_dir, "ca.crt"))
        try:
            with urllib.request.urlopen(f"https://127.0.0.1:{self.port}/readyz", context=ctx, timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def coordinator_metric(self, name):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(f"repack_webhook_{name} "):
                    return int(float(line.split()[1]))
        return None

    def lease(self):
        try:
            return self.api.sanitize_for_serialization(self.coord_api.read_namespaced_lease(LEASE_NAME, NAMESPACE))
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def lease_fresh(self):
        return lease_is_fresh(self.lease(), datetime.now(timezone.utc))

    def start_coordinator(self):
        self.coordinator.start()
        wait_for("the coordinator holding a fresh Lease", self.lease_fresh, timeout=30)
        time.sleep(0.5)  # the webhook's Lease watch sees it

    def diagnostics(self):
        return "\n".join(f"--- {p.name} ({p.log_path})\n{p.tail()}" for p in (self.webhook, self.coordinator))

    # ----- RepackRuns
    def create_run(self, name, relocations, moves):
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackRun", "metadata": {"name": name},
                "spec": {"mode": "Execute", "goals": [{"resource": NPU_RESOURCE}]}}
        self.custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, body)
        self.created_runs.append(name)
        self.update_run(name, lambda st: st.update({
            "phase": "Running", "plan": {"moves": moves}, "relocations": relocations}))
        self.seal_run(name)

    def seal_run(self, name):
        """Seal and digest the run's records as the controller does, in one patch, as its account
        (SEC-2: admission lets no one else write the digest): the webhook and the coordinator act only
        on records that match the digest."""
        from kubectl_repack.api.control import RECORDS_DIGEST_ANNOTATION, RECORDS_SEAL_ANNOTATION, records_digest, seal
        from kubectl_repack.kube.incluster import ensure_key

        run = self.run(name)
        uid, records = run["metadata"]["uid"], run["status"]["relocations"]
        as_controller = client.CustomObjectsApi(client.ApiClient(
            self.api.configuration, header_name="Impersonate-User",
            header_value=f"system:serviceaccount:{NAMESPACE}:repack-controller"))
        as_controller.patch_cluster_custom_object(GROUP, VERSION, PLURAL, name, {"metadata": {"annotations": {
            RECORDS_SEAL_ANNOTATION: seal(ensure_key(self.api, NAMESPACE), uid, records),
            RECORDS_DIGEST_ANNOTATION: records_digest(uid, records)}}})

    def update_run(self, name, mutate):
        """What `apply` does: read-modify-write of the status on resourceVersion, retried on 409."""
        for _ in range(20):
            run = self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
            status = run.setdefault("status", {})
            mutate(status)
            try:
                return self.custom.replace_cluster_custom_object_status(GROUP, VERSION, PLURAL, name, run)
            except ApiException as e:
                if e.status != 409:
                    raise
                time.sleep(0.1)
        pytest.fail(f"could not write the status of {name}")

    def run(self, name):
        return self.custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)

    def evict(self, ns, pod, run_name, index):
        self.core.create_namespaced_pod_eviction(pod, ns, {"apiVersion": "policy/v1", "kind": "Eviction",
                                                           "metadata": {"name": pod, "namespace": ns}})

        def accepted(st):
            st["relocations"][index]["eviction"] = {"phase": "Accepted"}
        self.update_run(run_name, accepted)


@pytest.fixture(scope="module")
def stack(control_plane, tmp_path_factory, request):
    tmp = str(tmp_path_factory.mktemp("webhook-e2e"))
    s = Stack(control_plane, tmp)
    out = repack_cli(control_plane.kubeconfig, "install", "--namespace", NAMESPACE, "--webhook-url", s.url,
                     "--cert-dir", s.cert_dir)
    assert out.returncode == 0, out.stderr + out.stdout
    assert "mutatingwebhookconfiguration.admissionregistration.k8s.io/repack-placement serverside-applied" in out.stdout
    from kubectl_repack.api.gates import PLACEMENT_KEY_SECRET_NAME
    from kubectl_repack.kube.incluster import create_key, ensure_key

    ensure_key(s.api, NAMESPACE)   # the records-seal and placement keys, as the controller makes them on its first start
    create_key(s.api, NAMESPACE, PLACEMENT_KEY_SECRET_NAME)
    s.webhook.start()
    wait_for("the webhook answering /readyz over TLS", s.webhook_ready, timeout=30)
    s.start_coordinator()
    failed_before = request.session.testsfailed
    try:
        yield s
    finally:
        if request.session.testsfailed > failed_before:
            print(s.diagnostics())
        s.coordinator.stop()
        s.webhook.stop()
        from tests.e2e.execute_helpers import delete_runs

        delete_runs(s.api, s.created_runs)
        out = repack_cli(control_plane.kubeconfig, "uninstall", "--namespace", NAMESPACE)
        print(out.stdout, out.stderr)


# ----- workloads ---------------------------------------------------------------------------------------
def deployment(name, pool, replicas, cards):
    labels = {"app": name}
    return {"metadata": {"name": name, "labels": labels}, "spec": {
        "replicas": replicas, "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels}, "spec": {
            "schedulerName": "volcano", "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"accelerator-pool": pool},
            "containers": [{"name": "serve", "image": "example.invalid/serve:1", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", NPU_RESOURCE: str(cards)},
                "limits": {"cpu": "1", "memory": "1Gi", NPU_RESOURCE: str(cards)}}}]}}}}


def live_pods(core, ns, app):
    return [p for p in core.list_namespaced_pod(ns, label_selector=f"app={app}").items
            if p.metadata.deletion_timestamp is None]


def running_on(core, ns, app, n):
    pods = live_pods(core, ns, app)
    return pods if len(pods) == n and all(p.status.phase == "Running" and p.spec.node_name for p in pods) else None


def relocation_for(ns, pod, planned):
    group = pod.metadata.annotations["scheduling.k8s.io/group-name"]
    rs = next(o.name for o in pod.metadata.owner_references if o.controller)
    record = {"namespace": ns, "victimPodName": pod.metadata.name, "victimPodUID": pod.metadata.uid,
              "podGroupName": group, "plannedNodeName": planned, "eviction": {"phase": "InProgress"},
              "placement": {"phase": "WaitingForReplacement"}}
    move = {"namespace": ns, "podGroupName": group, "owner": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs},
            "cards": 4, "pods": [{"name": pod.metadata.name, "fromNode": pod.spec.node_name, "toNode": planned,
                                  "cards": 4}]}
    return record, move


def replacement(core, ns, run_name, victim):
    for p in core.list_namespaced_pod(ns).items:
        ann = p.metadata.annotations or {}
        if ann.get(RELOCATION_RUN_ANNOTATION, "").startswith(run_name + "/") and \
                ann.get("repack.volcano.sh/relocation-victim") == victim:
            return p
    return None


def placement_table(run):
    rows = []
    for rel in run["status"]["relocations"]:
        pl = rel["placement"]
        rows.append(f"{rel['namespace']}/{rel['victimPodName']}\teviction={rel['eviction']['phase']}"
                    f"\tplacement={pl['phase']}\tplanned={rel['plannedNodeName']}"
                    f"\tselected={pl.get('selectedNodeName', '')}\tactual={pl.get('actualNodeName', '')}"
                    f"\treplacement={pl.get('replacementPodName', '')}")
    return "\n".join(rows)


def gates(pod):
    return [g.name for g in (pod.spec.scheduling_gates or [])]


# ----- install on the real API server (runs first: the stack fixture reuses the cluster-wide names) -----------
def test_install_is_valid_idempotent_and_least_privilege(control_plane):
    """The full install (Deployment + Service) passes the API server's validation, a second install
    converges without changing the CA, the real authorizer denies the webhook's account eviction and
    pod deletion, and uninstall removes everything but the CRD."""
    ns = f"repack-inst-{uuid.uuid4().hex[:4]}"
    api = control_plane.api_client
    reg = client.AdmissionregistrationV1Api(api)
    kubectl = control_plane.cp.binaries["kubectl"]

    def ca_bundle():
        return reg.read_mutating_webhook_configuration("repack-placement").webhooks[0].client_config.ca_bundle

    out = repack_cli(control_plane.kubeconfig, "install", "--namespace", ns, "--no-wait")
    assert out.returncode == 0, out.stderr
    first = ca_bundle()
    out = repack_cli(control_plane.kubeconfig, "install", "--namespace", ns, "--no-wait")
    assert out.returncode == 0, out.stderr
    assert ca_bundle() == first
    hook = reg.read_mutating_webhook_configuration("repack-placement").webhooks[0]
    assert hook.client_config.service.namespace == ns and hook.failure_policy == "Ignore"
    client.AppsV1Api(api).read_namespaced_deployment("repack-webhook", ns)
    client.CoreV1Api(api).read_namespaced_service("repack-webhook", ns)

    def can(*args, sa="repack-webhook"):
        r = subprocess.run([kubectl, f"--kubeconfig={control_plane.kubeconfig}", "auth", "can-i", *args,
                            f"--as=system:serviceaccount:{ns}:{sa}"], capture_output=True, text=True,
                           timeout=60)
        return r.stdout.strip()

    # The RepackRun controller's account is the only one that may evict; it may not delete pods, and its
    # pod patches (lifting expired gates) are confined by the pod-write policy (below).
    assert can("create", "pods", "--subresource=eviction", "-n", "default", sa="repack-controller") == "yes"
    assert can("delete", "pods", "-n", "default", sa="repack-controller") == "no"
    assert can("create", "subjectaccessreviews.authorization.k8s.io", sa="repack-controller") == "yes"
    assert can("get", "secrets/repack-controller-seal-key", "-n", ns, sa="repack-controller") == "yes"
    assert can("create", "leases.coordination.k8s.io", "-n", ns, sa="repack-controller") == "no"
    assert can("update", "leases.coordination.k8s.io/repack-execute", "-n", ns, sa="repack-controller") == "yes"

    # The network-facing webhook holds no write, no Secret, no Lease but the coordinator's to watch.
    for verb_args in (("create", "pods", "--subresource=eviction", "-n", "default"), ("delete", "pods", "-n", "default"),
                      ("patch", "pods", "-n", "default"), ("patch", "pods", "--subresource=status", "-n", "default"),
                      ("update", "repackruns.repack.volcano.sh", "--subresource=status"),
                      ("get", "secrets/repack-webhook-tls", "-n", ns), ("list", "secrets", "-n", ns),
                      ("update", "leases.coordination.k8s.io/repack-coordinator", "-n", ns)):
        assert can(*verb_args) == "no", verb_args
    assert can("watch", "leases.coordination.k8s.io/repack-coordinator", "-n", ns) == "yes"
    # It MACs replacement marks (SEC-5) with the placement key, read, by name; it verifies records by
    # their digest (SEC-2) and may not read the seal key (so a stolen token of its forges no seal).
    assert can("get", "secrets/repack-placement-key", "-n", ns) == "yes"
    assert can("get", "secrets/repack-placement-key", "-n", ns, sa="repack-coordinator") == "yes"
    assert can("get", "secrets/repack-placement-key", "-n", ns, sa="repack-controller") == "no"
    assert can("update", "secrets/repack-placement-key", "-n", ns, sa="repack-coordinator") == "no"
    assert can("get", "secrets/repack-controller-seal-key", "-n", ns) == "no"
    assert can("get", "secrets/repack-controller-seal-key", "-n", ns, sa="repack-coordinator") == "no"
    assert can("watch", "repackruns.repack.volcano.sh") == "yes"

    # The coordinator, in its own Deployment under its own account: its pod writes and its own Lease.
    client.AppsV1Api(api).read_namespaced_deployment("repack-coordinator", ns)
    assert can("patch", "pods", "--subresource=status", "-n", "default", sa="repack-coordinator") == "yes"
    assert can("patch", "pods", "-n", "default", sa="repack-coordinator") == "yes"
    assert can("update", "repackruns.repack.volcano.sh", "--subresource=status", sa="repack-coordinator") == "yes"
    assert can("update", "leases.coordination.k8s.io/repack-coordinator", "-n", ns, sa="repack-coordinator") == "yes"
    assert can("update", "leases.coordination.k8s.io/repack-execute", "-n", ns, sa="repack-coordinator") == "no"
    assert can("create", "leases.coordination.k8s.io", "-n", ns, sa="repack-coordinator") == "no"
    assert can("create", "pods", "--subresource=eviction", "-n", "default", sa="repack-coordinator") == "no"
    for name in ("repack-coordinator", "repack-controller", "repack-execute"):   # made by install
        client.CoordinationV1Api(api).read_namespaced_lease(name, ns)

    # What the pod-write policy lets those two accounts change on a pod: our gate and our annotations.
    core = client.CoreV1Api(api)
    pod_ns = f"{ns}-pods"
    core.create_namespace({"metadata": {"name": pod_ns}})
    try:
        core.create_namespaced_pod(pod_ns, {"metadata": {"name": "gated", "labels": {"app": "x"},
                                                         "annotations": {"team": "a"}},
                                            "spec": {"schedulingGates": [{"name": "repack.volcano.sh/placement"},
                                                                         {"name": "other.io/gate"}],
                                                     "containers": [{"name": "c", "image": "registry.invalid/a:1"}]}})
        for sa in ("repack-coordinator", "repack-controller"):
            for patch in ([{"op": "replace", "path": "/spec/containers/0/image", "value": "registry.invalid/evil:1"}],
                          [{"op": "replace", "path": "/metadata/labels/app", "value": "y"}],
                          [{"op": "replace", "path": "/metadata/annotations/team", "value": "b"}],
                          [{"op": "add", "path": "/spec/tolerations/-", "value": {"operator": "Exists"}}]):
                out = subprocess.run([kubectl, f"--kubeconfig={control_plane.kubeconfig}", "-n", pod_ns, "patch", "pod",
                                      "gated", "--type=json", "-p", json.dumps(patch),
                                      f"--as=system:serviceaccount:{ns}:{sa}"], capture_output=True, text=True, timeout=60)
                assert out.returncode != 0 and "repack-pod-writes" in out.stderr, (sa, patch, out.stderr)
        ungate = json.dumps([{"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "other.io/gate"}]},
                             {"op": "add", "path": "/metadata/annotations/repack.volcano.sh~1note", "value": "x"}])
        out = subprocess.run([kubectl, f"--kubeconfig={control_plane.kubeconfig}", "-n", pod_ns, "patch", "pod", "gated",
                              "--type=json", "-p", ungate, f"--as=system:serviceaccount:{ns}:repack-controller"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert gates(core.read_namespaced_pod("gated", pod_ns)) == ["other.io/gate"]
    finally:
        core.delete_namespace(pod_ns)

    out = repack_cli(control_plane.kubeconfig, "uninstall", "--namespace", ns)
    assert out.returncode == 0, out.stderr
    with pytest.raises(ApiException) as exc:
        reg.read_mutating_webhook_configuration("repack-placement")
    assert exc.value.status == 404
    client.ApiextensionsV1Api(api).read_custom_resource_definition("repackruns.repack.volcano.sh")  # kept


# ----- (a) gate, nominate, place -------------------------------------------------------------------------
def test_replacement_is_gated_nominated_and_placed_on_the_planned_node(stack, fake_nodes, make_namespace):
    core = stack.core
    ns = make_namespace("wh-a")
    pool = ns
    (src,) = fake_nodes(npu_node(f"{ns}-src", cards=8, pool=pool))
    apps = client.AppsV1Api(stack.api)
    apps.create_namespaced_deployment(ns, deployment("serve", pool, replicas=1, cards=4))
    (victim,) = wait_for("the victim Running on the source node", lambda: running_on(core, ns, "serve", 1), 90)
    assert victim.spec.node_name == src
    # Two receivers, one half full; the source is cordoned so the replacement must move. A probe
    # pod of the same shape shows where vc-scheduler puts such a pod on its own; the planned node
    # is the OTHER receiver, so landing there is the hint's doing, not the scheduler's preference.
    receivers = fake_nodes(npu_node(f"{ns}-r1", cards=8, pool=pool), npu_node(f"{ns}-r2", cards=8, pool=pool))
    core.create_namespaced_pod(ns, {"metadata": {"name": "filler"}, "spec": {
        "nodeName": receivers[1], "containers": [{"name": "c", "image": "example.invalid/x:1", "resources": {
            "requests": {"cpu": "8", "memory": "64Gi", NPU_RESOURCE: "4"},
            "limits": {"cpu": "8", "memory": "64Gi", NPU_RESOURCE: "4"}}}]}})
    wait_for("filler Running", lambda: core.read_namespaced_pod("filler", ns).status.phase == "Running")
    core.patch_node(src, {"spec": {"unschedulable": True}})
    probe = {"metadata": {"name": "probe"}, "spec": deployment("serve", pool, 1, 4)["spec"]["template"]["spec"]}
    core.create_namespaced_pod(ns, probe)
    natural = wait_for("the probe bound", lambda: core.read_namespaced_pod("probe", ns).spec.node_name, 60)
    assert natural in receivers
    core.delete_namespaced_pod("probe", ns, grace_period_seconds=0)

    def probe_gone():
        try:
            core.read_namespaced_pod("probe", ns)
            return False
        except ApiException as e:
            return e.status == 404
    wait_for("the probe gone", probe_gone, 30)
    planned = next(n for n in receivers if n != natural)

    run_name = f"wh-a-{uuid.uuid4().hex[:6]}"
    record, move = relocation_for(ns, victim, planned)
    stack.create_run(run_name, [record], [move])
    time.sleep(1.0)  # the webhook's RepackRun watch sees the open record
    spoof_uid = create_copy_as_user(stack, ns, victim)
    stack.evict(ns, victim.metadata.name, run_name, 0)

    new = wait_for("the replacement pod", lambda: replacement(core, ns, run_name, victim.metadata.name), 30)
    ann = new.metadata.annotations
    assert GATED_AT_ANNOTATION in ann, ann  # the webhook gated it at creation

    def placed():
        rel = stack.run(run_name)["status"]["relocations"][0]
        return rel if rel["placement"]["phase"] == "Placed" else None

    rel = wait_for("placement Placed", placed, 60)
    print("\n" + placement_table(stack.run(run_name)))
    pl = rel["placement"]
    assert rel["plannedNodeName"] == pl["selectedNodeName"] == pl["actualNodeName"] == planned, pl
    print(f"without a hint vc-scheduler chose {natural}; nominated and bound: {pl['actualNodeName']}")
    pod = core.read_namespaced_pod(new.metadata.name, ns)
    assert pl["replacementPodName"] == pod.metadata.name and pl["replacementPodUID"] == pod.metadata.uid
    assert pod.spec.node_name == planned
    assert PLACEMENT_GATE not in gates(pod)
    assert "repack.volcano.sh/placement-gate-owner" not in (pod.metadata.annotations or {})
    assert rel["eviction"] == {"phase": "Accepted"}  # apply's field untouched
    assert spoof_uid not in (pl["replacementPodUID"], pl.get("nominatedPodUID"))


def create_copy_as_user(stack, ns, victim) -> str:
    """Finding 6: while the record waits for its replacement, an ordinary user who may create pods
    in the namespace (no repack rights) creates a copy of the victim: its labels, owner references
    and annotations (the group name; a replacement's repack marks would be refused by the admission
    policy, test_security.py), scheduled nowhere so the ReplicaSet, which sees one pod too many,
    deletes the copy and not the victim. The webhook recognises replacements only when a workload
    controller creates them: the copy comes back ungated and unmarked. Returns its UID."""
    user = f"eve-{uuid.uuid4().hex[:6]}"
    rbac = client.RbacAuthorizationV1Api(stack.api)
    rbac.create_namespaced_role(ns, {"metadata": {"name": user}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get"]}]})
    rbac.create_namespaced_role_binding(ns, {"metadata": {"name": user}, "subjects": [
        {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": user, "apiGroup": "rbac.authorization.k8s.io"}})
    meta = victim.metadata
    owners = [{"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid, "controller": o.controller}
              for o in meta.owner_references]
    spec = deployment("serve", "nowhere", 1, 4)["spec"]["template"]["spec"]
    copy = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "generateName": meta.generate_name, "namespace": ns, "labels": dict(meta.labels),
        "annotations": dict(meta.annotations or {}), "ownerReferences": owners}, "spec": spec}
    out = stack.cluster.kubectl("create", "-f", "-", "-o", "json", f"--as={user}", input=json.dumps(copy),
                                check=False)
    assert out.returncode == 0, out.stderr
    created = json.loads(out.stdout)
    ann = created["metadata"].get("annotations") or {}
    assert not [k for k in ann if k.startswith("repack.volcano.sh/")], ann
    assert not created["spec"].get("schedulingGates"), created["spec"]
    return created["metadata"]["uid"]


# ----- the seed flow: apply with the webhook and the coordinator running ---------------------------------------
SEED_JSONPATH = ('jsonpath={range .status.relocations[*]}{.namespace}{"/"}{.victimPodName}{"\\teviction="}'
                 '{.eviction.phase}{"\\tplacement="}{.placement.phase}{"\\tplanned="}{.plannedNodeName}'
                 '{"\\tselected="}{.placement.selectedNodeName}{"\\tactual="}{.placement.actualNodeName}'
                 '{"\\treplacement="}{.placement.replacementPodName}{"\\n"}{end}')


def test_seed_flow_apply_places_every_replacement_on_its_planned_node(stack, control_plane, fake_nodes,
                                                                       make_namespace, tmp_path, monkeypatch):
    """Seed steps 5-6 with the placement hint: apply evicts, Volcano re-creates the workers under the
    same names, the webhook gates them, the coordinator nominates the planned nodes, vc-scheduler
    binds there; node 01 is freed and the run ends ExecutionCompleted with planned = selected = actual."""
    from tests.e2e.execute_helpers import (build_seed_layout, seed_nodes, cli, delete_runs, execute_run, reason_of,
                                           unique, write_run)

    # The install's namespace, as for a user: apply --local seals the records with the key there and
    # writes their digest (SEC-2: admission lets it, this user may read the key), which the webhook and
    # the coordinator verify them by.
    monkeypatch.setenv("REPACK_NAMESPACE", NAMESPACE)
    ns = make_namespace("repack-demo")
    nodes = seed_nodes()
    layout = build_seed_layout(stack.api, fake_nodes, ns, nodes)
    name = unique("ascend-execute")
    try:
        r = cli(control_plane.kubeconfig, "apply", "--local", "-f", write_run(tmp_path, execute_run(name)), "--cooldown", "0s",
                "-o", "json")
        run = json.loads(r.stdout)
        out = subprocess.run([control_plane.cp.binaries["kubectl"], f"--kubeconfig={control_plane.kubeconfig}",
                              "get", "repackrun", name, "-o", SEED_JSONPATH], capture_output=True, text=True, timeout=60)
        print("\n" + out.stdout)
        assert r.exit_code == 0, r.output
        assert reason_of(run, "Complete") == ("True", "ExecutionCompleted"), run["status"].get("conditions")
        relocs = run["status"]["relocations"]
        assert sorted(rec["victimPodName"] for rec in relocs) == sorted(layout["batch"])
        for rec in relocs:
            pl = rec["placement"]
            assert pl["phase"] == "Placed", rec
            assert rec["plannedNodeName"] == pl["selectedNodeName"] == pl["actualNodeName"], rec
            assert rec["plannedNodeName"] in nodes[1:]
            assert pl["replacementPodName"] == rec["victimPodName"]  # VCJob re-creates the same name
        assert run["status"]["result"]["freedNodes"] == [nodes[0]]
        assert out.stdout.count("placement=Placed") == len(relocs)
    finally:
        delete_runs(stack.api, [name])


# ----- (c) coordinator stopped ------------------------------------------------------------------------------
def test_coordinator_gone_no_pod_stays_gated_past_the_placement_lease(stack, fake_nodes, make_namespace):
    """A gate placed while the coordinator was frozen (Lease still fresh) outlives it; the webhook
    stops gating once the Lease is stale; the restarted coordinator releases the old gate as
    TimedOut and records the ungated replacement without a hint."""
    core = stack.core
    ns = make_namespace("wh-c")
    pool = ns
    (src,) = fake_nodes(npu_node(f"{ns}-src", cards=8, pool=pool))
    client.AppsV1Api(stack.api).create_namespaced_deployment(ns, deployment("serve", pool, replicas=2, cards=4))
    victims = wait_for("two victims Running", lambda: running_on(core, ns, "serve", 2), 90)
    (planned,) = fake_nodes(npu_node(f"{ns}-planned", cards=8, pool=pool))
    run_name = f"wh-c-{uuid.uuid4().hex[:6]}"
    pairs = [relocation_for(ns, v, planned) for v in victims]
    stack.create_run(run_name, [r for r, _ in pairs], [m for _, m in pairs])
    time.sleep(1.0)

    stack.coordinator.signal(signal.SIGSTOP)  # frozen while its Lease is still fresh
    try:
        stack.evict(ns, victims[0].metadata.name, run_name, 0)
        first = wait_for("the first replacement", lambda: replacement(core, ns, run_name, victims[0].metadata.name), 30)
        assert PLACEMENT_GATE in gates(first), "gated while the Lease was fresh"
        stack.coordinator.kill()
    finally:
        stack.coordinator.signal(signal.SIGCONT)
    wait_for("the leader Lease stale", lambda: not stack.lease_fresh(), LEADER_LEASE_S + 5)
    time.sleep(0.5)

    stack.evict(ns, victims[1].metadata.name, run_name, 1)
    second = wait_for("the second replacement", lambda: replacement(core, ns, run_name, victims[1].metadata.name), 30)
    assert PLACEMENT_GATE not in gates(second), "a stale Lease means no gate"
    assert GATED_AT_ANNOTATION not in second.metadata.annotations
    assert core.read_namespaced_pod(first.metadata.name, ns).spec.scheduling_gates, "nobody released it yet"

    gated_at = datetime.strptime(first.metadata.annotations[GATED_AT_ANNOTATION], "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=timezone.utc)
    wait_for("the placement lease passed", lambda: datetime.now(timezone.utc) > gated_at.replace(microsecond=0)
             + timedelta(seconds=PLACEMENT_LEASE_S + 1), PLACEMENT_LEASE_S + 10)
    restarted = time.monotonic()
    stack.start_coordinator()
    wait_for("the old gate released", lambda: not core.read_namespaced_pod(first.metadata.name, ns).spec.scheduling_gates,
             10)
    released_after = time.monotonic() - restarted

    # The restarted coordinator released it because its placement lease had run out (TimedOut;
    # once the pod is bound the record says Placed, with no selected node).
    assert stack.coordinator_metric("lease_timeouts_total") == 1
    assert stack.coordinator_metric("nominations_total") == 0

    def settled():
        rels = stack.run(run_name)["status"]["relocations"]
        return rels if all(r["placement"].get("phase") == "Placed" for r in rels) else None

    rels = wait_for("both replacements placed and recorded", settled, 60)
    print(f"\nold gate released {released_after:.1f}s after the coordinator restarted\n"
          + placement_table(stack.run(run_name)))
    assert rels[0]["placement"]["replacementPodName"] == first.metadata.name
    assert not rels[0]["placement"].get("selectedNodeName")
    assert rels[1]["placement"]["replacementPodName"] == second.metadata.name
    assert not rels[1]["placement"].get("selectedNodeName"), "no hint for a pod that was never gated"


# ----- (b) webhook stopped --------------------------------------------------------------------------------------
def test_webhook_gone_pods_are_created_ungated_quickly(stack, fake_nodes, make_namespace):
    core = stack.core
    ns = make_namespace("wh-b")
    pool = ns
    fake_nodes(npu_node(f"{ns}-src", cards=8, pool=pool))
    client.AppsV1Api(stack.api).create_namespaced_deployment(ns, deployment("serve", pool, replicas=1, cards=4))
    (victim,) = wait_for("the victim Running", lambda: running_on(core, ns, "serve", 1), 90)
    (planned,) = fake_nodes(npu_node(f"{ns}-planned", cards=8, pool=pool))
    run_name = f"wh-b-{uuid.uuid4().hex[:6]}"
    record, move = relocation_for(ns, victim, planned)
    stack.create_run(run_name, [record], [move])
    time.sleep(1.0)
    assert stack.lease_fresh()  # the coordinator is alive: only the webhook is gone
    stack.webhook.kill()

    t0 = time.monotonic()
    core.create_namespaced_pod(ns, {"metadata": {"name": "plain"}, "spec": {
        "schedulerName": "volcano", "nodeSelector": {"accelerator-pool": pool},
        "containers": [{"name": "c", "image": "example.invalid/x:1"}]}})
    create_seconds = time.monotonic() - t0
    assert create_seconds < 2.0, f"pod create took {create_seconds:.1f}s with the webhook down"
    stack.evict(ns, victim.metadata.name, run_name, 0)

    def new_pod():
        pods = [p for p in live_pods(core, ns, "serve") if p.metadata.name != victim.metadata.name]
        return pods[0] if pods else None

    pod = wait_for("the re-created pod", new_pod, 30)
    assert not gates(pod) and RELOCATION_RUN_ANNOTATION not in (pod.metadata.annotations or {})
    wait_for("the re-created pod Running", lambda: core.read_namespaced_pod(pod.metadata.name, ns).status.phase
             == "Running", 60)
    print(f"\npod create with the webhook down: {create_seconds * 1000:.0f} ms")
