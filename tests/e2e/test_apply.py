"""`kubectl repack apply` on the real control plane (EXEC-2, EXEC-3, EXEC-4, EXEC-6): real evictions through the Eviction
API, re-creation by Volcano's job controller, binding by vc-scheduler, and the Lease mutex.

Every test builds the seed's layout (see execute_helpers) in its own namespace on its own nodes,
and uses its own Lease namespace setting (REPACK_NAMESPACE) shared by the whole module.
"""
from __future__ import annotations

import json
import time

import pytest
from kubernetes import client

from tests.e2e.execute_helpers import (LEASE_NAMESPACE, PodDeletions, build_seed_layout, cli, cli_process, seed_nodes,
                                       delete_runs, EvictionTrap, execute_run, get_run, reason_of,
                                       unique, wait_for, write_run)
from tests.harness import NPU_RESOURCE

pytestmark = pytest.mark.e2e


@pytest.fixture
def runs_to_delete(control_plane):
    names: list = []
    yield names
    delete_runs(control_plane.api_client, names)


@pytest.fixture(autouse=True)
def _lease_namespace(monkeypatch):
    monkeypatch.setenv("REPACK_NAMESPACE", LEASE_NAMESPACE)


def _nodes(tag):
    return (f"{tag}-node-01", f"{tag}-node-02", f"{tag}-node-03")


def _pods_now(core, ns):
    return {p.metadata.name: (p.spec.node_name, p.metadata.uid) for p in core.list_namespaced_pod(ns).items
            if p.metadata.deletion_timestamp is None}


def _npu_on(core, node):
    total = 0
    for p in core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items:
        if p.status.phase in ("Succeeded", "Failed"):
            continue
        for c in p.spec.containers:
            total += int(((c.resources.requests or {}).get(NPU_RESOURCE)) or 0)
    return total


def reason_of_message(run, ctype):
    return next(c["message"] for c in run["status"]["conditions"] if c["type"] == ctype)


