"""The in-cluster half for real (NOM-6): `kubectl repack install --image <the image
hack/build-image.sh just built, pinned by digest>` on a real kubelet node, the seed scenario's
Execute steered by the *installed* webhook and coordinator, then `kubectl repack uninstall`.

Only the product's commands act: install, apply and uninstall. The harness provides the real node
(containerd + runc + CNI bridge, kubelet, kube-proxy, kube-scheduler; tests/harness/realnode.py)
next to the fake accelerator nodes of the node agent; the product's pod is placed on it with
`install --node-selector`. What shows it is the installed pod at work: its nodeName is the
kubelet's node, its containers have containerd IDs and run the image digest that was built, no
webhook or coordinator process runs outside a container, the replacements carry the webhook's
annotations, the webhook's and coordinator's own counters (read from the pod, the coordinator's
through its Service) count the gates and nominations, and a probe pod shows where vc-scheduler
alone would have put such a pod.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import ssl
import subprocess
import time
import urllib.request

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.e2e.helpers import absent, built_image, repack, wait_for
from tests.harness import NPU_RESOURCE
from tests.harness.controlplane import REPO_ROOT
from tests.harness.realnode import NODE_LABEL, local_processes
from kubectl_repack.api.gates import (GATED_AT_ANNOTATION, PLACEMENT_GATE, PLANNED_NODE_ANNOTATION,
                                      RELOCATION_RUN_ANNOTATION)
from kubectl_repack.deploy import manifests

pytestmark = pytest.mark.e2e

NAMESPACE = "repack-system"
FIGURES: dict = {}


def installed_pod(core, name=manifests.NAME):
    """The one live pod of Deployment `name` (the webhook's by default), or None."""
    pods = [p for p in core.list_namespaced_pod(NAMESPACE, label_selector=f"app.kubernetes.io/name={name}").items
            if p.metadata.deletion_timestamp is None]
    return pods[0] if len(pods) == 1 else None


def _ancestors(pid):
    seen = []
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        seen.append(pid)
    return seen


def _environ(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def outside_containers(pattern, run_dir):
    """Processes running `pattern` outside a container that belong to this test run: started by
    this pytest process, or pointed at this control plane (its kubeconfig is in the run dir).
    Other people's test runs on the same machine are not ours to count."""
    ours = []
    for pid, cmd, in_container in local_processes(pattern):
        if in_container:
            continue
        if os.getpid() in _ancestors(pid) or run_dir in cmd or run_dir in _environ(pid):
            ours.append((pid, cmd))
    return ours


def assert_no_local_webhook_or_coordinator(run_dir):
    """Every webhook/coordinator process of this run is inside a container (another PID
    namespace than this machine's), and each kind (webhook, coordinator, controller) runs in one."""
    for pattern in ("-m webhook.coordinator", "-m webhook ", "-m webhook.controller"):
        inside = [pid for pid, _cmd, in_container in local_processes(pattern) if in_container]
        assert inside, f"no containerised process runs `{pattern}`"
        local = outside_containers(pattern, run_dir)
        assert not local, f"`{pattern}` runs outside a container: {local}"


def read_metrics(url, context=None):
    with urllib.request.urlopen(url, timeout=5, context=context) as resp:
        text = resp.read().decode()
    values = {}
    for line in text.splitlines():
        if line.startswith("repack_webhook_") and not line.startswith("#"):
            name, value = line.split()[:2]
            values[name.removeprefix("repack_webhook_")] = int(float(value))
    return values


def pod_logs(control_plane) -> str:
    """Every process's logs (the kubelet removes them with the pod, so read them first)."""
    parts = []
    for deployment in (manifests.NAME, manifests.COORDINATOR_NAME, manifests.CONTROLLER_NAME):
        out = control_plane.kubectl("-n", NAMESPACE, "logs", f"deploy/{deployment}", "--tail=200", check=False)
        parts.append(f"--- {deployment} ---\n{out.stdout}{out.stderr}")
    return "\n".join(parts)


@pytest.fixture(scope="module")
def installed(real_node, control_plane, request):
    """`kubectl repack install --image <digest> --node-selector <the real node's label>`, waited
    for by install itself (--wait is the default)."""
    image = built_image()
    t0 = time.monotonic()
    # the default --replacement-creator list: this harness's workload controllers run under their own
    # identities (tests/harness/controlplane.py KCM_USER)
    out = repack(control_plane.kubeconfig, "install", "--namespace", NAMESPACE, "--image", image,
                 "--node-selector", f"{NODE_LABEL}=true", "--timeout", "240s")
    FIGURES["install_seconds"] = time.monotonic() - t0
    print(out.stdout + out.stderr)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "deployment.apps/repack-webhook Ready" in out.stdout
    assert "deployment.apps/repack-controller Ready" in out.stdout
    state = {"image": image, "uninstalled": False}
    failed_before = request.session.testsfailed
    try:
        yield state
    finally:
        if request.session.testsfailed > failed_before and not state["uninstalled"]:
            print(pod_logs(control_plane))
        if not state["uninstalled"]:
            repack(control_plane.kubeconfig, "uninstall", "--namespace", NAMESPACE)


def test_installed_pod_runs_on_the_real_node_from_the_built_image(installed, real_node, control_plane):
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    pod = installed_pod(core)
    coordinator = installed_pod(core, manifests.COORDINATOR_NAME)
    assert pod is not None and coordinator is not None
    assert pod.spec.node_name == coordinator.spec.node_name == real_node.name
    node = core.read_node(real_node.name)
    assert node.status.node_info.container_runtime_version.startswith("containerd://")
    assert NODE_LABEL in node.metadata.labels
    digest = installed["image"].split("@", 1)[1]
    assert real_node.imported[os.environ["REPACK_IMAGE"]] == digest
    # Each process in its own pod under its own ServiceAccount (no token shared with the webhook).
    assert (pod.spec.service_account_name, coordinator.spec.service_account_name) == (manifests.NAME,
                                                                                      manifests.COORDINATOR_NAME)
    statuses = {c.name: c for p in (pod, coordinator) for c in p.status.container_statuses}
    assert set(statuses) == {"webhook", "coordinator"}
    for name, cs in statuses.items():
        assert cs.ready and cs.state.running, (name, cs)
        assert cs.container_id.startswith("containerd://"), cs.container_id
        assert cs.container_id.split("://", 1)[1] in real_node.running_tasks(), name
        assert cs.image_id.endswith(digest), cs.image_id
        assert cs.restart_count == 0, (name, cs.restart_count)
    for c in pod.spec.containers + coordinator.spec.containers:
        assert c.image == installed["image"]
        assert c.security_context.read_only_root_filesystem and c.security_context.run_as_user == 65532
        assert c.readiness_probe is not None and c.liveness_probe is not None, c.name
    assert_no_local_webhook_or_coordinator(control_plane.cp.run_dir)

    # The API server calls the webhook through its Service, trusting the CA install generated.
    reg = client.AdmissionregistrationV1Api(api)
    hook, _stamp = reg.read_mutating_webhook_configuration(manifests.CONFIG_NAME).webhooks
    assert hook.client_config.url is None
    assert (hook.client_config.service.namespace, hook.client_config.service.name) == (NAMESPACE, manifests.NAME)
    secret = core.read_namespaced_secret(manifests.SECRET_NAME, NAMESPACE)
    assert hook.client_config.ca_bundle == secret.data["ca.crt"]
    endpoints = core.read_namespaced_endpoints(manifests.NAME, NAMESPACE)
    assert [a.ip for s in endpoints.subsets for a in s.addresses] == [pod.status.pod_ip]
    # The pod reached the API server through the `kubernetes` ClusterIP (kube-proxy): the
    # coordinator holds its leader Lease, written from inside the pod.
    lease = client.CoordinationV1Api(api).read_namespaced_lease("repack-coordinator", NAMESPACE)
    assert lease.spec.holder_identity.startswith(coordinator.metadata.name), lease.spec.holder_identity
    print(f"\ninstalled pod {pod.metadata.name} on {pod.spec.node_name} ({pod.status.pod_ip}); "
          f"install --wait took {FIGURES['install_seconds']:.1f}s\n{real_node.network.check_routes()}")


def natural_choice_when_node_01_is_emptied(core, node_agent, ns):
    """Where vc-scheduler alone puts a batch worker's replacement, asked of a twin of the seed's
    nodes in the state the replacements meet: node 01 emptied by the evictions, nodes 02 and 03
    holding their protected jobs (7 cards, 2 CPUs, 2 GiB each, bound by nodeName). A probe pod of a
    worker's shape in the twin's pool is scheduled, read and deleted; so are the twin nodes (the
    seed layout wants no other accelerator nodes). Returns the index (0-2) of the seed node the choice stands for.
    (A probe next to the real layout would meet node 01 still holding the victims: an exact tie
    that vc-scheduler breaks at random.)"""
    from tests.harness import npu_node

    twins = [f"{ns}-node-0{i}" for i in (1, 2, 3)]
    for name in twins:
        node_agent.add_node(npu_node(name, cards=8, pool=ns))
    try:
        for name in twins[1:]:
            core.create_namespaced_pod(ns, {"metadata": {"name": f"protected-{name[-2:]}"}, "spec": {
                "nodeName": name, "containers": [{"name": "c", "image": "example.invalid/x:1", "resources": {
                    "requests": {"cpu": "2", "memory": "2Gi", NPU_RESOURCE: "7"},
                    "limits": {"cpu": "2", "memory": "2Gi", NPU_RESOURCE: "7"}}}]}})
        wait_for("the twin's protected pods Running", lambda: all(
            p.status.phase == "Running" for p in core.list_namespaced_pod(ns).items) or None, 30)
        natural = probe_natural_node(core, ns, {
            "schedulerName": "volcano", "nodeSelector": {"accelerator-pool": ns}, "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "c", "image": "example.invalid/x:1", "resources": {
                "requests": {"cpu": "1", "memory": "1Gi", NPU_RESOURCE: "1"},
                "limits": {"cpu": "1", "memory": "1Gi", NPU_RESOURCE: "1"}}}]})
    finally:
        for name in twins:
            node_agent.remove_node(name, delete_pods=True)
    return int(natural.rsplit("-", 1)[1]) - 1


