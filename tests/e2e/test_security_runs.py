"""What a RepackRun's status writer and creator can make the *installed* controller do (SEC-1,
SEC-2), on the real API server with the installed admission policies and RBAC, as the attacker
would: impersonated users with only the rights named.

* A user who may write `repackruns/status` (every run's: RepackRuns are cluster-scoped) but not
  evict rewrites the status of an admin's Failed Execute (phase, conditions, each record's eviction
  phase, the execution deadline) and clears the status of an admin's Succeeded one: the controller
  resumes neither and plans neither again; it puts the status back from its run-state mark. The
  API server's audit log shows no Eviction call for any pod, and every pod keeps its UID.
* The mark is the controller's alone: a user who may update RepackRuns can neither remove nor
  change it, nor create a run carrying one (the creator ValidatingAdmissionPolicy).
* A DryRun by a user who may evict nowhere the plan could move pods names nothing of those
  namespaces (the same DryRun by an admin names their pods: what the check would see).
* While a run goes on, each settled outcome is sealed in its Started mark: a record a status writer
  turned back from Rejected to Pending is restored, not evicted, when a crashed run is continued."""
from __future__ import annotations

import base64
import datetime as dt
import json
import time

import pytest
from kubernetes import client

from kubectl_repack.api.control import RUN_STATE_ANNOTATION
from tests.e2e.helpers import wait_for
from tests.e2e.test_installed import NAMESPACE, _finished, _kubectl_apply, audit_evictions, installed  # noqa: F401

pytestmark = pytest.mark.e2e