def test_seed_scenario_executes_and_verifies(control_plane, fake_nodes, make_namespace, tmp_path, runs_to_delete):
    """Seed steps 5-6: both workers evicted, re-created by Volcano, bound; node 01 verified empty."""
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    ns = make_namespace("repack-demo")
    nodes = seed_nodes()
    layout = build_seed_layout(api, fake_nodes, ns, nodes)
    deletions = PodDeletions(api, ns)
    name = unique("ascend-execute")
    runs_to_delete.append(name)

    t0 = time.monotonic()
    r = cli(control_plane.kubeconfig, "apply", "--local", "-f", write_run(tmp_path, execute_run(name)), "--cooldown", "0s",
            "-o", "json")
    wall = time.monotonic() - t0
    deletions.stop()
    run = json.loads(r.stdout)
    # --local on a cluster without the placement webhook says so (stderr: stdout is the object)
    assert "warning: no placement webhook is installed" in r.stderr, r.stderr
    st = run["status"]
    relocs = st["relocations"]
    assert st["plan"]["freedNodes"] == [nodes[0]]
    assert st["startTime"] and st["completionTime"] and st["executionDeadline"]
    # Both workers evicted through the Eviction API, re-created by Volcano under the same name,
    # bound by vc-scheduler; the records say where.
    assert sorted(rec["victimPodName"] for rec in relocs) == sorted(layout["batch"])
    hits = 0
    for rec in relocs:
        victim_node, victim_uid = layout["batch"][rec["victimPodName"]]
        assert rec["victimPodUID"] == victim_uid
        assert rec["plannedNodeName"] in nodes[1:]
        assert rec["eviction"]["phase"] == "Accepted", rec
        assert rec["placement"]["phase"] == "Placed", rec
        assert rec["placement"]["replacementPodName"] == rec["victimPodName"]  # VCJob re-creates same name
        assert rec["placement"]["replacementPodUID"] != victim_uid
        assert rec["placement"]["actualNodeName"] in nodes
        hits += rec["placement"]["actualNodeName"] == rec["plannedNodeName"]
    live = _pods_now(core, ns)
    for rec in relocs:
        assert live[rec["victimPodName"]] == (rec["placement"]["actualNodeName"],
                                              rec["placement"]["replacementPodUID"])
    for pod, where in layout["protected"].items():
        assert live[pod] == where                      # nothing else disturbed
    # The API server deleted exactly the two victims (by uid), nothing else.
    assert sorted(uid for _, uid in deletions.deleted) == sorted(uid for _, uid in layout["batch"].values())

    # The verified result matches the live cluster, whichever way vc-scheduler placed them.
    res = st["result"]
    assert res["metricsVerified"] is True and res["movedCardCount"] == 2
    node01_free = _npu_on(core, nodes[0]) == 0
    assert node01_free == all(rec["placement"]["actualNodeName"] != nodes[0] for rec in relocs)
    if node01_free:
        assert r.exit_code == 0, r.output
        assert st["phase"] == "Succeeded", st
        assert reason_of(run, "Complete")[1] == ("ExecutionCompleted" if hits == 2
                                                 else "ExecutionCompletedWithAlternativePlacement")
        assert res["freedNodeCount"] == 1 and res["freedNodes"] == [nodes[0]] and res["fragAfterPercent"] == 0
    else:
        # Without the placement webhook nothing hints the planned node; vc-scheduler's node order
        # may bind a replacement back onto the emptied node. Reported, not hidden (EXEC-6).
        assert r.exit_code == 5, r.output
        assert st["phase"] == "Failed" and reason_of(run, "Failed") == ("True", "NodesNotFreed"), st
        assert nodes[0] in reason_of_message(run, "Failed")
        assert res["freedNodeCount"] == 0 and "freedNodes" not in res
        assert res["fragAfterPercent"] == 33

    # Seed step 6's jsonpath over the stored object, through the real kubectl.
    kubectl = control_plane.cp.binaries["kubectl"]
    import subprocess
    out = subprocess.run([kubectl, f"--kubeconfig={control_plane.kubeconfig}", "get", "repackrun", name, "-o",
                          'jsonpath=result: frag {.status.result.fragAfterPercent}%, freed '
                          '{.status.result.freedNodeCount}, moved {.status.result.movedCardCount}, verified '
                          '{.status.result.metricsVerified}{"\\n"}'], capture_output=True, text=True, timeout=60)
    assert out.stdout == (f"result: frag {res['fragAfterPercent']}%, freed {res['freedNodeCount']}, moved 2, "
                          "verified true\n"), out.stderr
    out = subprocess.run([kubectl, f"--kubeconfig={control_plane.kubeconfig}", "get", "repackrun", name, "-o",
                          'jsonpath={range .status.relocations[*]}{.namespace}{"/"}{.victimPodName}{"\\teviction="}'
                          '{.eviction.phase}{"\\tplacement="}{.placement.phase}{"\\tplanned="}{.plannedNodeName}'
                          '{"\\tselected="}{.placement.selectedNodeName}{"\\tactual="}{.placement.actualNodeName}'
                          '{"\\treplacement="}{.placement.replacementPodName}{"\\n"}{end}'],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout == "".join(
        f"{ns}/{rec['victimPodName']}\teviction=Accepted\tplacement=Placed\tplanned={rec['plannedNodeName']}"
        f"\tselected=\tactual={rec['placement']['actualNodeName']}\treplacement={rec['victimPodName']}\n"
        for rec in relocs), out.stderr
    print(f"\nseed scenario: apply -> verified in {wall:.1f}s; replacements on the planned node: {hits}/{len(relocs)}")


def test_pdb_blocks_the_gang_and_nothing_is_disturbed(control_plane, fake_nodes, make_namespace, tmp_path,
                                                      runs_to_delete):
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    policy = client.PolicyV1Api(api)
    ns = make_namespace("repack-pdb")
    layout = build_seed_layout(api, fake_nodes, ns, _nodes("pdb"))
    policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "keep-training"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"volcano.sh/job-name": "ascend-batch-training"}}}})

    seen = []

    def settled():
        pdb = policy.read_namespaced_pod_disruption_budget("keep-training", ns)
        st = pdb.status
        seen[:] = [st]
        # A VCJob has no scale subresource, so the disruption controller cannot resolve the
        # pods' controller for maxUnavailable (condition SyncFailed); the PDB then allows 0
        # disruptions, as the API server's eviction check also finds.
        return st is not None and st.conditions and st.disruptions_allowed == 0
    try:
        wait_for("PDB status with 0 disruptions allowed", settled, timeout=30)
    except BaseException:
        print("PDB STATUS", seen)
        raise
    before = _pods_now(core, ns)
    deletions = PodDeletions(api, ns)
    name = unique("pdb-execute")
    runs_to_delete.append(name)

    r = cli(control_plane.kubeconfig, "apply", "--local", "-f", write_run(tmp_path, execute_run(name)), "--cooldown", "0s",
            "-o", "json")
    deletions.stop()
    assert r.exit_code == 5, r.output
    run = json.loads(r.stdout)
    st = run["status"]
    assert st["phase"] == "Failed"
    assert reason_of(run, "Failed") == ("True", "EvictionBlockedByPDB")
    assert f"PodDisruptionBudget {ns}/keep-training" in reason_of_message(run, "Failed")
    assert len(st["relocations"]) == 2
    for rec in st["relocations"]:
        assert rec["eviction"]["phase"] == "Rejected"
        assert f"PodDisruptionBudget {ns}/keep-training allows 0 disruption(s), the PodGroup needs 2" \
            in rec["eviction"]["message"]
        assert rec["placement"]["phase"] == "WaitingForReplacement"
    assert "result" not in st  # nothing was evicted
    assert _pods_now(core, ns) == before
    assert deletions.deleted == []
    assert set(layout["batch"]) <= set(before)