def probe_natural_node(core, ns, spec, timeout=60):
    """Where vc-scheduler puts a pod of this shape on its own: a probe pod, bound and deleted."""
    name = "probe"
    core.create_namespaced_pod(ns, {"metadata": {"name": name}, "spec": spec})
    natural = wait_for("the probe pod bound", lambda: core.read_namespaced_pod(name, ns).spec.node_name, timeout)
    core.delete_namespaced_pod(name, ns, grace_period_seconds=0)

    def gone():
        try:
            core.read_namespaced_pod(name, ns)
            return False
        except ApiException as e:
            return e.status == 404
    wait_for("the probe pod gone", gone, 30)
    return natural


def test_seed_execute_is_steered_by_the_installed_webhook_and_coordinator(
        installed, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path, monkeypatch):
    """Seed steps 5-6 with nothing local but `kubectl repack apply`, which plans, creates the run and
    follows it: the installed controller evicts, the replacements are gated by the installed
    webhook, nominated by the installed coordinator and bound by vc-scheduler on their planned
    nodes; node 01 is freed."""
    from tests.e2e.execute_helpers import (build_seed_layout, seed_nodes, cli, delete_runs, execute_run,
                                           reason_of, unique, write_run)

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    pod = installed_pod(core)
    # Where vc-scheduler alone would put the replacements: the planned nodes must be others.
    nodes = seed_nodes()
    natural = nodes[natural_choice_when_node_01_is_emptied(core, node_agent, make_namespace("probe"))]
    ns = make_namespace("repack-demo")
    layout = build_seed_layout(api, fake_nodes, ns, nodes)

    webhook_ctx = ssl.create_default_context(cadata=__import__("base64").b64decode(
        core.read_namespaced_secret(manifests.SECRET_NAME, NAMESPACE).data["ca.crt"]).decode())
    webhook_ctx.check_hostname = False  # the certificate names the Service, not the pod IP
    webhook_metrics = f"https://{pod.status.pod_ip}:{manifests.CONTAINER_PORT}/metrics"
    svc = core.read_namespaced_service(manifests.COORDINATOR_NAME, NAMESPACE)
    coordinator_metrics = f"http://{svc.spec.cluster_ip}:{manifests.METRICS_PORT}/metrics"
    before_webhook = read_metrics(webhook_metrics, webhook_ctx)
    before_coordinator = read_metrics(coordinator_metrics)

    name = unique("ascend-execute")
    try:
        t0 = time.monotonic()
        r = cli(control_plane.kubeconfig, "apply", "-f", write_run(tmp_path, execute_run(name)), "--cooldown", "0s",
                "-o", "json")
        FIGURES["apply_seconds"] = time.monotonic() - t0
        assert r.exit_code == 0, r.output
        run = json.loads(r.stdout)
        assert_no_local_webhook_or_coordinator(control_plane.cp.run_dir)
        assert reason_of(run, "Complete") == ("True", "ExecutionCompleted"), run["status"].get("conditions")
        relocs = run["status"]["relocations"]
        assert sorted(rec["victimPodName"] for rec in relocs) == sorted(layout["batch"])
        rows = []
        for rec in relocs:
            pl = rec["placement"]
            assert pl["phase"] == "Placed", rec
            assert rec["plannedNodeName"] == pl["selectedNodeName"] == pl["actualNodeName"], rec
            assert rec["plannedNodeName"] in nodes[1:] and rec["plannedNodeName"] != natural, (rec, natural)
            replacement = core.read_namespaced_pod(pl["replacementPodName"], ns)
            ann = replacement.metadata.annotations or {}
            assert ann.get(GATED_AT_ANNOTATION), ann  # gated at creation by the installed webhook
            assert ann.get(RELOCATION_RUN_ANNOTATION, "").startswith(name + "/"), ann
            assert ann.get(PLANNED_NODE_ANNOTATION) == rec["plannedNodeName"], ann
            assert PLACEMENT_GATE not in [g.name for g in replacement.spec.scheduling_gates or []]
            assert replacement.spec.node_name == rec["plannedNodeName"]
            rows.append(f"{rec['victimPodName']}: planned={rec['plannedNodeName']} "
                        f"actual={pl['actualNodeName']} gated-at={ann[GATED_AT_ANNOTATION]}")
        assert run["status"]["result"]["freedNodes"] == [nodes[0]]
        after_webhook = read_metrics(webhook_metrics, webhook_ctx)
        after_coordinator = read_metrics(coordinator_metrics)
        gates = after_webhook["gates_total"] - before_webhook["gates_total"]
        nominations = after_coordinator["nominations_total"] - before_coordinator["nominations_total"]
        assert gates == len(relocs), (before_webhook, after_webhook)
        assert nominations == len(relocs), (before_coordinator, after_coordinator)
        # Still the same installed pod, never restarted.
        now = installed_pod(core)
        assert now.metadata.uid == pod.metadata.uid
        assert all(cs.restart_count == 0 for cs in now.status.container_statuses)
        print(f"\nvc-scheduler alone chose (the twin of) {natural} for a worker-shaped probe pod; through the installed "
              f"webhook ({gates} gates) and coordinator ({nominations} nominations, metrics read through "
              f"its Service {svc.spec.cluster_ip}:{manifests.METRICS_PORT}):\n  " + "\n  ".join(rows)
              + f"\napply took {FIGURES['apply_seconds']:.1f}s")
    finally:
        delete_runs(api, [name])


def _sample(name: str, new_name: str, **spec_changes) -> dict:
    """One of config/samples (the seed's YAML), renamed for this test."""
    import yaml

    with open(os.path.join(REPO_ROOT, "config", "samples", name)) as f:
        run = yaml.safe_load(f)
    run["metadata"]["name"] = new_name
    run["spec"].update(spec_changes)
    return run