def _user(rbac, name: str, verbs: list, resources: list) -> None:
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": ["repack.volcano.sh"], "resources": resources, "verbs": verbs}]})
    rbac.create_cluster_role_binding({"metadata": {"name": name}, "subjects": [
        {"kind": "User", "name": name, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": name, "apiGroup": "rbac.authorization.k8s.io"}})


def _drop_user(rbac, name: str) -> None:
    for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
        try:
            delete(name)
        except client.ApiException:
            pass


def _run(name: str, spec: dict) -> dict:
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name},
            "spec": spec}


def _restored(api, name: str, phase: str):
    from tests.e2e.execute_helpers import get_run

    run = get_run(api, name)
    st = run.get("status") or {}
    return run if st.get("phase") == phase and "restored from annotation" in (st.get("message") or "") else None


def _free_execute_lease(coordination) -> None:
    """No other run holds the execute Lease and no cooldown is pending (earlier tests' runs)."""
    from kubectl_repack.engine.mutex import COOLDOWN_ANNOTATION, LAST_COMPLETION_ANNOTATION

    lease = coordination.read_namespaced_lease("repack-execute", NAMESPACE)
    lease.spec.holder_identity = None
    kept = {k: v for k, v in (lease.metadata.annotations or {}).items() if k != LAST_COMPLETION_ANNOTATION}
    lease.metadata.annotations = dict(kept, **{COOLDOWN_ANNOTATION: "0s"})
    coordination.replace_namespaced_lease("repack-execute", NAMESPACE, lease)


def test_a_status_writer_restarts_no_finished_run(installed, real_node, control_plane, fake_nodes, make_namespace,
                                                  tmp_path):
    """Finding 1 (A) and (B). (B) first: an admin's Execute made while no pod can move ends
    Succeeded (NoFragmentation). Then the seed layout, with a PodDisruptionBudget over the movable
    gang: (A) an admin's Execute ends Failed, both records Rejected. Mallory (get/patch/update on
    repackruns and repackruns/status, nothing else) rewrites (A)'s status to a Running run with
    Pending records and a deadline a day away, and clears (B)'s; the budget is deleted, so any
    eviction would now go through. The controller restores both statuses and evicts nothing."""
    from tests.e2e.execute_helpers import build_seed_layout, delete_runs, execute_spec, get_run, reason_of, \
        seed_nodes, unique

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    policy = client.PolicyV1Api(api)
    _free_execute_lease(client.CoordinationV1Api(api))
    ns = make_namespace("repack-restart")
    mallory = unique("mallory")
    _user(rbac, mallory, ["get", "list", "watch", "patch", "update"], ["repackruns", "repackruns/status"])
    names = {"succeeded": unique("succeeded"), "failed": unique("failed")}
    try:
        # (B)'s run: nothing to move yet, so it ends Succeeded having evicted nothing
        _kubectl_apply(control_plane, _run(names["succeeded"], execute_spec()), tmp_path)
        done = wait_for("the first Execute to end", lambda: _finished(api, names["succeeded"]), timeout=120)
        assert reason_of(done, "Complete") == ("True", "NoFragmentation"), done["status"]

        nodes = seed_nodes()
        layout = build_seed_layout(api, fake_nodes, ns, nodes)
        batch = {uid for _, uid in layout["batch"].values()}
        every_pod = batch | {uid for _, uid in layout["protected"].values()}
        policy.create_namespaced_pod_disruption_budget(ns, {
            "metadata": {"name": "batch-guard"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"volcano.sh/job-name": "ascend-batch-training"}}}})
        wait_for("the budget to count the gang", lambda: (policy.read_namespaced_pod_disruption_budget(
            "batch-guard", ns).status.current_healthy or 0) >= 2 or None, timeout=60)

        # (A)'s run: blocked by the budget, Failed with both records Rejected
        _kubectl_apply(control_plane, _run(names["failed"], execute_spec()), tmp_path)
        failed = wait_for("the blocked Execute to end", lambda: _finished(api, names["failed"]), timeout=180)
        assert failed["status"]["phase"] == "Failed", failed["status"]
        records = failed["status"]["relocations"]
        assert [r["eviction"]["phase"] for r in records] == ["Rejected", "Rejected"], records
        assert {r["victimPodUID"] for r in records} == batch

        # the attack, as mallory, through the status subresource only
        for r in records:
            r["eviction"] = {"phase": "Pending"}
        deadline = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        rewrite = {"status": {"phase": "Running", "relocations": records, "executionDeadline": deadline,
                              "message": "resumed", "conditions": [
                                  {"type": "Progressing", "status": "True", "reason": "Executing", "message": "resumed",
                                   "lastTransitionTime": deadline}]}}
        out = control_plane.kubectl("patch", "repackrun", names["failed"], "--subresource=status", "--type=merge",
                                    "-p", json.dumps(rewrite), f"--as={mallory}", check=False)
        assert out.returncode == 0, out.stderr
        out = control_plane.kubectl("patch", "repackrun", names["succeeded"], "--subresource=status", "--type=json",
                                    "-p", json.dumps([{"op": "remove", "path": "/status"}]), f"--as={mallory}",
                                    check=False)
        assert out.returncode == 0, out.stderr
        assert not get_run(api, names["succeeded"]).get("status")
        policy.delete_namespaced_pod_disruption_budget("batch-guard", ns)

        again = wait_for("(A)'s status put back", lambda: _restored(api, names["failed"], "Failed"), timeout=120)
        assert [r["eviction"]["phase"] for r in again["status"]["relocations"]] == ["Rejected", "Rejected"]
        assert reason_of(again, "Failed")[0] == "True" and reason_of(again, "Progressing")[0] == "False"
        cleared = wait_for("(B)'s status put back", lambda: _restored(api, names["succeeded"], "Succeeded"),
                           timeout=120)
        assert reason_of(cleared, "Complete") == ("True", "NoFragmentation"), cleared["status"]
        time.sleep(10)     # several controller ticks after both were put back: still nothing happens
        counts = audit_evictions(control_plane, every_pod)
        assert all(codes == [] for codes in counts.values()), counts
        live = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(ns).items}
        assert all(live.get(pod) == uid for pod, (_, uid) in {**layout["batch"], **layout["protected"]}.items()), live
        for name in names.values():
            assert get_run(api, name)["status"]["phase"] in ("Succeeded", "Failed")
        print(f"\nrewritten Failed run: {again['status']['message']}\ncleared Succeeded run: "
              f"{cleared['status']['message']}\nEviction calls per pod (audit log): {counts}")
    finally:
        delete_runs(api, list(names.values()))
        _drop_user(rbac, mallory)


