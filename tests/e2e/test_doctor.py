"""`kubectl repack doctor`, `cancel` and `status -w` against the real control plane (VER-3, EXEC-10, CLI-1).

Nothing of the in-cluster part is installed here (no webhook, no controller: the controller is not
on this branch), so doctor must say so with FAIL lines while the CRD, RBAC and Volcano checks pass;
cancel and status -w act on RepackRuns whose status the test writes itself through the status
subresource, as the controller would.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from kubernetes import client

from kubectl_repack.api.run import (COND_COMPLETE, COND_FAILED, COND_PROGRESSING, Reason, derive_phase,
                                    set_condition)
from kubectl_repack.api.times import rfc3339, utcnow
from kubectl_repack.api.versions import TESTED_KUBERNETES, TESTED_VOLCANO
from kubectl_repack.kube.runs import RunStore
from tests.e2e.helpers import wait_for
from tests.harness import NPU_RESOURCE
from tests.harness.controlplane import REPO_ROOT

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "repack.volcano.sh", "v1alpha1", "repackruns"
CANCEL = "repack.volcano.sh/cancel"
CHECKS = ["crd", "webhook", "webhook-endpoints", "webhook-cert", "controller", "coordinator", "rbac-create",
          "rbac-patch", "volcano-crds", "volcano-scheduler", "volcano-version", "kubernetes", "admission-policies",
          "webhook-network-policy"]


def repack(kubeconfig, *args, timeout=120):
    """`python -m kubectl_repack.cli ARGS --kubeconfig KUBECONFIG`, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "kubectl_repack.cli", *args, "--kubeconfig", kubeconfig],
                          capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT)


def repack_process(kubeconfig, *args):
    return subprocess.Popen([sys.executable, "-u", "-m", "kubectl_repack.cli", *args, "--kubeconfig", kubeconfig],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT)


def by_check(stdout):
    """{check name: (verdict, rest of the line)} of doctor's output, in order."""
    out = {}
    for line in stdout.splitlines():
        verdict, name, detail = line.split(None, 2)
        out[name] = (verdict, detail)
    return out


@pytest.fixture
def runs(control_plane):
    """Creates Execute RepackRuns with unique names (deleted afterwards); `progress` writes a status
    through the status subresource, as the controller would."""
    store = RunStore(control_plane.cp.new_api_client())
    made = []

    class Runs:
        @staticmethod
        def create(prefix="doctor-run"):
            name = f"{prefix}-{uuid.uuid4().hex[:6]}"
            store.create({"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackRun", "metadata": {"name": name},
                          "spec": {"mode": "Execute", "goals": [{"resource": NPU_RESOURCE}]}})
            made.append(name)
            return name

        @staticmethod
        def progress(name, ctype, status, reason, message, evicted=0, bound=0, total=0):
            def mutate(st):
                now = rfc3339(utcnow())
                set_condition(st, ctype, status, reason, message, now)
                if ctype != COND_PROGRESSING and status == "True":
                    set_condition(st, COND_PROGRESSING, "False", reason, message, now)
                st["phase"], st["message"] = derive_phase(st), message
                st["relocations"] = [{
                    "namespace": "team-a", "victimPodName": f"worker-{i}", "podGroupName": "train",
                    "plannedNodeName": "node-2",
                    "eviction": {"phase": "Accepted" if i < evicted else "Pending"},
                    "placement": {"phase": "Placed" if i < bound else "WaitingForReplacement"}} for i in range(total)]
            return store.update_status(name, mutate)

        get = staticmethod(store.get)

    yield Runs
    for name in made:
        store.delete(name)