def _kubectl_apply(control_plane, obj, tmp_path, *extra):
    import yaml

    path = tmp_path / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    out = control_plane.kubectl("apply", "-f", str(path), *extra, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip()


def _finished(api, name):
    from tests.e2e.execute_helpers import get_run

    run = get_run(api, name)
    return run if (run.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None


def audit_evictions(control_plane, uids) -> dict:
    """{victim UID: [answer codes of its Eviction calls]} from the API server's audit log."""
    out: dict = {uid: [] for uid in uids}
    with open(control_plane.cp.audit_log) as f:
        for line in f:
            event = json.loads(line)
            if (event.get("objectRef") or {}).get("subresource") != "eviction" or event.get("stage") != "ResponseComplete":
                continue
            uid = (((event.get("requestObject") or {}).get("deleteOptions") or {}).get("preconditions") or {}).get("uid")
            if uid in out:
                out[uid].append((event.get("responseStatus") or {}).get("code"))
    return out


def _events(core, name) -> list:
    return [(e.reason, e.type) for e in sorted(
        core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}").items,
        key=lambda e: (e.first_timestamp or e.event_time or e.metadata.creation_timestamp, e.metadata.name))]


def test_seed_flow_with_kubectl_apply_is_reconciled_in_the_cluster(
        installed, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path):
    """Seed steps 2-7 with `kubectl apply` only, against the installed controller: a user without
    eviction rights is refused (SubjectAccessReview as the creator the webhook recorded), the
    DryRuns are planned in the cluster and answer the seed's jsonpath queries, the Execute frees
    node 01 while `kubectl get repackrun -w` watches, ascend-large-training then runs there, and a
    run waiting for the cooldown is cancelled with `kubectl repack cancel`.

    The seed also places a Kthena ModelServing; it cannot run here (its Go module is not served by
    the module proxy this machine reaches), so this test uses the seed's VCJob parts only."""
    from tests.e2e.execute_helpers import build_seed_layout, delete_runs, seed_nodes, get_run, reason_of, unique, vcjob

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    ns = make_namespace("repack-demo")
    nodes = seed_nodes()
    layout = build_seed_layout(api, fake_nodes, ns, nodes)
    victims = {uid for _, uid in layout["batch"].values()}
    names = {k: unique(k) for k in ("bob-execute", "scoped-dryrun", "guarded-dryrun", "execute", "pending")}
    bob = unique("bob")
    role = {"metadata": {"name": bob}, "rules": [{"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns"],
                                                  "verbs": ["create", "get", "list", "watch"]}]}
    rbac.create_cluster_role(role)
    rbac.create_cluster_role_binding({"metadata": {"name": bob}, "subjects": [
        {"kind": "User", "name": bob, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": bob, "apiGroup": "rbac.authorization.k8s.io"}})
    try:
        # 1. A user who may create RepackRuns but not evict: the run is refused before any eviction.
        _kubectl_apply(control_plane, _sample("ascend-execute-001.yaml", names["bob-execute"]), tmp_path,
                       f"--as={bob}")
        refused = wait_for("bob's run to end", lambda: _finished(api, names["bob-execute"]), timeout=120)
        assert reason_of(refused, "Failed") == ("True", "EvictionNotAuthorized"), refused["status"]
        message = refused["status"]["message"]
        assert f"'{bob}'" in message and "pods/eviction in none of the 1 namespace(s)" in message, message
        assert ns not in message, message     # SEC-1: nothing of a namespace the creator may not evict in
        creator = refused["metadata"]["annotations"]["repack.volcano.sh/creator-username"]
        assert creator == bob                      # filled in by the webhook, checked by the admission policy
        assert not refused["status"].get("relocations")
        assert all(codes == [] for codes in audit_evictions(control_plane, victims).values())
        FIGURES["sar_refusal"] = message

        # 2. The seed's DryRuns, applied with kubectl, answered by the seed's jsonpath queries.
        for key, sample in (("scoped-dryrun", "ascend-scoped-dryrun.yaml"), ("guarded-dryrun", "ascend-guarded-dryrun.yaml")):
            _kubectl_apply(control_plane, _sample(sample, names[key]), tmp_path)
            done = wait_for(f"{key} planned", lambda key=key: _finished(api, names[key]), timeout=120)
            assert done["status"]["phase"] == "Succeeded", done["status"]
        freed = control_plane.kubectl("get", "repackrun", names["scoped-dryrun"], "-o",
                                      "jsonpath={.status.plan.freedNodes}").stdout
        assert json.loads(freed) == [nodes[0]], freed
        guarded = control_plane.kubectl("get", "repackrun", names["guarded-dryrun"], "-o", "jsonpath="
                                        "fragmentation={.status.plan.summary.fragBeforePercent}% -> "
                                        "{.status.plan.summary.fragAfterPercent}%, freedNodes="
                                        "{.status.plan.summary.freedNodeCount}").stdout
        assert guarded.endswith("freedNodes=1"), guarded
        FIGURES["guarded_dryrun_jsonpath"] = guarded

        # 3. The Execute, applied with kubectl and watched with `kubectl get repackrun -w`.
        t0 = time.monotonic()
        _kubectl_apply(control_plane, _sample("ascend-execute-001.yaml", names["execute"],
                                              eviction={"gracePeriodSeconds": 0}), tmp_path)
        watch = subprocess.Popen([control_plane.cp.binaries["kubectl"], f"--kubeconfig={control_plane.kubeconfig}",
                                  "get", "repackrun", names["execute"], "-w"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
        run = wait_for("the Execute to end", lambda: _finished(api, names["execute"]), timeout=300)
        FIGURES["kubectl_apply_to_succeeded_seconds"] = round(time.monotonic() - t0, 1)
        time.sleep(2)
        watch.terminate()
        watched = watch.communicate(timeout=10)[0]
        FIGURES["kubectl_get_w"] = watched
        assert reason_of(run, "Complete") == ("True", "ExecutionCompleted"), run["status"]
        assert run["status"]["result"]["freedNodes"] == [nodes[0]]
        assert "Succeeded" in watched and "ExecutionCompleted" in watched, watched
        for rec in run["status"]["relocations"]:
            assert rec["eviction"]["phase"] == "Accepted" and rec["placement"]["phase"] == "Placed", rec
            assert rec["placement"]["actualNodeName"] == rec["plannedNodeName"], rec
        events = [r for r, _ in _events(core, names["execute"])]
        for expected in ("Started", "Evicted", "Placed", "Completed"):
            assert expected in events, events
        assert events.count("Evicted") == len(victims), events
        # the workload owners' audit trail: an Event on the PodGroup and on the VCJob for each pod evicted
        audit = [e for e in core.list_namespaced_event(ns, field_selector="reason=RepackEvicted").items]
        assert len(audit) == 2 * len(victims), audit
        assert sorted(e.involved_object.kind for e in audit) == ["Job"] * len(victims) + ["PodGroup"] * len(victims), audit
        assert all(f"by RepackRun {names['execute']} (created by " in e.message for e in audit), [e.message for e in audit]
        described = control_plane.kubectl("describe", "repackrun", names["execute"]).stdout
        assert "Evicted" in described and "Completed" in described, described
        # Measured, not inferred: each victim was evicted by exactly one successful call.
        counts = audit_evictions(control_plane, victims)
        assert all(codes.count(201) == 1 for codes in counts.values()), counts
        released = lambda name: not (get_run(api, name)["metadata"].get("finalizers") or []) or None  # noqa: E731
        wait_for("the finalizer to be released once the run ended", lambda: released(names["execute"]), timeout=30)

        # 4. Seed step 7: the large training job (2 workers x 4 cards) now runs on the freed node.
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", ns, "jobs",
            vcjob("ascend-large-training", {"workload-type": "training"}, [("worker", 2, 4)],
                  {"accelerator-pool": "ascend-npu"}))
        from tests.e2e.execute_helpers import SCHEDULE_TIMEOUT, running_on
        large = wait_for("ascend-large-training Running", lambda: running_on(core, ns, "ascend-large-training"),
                         timeout=SCHEDULE_TIMEOUT)
        assert {n for n, _ in large.values()} == {nodes[0]}, large

        # 5. A run that waits for the cooldown, cancelled with `kubectl repack cancel`.
        pending = _sample("ascend-execute-001.yaml", names["pending"])
        pending["metadata"]["annotations"] = {"repack.volcano.sh/execute-cooldown": "1h"}
        _kubectl_apply(control_plane, pending, tmp_path)
        wait_for("the run to wait for the cooldown", lambda: (get_run(api, names["pending"]).get("status") or {})
                 .get("phase") == "Pending" or None, timeout=120)
        assert reason_of(get_run(api, names["pending"]), "Progressing")[1] == "ExecuteCooldownActive"
        out = repack(control_plane.kubeconfig, "cancel", names["pending"])
        assert out.returncode == 0, out.stdout + out.stderr
        cancelled = wait_for("the cancelled run to end", lambda: _finished(api, names["pending"]), timeout=120)
        assert reason_of(cancelled, "Failed")[1] == "Cancelled", cancelled["status"]
        assert "nothing was evicted" in cancelled["status"]["message"]
        wait_for("the cancelled run's finalizer to be released", lambda: released(names["pending"]), timeout=30)
        print(f"\n{FIGURES['kubectl_get_w']}\nkubectl apply -> Succeeded: "
              f"{FIGURES['kubectl_apply_to_succeeded_seconds']}s\nrefused: {FIGURES['sar_refusal']}\n"
              f"audit (201s per victim): {counts}\nevents: {events}")
    finally:
        delete_runs(api, list(names.values()))
        rbac.delete_cluster_role_binding(bob)
        rbac.delete_cluster_role(bob)
        # the cluster-wide cooldown the pending run stored: back to none for whatever runs next
        lease = client.CoordinationV1Api(api)
        try:
            lease.patch_namespaced_lease("repack-execute", NAMESPACE, {"metadata": {"annotations": {
                "repack.volcano.sh/execute-cooldown": "0s"}}})
        except ApiException:
            pass



def test_a_waiting_job_takes_the_vacated_node_and_the_run_names_it(
        installed, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path):
    """RELIEF-2 and RELIEF-3 end to end: the seed's ascend-large-training (2 workers x 4 cards) is submitted
    before the untargeted seed Execute and stays Pending (no node has 8 free cards); the Execute,
    applied with kubectl and carried out by the installed controller, vacates node 01, the waiting
    job binds there at once, and the run ends Succeeded: node 01 is in status.result.vacatedNodes
    with the job in takenBy and in a VacatedNodeTaken Event, and not in freedNodes (a pod uses it)."""
    from tests.e2e.execute_helpers import (build_seed_layout, delete_runs, get_run, reason_of, seed_nodes, unique,
                                           vcjob, wait_running)

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    ns = make_namespace("repack-demo")
    nodes = seed_nodes()
    t0 = time.monotonic()
    layout = build_seed_layout(api, fake_nodes, ns, nodes)
    job = "ascend-large-training"
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", ns, "jobs",
        vcjob(job, {"workload-type": "training"}, [("worker", 2, 4)], {"accelerator-pool": "ascend-npu"}))
    selector = f"volcano.sh/job-name={job}"
    wait_for(f"{job}'s 2 pods created", lambda: len(core.list_namespaced_pod(ns, label_selector=selector).items) == 2
             or None, timeout=240)
    hold = time.monotonic() + 10
    while time.monotonic() < hold:   # 6 cards free on node 01, 1 on 02 and 03: the gang cannot run
        bound = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(ns, label_selector=selector).items
                 if p.spec.node_name}
        assert not bound, f"{job} was scheduled before the run: {bound}"
        time.sleep(0.5)
    name = unique("execute-taken")
    run = _sample("ascend-execute-001.yaml", name, eviction={"gracePeriodSeconds": 0})
    run["metadata"]["annotations"] = {"repack.volcano.sh/execute-cooldown": "0s"}   # no wait for what runs next
    try:
        t1 = time.monotonic()
        _kubectl_apply(control_plane, run, tmp_path)
        done = wait_for("the Execute to end", lambda: _finished(api, name), timeout=300)
        FIGURES["taken_apply_to_end_seconds"] = round(time.monotonic() - t1, 1)
        st = done["status"]
        large = wait_running(api, ns, job)
        assert {n for n, _ in large.values()} == {nodes[0]}, large
        assert reason_of(done, "Complete") == ("True", "ExecutionCompleted"), json.dumps(st, indent=1)
        assert st["phase"] == "Succeeded"
        assert st["plan"]["freedNodes"] == [nodes[0]], st["plan"]
        assert sorted(r["victimPodName"] for r in st["relocations"]) == sorted(layout["batch"])
        for rec in st["relocations"]:
            assert rec["placement"]["phase"] == "Placed", rec
            assert rec["placement"]["actualNodeName"] == rec["plannedNodeName"] != nodes[0], rec
        result = st["result"]
        assert result["vacatedNodes"] == [{"node": nodes[0], "takenBy": [f"{ns}/{job}"]}], result
        assert "freedNodes" not in result and result["freedNodeCount"] == 0, result
        assert result["metricsVerified"] is True, result
        message = f"{nodes[0]} vacated; now used by {ns}/{job}"
        events = [(e.reason, e.type, e.message) for e in core.list_namespaced_event(
            "default", field_selector=f"involvedObject.name={name}").items]
        assert ("VacatedNodeTaken", "Normal", message) in events, events
        shown = repack(control_plane.kubeconfig, "status", name)
        assert shown.returncode == 0, shown.stdout + shown.stderr
        assert "VACATED NODES IN USE (1 of 1)" in shown.stdout and f"{ns}/{job}" in shown.stdout, shown.stdout
        FIGURES["taken_total_seconds"] = round(time.monotonic() - t0, 1)
        print(f"\nresult: {json.dumps(result)}\nevent: {message}\ncondition: "
              f"{next(c['message'] for c in st['conditions'] if c['type'] == 'Complete')}\n"
              f"kubectl apply -> end: {FIGURES['taken_apply_to_end_seconds']}s, test: {FIGURES['taken_total_seconds']}s")
    finally:
        delete_runs(api, [name])


def _podgroup_of(custom, ns, job):
    for pg in custom.list_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]:
        if (pg["metadata"].get("ownerReferences") or [{}])[0].get("name") == job:
            return pg
    return None


def _tried(custom, ns, job):
    """The job's PodGroup once vc-scheduler has tried it (a condition written), else None."""
    pg = _podgroup_of(custom, ns, job)
    return pg if pg and (pg.get("status") or {}).get("conditions") else None


def test_a_run_aimed_at_the_waiting_job_makes_room_for_it(
        installed, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path):
    """Relief (RELIEF-2, RELIEF-3) on the installed controller. The seed's ascend-large-training (2 workers x 4
    cards) is submitted first and waits: node 01 has 6 cards free, 02 and 03 one each.
    `kubectl repack why` names fragmentation and the one-line fix; a RepackRun aimed at its PodGroup
    (spec.target, applied with kubectl, carried out by the installed controller) vacates node 01 and
    the job's pods are bound there. A job in a closed queue gets a `why` that says so, and
    `plan --for` ends TargetAlreadyFits naming the queue state, moving nothing."""
    from tests.e2e.execute_helpers import (build_seed_layout, delete_runs, pending_state, seed_nodes, unique, vcjob,
                                           wait_running)

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    ns = make_namespace("repack-demo")
    nodes = seed_nodes()
    layout = build_seed_layout(api, fake_nodes, ns, nodes)
    protected = [uid for _, uid in layout["protected"].values()]
    custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", vcjob(
        "ascend-large-training", {"workload-type": "training"}, [("worker", 2, 4)], {"accelerator-pool": "ascend-npu"}))
    pg = wait_for("vc-scheduler to try ascend-large-training", lambda: _tried(custom, ns, "ascend-large-training"),
                  timeout=120)
    from tests.e2e.execute_helpers import running_on
    assert running_on(core, ns, "ascend-large-training") is None
    why = repack(control_plane.kubeconfig, "why", "vcjob/ascend-large-training", "-n", ns)
    assert why.returncode == 0, why.stdout + why.stderr
    assert "Fragmentation" in why.stdout and f"vacate {nodes[0]}" in why.stdout, why.stdout
    assert f"kubectl repack plan --for podgroup/{pg['metadata']['name']} -n {ns}" in why.stdout, why.stdout
    FIGURES["why"] = why.stdout
    dry = repack(control_plane.kubeconfig, "plan", "--for", "vcjob/ascend-large-training", "-n", ns, "-o", "json")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert json.loads(dry.stdout)["status"]["plan"]["freedNodes"] == [nodes[0]], dry.stdout

    name = unique("relief")
    run = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name},
           "spec": {"mode": "Execute", "target": {"podGroups": [f"{ns}/{pg['metadata']['name']}"]},
                    "scope": {"podGroups": {"exclude": {"selector": {"matchLabels": {
                        "repack.volcano.sh/protected": "true"}}}}},
                    "eviction": {"gracePeriodSeconds": 0}}}
    try:
        t0 = time.monotonic()
        _kubectl_apply(control_plane, run, tmp_path)
        done = wait_for("the targeted Execute to end", lambda: _finished(api, name), timeout=300)
        assert done["status"]["phase"] == "Succeeded", json.dumps(
            {k: v for k, v in done["status"].items() if k != "plan"}, indent=1)[:4000] + "\n" + pending_state(
            api, ns, "ascend-large-training")
        assert done["status"]["plan"]["summary"]["target"]["fits"] is True, done["status"]["plan"]
        assert done["status"]["plan"]["freedNodes"] == [nodes[0]], done["status"]["plan"]
        # node 01 was vacated (the target may already hold it: then it is named there, not in freedNodes)
        vacated = done["status"]["result"]["vacatedNodes"]
        assert [v["node"] for v in vacated] == [nodes[0]], done["status"]["result"]
        assert vacated[0].get("takenBy", [f"{ns}/ascend-large-training"]) == [f"{ns}/ascend-large-training"], vacated
        large = wait_running(api, ns, "ascend-large-training")
        FIGURES["targeted_apply_to_bound_seconds"] = round(time.monotonic() - t0, 1)
        assert {n for n, _ in large.values()} == {nodes[0]}, large
        # RELIEF-3: the result says the target was bound, and how soon after node 01 was vacated (here
        # vc-scheduler usually binds it on its own as the node empties: then nothing is nominated, and
        # the result says so; the nomination itself is shown with a held target below)
        target = done["status"]["result"]["target"]
        assert target["bound"] is True and target["podGroups"] == [f"{ns}/{pg['metadata']['name']}"], target
        assert isinstance(target["boundAfterSeconds"], (int, float)) and 0 <= target["boundAfterSeconds"] < 60, target
        assert target.get("nominated") or "on its own before any nomination" in target["message"], target
        FIGURES["targeted_bound_after_vacated_seconds"] = target["boundAfterSeconds"]
        shown = repack(control_plane.kubeconfig, "status", name)
        assert shown.returncode == 0, shown.stderr
        assert f"Target:      {ns}/{pg['metadata']['name']}: bound {target['boundAfterSeconds']:g} s after the nodes " \
               "were vacated" in shown.stdout, shown.stdout
        # only the eligible batch job moved; the protected jobs were never touched
        assert sorted(r["victimPodName"] for r in done["status"]["relocations"]) == sorted(layout["batch"]), \
            done["status"]["relocations"]
        assert all(codes == [] for codes in audit_evictions(control_plane, protected).values())
    finally:
        delete_runs(api, [name])

    # a job whose queue is closed: why names the queue, plan --for moves nothing
    queue = unique("closed-q")
    custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": queue},
        "spec": {"weight": 1, "reclaimable": True}})
    try:
        q = custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)
        custom.create_namespaced_custom_object("bus.volcano.sh", "v1alpha1", "default", "commands", {
            "apiVersion": "bus.volcano.sh/v1alpha1", "kind": "Command",
            "metadata": {"generateName": f"{queue}-close-", "ownerReferences": [{
                "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": queue,
                "uid": q["metadata"]["uid"], "controller": True}]},
            "target": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "name": queue,
                       "uid": q["metadata"]["uid"], "controller": True},
            "action": "CloseQueue"})
        wait_for(f"queue {queue} Closed", lambda: (custom.get_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues", queue).get("status") or {}).get("state") == "Closed" or None,
            timeout=90)
        job = vcjob("queued-training", {"workload-type": "training"}, [("worker", 1, 1)], {"accelerator-pool": "ascend-npu"})
        job["spec"]["queue"] = queue
        custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", job)
        # Volcano creates the job's pods only once its PodGroup is Inqueue: in a closed queue, never
        wait_for("queued-training's PodGroup", lambda: _podgroup_of(custom, ns, "queued-training"), timeout=120)
        why = repack(control_plane.kubeconfig, "why", "vcjob/queued-training", "-n", ns)
        assert why.returncode == 0, why.stdout + why.stderr
        assert f"queue {queue} is Closed" in why.stdout and "Repack:" not in why.stdout, why.stdout
        out = repack(control_plane.kubeconfig, "plan", "--for", "vcjob/queued-training", "-n", ns, "--exit-code")
        assert out.returncode == 3, out.stdout + out.stderr
        assert "TargetAlreadyFits" in out.stdout and f"queue {queue} is Closed" in out.stdout, out.stdout
    finally:
        custom.delete_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", "queued-training")
        custom.delete_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)