def test_the_run_state_mark_is_the_controllers_alone(installed, control_plane, tmp_path):
    """A user who may update RepackRuns (as `kubectl repack cancel` needs) can neither remove nor
    change a run's mark, nor create a run carrying one; the controller's own writes go through
    (the run above carries one)."""
    from tests.e2e.execute_helpers import delete_runs, execute_spec, get_run, unique

    api = control_plane.api_client
    rbac = client.RbacAuthorizationV1Api(api)
    bob = unique("bob")
    _user(rbac, bob, ["create", "get", "list", "patch", "update"], ["repackruns"])
    name, forged = unique("marked"), unique("forged-mark")
    try:
        spec = execute_spec()      # an Execute with no node in scope: it ends at once, marked Finished
        spec["scope"] = {"nodes": {"include": {"selector": {"matchLabels": {"nothing": "here"}}}}}
        _kubectl_apply(control_plane, _run(name, spec), tmp_path)
        run = wait_for("the run to end", lambda: _finished(api, name), timeout=120)
        mark = run["metadata"]["annotations"][RUN_STATE_ANNOTATION]
        for value in (None, mark.replace("Finished", "Started"), "{}"):
            out = control_plane.kubectl("patch", "repackrun", name, "--type=merge", "-p",
                                        json.dumps({"metadata": {"annotations": {RUN_STATE_ANNOTATION: value}}}),
                                        f"--as={bob}", check=False)
            assert out.returncode != 0, value
            assert f"annotation {RUN_STATE_ANNOTATION} is written by the repack controller only" in out.stderr, \
                out.stderr
        assert get_run(api, name)["metadata"]["annotations"][RUN_STATE_ANNOTATION] == mark
        # cancel (another annotation) still works for bob
        out = control_plane.kubectl("annotate", "repackrun", name, "repack.volcano.sh/cancel=true", f"--as={bob}",
                                    check=False)
        assert out.returncode == 0, out.stderr
        copy = _run(forged, spec)
        copy["metadata"]["annotations"] = {RUN_STATE_ANNOTATION: mark}
        path = tmp_path / "forged.yaml"
        path.write_text(json.dumps(copy))
        out = control_plane.kubectl("create", "-f", str(path), f"--as={bob}", check=False)
        assert out.returncode != 0 and "written by the repack controller only" in out.stderr, out.stderr
    finally:
        delete_runs(api, [name, forged])
        _drop_user(rbac, bob)