def test_two_applies_started_together_only_one_executes(control_plane, fake_nodes, make_namespace, tmp_path,
                                                         runs_to_delete):
    api = control_plane.api_client
    ns = make_namespace("repack-race")
    build_seed_layout(api, fake_nodes, ns, _nodes("race"))
    names = [unique("race-a"), unique("race-b")]
    runs_to_delete.extend(names)
    files = [write_run(tmp_path, execute_run(n)) for n in names]
    # A Lease of its own (no completion history from earlier tests): the winner holds it while the
    # loser asks; a 10m cooldown makes sure a loser that came late could still never execute.
    env = {"REPACK_NAMESPACE": unique("repack-e2e-race")}
    procs = [cli_process(control_plane.kubeconfig, "apply", "--local", "-f", f, "--no-wait", "--cooldown", "10m", "-o", "json",
                         env=env) for f in files]
    outs = [p.communicate(timeout=300) for p in procs]
    codes = [p.returncode for p in procs]
    runs = [get_run(api, n) for n in names]
    executed = [i for i, run in enumerate(runs) if run["status"].get("relocations")]
    assert len(executed) == 1, (codes, outs, [run["status"] for run in runs])
    winner, loser = executed[0], 1 - executed[0]
    assert codes[winner] in (0, 5), outs[winner]
    assert runs[winner]["status"]["phase"] in ("Succeeded", "Failed")
    assert all(rec["eviction"]["phase"] == "Accepted" for rec in runs[winner]["status"]["relocations"])
    assert codes[loser] == 4, outs[loser]
    lost = runs[loser]["status"]
    assert lost["phase"] == "Pending"
    # the loser asks for the Lease while the winner holds it, or (the winner already done) during the
    # cooldown the winner started: either way it waits and evicts nothing
    why = reason_of(runs[loser], "Progressing")
    assert why in (("False", "AnotherRunActive"), ("False", "ExecuteCooldownActive")), why
    if why[1] == "AnotherRunActive":
        assert names[winner] in reason_of_message(runs[loser], "Progressing")
    assert "plan" not in lost and "relocations" not in lost
    assert json.loads(outs[loser][0])["status"]["phase"] == "Pending"