HOLD_GATE = "e2e.repack.volcano.sh/hold"


def held_gang(core, custom, ns, name, members, cards, gate=HOLD_GATE, annotations=None):
    """A bare Volcano gang (a PodGroup with minMember `members`, and its pods) whose pods carry a
    scheduling gate not repack's (`gate`: the test's own, or Volcano 1.15's queue-allocation gate with
    its opt-in `annotations`): vc-scheduler cannot bind them until it is lifted."""
    custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": name},
        "spec": {"minMember": members, "queue": "default"}})
    requests = {"cpu": "1", "memory": "1Gi", NPU_RESOURCE: str(cards)}
    for i in range(members):
        core.create_namespaced_pod(ns, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{name}-{i}", "labels": {"app": name},
                         "annotations": {"scheduling.k8s.io/group-name": name, **(annotations or {})}},
            "spec": {"schedulerName": "volcano", "nodeSelector": {"accelerator-pool": "ascend-npu"},
                     "schedulingGates": [{"name": gate}], "terminationGracePeriodSeconds": 0,
                     "restartPolicy": "Never",
                     "containers": [{"name": "trainer", "image": "alpine:3.20", "command": ["sh", "-c", "tail -f /dev/null"],
                                     "resources": {"requests": requests, "limits": requests}}]}})
    return [f"{name}-{i}" for i in range(members)]


