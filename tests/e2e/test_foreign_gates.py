"""Repack's placement gate next to Volcano 1.15's queue-allocation gate, on the real API server with the
webhook, the coordinator and vc-scheduler running (the `stack` of test_webhook.py).

Volcano 1.15 lifts its gate only from a pod whose *only* gate it is (tests/harness/volcano_gates.py has
the rule from its source; Volcano 1.15 cannot be built here, so `QueueGateLifter` does what its
vc-scheduler does with the gate, by that rule, while vc-scheduler v1.14.1 schedules). The seed's batch
job opts in (annotation and gate in its pod template): when `apply` moves its workers, the replacements
carry both gates; the coordinator must nominate, lift ours first and leave theirs alone; only then
can Volcano lift its own, and the pods bind to the nominated nodes. With Kubernetes >= 1.35 binding
clears nominatedNodeName: the run's record reads the node the pod is bound to."""
from __future__ import annotations

import json

import pytest
from kubernetes import client

from kubectl_repack.api.gates import PLACEMENT_GATE, RELOCATION_RUN_ANNOTATION
from tests.e2e.execute_helpers import (ELIGIBLE, PROTECTED, cli_process, delete_runs, execute_run,
                                       foreign_providers, get_run, reason_of, seed_nodes, unique, wait_running,
                                       write_run)
from tests.e2e.helpers import vcjob, wait_for
from tests.e2e.test_webhook import NAMESPACE, stack  # noqa: F401  (the module-scoped webhook + coordinator fixture)
from tests.harness import npu_node
from tests.harness.volcano_gates import QUEUE_ALLOCATION_ANNOTATION, QUEUE_ALLOCATION_GATE, QueueGateLifter

pytestmark = pytest.mark.e2e


def gated_vcjob(name, labels, tasks, node_selector):
    """`vcjob` whose pods opt in to Volcano 1.15's queue admission: its annotation and its gate, as
    vc-webhook-manager 1.15 would add them, written into the template (no Volcano webhook here)."""
    job = vcjob(name, labels, tasks, node_selector)
    for task in job["spec"]["tasks"]:
        template = task["template"]
        template["metadata"]["annotations"] = {QUEUE_ALLOCATION_ANNOTATION: "true"}
        template["spec"]["schedulingGates"] = [{"name": QUEUE_ALLOCATION_GATE}]
    return job


def gates(pod):
    return [g.name for g in (pod.spec.scheduling_gates or [])]