def test_cooldown_is_honoured_and_ttl_deletes_a_finished_run(control_plane, fake_nodes, make_namespace, tmp_path,
                                                             runs_to_delete):
    api = control_plane.api_client
    ns = make_namespace("repack-cool")
    build_seed_layout(api, fake_nodes, ns, _nodes("cool"))
    first, second = unique("cool-first"), unique("cool-second")
    runs_to_delete.extend([first, second])
    r = cli(control_plane.kubeconfig, "apply", "--local", "-f", write_run(tmp_path, execute_run(first, ttl=1)),
            "--cooldown", "0s", "-o", "json")
    assert r.exit_code in (0, 5), r.output
    assert json.loads(r.stdout)["status"]["completionTime"]
    time.sleep(2)  # past the first run's TTL

    # Right after a finished Execute, with a 10 minute cooldown: Pending, ExecuteCooldownActive.
    r = cli(control_plane.kubeconfig, "apply", "--local", "-f", write_run(tmp_path, execute_run(second)),
            "--cooldown", "10m", "--no-wait")
    assert r.exit_code == 4, r.output
    assert f"repackrun.repack.volcano.sh/{first} deleted (ttlSecondsAfterFinished passed)" in r.stderr
    from kubernetes.client.rest import ApiException
    with pytest.raises(ApiException) as exc:
        get_run(api, first)
    assert exc.value.status == 404
    run = get_run(api, second)
    assert run["status"]["phase"] == "Pending"
    assert reason_of(run, "Progressing") == ("False", "ExecuteCooldownActive")
    assert first in reason_of_message(run, "Progressing") and "10m" in reason_of_message(run, "Progressing")
    lease = client.CoordinationV1Api(api).read_namespaced_lease("repack-execute", LEASE_NAMESPACE)
    assert lease.metadata.annotations["repack.volcano.sh/execute-cooldown"] == "0s"  # setting stored on acquire
    assert lease.metadata.annotations["repack.volcano.sh/last-execute-run"] == first
    assert not lease.spec.holder_identity

    # With --cooldown 0s the same run goes ahead (live re-plan on the current layout).
    r = cli(control_plane.kubeconfig, "apply", "--local", "--resume", second, "--cooldown", "0s", "--no-wait", "-o", "json")
    assert r.exit_code in (0, 3, 5), r.output
    st = json.loads(r.stdout)["status"]
    assert st["phase"] in ("Succeeded", "Failed") and st["plan"]["summary"]
    assert reason_of(json.loads(r.stdout), "Progressing")[1] != "ExecuteCooldownActive"
    finished_code = r.exit_code

    # Applying the same file again: the stored spec is the file's (the server kept it as sent), so
    # apply recognises its run, which is finished, and says so without doing anything.
    r = cli(control_plane.kubeconfig, "apply", "--local", "-f", write_run(tmp_path, execute_run(second)), "--no-wait")
    assert r.exit_code == finished_code, r.output
    assert f"repackrun {second} already finished" in r.stderr


def test_killed_apply_resumes_without_double_eviction(control_plane, fake_nodes, make_namespace, tmp_path,
                                                      runs_to_delete):
    api = control_plane.api_client
    core = client.CoreV1Api(api)
    ns = make_namespace("repack-crash")
    layout = build_seed_layout(api, fake_nodes, ns, _nodes("crash"))
    deletions = PodDeletions(api, ns)
    name = unique("crash-execute")
    runs_to_delete.append(name)
    trap = EvictionTrap(control_plane.kubeconfig, tmp_path)
    try:
        proc = cli_process(trap.kubeconfig, "apply", "--local", "-f", write_run(tmp_path, execute_run(name)),
                           "--cooldown", "0s", "-o", "json")
        trap.process = proc
        out, err = proc.communicate(timeout=300)
    finally:
        trap.close()
    assert proc.returncode == -9, (out, err)
    assert len(trap.evicted) == 1 and trap.evicted[0][1] == 201, trap.evicted

    # Killed from outside right after its first Eviction call was carried out, before the answer
    # reached it: the record of that victim is InProgress, the other still Pending; the plan and
    # both records were persisted before.
    run = get_run(api, name)
    st = run["status"]
    assert st["phase"] == "Running"
    assert [rec["eviction"]["phase"] for rec in st["relocations"]] == ["InProgress", "Pending"]
    lease = client.CoordinationV1Api(api).read_namespaced_lease("repack-execute", LEASE_NAMESPACE)
    assert lease.spec.holder_identity.startswith(f"{name}@")  # still held by the dead process

    r = cli(control_plane.kubeconfig, "apply", "--local", "--resume", name, "-o", "json")
    time.sleep(1)
    deletions.stop()
    assert r.exit_code in (0, 5), r.output
    st = json.loads(r.stdout)["status"]
    assert len(st["relocations"]) == 2
    first, second = st["relocations"]
    assert first["eviction"]["phase"] == "Accepted" and "when apply resumed" in first["eviction"]["message"]
    assert second["eviction"]["phase"] == "Accepted"
    assert all(rec["placement"]["phase"] == "Placed" for rec in st["relocations"])
    # One deletion per victim uid; no replacement was evicted by a replayed request.
    victim_uids = sorted(uid for _, uid in layout["batch"].values())
    assert sorted(uid for _, uid in deletions.deleted) == victim_uids
    live = _pods_now(core, ns)
    for rec in st["relocations"]:
        assert live[rec["victimPodName"]][1] == rec["placement"]["replacementPodUID"]
    assert st["result"]["movedCardCount"] == 2 and st["result"]["metricsVerified"] is True