@pytest.mark.parametrize("foreign_gate", ["test-hold", "volcano-queue-allocation"])
def test_the_coordinator_nominates_the_vacated_node_to_the_targets_pending_pods(
        installed, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path, foreign_gate):
    """RELIEF-3 on the installed controller and coordinator. The target (a gang of 2 x 4 cards) is
    held by a scheduling gate that is not repack's (the test's own, or Volcano 1.15's queue-allocation
    gate with its opt-in annotation), so vc-scheduler cannot take node 01 for it on its own: once the
    targeted Execute has vacated node 01, the coordinator marks the target's pods with the run and
    writes status.nominatedNodeName = node 01 through pods/status (admitted by the repack-nominations
    policy), leaving the foreign gate alone. The gate is then lifted (by the test; for Volcano's, the
    way vc-scheduler 1.15 does: tests/harness/volcano_gates.py), the gang is bound there, and the
    run's status.result.target says bound, how long after the vacating, and the hints."""
    from tests.harness.volcano_gates import (QUEUE_ALLOCATION_ANNOTATION, QUEUE_ALLOCATION_GATE,
                                             volcano_lifts_its_gate)
    from kubectl_repack.api.gates import TARGET_NODE_ANNOTATION, TARGET_RUN_ANNOTATION
    from tests.e2e.execute_helpers import build_seed_layout, delete_runs, seed_nodes, unique

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    ns = make_namespace("repack-demo")
    nodes = seed_nodes()
    layout = build_seed_layout(api, fake_nodes, ns, nodes)
    if foreign_gate == "test-hold":
        gate, opt_in = HOLD_GATE, None
    else:
        gate, opt_in = QUEUE_ALLOCATION_GATE, {QUEUE_ALLOCATION_ANNOTATION: "true"}
    held = held_gang(core, custom, ns, "held-training", 2, 4, gate=gate, annotations=opt_in)
    name = unique("relief-held")
    # no cooldown left by an earlier Execute of this module, and none left by this one
    client.CoordinationV1Api(api).patch_namespaced_lease("repack-execute", NAMESPACE, {"metadata": {"annotations": {
        "repack.volcano.sh/execute-cooldown": "0s"}}})
    run = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
           "metadata": {"name": name, "annotations": {"repack.volcano.sh/execute-cooldown": "0s"}},
           "spec": {"mode": "Execute", "target": {"podGroups": [f"{ns}/held-training"]},
                    "scope": {"podGroups": {"exclude": {"selector": {"matchLabels": {
                        "repack.volcano.sh/protected": "true"}}}}},
                    "eviction": {"gracePeriodSeconds": 0}}}

    def hinted():
        pods = [core.read_namespaced_pod(p, ns) for p in held]
        if all(p.status.nominated_node_name for p in pods):
            return {p.metadata.name: (p.status.nominated_node_name, p.spec.node_name, p.metadata.annotations) for p in pods}
        return None
    try:
        _kubectl_apply(control_plane, run, tmp_path)
        seen = wait_for("the coordinator to nominate the held target's pods", hinted, timeout=240)
        t_hint = time.monotonic()
        stored = custom.get_cluster_custom_object("repack.volcano.sh", "v1alpha1", "repackruns", name)
        for pod, (hint, bound_to, ann) in seen.items():
            assert hint == nodes[0] and not bound_to, seen       # a hint on a pending pod, not a binding
            assert ann[TARGET_RUN_ANNOTATION] == f"{name}/{stored['metadata']['uid']}", ann
            assert ann[TARGET_NODE_ANNOTATION] == nodes[0], ann
        # the hint came once node 01 was vacated, and the run waits for the target meanwhile
        interim = stored["status"]["result"]
        assert stored["status"]["phase"] == "Running", stored["status"]
        assert [v["node"] for v in interim["vacatedNodes"]] == [nodes[0]], interim
        assert interim["target"]["bound"] is False and interim["target"]["vacatedAt"], interim
        for pod in held:   # the foreign gate is untouched by repack; then it goes: vc-scheduler binds, hinted node first
            live = core.read_namespaced_pod(pod, ns)
            assert [g.name for g in live.spec.scheduling_gates or ()] == [gate], live.spec.scheduling_gates
            if foreign_gate == "test-hold":
                core.patch_namespaced_pod(pod, ns, [{"op": "replace", "path": "/spec/schedulingGates", "value": []}])
            else:   # as vc-scheduler 1.15 removes its gate: only when it is the pod's only gate
                assert volcano_lifts_its_gate(api.sanitize_for_serialization(live))
                core.patch_namespaced_pod(pod, ns, {"spec": {"schedulingGates": [
                    {"name": QUEUE_ALLOCATION_GATE, "$patch": "delete"}]}})
        done = wait_for("the targeted Execute to end", lambda: _finished(api, name), timeout=120)
        FIGURES["held_target_hint_to_run_end_seconds"] = round(time.monotonic() - t_hint, 1)
        st = done["status"]
        assert st["phase"] == "Succeeded", json.dumps({k: v for k, v in st.items() if k != "plan"}, indent=1)[:4000]
        target = st["result"]["target"]
        assert target["bound"] is True, target
        assert sorted(target["nominated"], key=lambda e: e["pod"]) == [
            {"pod": f"{ns}/{p}", "node": nodes[0]} for p in held], target
        assert 0 <= target["boundAfterSeconds"] < 60 and target["boundAt"], target
        assert target["message"] == (f"bound {target['boundAfterSeconds']:g} s after the nodes were vacated "
                                     f"(2 pods nominated to {nodes[0]})"), target
        FIGURES["held_target_bound_after_vacated_seconds"] = target["boundAfterSeconds"]
        assert {core.read_namespaced_pod(p, ns).spec.node_name for p in held} == {nodes[0]}
        assert sorted(r["victimPodName"] for r in st["relocations"]) == sorted(layout["batch"]), st["relocations"]
        logs = control_plane.kubectl("-n", NAMESPACE, "logs", f"deploy/{manifests.COORDINATOR_NAME}", "--tail=400",
                                     check=False).stdout
        assert f"pod {ns}/{held[0]}: nominated {nodes[0]} for the target of run {name}" in logs, logs[-3000:]
        shown = repack(control_plane.kubeconfig, "status", name)
        assert f"Target:      {ns}/held-training: {target['message']}" in shown.stdout, shown.stdout
    finally:
        delete_runs(api, [name])