def test_ours_is_lifted_first_theirs_untouched_and_the_pod_binds_to_the_nominated_node(
        stack, control_plane, fake_nodes, make_namespace, tmp_path):  # noqa: F811
    core, custom = stack.core, stack.custom
    ns = make_namespace("foreign-gates")
    nodes = seed_nodes()
    wait_for("NPU nodes of other tests to be gone", lambda: not foreign_providers(core, nodes) or None, timeout=90)
    volcano = QueueGateLifter(core, ns).start()
    try:
        fake_nodes(npu_node(nodes[0], cards=8))
        custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", gated_vcjob(
            "ascend-batch-training", ELIGIBLE, [("worker", 2, 1)], {"accelerator-pool": "ascend-npu"}))
        batch = wait_running(stack.api, ns, "ascend-batch-training")
        assert sorted(volcano.lifted) == sorted(batch)   # Volcano's gate was lifted from the originals
        for node, job, tasks in ((nodes[1], "online-serving-critical", [("entry", 1, 4), ("worker", 1, 3)]),
                                 (nodes[2], "llm-pretrain-critical", [("master", 1, 3), ("worker", 1, 4)])):
            fake_nodes(npu_node(node, cards=8))
            custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs",
                                                   vcjob(job, PROTECTED, tasks, {"kubernetes.io/hostname": node}))
            wait_running(stack.api, ns, job)
        wait_for("3 PodGroups", lambda: len(custom.list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]) == 3)

        volcano.pause()   # Volcano's gate stays on the replacements until we say
        name = unique("foreign-gates")
        proc = cli_process(control_plane.kubeconfig, "apply", "--local", "-f", write_run(tmp_path, execute_run(name)),
                           "--cooldown", "0s", "-o", "json",
                           # the install's namespace: apply --local seals its records with the key there
                           env={"REPACK_NAMESPACE": NAMESPACE})
        try:
            def nominated_and_still_gated_by_volcano():
                if proc.poll() is not None:
                    pytest.fail(f"apply ended early ({proc.returncode}): {proc.communicate()}")
                try:
                    run = get_run(stack.api, name)
                except client.ApiException as e:
                    if e.status == 404:   # apply has not created it yet
                        return None
                    raise
                records = (run.get("status") or {}).get("relocations") or []
                if len(records) != len(batch):
                    return None
                out = []
                for rec in records:
                    pods = [p for p in core.list_namespaced_pod(ns).items
                            if (p.metadata.annotations or {}).get(RELOCATION_RUN_ANNOTATION, "").startswith(name + "/")
                            and p.metadata.name == rec["victimPodName"] and p.metadata.deletion_timestamp is None]
                    if not pods or pods[0].status.nominated_node_name != rec["plannedNodeName"] \
                            or PLACEMENT_GATE in gates(pods[0]):
                        return None
                    out.append((rec, pods[0]))
                return out

            held = wait_for("every replacement nominated, our gate lifted, Volcano's still on",
                            nominated_and_still_gated_by_volcano, timeout=120)
            for rec, pod in held:
                assert gates(pod) == [QUEUE_ALLOCATION_GATE], gates(pod)   # theirs untouched
                assert not pod.spec.node_name                               # so not bound yet
                assert rec["placement"]["phase"] == "Nominated", rec
                assert rec["placement"]["selectedNodeName"] == rec["plannedNodeName"]
            assert len(volcano.lifted) == len(batch)   # paused: Volcano lifted nothing since the originals

            volcano.resume()   # now Volcano may lift its own: the only gate left is its
            out, err = proc.communicate(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err
        run = json.loads(out)
        assert reason_of(run, "Complete") == ("True", "ExecutionCompleted"), run["status"].get("conditions")
        assert run["status"]["result"]["freedNodes"] == [nodes[0]]
        for rec in run["status"]["relocations"]:
            pl = rec["placement"]
            assert pl["phase"] == "Placed" and rec["plannedNodeName"] == pl["selectedNodeName"] == pl["actualNodeName"]
            pod = core.read_namespaced_pod(rec["victimPodName"], ns)
            assert pod.spec.node_name == rec["plannedNodeName"] and gates(pod) == []
            # Kubernetes >= 1.35 (ClearingNominatedNodeNameAfterBinding): binding cleared the hint
            assert not pod.status.nominated_node_name, pod.status.nominated_node_name
        assert sorted(set(volcano.lifted)) == sorted(batch)   # Volcano lifted its gate from each replacement
        assert len(volcano.lifted) == 2 * len(batch)
    finally:
        volcano.stop()
        delete_runs(stack.api, [name] if "name" in locals() else [])


def test_a_hint_on_a_bound_pod_is_refused_by_the_api_server_and_read_back_as_the_bound_node(
        control_plane, fake_nodes, make_namespace):
    """Kubernetes >= 1.35 refuses status.nominatedNodeName on a bound pod (422; it was accepted
    before): the coordinator's write answers with the node the pod is bound to instead of raising,
    so it records that and never retries (tests/unit/webhook/coordinator has the whole tick)."""
    from kubectl_repack.errors import Invalid
    from kubectl_repack.kube.objects import LiveCluster
    from webhook.coordinator.loop import Coordinator, PlacementKey

    core = client.CoreV1Api(control_plane.api_client)
    ns = make_namespace("nominate-bound")
    (node,) = fake_nodes(npu_node(f"{ns}-n", cards=8))
    spec = {"containers": [{"name": "c", "image": "example.invalid/x:1"}]}
    core.create_namespaced_pod(ns, {"metadata": {"name": "bound"}, "spec": {**spec, "nodeName": node}})
    core.create_namespaced_pod(ns, {"metadata": {"name": "pending"}, "spec": {**spec, "schedulerName": "nobody"}})
    cluster = LiveCluster(control_plane.api_client)
    with pytest.raises(Invalid) as refused:
        cluster.nominate(ns, "bound", node)
    assert "may not be set on pods that are already bound" in str(refused.value)
    # no placement key readable: acts on no marks (this test only nominates)
    coordinator = Coordinator(cluster, runs=None, elector=None, placement_key=PlacementKey(lambda: None))
    assert coordinator.nominate_or_bound(ns, "bound", node) == node
    assert coordinator.nominate_or_bound(ns, "pending", node) == ""
    assert core.read_namespaced_pod("pending", ns).status.nominated_node_name == node
    assert not core.read_namespaced_pod("bound", ns).status.nominated_node_name
    assert (coordinator.metrics.value("nominations_refused_bound_total"),
            coordinator.metrics.value("nominations_total")) == (1, 1)