def test_doctor_on_a_cluster_without_the_in_cluster_part(control_plane, make_namespace):
    done = repack(control_plane.kubeconfig, "doctor")
    print(done.stdout)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == ""
    checks = by_check(done.stdout)
    assert list(checks) == CHECKS
    assert {name: verdict for name, (verdict, _) in checks.items()} == {
        "crd": "OK", "webhook": "FAIL", "webhook-endpoints": "FAIL", "webhook-cert": "WARN", "controller": "FAIL",
        "coordinator": "FAIL", "rbac-create": "OK", "rbac-patch": "OK", "volcano-crds": "OK",
        "volcano-scheduler": checks["volcano-scheduler"][0], "volcano-version": "OK", "kubernetes": "OK", "admission-policies": "FAIL",
        "webhook-network-policy": "WARN"}
    assert checks["kubernetes"][1] == f"Kubernetes {TESTED_KUBERNETES} (>= 1.30; CI tests {TESTED_KUBERNETES})"
    # The harness records the vc-scheduler it runs as Volcano's installer would (a Deployment).
    assert checks["volcano-version"][1] == (f"Volcano {TESTED_VOLCANO} (Deployment volcano-system/volcano-scheduler; "
                                            f"CI tests {TESTED_VOLCANO})")
    assert checks["crd"][1] == "repackruns.repack.volcano.sh v1alpha1 Established, schema and printer columns current"
    assert checks["controller"][1] == ("Lease repack-system/repack-controller not found: the in-cluster RepackRun "
                                       "controller is not running — kubectl repack install")
    assert checks["webhook"][1].startswith("MutatingWebhookConfiguration repack-placement not found")
    # No NetworkPolicy: a WARN naming the fix (tests/e2e/test_network_policy.py has more). Alone, the
    # harness's API server (--endpoint-reconciler-type=none) advertises no address, so the fix is the
    # flag; in a session with a real node it advertises the bridge's gateway, which the fix names.
    policy = checks["webhook-network-policy"][1]
    assert policy.startswith("no NetworkPolicy repack-system/repack-webhook: the webhook port (8443) is reachable "
                             "from every pod"), policy
    gateway = control_plane.cp.api_host
    if control_plane.cp.node_network is None:
        assert "(the Service default/kubernetes has no endpoints" in policy, policy
        assert "kubectl repack install --apiserver-cidr CIDR" in policy, policy
    else:
        assert f"it reads the API server's addresses, now {gateway}/32, and admits only them" in policy, policy

    # The harness's vc-scheduler runs without leader election (no Lease): a PodGroup it moves to
    # Inqueue is the sign that it acts.
    ns = make_namespace("doctor")
    custom = client.CustomObjectsApi(control_plane.api_client)
    custom.create_namespaced_custom_object("scheduling.volcano.sh", "v1beta1", ns, "podgroups", {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "gang"},
        "spec": {"minMember": 1, "queue": "default"}})
    wait_for("vc-scheduler to write the PodGroup's status", lambda: (custom.get_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups", "gang").get("status") or {}).get("phase"), timeout=120)
    again = by_check(repack(control_plane.kubeconfig, "doctor").stdout)
    assert again["volcano-scheduler"][0] == "OK", again["volcano-scheduler"]
    assert f"PodGroup {ns}/gang status written by vc-scheduler" in again["volcano-scheduler"][1]


def test_doctor_reads_volcanos_version_from_its_scheduler_deployment(control_plane):
    """Volcano as its installer deploys it (Deployment volcano-system/volcano-scheduler, which the harness
    records for the vc-scheduler it runs): doctor names the version, warns on one CI does not test
    (naming the tested one), and says so when it finds no scheduler image at all."""
    apps = client.AppsV1Api(control_plane.api_client)
    original = apps.read_namespaced_deployment("volcano-scheduler", "volcano-system")
    image = original.spec.template.spec.containers[0].image
    assert image == f"docker.io/volcanosh/vc-scheduler:{TESTED_VOLCANO}"

    def set_image(value):
        apps.patch_namespaced_deployment("volcano-scheduler", "volcano-system", {"spec": {"template": {"spec": {
            "containers": [{"name": "volcano-scheduler", "image": value}]}}}})

    def line():
        return by_check(repack(control_plane.kubeconfig, "doctor").stdout)["volcano-version"]

    try:
        set_image("docker.io/volcanosh/vc-scheduler:v1.15.1")
        assert line() == ("WARN", f"Volcano v1.15.1 (Deployment volcano-system/volcano-scheduler) is not tested: CI "
                                  f"tests Volcano {TESTED_VOLCANO} only")
        set_image("docker.io/volcanosh/vc-controller-manager:v1.14.1")
        assert line() == ("WARN", f"no Deployment in volcano-system runs a vc-scheduler image: Volcano's version "
                                  f"unknown (CI tests Volcano {TESTED_VOLCANO})")
    finally:
        set_image(image)
    assert line() == ("OK", f"Volcano {TESTED_VOLCANO} (Deployment volcano-system/volcano-scheduler; CI tests "
                            f"{TESTED_VOLCANO})")


def test_doctor_as_a_user_without_rights_still_runs_every_check(control_plane):
    """Impersonated (the harness's admin may impersonate): reads are refused, each check says so
    on its own line (WARN: it could not tell), and the access reviews name the missing permission."""
    done = repack(control_plane.kubeconfig, "doctor", "--as", "nobody-in-particular")
    print(done.stdout)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    checks = by_check(done.stdout)
    assert list(checks) == CHECKS
    assert checks["rbac-create"][0] == "FAIL"
    assert checks["rbac-create"][1].startswith("may not create repackruns.repack.volcano.sh (needed by kubectl "
                                               "repack apply and kubectl apply of a RepackRun)")
    # Reading CRDs is refused, API discovery is not: the CRD and Volcano are seen to be served.
    assert checks["crd"][0] == "WARN" and checks["crd"][1].startswith(
        "repack.volcano.sh/v1alpha1 repackruns is served; the CRD itself is not readable with your credentials")
    assert checks["volcano-crds"][0] == "OK"
    # What the caller may not read is not an answer about the cluster: WARN, not FAIL.
    assert checks["controller"][0] == "WARN" and "HTTP 403" in checks["controller"][1]
    assert {verdict for verdict, _ in checks.values()} == {"OK", "WARN", "FAIL"}
    assert [n for n, (verdict, _) in checks.items() if verdict == "FAIL"] == ["rbac-create", "rbac-patch"]


def test_cancel_sets_the_annotation_and_leaves_a_finished_run_alone(control_plane, runs):
    kc = control_plane.kubeconfig
    name = runs.create()
    runs.progress(name, COND_PROGRESSING, "True", Reason.EXECUTING, "evicting", evicted=1, total=2)
    spec = runs.get(name)["spec"]
    done = repack(kc, "cancel", name)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"repackrun.repack.volcano.sh/{name} cancel requested\n", "")
    obj = runs.get(name)
    assert obj["metadata"]["annotations"][CANCEL] == "true"
    assert obj["spec"] == spec and obj["status"]["phase"] == "Running"
    assert repack(kc, "cancel", name, "-o", "name").stdout == f"repackrun.repack.volcano.sh/{name}\n"

    # What the controller then does (simulated): the run ends Failed/Cancelled.
    runs.progress(name, COND_FAILED, "True", Reason.CANCELLED, "cancelled: 1 of 2 moved", evicted=1, total=2)
    rv = runs.get(name)["metadata"]["resourceVersion"]
    done = repack(kc, "cancel", name)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (f"repackrun.repack.volcano.sh/{name} already finished (Failed, Cancelled): "
                           "nothing to cancel\n")
    assert runs.get(name)["metadata"]["resourceVersion"] == rv    # not written

    missing = repack(kc, "cancel", "no-such-run-x")
    assert missing.returncode == 1 and missing.stdout == ""
    assert missing.stderr == ('error: reading repackrun no-such-run-x: repackruns.repack.volcano.sh '
                              '"no-such-run-x" not found (HTTP 404)\n')
    bad = repack(kc, "cancel", "Bad_Name")
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr


def test_status_watch_follows_pending_progress_and_the_end(control_plane, runs):
    name = runs.create()
    steps = [
        (COND_PROGRESSING, "False", Reason.ANOTHER_RUN_ACTIVE, "waiting for repack-execute-000 (Lease held)", 0, 0),
        (COND_PROGRESSING, "False", Reason.COOLDOWN, "cooldown ends at 13:20:00", 0, 0),
        (COND_PROGRESSING, "True", Reason.EXECUTING, "evicting", 0, 0),
        (COND_PROGRESSING, "True", Reason.EXECUTING, "evicting", 1, 0),
        (COND_PROGRESSING, "True", Reason.EXECUTING, "evicting", 2, 1),
        (COND_COMPLETE, "True", Reason.COMPLETED, "goal met", 2, 2),
    ]
    runs.progress(name, *steps[0][:4], total=2)
    proc = repack_process(control_plane.kubeconfig, "status", name, "-w", "--timeout", "3m")

    def controller():
        for ctype, status, reason, message, evicted, bound in steps[1:]:
            time.sleep(2.5)   # more than the 1 s poll: every step is seen
            runs.progress(name, ctype, status, reason, message, evicted=evicted, bound=bound, total=2)
    writer = threading.Thread(target=controller)
    writer.start()
    out, err = proc.communicate(timeout=120)
    writer.join()
    assert proc.returncode == 0, err
    assert err.splitlines() == [
        "Pending (AnotherRunActive): evictions 0/2, replacements bound 0/0; waiting for repack-execute-000 (Lease held)",
        "Pending (ExecuteCooldownActive): evictions 0/2, replacements bound 0/0; cooldown ends at 13:20:00",
        "Running (Executing): evictions 0/2, replacements bound 0/0; evicting",
        "Running (Executing): evictions 1/2, replacements bound 0/1; evicting",
        "Running (Executing): evictions 2/2, replacements bound 1/2; evicting",
        "Succeeded (ExecutionCompleted): evictions 2/2, replacements bound 2/2; goal met",
    ]
    assert out.startswith(f"Name:        {name}\nMode:        Execute\n")
    assert "Phase:       Succeeded" in out and "ExecutionCompleted" in out


def test_status_watch_timeout_and_ctrl_c_leave_the_run_alone(control_plane, runs):
    kc = control_plane.kubeconfig
    name = runs.create()
    runs.progress(name, COND_PROGRESSING, "False", Reason.COOLDOWN, "cooldown ends at 13:20:00")
    done = repack(kc, "status", name, "-w", "--timeout", "3s")
    assert done.returncode == 4, done.stderr
    assert done.stderr.splitlines() == [
        "Pending (ExecuteCooldownActive): cooldown ends at 13:20:00",
        f"stopped following after 3s: the run is Pending (ExecuteCooldownActive); it goes on in the cluster: "
        f"kubectl repack status {name} -w"]
    assert "Phase:       Pending" in done.stdout

    proc = repack_process(kc, "status", name, "-w")
    wait_for("the first progress line", lambda: proc.stderr.readline(), timeout=60)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err == f"stopped following; the run goes on in the cluster: kubectl repack status {name} -w\n"
    assert out == ""
    assert runs.get(name)["status"]["phase"] == "Pending"
    assert CANCEL not in (runs.get(name)["metadata"].get("annotations") or {})