def test_the_coordinators_token_may_nominate_only_what_its_marks_name(installed, control_plane, make_namespace):
    """SEC-3 for pods/status (the repack-nominations admission policy): the coordinator's
    ServiceAccount may patch pods/status on every pod (RBAC), so without the policy its token could
    hint any pod anywhere, and rewrite labels, podIP or the Ready condition through the status
    subresource. With it: an unrelated pod cannot be hinted; a target pod (pending, in a PodGroup,
    marked by the coordinator) only to the node its mark names; no other field changes. (The
    coordinator's identity by impersonation with the admin's credentials, as its token would be.)"""
    from kubectl_repack.api.gates import TARGET_NODE_ANNOTATION, TARGET_RUN_ANNOTATION

    core = client.CoreV1Api(control_plane.api_client)
    ns = make_namespace("nominate")
    coordinator = f"system:serviceaccount:{NAMESPACE}:{manifests.COORDINATOR_NAME}"
    as_coordinator = client.CoreV1Api(client.ApiClient(control_plane.api_client.configuration,
                                                       header_name="Impersonate-User", header_value=coordinator))
    for pod in ("unrelated", "target"):   # nobody schedules them: no scheduler of that name
        core.create_namespaced_pod(ns, {"metadata": {"name": pod, "annotations": {
            "scheduling.k8s.io/group-name": "some-gang"}}, "spec": {
            "schedulerName": "nobody", "containers": [{"name": "c", "image": "alpine:3.20"}]}})

    def refused(pod, body):
        try:
            as_coordinator.patch_namespaced_pod_status(pod, ns, body)
        except ApiException as e:
            assert e.status == 403 and "ValidatingAdmissionPolicy 'repack-nominations'" in e.body, (body, e.body)
            return e.body
        pytest.fail(f"the coordinator's status patch {body} of pod {pod} was admitted")

    # RBAC lets the coordinator patch pods/status on every pod: the policy is what refuses the writes below
    can = control_plane.kubectl("auth", "can-i", "patch", "pods", "--subresource=status", "-n", ns,
                                f"--as={coordinator}", check=False)
    assert can.stdout.strip() == "yes", can.stdout + can.stderr
    said = refused("unrelated", {"status": {"nominatedNodeName": "some-node"}})
    assert "may set status.nominatedNodeName only to" in said and "not to some-node" in said, said
    assert not core.read_namespaced_pod("unrelated", ns).status.nominated_node_name

    # marked as a target pod of a run (through the pods patch the coordinator may make), the hint to
    # the marked node goes through; to any other node, or with any other change, it does not
    as_coordinator.patch_namespaced_pod("target", ns, {"metadata": {"annotations": {
        TARGET_RUN_ANNOTATION: "run-x/uid-x", TARGET_NODE_ANNOTATION: "node-x"}}})
    for body in ({"status": {"nominatedNodeName": "node-y"}},
                 {"status": {"nominatedNodeName": "node-x", "podIP": "10.9.9.9", "podIPs": [{"ip": "10.9.9.9"}]}},
                 {"status": {"nominatedNodeName": "node-x", "conditions": [
                     {"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}},
                 {"metadata": {"labels": {"app": "hijacked"}}, "status": {"nominatedNodeName": "node-x"}},
                 {"metadata": {"annotations": {TARGET_NODE_ANNOTATION: "node-y"}}, "status": {"nominatedNodeName": "node-y"}}):
        refused("target", body)
    pod = core.read_namespaced_pod("target", ns)
    assert not pod.status.nominated_node_name and not pod.status.pod_ip and "app" not in (pod.metadata.labels or {})
    as_coordinator.patch_namespaced_pod_status("target", ns, {"status": {"nominatedNodeName": "node-x"}})
    assert core.read_namespaced_pod("target", ns).status.nominated_node_name == "node-x"


def test_records_written_by_a_status_writer_evict_nothing(
        installed, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path):
    """Security finding 3 on the installed controller: an admin's Execute waits for the execute
    Lease (held here); a user who may write repackruns/status but not evict puts a complete,
    self-consistent plan and a record into it, naming a protected pod the planner would never move.
    When the Lease is free the controller finds records it did not seal, ends the run Failed,
    RelocationRecordsInvalid, and the API server's audit log shows no Eviction for any pod. The
    admin's manifest, server-side applied twice without the creator annotations, keeps the record
    the webhook filled in (the policy would refuse dropping it)."""
    from kubectl_repack.engine.mutex import COOLDOWN_ANNOTATION, LAST_COMPLETION_ANNOTATION
    from tests.e2e.execute_helpers import build_seed_layout, delete_runs, get_run, reason_of, unique

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    coordination = client.CoordinationV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    ns = make_namespace("repack-forged")
    nodes = ("forged-node-01", "forged-node-02", "forged-node-03")
    layout = build_seed_layout(api, fake_nodes, ns, nodes)
    every_pod = {uid for _, uid in list(layout["batch"].values()) + list(layout["protected"].values())}
    mallory = unique("mallory")
    rbac.create_cluster_role({"metadata": {"name": mallory}, "rules": [
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns", "repackruns/status"],
         "verbs": ["get", "list", "watch", "patch", "update"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": mallory}, "subjects": [
        {"kind": "User", "name": mallory, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": mallory, "apiGroup": "rbac.authorization.k8s.io"}})
    name = unique("forged-execute")

    def set_holder(holder):
        """The execute Lease (made by install; nobody may create it) held by `holder`, or free (None),
        and with no cooldown pending (the seed flow's Execute left one)."""
        lease = coordination.read_namespaced_lease("repack-execute", NAMESPACE)
        lease.spec.holder_identity, lease.spec.lease_duration_seconds = holder, 3600
        lease.spec.acquire_time = lease.spec.renew_time = dt.datetime.now(dt.timezone.utc)
        kept = {k: v for k, v in (lease.metadata.annotations or {}).items() if k != LAST_COMPLETION_ANNOTATION}
        lease.metadata.annotations = dict(kept, **{COOLDOWN_ANNOTATION: "0s"})   # as the seed flow leaves it
        coordination.replace_namespaced_lease("repack-execute", NAMESPACE, lease)
    try:
        set_holder("e2e-hold")
        manifest = _sample("ascend-execute-001.yaml", name, eviction={"gracePeriodSeconds": 0})
        for _ in range(2):   # server-side, twice, the manifest without the creator annotations
            path = tmp_path / f"{name}.yaml"
            path.write_text(yaml.safe_dump(manifest))
            out = control_plane.kubectl("apply", "--server-side", "-f", str(path), check=False)
            assert out.returncode == 0, out.stdout + out.stderr
        admin = json.loads(control_plane.kubectl("auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]
        assert get_run(api, name)["metadata"]["annotations"]["repack.volcano.sh/creator-username"] == admin["username"]
        wait_for("the Execute to wait for the held Lease", lambda: (reason_of(get_run(api, name), "Progressing")
                                                                     or ("", ""))[1] == "AnotherRunActive" or None,
                 timeout=120)

        victim, (node, uid) = sorted(layout["protected"].items())[0]
        group = core.read_namespaced_pod(victim, ns).metadata.annotations["scheduling.k8s.io/group-name"]
        forged = {"status": {
            "plan": {"summary": {"fragBeforePercent": 50, "fragAfterPercent": 0, "freedNodeCount": 1,
                                 "movedCardCount": 4},
                     "moves": [{"namespace": ns, "podGroupName": group, "cards": 4,
                                "pods": [{"name": victim, "fromNode": node, "toNode": nodes[0], "cards": 4}]}],
                     "freedNodes": [node]},
            "relocations": [{"namespace": ns, "podGroupName": group, "victimPodName": victim, "victimPodUID": uid,
                             "plannedNodeName": nodes[0], "eviction": {"phase": "Pending"},
                             "placement": {"phase": "WaitingForReplacement"}}]}}
        out = control_plane.kubectl("patch", "repackrun", name, "--subresource=status", "--type=merge", "-p",
                                    json.dumps(forged), f"--as={mallory}", check=False)
        assert out.returncode == 0, out.stderr
        set_holder(None)
        run = wait_for("the forged run to end", lambda: _finished(api, name), timeout=180)
        assert reason_of(run, "Failed") == ("True", "RelocationRecordsInvalid"), run["status"]
        assert "carry no seal" in run["status"]["message"] and "nothing was evicted" in run["status"]["message"]
        counts = audit_evictions(control_plane, every_pod)
        assert all(codes == [] for codes in counts.values()), counts
        assert core.read_namespaced_pod(victim, ns).metadata.uid == uid       # still the same pod, never evicted
        FIGURES["forged_records_refusal"] = run["status"]["message"]
        print(f"\nforged records: {run['status']['message']}\nEviction calls per pod (audit log): {counts}")
    finally:
        delete_runs(api, [name])
        rbac.delete_cluster_role_binding(mallory)
        rbac.delete_cluster_role(mallory)
        lease = coordination.read_namespaced_lease("repack-execute", NAMESPACE)
        if lease.spec.holder_identity == "e2e-hold":
            set_holder(None)

class EvictionHold:
    """A validating webhook for pods/eviction, served here over TLS, that holds the second distinct
    eviction it sees until released: the controller is then, for certain, in the middle of a gang."""

    def __init__(self, tmp_path):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        from kubectl_repack.deploy import certs

        self.bundle = certs.generate("eviction-hold", "e2e", extra_sans=["127.0.0.1"])
        paths = certs.write_pem(tmp_path / "hold-tls", self.bundle)
        self.seen: list = []
        self.arrived, self.released = threading.Event(), threading.Event()
        hold = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                pod = review["request"].get("name")
                if pod not in hold.seen:
                    hold.seen.append(pod)
                if len(hold.seen) > 1 and pod == hold.seen[1] and not hold.released.is_set():
                    hold.arrived.set()
                    hold.released.wait(25)
                body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                   "response": {"uid": review["request"]["uid"], "allowed": True}}).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:      # the API server stopped waiting for the held answer
                    hold.dropped += 1

            def log_message(self, *args):
                pass

        self.dropped = 0
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(paths["tls.crt"]), str(paths["tls.key"]))
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def configuration(self, name, namespace):
        import base64

        return {"metadata": {"name": name}, "webhooks": [{
            "name": "hold.e2e.repack.volcano.sh", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Ignore", "timeoutSeconds": 30,
            "clientConfig": {"url": f"https://127.0.0.1:{self.server.server_port}/hold",
                             "caBundle": base64.b64encode(self.bundle.ca_cert_pem).decode()},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods/eviction"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}}]}

    def close(self):
        self.released.set()
        self.server.shutdown()


def test_controller_killed_mid_gang_continues_and_evicts_no_pod_twice(
        installed, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path):
    """The controller's container is killed (SIGKILL through containerd) while the second eviction
    of the gang is in flight; the restarted controller continues the run from its records. The
    API server's audit log shows one successful Eviction per victim."""
    from tests.e2e.execute_helpers import build_seed_layout, delete_runs, get_run, reason_of, unique

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    reg = client.AdmissionregistrationV1Api(api)
    ns = make_namespace("repack-failover")
    nodes = ("failover-node-01", "failover-node-02", "failover-node-03")
    layout = build_seed_layout(api, fake_nodes, ns, nodes)
    victims = {uid for _, uid in layout["batch"].values()}
    hold = EvictionHold(tmp_path)
    config = unique("eviction-hold")
    reg.create_validating_webhook_configuration(hold.configuration(config, ns))
    name = unique("failover-execute")
    try:
        def controller_pod():
            pods = [p for p in core.list_namespaced_pod(
                NAMESPACE, label_selector=f"app.kubernetes.io/name={manifests.CONTROLLER_NAME}").items
                if p.metadata.deletion_timestamp is None]
            return pods[0] if len(pods) == 1 else None
        before = controller_pod()
        restarts = before.status.container_statuses[0].restart_count
        _kubectl_apply(control_plane, _sample("ascend-execute-001.yaml", name, eviction={"gracePeriodSeconds": 0}),
                       tmp_path)
        assert hold.arrived.wait(180), f"no second eviction reached the hold (seen: {hold.seen})"
        mid = get_run(api, name)["status"]["relocations"]
        FIGURES["failover_records_at_kill"] = [(r["victimPodName"], r["eviction"]["phase"]) for r in mid]
        assert [r["eviction"]["phase"] for r in mid] == ["Accepted", "InProgress"], mid
        container = before.status.container_statuses[0].container_id.split("://", 1)[1]
        t_kill = time.monotonic()
        real_node.ctr("task", "kill", "-s", "SIGKILL", container)
        wait_for("the controller container to restart", lambda: (lambda p: p and p.status.container_statuses[0]
                 .restart_count > restarts)(controller_pod()), timeout=120)
        hold.released.set()             # the dead controller's call is answered now, or was dropped
        run = wait_for("the run to end after the fail-over", lambda: _finished(api, name), timeout=300)
        FIGURES["failover_seconds_from_kill_to_end"] = round(time.monotonic() - t_kill, 1)
        assert reason_of(run, "Complete") == ("True", "ExecutionCompleted"), json.dumps(run["status"], indent=1)
        assert run["status"]["result"]["freedNodes"] == [nodes[0]]
        counts = audit_evictions(control_plane, victims)
        FIGURES["failover_audit"] = counts
        assert all(codes.count(201) == 1 for codes in counts.values()), counts
        print(f"\nrecords when the container was killed: {FIGURES['failover_records_at_kill']}; "
              f"Eviction calls per victim UID (answer codes, from the audit log): {counts}; "
              f"kill -> Succeeded {FIGURES['failover_seconds_from_kill_to_end']}s")
    finally:
        hold.close()
        reg.delete_validating_webhook_configuration(config)
        delete_runs(api, [name])


def test_gates_are_lifted_within_the_promise_while_the_coordinator_is_down(installed, real_node, control_plane,
                                                                        make_namespace):
    """Security finding 10: with the coordinator's Deployment scaled to 0, a pod our webhook gated
    20 s ago is ungated by the controller once the 30 s placement lease is over (at most one gate
    sweep later), while a pod gated just now keeps its gate; other gates are never touched."""
    from kubectl_repack.api.gates import (GATED_AT_ANNOTATION, PLACEMENT_GATE, PLACEMENT_GATE_OWNER_ANNOTATION,
                                          PLACEMENT_LEASE)
    from kubectl_repack.api.times import rfc3339
    from webhook.controller.loop import GATE_SWEEP_SECONDS, DEFAULT_INTERVAL

    api = control_plane.api_client
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    ns = make_namespace("repack-gates")
    apps.patch_namespaced_deployment_scale(manifests.COORDINATOR_NAME, NAMESPACE, {"spec": {"replicas": 0}})
    try:
        wait_for("the coordinator's pod gone", lambda: installed_pod(core, manifests.COORDINATOR_NAME) is None
                 and not core.list_namespaced_pod(NAMESPACE, label_selector="app.kubernetes.io/name="
                                                  + manifests.COORDINATOR_NAME).items, timeout=120)

        def gated_pod(name, gated_at):
            """A pod carrying our gate (and another) as if our webhook had gated it at `gated_at`. The
            webhook strips repack's marks from every pod it admits (SEC-5), so the marks are written
            right after the create, as an admin; should the controller's sweep lift the unmarked gate
            in between, that pod is replaced by a new one."""
            annotations = {GATED_AT_ANNOTATION: rfc3339(gated_at), PLACEMENT_GATE_OWNER_ANNOTATION: "some-run/uid"}
            for attempt in range(3):
                pod_name = f"{name}-{attempt}"
                core.create_namespaced_pod(ns, {"metadata": {"name": pod_name, "annotations": annotations},
                                                "spec": {"schedulingGates": [{"name": PLACEMENT_GATE},
                                                                             {"name": "example.com/hold"}],
                                                         "containers": [{"name": "c", "image": "registry.invalid/never:1"}]}})
                core.patch_namespaced_pod(pod_name, ns, {"metadata": {"annotations": annotations}})
                pod = core.read_namespaced_pod(pod_name, ns)
                if [g.name for g in pod.spec.scheduling_gates or []] == [PLACEMENT_GATE, "example.com/hold"]:
                    return pod_name
            pytest.fail("the controller lifted the gate of every freshly created pod before its marks were written")
        # whole seconds: the annotation holds seconds (rfc3339), so the controller counts from there
        gated_at = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=20)).replace(microsecond=0)
        old = gated_pod("old", gated_at)
        fresh_name = gated_pod("fresh", dt.datetime.now(dt.timezone.utc))

        def lifted():
            pod = core.read_namespaced_pod(old, ns)
            return [g.name for g in pod.spec.scheduling_gates or []] == ["example.com/hold"] or None
        wait_for("the old pod's placement gate lifted", lifted, timeout=90)
        took = (dt.datetime.now(dt.timezone.utc) - gated_at).total_seconds()
        bound = PLACEMENT_LEASE.total_seconds() + GATE_SWEEP_SECONDS + DEFAULT_INTERVAL + 5   # + polling slack
        assert PLACEMENT_LEASE.total_seconds() <= took <= bound, took
        fresh = core.read_namespaced_pod(fresh_name, ns)
        assert [g.name for g in fresh.spec.scheduling_gates] == [PLACEMENT_GATE, "example.com/hold"]
        assert PLACEMENT_GATE_OWNER_ANNOTATION not in (core.read_namespaced_pod(old, ns).metadata.annotations or {})
        FIGURES["gate_lifted_after_seconds"] = round(took, 1)
        print(f"\ncoordinator down: the gate set {took:.1f}s earlier was lifted by the controller (promise "
              f"{PLACEMENT_LEASE.total_seconds():.0f}s + one {GATE_SWEEP_SECONDS:.0f}s sweep)")
    finally:
        apps.patch_namespaced_deployment_scale(manifests.COORDINATOR_NAME, NAMESPACE, {"spec": {"replicas": 1}})
        wait_for("the coordinator back and holding its Lease", lambda: (lambda lease: lease.spec.holder_identity
                 and installed_pod(core, manifests.COORDINATOR_NAME) is not None
                 and lease.spec.holder_identity.startswith(installed_pod(core, manifests.COORDINATOR_NAME).metadata.name))(
                     client.CoordinationV1Api(api).read_namespaced_lease("repack-coordinator", NAMESPACE)) or None,
                 timeout=180)

def test_uninstall_removes_everything_install_created(installed, real_node, control_plane):
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    def container_ids():
        # every installed container running (a test before may have just restarted one of them)
        pods = [installed_pod(core, name) for name in (manifests.NAME, manifests.COORDINATOR_NAME,
                                                       manifests.CONTROLLER_NAME)]
        ids = [cs.container_id for pod in pods if pod is not None for cs in pod.status.container_statuses or ()]
        return ids if all(p is not None for p in pods) and ids and all(ids) else None
    containers = [c.split("://", 1)[1] for c in wait_for("every installed container running", container_ids,
                                                        timeout=120)]
    out = repack(control_plane.kubeconfig, "uninstall", "--namespace", NAMESPACE)
    assert out.returncode == 0, out.stdout + out.stderr
    installed["uninstalled"] = True
    print(out.stdout)

    reg = client.AdmissionregistrationV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    apps = client.AppsV1Api(api)
    for what, read in [
        ("MutatingWebhookConfiguration", lambda: reg.read_mutating_webhook_configuration(manifests.CONFIG_NAME)),
        ("ClusterRole", lambda: rbac.read_cluster_role(manifests.NAME)),
        ("ClusterRoleBinding", lambda: rbac.read_cluster_role_binding(manifests.NAME)),
        ("Deployment", lambda: apps.read_namespaced_deployment(manifests.NAME, NAMESPACE)),
        ("Deployment", lambda: apps.read_namespaced_deployment(manifests.COORDINATOR_NAME, NAMESPACE)),
        ("Service", lambda: core.read_namespaced_service(manifests.NAME, NAMESPACE)),
        ("Service", lambda: core.read_namespaced_service(manifests.COORDINATOR_NAME, NAMESPACE)),
        ("ValidatingAdmissionPolicy", lambda: reg.read_validating_admission_policy("repack-run-creator")),
        ("ValidatingAdmissionPolicy", lambda: reg.read_validating_admission_policy("repack-pod-writes")),
        ("Secret", lambda: core.read_namespaced_secret(manifests.SECRET_NAME, NAMESPACE)),
    ]:
        assert absent(read), f"{what} still there after uninstall"
    # The namespace install created goes, and with it the pod: the kubelet stops its containers.
    wait_for("the namespace gone", lambda: absent(lambda: core.read_namespace(NAMESPACE)), 120)
    wait_for("the pod's containers stopped on the node",
             lambda: not set(containers) & set(real_node.running_tasks()), 60)
    for pattern in ("-m webhook.coordinator", "-m webhook ", "-m webhook.controller"):
        left = [p for p in local_processes(pattern) if p[2]]
        assert not left, f"containerised `{pattern}` still running after uninstall: {left}"
        assert not outside_containers(pattern, control_plane.cp.run_dir)
    client.ApiextensionsV1Api(api).read_custom_resource_definition("repackruns.repack.volcano.sh")  # kept