def test_a_dry_run_names_nothing_of_a_namespace_its_creator_may_not_evict_in(
        installed, real_node, control_plane, fake_nodes, make_namespace, tmp_path):
    """Finding 6: carol may create RepackRuns and evict in her own namespace only; the seed layout
    lives in another. Her DryRun is planned as she may see the cluster: she may evict nowhere its
    pods could move, so it gets no plan, and neither its status nor its Events name that
    namespace, its pods, PodGroups or jobs. The admin's DryRun of the same spec does name them."""
    from tests.e2e.execute_helpers import build_seed_layout, delete_runs, execute_spec, seed_nodes, unique

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    other = make_namespace("repack-hidden")
    own = make_namespace("repack-carol")
    layout = build_seed_layout(api, fake_nodes, other, seed_nodes())
    carol = unique("carol")
    _user(rbac, carol, ["create", "get", "list", "watch"], ["repackruns"])
    rbac.create_namespaced_role(own, {"metadata": {"name": carol}, "rules": [
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]})
    rbac.create_namespaced_role_binding(own, {"metadata": {"name": carol}, "subjects": [
        {"kind": "User", "name": carol, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": carol, "apiGroup": "rbac.authorization.k8s.io"}})
    spec = dict(execute_spec(), mode="DryRun")
    spec.pop("eviction")
    names = {"carol": unique("carol-dry"), "admin": unique("admin-dry")}
    secrets = {other, "ascend-batch-training", *layout["batch"], *layout["protected"]}
    try:
        _kubectl_apply(control_plane, _run(names["carol"], spec), tmp_path, f"--as={carol}")
        _kubectl_apply(control_plane, _run(names["admin"], spec), tmp_path)
        mine = wait_for("carol's DryRun to end", lambda: _finished(api, names["carol"]), timeout=120)
        admin = wait_for("the admin's DryRun to end", lambda: _finished(api, names["admin"]), timeout=120)
        assert mine["metadata"]["annotations"]["repack.volcano.sh/creator-username"] == carol
        shown = json.dumps(admin["status"])
        assert other in shown and "ascend-batch-training" in shown, shown      # what a leak would look like
        status = json.dumps(mine["status"])
        events = " ".join(e.message or "" for e in core.list_namespaced_event(
            "default", field_selector=f"involvedObject.name={names['carol']}").items)
        assert mine["status"]["phase"] == "Failed" and "plan" not in mine["status"], status
        assert "may create pods/eviction in none of the 1 namespace(s)" in mine["status"]["message"], status
        for secret in secrets:
            assert secret not in status and secret not in events, (secret, status, events)
        print(f"\ncarol's DryRun: {mine['status']['message']}")
    finally:
        delete_runs(api, list(names.values()))
        _drop_user(rbac, carol)


def _controller_replicas(api, replicas: int) -> None:
    """Scale the installed controller to `replicas` and wait until that many pods run (0: none left)."""
    from kubectl_repack.deploy.parts import CONTROLLER_NAME

    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.patch_namespaced_deployment_scale(CONTROLLER_NAME, NAMESPACE, {"spec": {"replicas": replicas}})

    def settled():
        pods = core.list_namespaced_pod(NAMESPACE, label_selector=f"app.kubernetes.io/name={CONTROLLER_NAME}").items
        if replicas == 0:
            return not pods or None
        ready = [p for p in pods if p.metadata.deletion_timestamp is None and p.status.container_statuses
                 and all(c.ready for c in p.status.container_statuses)]
        return len(ready) == replicas or None
    wait_for(f"the controller at {replicas} replica(s)", settled, timeout=180)


def test_a_settled_record_turned_back_to_pending_is_not_evicted_when_a_crashed_run_is_continued(
        installed, real_node, control_plane, fake_nodes, make_namespace, tmp_path):
    """Finding 1, while a run is going: the controller seals each record's outcome in the run's
    `Started` mark as soon as it settles. An admin's Execute has both records Rejected (a
    PodDisruptionBudget blocks the gang), and the controller stops before it ends the run (a crash:
    the Deployment scaled to 0; the run is put back as the crash leaves it: Running, its Started mark
    holding both outcomes, written with the controller's key and account as the controller writes
    it). Mallory (repackruns/status only) turns both records back to Pending, the budget is deleted
    (any eviction would now go through) and the controller comes back: it restores both records from
    the mark, evicts nothing (API server audit log), and ends the run Failed."""
    from kubectl_repack.api.control import (SEAL_SECRET_KEY, SEAL_SECRET_NAME, STATE_STARTED, RunState,
                                            read_state_mark, state_mark)
    from kubectl_repack.deploy.parts import CONTROLLER_NAME
    from tests.e2e.execute_helpers import build_seed_layout, delete_runs, execute_spec, get_run, reason_of, \
        seed_nodes, unique

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    policy = client.PolicyV1Api(api)
    _free_execute_lease(client.CoordinationV1Api(api))
    ns = make_namespace("repack-continue")
    mallory = unique("mallory")
    _user(rbac, mallory, ["get", "list", "watch", "patch", "update"], ["repackruns", "repackruns/status"])
    name = unique("crashed")
    scaled_down = False
    try:
        layout = build_seed_layout(api, fake_nodes, ns, seed_nodes())
        every_pod = {uid for _, uid in {**layout["batch"], **layout["protected"]}.values()}
        policy.create_namespaced_pod_disruption_budget(ns, {
            "metadata": {"name": "batch-guard"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"volcano.sh/job-name": "ascend-batch-training"}}}})
        wait_for("the budget to count the gang", lambda: (policy.read_namespaced_pod_disruption_budget(
            "batch-guard", ns).status.current_healthy or 0) >= 2 or None, timeout=60)
        _kubectl_apply(control_plane, _run(name, execute_spec()), tmp_path)
        ended = wait_for("the blocked Execute to end", lambda: _finished(api, name), timeout=180)
        assert [r["eviction"]["phase"] for r in ended["status"]["relocations"]] == ["Rejected", "Rejected"]

        # the crash: the controller stops after sealing both outcomes, before the status that ends the run
        _controller_replicas(api, 0)
        scaled_down = True
        st = ended["status"]
        st["phase"], st["message"] = "Running", "executing"
        st["conditions"] = [dict(c, status="True", reason="Executing", message="executing")
                            for c in st["conditions"] if c["type"] == "Progressing"]
        for key in ("completionTime", "result"):
            st.pop(key, None)
        out = control_plane.kubectl("patch", "repackrun", name, "--subresource=status", "--type=merge", "-p",
                                    json.dumps({"status": dict(st, completionTime=None, result=None)}), check=False)
        assert out.returncode == 0, out.stderr
        secret = core.read_namespaced_secret(SEAL_SECRET_NAME, NAMESPACE)
        key = base64.b64decode(secret.data[SEAL_SECRET_KEY])
        started = RunState(STATE_STARTED, st["executionDeadline"], evictions=("Rejected", "Rejected"))
        out = control_plane.kubectl(
            "annotate", "--overwrite", "repackrun", name,
            f"{RUN_STATE_ANNOTATION}={state_mark(key, ended['metadata']['uid'], started)}",
            f"--as=system:serviceaccount:{NAMESPACE}:{CONTROLLER_NAME}", check=False)
        assert out.returncode == 0, out.stderr
        crashed = get_run(api, name)
        assert crashed["status"]["phase"] == "Running" and read_state_mark(crashed, key) == started

        # the attack, as mallory, through the status subresource only
        records = crashed["status"]["relocations"]
        for r in records:
            r["eviction"] = {"phase": "Pending"}
        out = control_plane.kubectl("patch", "repackrun", name, "--subresource=status", "--type=merge", "-p",
                                    json.dumps({"status": {"relocations": records}}), f"--as={mallory}", check=False)
        assert out.returncode == 0, out.stderr
        policy.delete_namespaced_pod_disruption_budget("batch-guard", ns)

        _controller_replicas(api, 1)
        scaled_down = False
        again = wait_for("the continued run to end", lambda: _finished(api, name), timeout=180)
        assert [r["eviction"]["phase"] for r in again["status"]["relocations"]] == ["Rejected", "Rejected"], \
            again["status"]
        assert all(r["eviction"]["message"] == f"restored from annotation {RUN_STATE_ANNOTATION}"
                   for r in again["status"]["relocations"])
        assert again["status"]["phase"] == "Failed" and reason_of(again, "Failed")[0] == "True", again["status"]
        events = [(e.reason, e.message) for e in core.list_namespaced_event(
            "default", field_selector=f"involvedObject.name={name}").items]
        assert any(r == "StatusRestored" and "was rewritten since it settled" in (m or "") for r, m in events), events
        time.sleep(5)     # a few controller ticks more: still nothing happens
        counts = audit_evictions(control_plane, every_pod)
        assert all(codes == [] for codes in counts.values()), counts
        live = {p.metadata.name: p.metadata.uid for p in core.list_namespaced_pod(ns).items}
        assert all(live.get(pod) == uid for pod, (_, uid) in {**layout["batch"], **layout["protected"]}.items()), live
        print(f"\ncontinued run: {again['status']['message']}\nEviction calls per pod (audit log): {counts}")
    finally:
        if scaled_down:
            _controller_replicas(api, 1)
        delete_runs(api, [name])
        _drop_user(rbac, mallory)
