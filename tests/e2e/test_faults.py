"""Faults and races against the real API server (EXEC-2, EXEC-3, EXEC-9):

- an API outage longer than the execute Lease, mid-run: the kube-apiserver process of the harness
  is stopped right after the first eviction of a gang and started again later; the run must not
  issue another eviction on a Lease it could not confirm, and `apply --resume` finishes it;
- a PodDisruptionBudget tightened after the first eviction of a gang: the run stops evicting that
  gang, reports EvictionBlockedByPDB naming the PDB, and says in status that the gang is partly
  evicted;
- two coordinators against one cluster: only the Lease holder acts (releases a placement gate no
  relocation holds), the other does nothing; when the holder is killed, the other takes over within
  the Lease duration.

The apply side runs in-process on the real kube layer (RunStore, ExecuteLease, LiveCluster) so the
tests can act at an exact point of the run (after the first Eviction call); the coordinators are
separate processes.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from kubernetes import client

from kubectl_repack.engine import mutex
from kubectl_repack.engine.execute_lease import ExecuteLease
from kubectl_repack.engine.executor import LeaseLost
from kubectl_repack.engine.workflow import ApplyRequest, apply_run
from kubectl_repack.kube.client import connect
from kubectl_repack.kube.objects import LiveCluster
from kubectl_repack.kube.runs import RunStore
from tests.e2e.execute_helpers import (build_seed_layout, cli, delete_runs, execute_run,
                                       get_run, unique, wait_for)
from tests.harness.controlplane import REPO_ROOT

pytestmark = pytest.mark.e2e

LEASE_NAMESPACE = "repack-e2e-faults"
OUTAGE_SECONDS = mutex.LEASE_DURATION_SECONDS + 5      # the API server is down longer than the Lease


@pytest.fixture(autouse=True)
def _lease_namespace(monkeypatch):
    monkeypatch.setenv("REPACK_NAMESPACE", LEASE_NAMESPACE)


@pytest.fixture
def runs_to_delete(control_plane):
    names: list = []
    yield names
    delete_runs(control_plane.api_client, names)


class Notes:
    def __init__(self):
        self.lines = []

    def note(self, message):
        self.lines.append(message)

    def progress(self, progress):
        pass


class HookedCluster(LiveCluster):
    """The real LiveCluster; `after_evict(name, code)` runs after each Eviction call returned."""

    def __init__(self, api, after_evict):
        super().__init__(api)
        self.after_evict = after_evict
        self.evictions = []

    def evict(self, namespace, name, uid, grace_seconds):
        code, message = super().evict(namespace, name, uid, grace_seconds)
        self.evictions.append((name, uid, code))
        self.after_evict(name, code)
        return code, message


def apiserver_down(cp, seconds):
    """Stop the harness's kube-apiserver process, keep it down `seconds`, start the same command
    again and wait until it is ready. Returns the measured time it did not answer."""
    comp = cp.components["kube-apiserver"]
    t0 = time.monotonic()
    comp.stop()
    time.sleep(max(0.0, seconds - (time.monotonic() - t0)))
    comp.start()
    deadline = time.monotonic() + 120
    while True:
        try:
            if cp._apiserver_ready():
                break
        except Exception:  # noqa: BLE001 - connection refused while it starts
            pass
        comp.check_alive()
        if time.monotonic() > deadline:
            raise AssertionError(f"kube-apiserver did not come back; log {comp.log_path}")
        time.sleep(0.2)
    return time.monotonic() - t0


def _pods(core, ns):
    return {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(ns).items
            if p.metadata.deletion_timestamp is None}


def _nodes(tag):
    return (f"{tag}-node-01", f"{tag}-node-02", f"{tag}-node-03")


def _condition(run, ctype):
    return next(((c["status"], c["reason"], c["message"]) for c in run["status"]["conditions"]
                 if c["type"] == ctype), None)


# ---- an API outage longer than the Lease ---------------------------------------------------------

@pytest.fixture
def controllers_restarted_afterwards(control_plane):
    """After a test that takes the API server down: fresh controllers for the tests that follow
    (see ControlPlane.restart_controllers for what went wrong without)."""
    yield
    control_plane.cp.restart_controllers()


def test_api_outage_longer_than_the_lease_stops_the_run_before_its_next_eviction(
        controllers_restarted_afterwards, control_plane, fake_nodes, make_namespace, runs_to_delete):
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    ns = make_namespace("repack-outage")
    layout = build_seed_layout(api, fake_nodes, ns, _nodes("outage"))
    name = unique("outage-execute")
    runs_to_delete.append(name)
    outage = {}

    def after_evict(pod, code):
        if not outage:      # right after the first eviction of the gang went through
            outage["first"] = (pod, code)
            outage["down"] = apiserver_down(control_plane.cp, OUTAGE_SECONDS)

    runner_api = connect(control_plane.kubeconfig)
    cluster = HookedCluster(runner_api, after_evict)
    lease = ExecuteLease(runner_api)
    request = ApplyRequest(name, execute_run(name), cooldown=dt.timedelta(0))
    with pytest.raises(LeaseLost) as exc:
        apply_run(request, RunStore(runner_api), lease, cluster, cluster, Notes())
    print(f"\nAPI server down for {outage['down']:.1f} s")
    assert outage["down"] > mutex.LEASE_DURATION_SECONDS
    assert outage["first"][1] == 201
    assert "could not be renewed" in str(exc.value) and "no further eviction was issued" in str(exc.value)
    assert f"--resume {name}" in str(exc.value)
    # Exactly one Eviction call: none was issued on a Lease that could not be confirmed.
    assert [e[0] for e in cluster.evictions] == [outage["first"][0]]
    run = get_run(api, name)
    st = run["status"]
    assert st["phase"] == "Running"
    phases = [r["eviction"]["phase"] for r in st["relocations"]]
    assert phases == ["Accepted", "Pending"], phases
    second = st["relocations"][1]
    assert _pods(core, ns).get(second["victimPodName"]) == second["victimPodUID"]   # still running, untouched
    lease_obj = client.CoordinationV1Api(api).read_namespaced_lease(mutex.LEASE_NAME, LEASE_NAMESPACE)
    assert not lease_obj.spec.holder_identity       # released on the way out (the API was back by then)

    # `apply --resume` continues from the records: only the second victim is evicted now.
    r = cli(control_plane.kubeconfig, "apply", "--local", "--resume", name, "--cooldown", "0s", "-o", "json")
    assert r.exit_code in (0, 5), r.output
    st = json.loads(r.stdout)["status"]
    assert [rec["eviction"]["phase"] for rec in st["relocations"]] == ["Accepted", "Accepted"]
    assert sorted(rec["victimPodUID"] for rec in st["relocations"]) == sorted(u for _, u in layout["batch"].values())


# ---- a PDB tightened mid-gang ---------------------------------------------------------------------

def test_a_pdb_tightened_after_the_first_eviction_stops_the_gang_and_says_so(
        control_plane, fake_nodes, make_namespace, runs_to_delete):
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    policy = client.PolicyV1Api(api)
    ns = make_namespace("repack-pdb")
    build_seed_layout(api, fake_nodes, ns, _nodes("pdbmid"))
    pdb_name = "batch-budget"
    policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": pdb_name},
        "spec": {"minAvailable": 0, "selector": {"matchLabels": {"volcano.sh/job-name": "ascend-batch-training"}}}})
    wait_for("the PDB to allow 2 disruptions", lambda: (lambda s: s and s.observed_generation == 1
                                                        and s.disruptions_allowed == 2)(
        policy.read_namespaced_pod_disruption_budget(pdb_name, ns).status), timeout=60)
    name = unique("pdb-execute")
    runs_to_delete.append(name)

    def after_evict(pod, code):
        if code == 201 and not tightened:
            tightened.append(pod)       # an operator tightens the budget right after the first eviction
            policy.patch_namespaced_pod_disruption_budget(pdb_name, ns, {"spec": {"minAvailable": 2}})
    tightened: list = []
    runner_api = connect(control_plane.kubeconfig)
    cluster = HookedCluster(runner_api, after_evict)
    request = ApplyRequest(name, execute_run(name), cooldown=dt.timedelta(0),
                           eviction_retry_timeout=dt.timedelta(seconds=6))
    before = _pods(core, ns)
    result = apply_run(request, RunStore(runner_api), ExecuteLease(runner_api), cluster, cluster, Notes())
    run = result.run
    st = run["status"]
    first, second = st["relocations"]
    assert first["eviction"]["phase"] == "Accepted" and first["victimPodName"] == tightened[0]
    assert second["eviction"]["phase"] == "Rejected", second
    assert f"disruption budget {pdb_name}" in second["eviction"]["message"], second["eviction"]["message"]
    assert {c for _, _, c in cluster.evictions[1:]} == {429}        # retried, never accepted
    assert before.get(second["victimPodName"]) == second["victimPodUID"]
    assert _pods(core, ns).get(second["victimPodName"]) == second["victimPodUID"]   # the second worker runs on
    status, reason, message = _condition(run, "Failed")
    assert (st["phase"], status, reason) == ("Failed", "True", "EvictionBlockedByPDB")
    assert pdb_name in message
    assert re.search(rf"left partly evicted: {ns}/\S+: 1 of 2 pod\(s\) evicted", message), message


# ---- two coordinators -----------------------------------------------------------------------------

COORD_LEASE_S = 6


class Coordinator:
    def __init__(self, tag, kubeconfig, namespace, log_dir):
        self.tag = tag
        self.log_path = os.path.join(log_dir, f"coordinator-{tag}.log")
        self.argv = [sys.executable, "-m", "webhook.coordinator", "--kubeconfig", kubeconfig, "--namespace", namespace,
                     "--lease-name", "repack-coordinator-faults", "--lease-duration", f"{COORD_LEASE_S}s",
                     "--interval", "0.5s"]
        self.proc = None

    def start(self):
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PYTHONPATH=REPO_ROOT, PYTHONUNBUFFERED="1"))
        log.close()
        return self

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def identity(self):
        m = re.search(r"acquired lease \S+ as (\S+)", self.log())
        return m.group(1) if m else None

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _gated_orphan(core, namespace, name):
    """A pod carrying the placement gate and no relocation: the leader's sweep releases it (a gate is
    never held for a run that will not place the pod), which is the act only the Lease holder does."""
    from kubectl_repack.api.gates import PLACEMENT_GATE

    core.create_namespaced_pod(namespace, {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
        "spec": {"schedulingGates": [{"name": PLACEMENT_GATE}],
                 "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}})


def _released(core, namespace, name):
    return not (core.read_namespaced_pod(name, namespace).spec.scheduling_gates or [])


def test_two_coordinators_only_the_lease_holder_acts_and_the_other_takes_over(control_plane, make_namespace,
                                                                              tmp_path):
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    coord = client.CoordinationV1Api(api)
    ns = make_namespace("repack-coord")
    a = Coordinator("a", control_plane.kubeconfig, ns, str(tmp_path)).start()
    b = None
    try:
        wait_for("coordinator a to lead", a.identity, timeout=30)
        b = Coordinator("b", control_plane.kubeconfig, ns, str(tmp_path)).start()
        time.sleep(3)     # b is up and polling the Lease
        holder = coord.read_namespaced_lease("repack-coordinator-faults", ns).spec.holder_identity
        assert holder == a.identity() and b.identity() is None, (holder, b.log())

        first = unique("gated-a")
        _gated_orphan(core, ns, first)
        wait_for(f"pod {first}'s gate released by the leader", lambda: _released(core, ns, first), timeout=30)
        wait_for(f"coordinator a to log removing {first}'s gate",
                 lambda: f"pod {ns}/{first}: gate removed" in a.log() or None, timeout=10)
        assert "gate removed" not in b.log() and b.identity() is None     # the standby did nothing

        a.proc.send_signal(signal.SIGKILL)    # the holder dies without releasing the Lease
        killed = time.monotonic()
        a.proc.wait(10)
        wait_for("coordinator b to take over", b.identity, timeout=COORD_LEASE_S * 4)
        takeover = time.monotonic() - killed
        print(f"\ncoordinator b took over {takeover:.1f} s after a was killed")
        # b judges expiry by when it observed a's last renewal, which was at most a third of the
        # duration before the kill; b polls every 0.5 s (plus one Lease round trip).
        assert takeover <= COORD_LEASE_S + 1.5, takeover
        assert coord.read_namespaced_lease("repack-coordinator-faults", ns).spec.holder_identity == b.identity()
        assert b.identity() != a.identity()

        second = unique("gated-b")
        _gated_orphan(core, ns, second)
        wait_for(f"pod {second}'s gate released by the new leader", lambda: _released(core, ns, second), timeout=30)
        # the line is written after the patch returns: the test can see the pod first
        wait_for(f"coordinator b to log removing {second}'s gate",
                 lambda: f"pod {ns}/{second}: gate removed" in b.log() or None, timeout=10)
    finally:
        a.stop()
        if b is not None:
            b.stop()
