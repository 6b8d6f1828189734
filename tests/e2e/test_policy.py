"""RepackPolicy on the real control plane (POLICY-1, POLICY-2), reconciled by the *installed*
controller (`kubectl repack install --image <the image built from this tree>`), policies applied
with plain `kubectl apply` (the webhook fills in the creator record, the admission policy checks it):

* onFragAbovePercent 20 on the seed layout creates one Execute run that frees node 01, and no
  second run while the layout stays compact, while the evaluation time advances at least twice;
  a PodGroup that run moved is not moved again within minWorkloadInterval, though fragmentation
  comes back and the policy fires again;
* a cron policy on a one-minute schedule with history limit 1 creates runs (one per minute) and
  keeps only one; suspended it creates none; a policy whose window is closed creates no Execute;
* onPendingBlocked starts a run targeted at the seed's pending ascend-large-training, which then runs;
* SEC: a policy created by a user who may not evict gets runs that carry that user's record (the
  controller's account sets it; nobody else may), and they evict nothing.

The controller evaluates policies every 5 s here (REPACK_POLICY_INTERVAL, set on the installed
Deployment): cron slots are still the schedule's own minutes."""
from __future__ import annotations

import datetime as dt
import json
import re
import time
import uuid

import pytest
import yaml
from kubernetes import client

from kubectl_repack.api.policy import POLICY_LABEL, TRIGGER_LABEL
from tests.e2e.helpers import repack, vcjob, wait_for
from tests.e2e.test_installed import NAMESPACE, audit_evictions, installed, pod_logs  # noqa: F401 (fixture)
from tests.harness import NPU_RESOURCE

pytestmark = pytest.mark.e2e

GROUP, VERSION = "repack.volcano.sh", "v1alpha1"
INTERVAL = "5s"


@pytest.fixture(scope="module")
def controller_fast(installed, control_plane):
    """The installed controller evaluating policies every 5 s (rolled out, waited for)."""
    out = control_plane.kubectl("-n", NAMESPACE, "set", "env", "deploy/repack-controller",
                                f"REPACK_POLICY_INTERVAL={INTERVAL}", check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    out = control_plane.kubectl("-n", NAMESPACE, "rollout", "status", "deploy/repack-controller", "--timeout=240s",
                                check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    # the new leader must hold the Lease (the old pod released it on SIGTERM)
    time.sleep(3)
    return installed


def guarded_spec(**extra):
    """The seed's guarded Execute (step 4 -> 5) as a template."""
    from tests.e2e.execute_helpers import execute_spec

    spec = execute_spec()
    spec.update(extra)
    return spec


def policy(name, trigger, spec, **fields):
    obj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackPolicy", "metadata": {"name": name},
           "spec": {"trigger": trigger,
                    # no cooldown wait between the runs of these tests (the template's bounded annotation)
                    "runTemplate": {"metadata": {"annotations": {"repack.volcano.sh/execute-cooldown": "0s"}},
                                    "spec": spec}}}
    obj["spec"].update(fields)
    return obj


def kubectl_apply(control_plane, tmp_path, obj, *extra):
    path = tmp_path / f"{obj['metadata']['name']}-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(obj))
    out = control_plane.kubectl("apply", "-f", str(path), *extra, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def get_policy(api, name):
    return client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, "repackpolicies", name)


def policy_runs(api, name):
    items = client.CustomObjectsApi(api).list_cluster_custom_object(
        GROUP, VERSION, "repackruns", label_selector=f"{POLICY_LABEL}={name}")["items"]
    return sorted(items, key=lambda r: r["metadata"]["name"])


def delete_policy(control_plane, api, name):
    control_plane.kubectl("delete", "repackpolicy", name, "--ignore-not-found", "--wait=true", check=False)
    # its runs go with it (ownerReferences; the garbage collector of the control plane deletes them)
    wait_for(f"the runs of {name} to be deleted", lambda: not policy_runs(api, name) or None, timeout=120)


def finished(run):
    return (run.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def reason(run):
    for c in (run.get("status") or {}).get("conditions") or ():
        if c["status"] == "True" and c["type"] in ("Complete", "Failed"):
            return c["reason"]
    return None


def evaluations(api, name, count, timeout=120):
    """Wait until status.lastEvaluationTime has changed `count` times; returns the policy."""
    seen = []

    def advanced():
        t = (get_policy(api, name).get("status") or {}).get("lastEvaluationTime")
        if t and (not seen or seen[-1] != t):
            seen.append(t)
        return len(seen) > count or None
    wait_for(f"{count} evaluations of {name}", advanced, timeout=timeout, interval=1)
    return get_policy(api, name)


def test_fragmentation_policy_executes_once_and_leaves_moved_workloads_alone(
        controller_fast, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path):
    from tests.e2e.execute_helpers import build_seed_layout, running_on, seed_nodes

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    ns = make_namespace("repack-demo")
    nodes = seed_nodes()
    layout = build_seed_layout(api, fake_nodes, ns, nodes)
    name = f"frag-{uuid.uuid4().hex[:5]}"
    obj = policy(name, {"onFragAbovePercent": 20}, guarded_spec(), minWorkloadInterval="1h",
                 successfulRunsHistoryLimit=5, failedRunsHistoryLimit=5)
    try:
        t0 = time.monotonic()
        kubectl_apply(control_plane, tmp_path, obj)
        stored = get_policy(api, name)
        me = json.loads(control_plane.kubectl("auth", "whoami", "-o", "json").stdout)["status"]["userInfo"]
        assert stored["metadata"]["annotations"]["repack.volcano.sh/creator-username"] == me["username"]

        first = wait_for("the policy's Execute to end", lambda: next(
            (r for r in policy_runs(api, name) if finished(r)), None), timeout=300)
        took = round(time.monotonic() - t0, 1)
        st = first["status"]
        assert re.fullmatch(rf"{name}-\d{{14}}", first["metadata"]["name"]), first["metadata"]["name"]
        assert first["metadata"]["labels"][TRIGGER_LABEL] == "onFragAbovePercent"
        assert first["metadata"]["ownerReferences"][0]["kind"] == "RepackPolicy"
        assert first["metadata"]["annotations"]["repack.volcano.sh/creator-username"] == me["username"]
        assert reason(first) == "ExecutionCompleted", json.dumps(st, indent=1)
        assert st["result"]["freedNodes"] == [nodes[0]], st["result"]
        moved_uids = {rec["victimPodUID"] for rec in st["relocations"]}
        assert moved_uids == {uid for _, uid in layout["batch"].values()}

        # compact now: the evaluations go on (at least twice more) and create nothing
        pol = evaluations(api, name, 3)
        assert [r["metadata"]["name"] for r in policy_runs(api, name)] == [first["metadata"]["name"]]
        status = pol["status"]
        assert "not above 20%" in status["lastEvaluation"]["message"], status["lastEvaluation"]
        assert status["lastRunStatus"]["name"] == first["metadata"]["name"]
        assert status["lastRunStatus"]["reason"] == "ExecutionCompleted" and status["lastSuccessfulTime"]
        assert [c["status"] for c in status["conditions"] if c["type"] == "Healthy"] == ["True"]
        moved = status["recentlyMoved"]
        assert [(m["owner"]["kind"], m["owner"]["name"]) for m in moved] == [("Job", "ascend-batch-training")], moved
        out = control_plane.kubectl("get", "repackpolicy", name)
        header = out.stdout.splitlines()[0].split()
        assert header[:6] == ["NAME", "SUSPEND", "LAST-TRIGGER", "NEXT", "LAST-RESULT", "HEALTHY"], out.stdout
        assert "ExecutionCompleted" in out.stdout.splitlines()[1], out.stdout

        # fragmentation comes back (the protected jobs end: the batch workers sit alone on 02 and 03);
        # the policy fires again, but the workload it moved is out of scope for an hour: nothing moves
        batch_now = running_on(core, ns, "ascend-batch-training")
        for job in ("online-serving-critical", "llm-pretrain-critical"):
            custom.delete_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", job)
        wait_for("the protected pods gone", lambda: not [
            p for p in core.list_namespaced_pod(ns).items if "critical" in p.metadata.name] or None, timeout=120)
        second = wait_for("a second run of the policy to end", lambda: next(
            (r for r in policy_runs(api, name) if r["metadata"]["name"] != first["metadata"]["name"] and finished(r)),
            None), timeout=300)
        excluded = second["spec"]["scope"]["podGroups"]["exclude"]["names"]
        batch_pg = f"{ns}/{moved[0]['podGroupName']}"
        assert batch_pg in excluded, excluded
        assert second["metadata"]["labels"][TRIGGER_LABEL] == "onFragAbovePercent"
        assert not second["status"].get("relocations"), second["status"]
        assert reason(second) != "ExecutionCompleted", second["status"]
        assert running_on(core, ns, "ascend-batch-training") == batch_now     # same pods, same nodes
        assert all(codes == [] for codes in audit_evictions(control_plane, {u for _, u in batch_now.values()}).values())
        # a run that moved nothing at this fragmentation is not repeated every interval
        status = evaluations(api, name, 2)["status"]
        assert len(policy_runs(api, name)) == 2, [r["metadata"]["name"] for r in policy_runs(api, name)]
        assert "moved nothing at 33%" in status["lastEvaluation"]["message"], status["lastEvaluation"]
        print(f"\npolicy {name}: Execute {first['metadata']['name']} freed {nodes[0]} {took}s after kubectl apply; "
              f"then {len(policy_runs(api, name))} run(s); second run {second['metadata']['name']}: "
              f"{reason(second)}: {second['status'].get('message')}")
    except BaseException:
        print(pod_logs(control_plane))
        raise
    finally:
        delete_policy(control_plane, api, name)


def test_cron_policy_keeps_one_run_suspend_stops_it_and_a_closed_window_creates_no_execute(
        controller_fast, control_plane, tmp_path):
    api = control_plane.api_client
    cron, closed = f"cron-{uuid.uuid4().hex[:5]}", f"closed-{uuid.uuid4().hex[:5]}"
    from zoneinfo import ZoneInfo

    # the window opens daily 12 h from now, in Tokyo time (the image resolves the zone too)
    far = (dt.datetime.now(ZoneInfo("Asia/Tokyo")).hour + 12) % 24
    dry = {"mode": "DryRun", "goals": [{"resource": NPU_RESOURCE}]}
    try:
        kubectl_apply(control_plane, tmp_path, policy(cron, {"cronSchedule": "*/1 * * * *"}, dry,
                                                      successfulRunsHistoryLimit=1, failedRunsHistoryLimit=1))
        kubectl_apply(control_plane, tmp_path, policy(closed, {"cronSchedule": "*/1 * * * *"}, guarded_spec(),
                                                      windows=[{"schedule": f"0 {far} * * *", "duration": "1h"}],
                                                      timeZone="Asia/Tokyo"))
        names = set()

        def two_created():
            for r in policy_runs(api, cron):
                names.add(r["metadata"]["name"])
            return len(names) >= 2 or None
        wait_for("two runs of the cron policy", two_created, timeout=200, interval=1)
        # one per minute, named after the time it was created (UTC), right after a minute began
        stamps = sorted(dt.datetime.strptime(n.rsplit("-", 1)[1], "%Y%m%d%H%M%S") for n in names)
        assert all(s.second <= 20 for s in stamps), stamps
        assert (stamps[1] - stamps[0]).total_seconds() >= 50, stamps
        kept = wait_for("only one run kept", lambda: (lambda rs: rs if len(rs) == 1 and finished(rs[0]) else None)(
            policy_runs(api, cron)), timeout=60)
        assert kept[0]["metadata"]["labels"][TRIGGER_LABEL] == "cronSchedule"
        status = get_policy(api, cron)["status"]
        assert status["lastScheduleTime"] and status["nextTriggerTime"] > status["lastScheduleTime"]

        # the window policy: slots came and went, nothing was created
        closed_status = get_policy(api, closed)["status"]
        assert policy_runs(api, closed) == []
        assert "outside every maintenance window" in closed_status["lastEvaluation"]["message"], closed_status
        assert [c["status"] for c in closed_status["conditions"] if c["type"] == "Healthy"] == ["True"], closed_status
        opens = dt.datetime.strptime(closed_status["lastEvaluation"]["message"].split("opens at ")[1][:20],
                                     "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
        assert opens.astimezone(ZoneInfo("Asia/Tokyo")).hour == far and opens.minute == 0, opens

        # suspended: no run for more than a minute
        out = repack(control_plane.kubeconfig, "policy", "suspend", cron)
        assert out.returncode == 0, out.stdout + out.stderr
        before = {r["metadata"]["name"] for r in policy_runs(api, cron)}
        wait_for("the suspend to be seen", lambda: (get_policy(api, cron).get("status") or {}).get(
            "lastEvaluation", {}).get("message", "").startswith("suspended") or None, timeout=60)
        time.sleep(70)
        after = {r["metadata"]["name"] for r in policy_runs(api, cron)}
        assert after <= before, (before, after)
        got = repack(control_plane.kubeconfig, "policy", "get", cron)
        assert got.returncode == 0 and "true" in got.stdout.splitlines()[1].lower(), got.stdout
        print(f"\ncron policy runs seen: {sorted(names)}; kept: {sorted(after)}; window policy: "
              f"{closed_status['lastEvaluation']['message']}")
    finally:
        for name in (cron, closed):
            delete_policy(control_plane, api, name)


def test_pending_blocked_gang_gets_a_targeted_run_and_then_runs(
        controller_fast, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path):
    from tests.e2e.execute_helpers import build_seed_layout, seed_nodes, wait_running

    api = control_plane.api_client
    core = client.CoreV1Api(api)
    ns = make_namespace("repack-demo")
    nodes = seed_nodes()
    build_seed_layout(api, fake_nodes, ns, nodes)
    job = "ascend-large-training"
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "batch.volcano.sh", "v1alpha1", ns, "jobs",
        vcjob(job, {"workload-type": "training", "team": "large"}, [("worker", 2, 4)],
              {"accelerator-pool": "ascend-npu"}))
    selector = f"volcano.sh/job-name={job}"
    wait_for(f"{job}'s 2 pods created", lambda: len(core.list_namespaced_pod(ns, label_selector=selector).items) == 2
             or None, timeout=240)
    name = f"blocked-{uuid.uuid4().hex[:5]}"
    spec = guarded_spec()
    spec["goals"] = [{"resource": NPU_RESOURCE}]
    obj = policy(name, {"onPendingBlocked": {"forSeconds": 10, "podGroupSelector": {"matchLabels": {"team": "large"}}}},
                 spec)
    try:
        t0 = time.monotonic()
        kubectl_apply(control_plane, tmp_path, obj)
        tracked = wait_for("the gang tracked as blocked", lambda: (get_policy(api, name).get("status") or {}).get(
            "pendingBlocked"), timeout=120, interval=1)
        assert tracked[0]["cause"] == "Fragmentation" and tracked[0]["blockedSince"], tracked
        run = wait_for("the targeted run to end", lambda: next(
            (r for r in policy_runs(api, name) if finished(r)), None), timeout=300)
        assert run["metadata"]["labels"][TRIGGER_LABEL] == "onPendingBlocked"
        assert run["spec"]["target"] == {"podGroups": [tracked[0]["podGroup"]]}
        created = dt.datetime.strptime(run["metadata"]["name"].rsplit("-", 1)[1], "%Y%m%d%H%M%S")
        since = dt.datetime.strptime(tracked[0]["blockedSince"], "%Y-%m-%dT%H:%M:%SZ")
        assert (created - since).total_seconds() >= 10, (since, created)
        large = wait_running(api, ns, job)
        assert {n for n, _ in large.values()} == {nodes[0]}, large
        assert run["status"]["phase"] == "Succeeded", json.dumps(run["status"], indent=1)
        print(f"\npolicy {name}: {tracked[0]['podGroup']} blocked since {tracked[0]['blockedSince']}; run "
              f"{run['metadata']['name']} {reason(run)}; {job} running on {nodes[0]} "
              f"{round(time.monotonic() - t0, 1)}s after kubectl apply")
    except BaseException:
        print(pod_logs(control_plane))
        raise
    finally:
        delete_policy(control_plane, api, name)


def test_a_policy_of_a_user_who_may_not_evict_evicts_nothing(
        controller_fast, real_node, control_plane, node_agent, fake_nodes, make_namespace, tmp_path):
    from tests.e2e.execute_helpers import build_seed_layout, seed_nodes

    api = control_plane.api_client
    rbac = client.RbacAuthorizationV1Api(api)
    ns = make_namespace("repack-demo")
    layout = build_seed_layout(api, fake_nodes, ns, seed_nodes())
    victims = {uid for _, uid in layout["batch"].values()}
    bob = f"bob-{uuid.uuid4().hex[:5]}"
    rbac.create_cluster_role({"metadata": {"name": bob}, "rules": [
        {"apiGroups": [GROUP], "resources": ["repackpolicies", "repackruns"], "verbs": ["create", "get", "list"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": bob}, "subjects": [
        {"kind": "User", "name": bob, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": bob, "apiGroup": "rbac.authorization.k8s.io"}})
    name = f"bobs-{uuid.uuid4().hex[:5]}"
    try:
        kubectl_apply(control_plane, tmp_path, policy(name, {"onFragAbovePercent": 20}, guarded_spec()), f"--as={bob}")
        stored = get_policy(api, name)
        assert stored["metadata"]["annotations"]["repack.volcano.sh/creator-username"] == bob
        # only the controller's account may create a run carrying another user's record, even one a policy owns
        forged = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackRun", "metadata": {
            "name": f"{name}-forged", "annotations": {k: v for k, v in stored["metadata"]["annotations"].items()
                                                      if "creator" in k} | {
                "repack.volcano.sh/creator-username": "kubernetes-admin"},
            "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackPolicy", "name": name,
                                 "uid": stored["metadata"]["uid"]}]}, "spec": guarded_spec()}
        path = tmp_path / "forged.yaml"
        path.write_text(yaml.safe_dump(forged))
        out = control_plane.kubectl("create", "-f", str(path), f"--as={bob}", check=False)
        assert out.returncode != 0 and "creator annotations must name the user creating it" in out.stderr, out.stderr
        run = wait_for("bob's policy run to end", lambda: next(
            (r for r in policy_runs(api, name) if finished(r)), None), timeout=300)
        assert run["metadata"]["annotations"]["repack.volcano.sh/creator-username"] == bob
        assert reason(run) == "EvictionNotAuthorized", json.dumps(run["status"], indent=1)
        message = run["status"]["message"]
        assert f"'{bob}'" in message and "pods/eviction" in message, message
        assert not run["status"].get("relocations")
        assert all(codes == [] for codes in audit_evictions(control_plane, victims).values())
        print(f"\nbob's policy run {run['metadata']['name']}: {reason(run)}: {message}")
    finally:
        delete_policy(control_plane, api, name)
        rbac.delete_cluster_role_binding(bob)
        rbac.delete_cluster_role(bob)


def test_bad_policies_are_refused_by_the_crd_and_a_bad_cron_or_template_is_reported_not_run(
        controller_fast, control_plane, tmp_path):
    """Bad input on the API server (POLICY-2): the CRD (schema and CEL) refuses a window without a
    duration, onFragAbovePercent outside 0-100, a template the RepackRun schema refuses and a policy
    without a trigger, naming the field; a cron string (which CEL cannot parse) and a template the
    planner refuses get in, and the controller reports them Healthy=False/ReconcileFailed naming the
    field and creates nothing."""
    api = control_plane.api_client
    dry = {"mode": "DryRun", "goals": [{"resource": NPU_RESOURCE}]}
    refused = [
        (policy("bad-window", {"cronSchedule": "0 2 * * *"}, dry, windows=[{"schedule": "0 1 * * *"}]),
         "spec.windows[0].duration: Required value"),
        (policy("bad-frag", {"onFragAbovePercent": 101}, dry), "spec.trigger.onFragAbovePercent: Invalid value: 101"),
        (policy("bad-template", {"onFragAbovePercent": 20}, {"mode": "Later", "goals": dry["goals"]}),
         "spec.runTemplate.spec.mode: Unsupported value: \"Later\""),
        (policy("no-trigger", {}, dry), "trigger must set at least one of cronSchedule, onFragAbovePercent or "
                                        "onPendingBlocked"),
    ]
    for obj, words in refused:
        path = tmp_path / f"{obj['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(obj))
        out = control_plane.kubectl("apply", "-f", str(path), check=False)
        assert out.returncode != 0 and words in out.stderr, (obj["metadata"]["name"], out.stderr)
        # ... and locally, before anything is sent
        local = repack(control_plane.kubeconfig, "policy", "create", "-f", str(path))
        assert local.returncode == 2 and local.stderr.startswith("error: spec."), local.stderr
    selector_in_without_values = dict(dry, scope={"podGroups": {"include": {"selector": {"matchExpressions": [
        {"key": "team", "operator": "In"}]}}}})
    taken = [(policy("bad-cron", {"cronSchedule": "0 25 * * *"}, dry), "spec.trigger.cronSchedule: '0 25 * * *'"),
             (policy("planner-refuses", {"cronSchedule": "*/1 * * * *"}, selector_in_without_values),
              "spec.runTemplate.spec.scope.podGroups.include.selector.matchExpressions[0].values")]
    try:
        for obj, words in taken:
            kubectl_apply(control_plane, tmp_path, obj)
        for obj, words in taken:
            name = obj["metadata"]["name"]
            cond = wait_for(f"{name} reported", lambda name=name: next(
                (c for c in (get_policy(api, name).get("status") or {}).get("conditions") or ()
                 if c["type"] == "Healthy"), None), timeout=60)
            assert (cond["status"], cond["reason"]) == ("False", "ReconcileFailed"), cond
            assert words in cond["message"] and "no run is created" in cond["message"], cond["message"]
        time.sleep(65)      # a cron slot of planner-refuses came and went
        for obj, _ in taken:
            assert policy_runs(api, obj["metadata"]["name"]) == []
        out = control_plane.kubectl("get", "repackpolicy", "bad-cron", "planner-refuses")
        header, *rows = out.stdout.splitlines()
        at = header.index("HEALTHY")       # columns of unset fields print empty: read HEALTHY by position
        assert len(rows) == 2 and all(row[at:].split()[0] == "False" for row in rows), out.stdout
        print("\n" + out.stdout)
    finally:
        for obj, _ in taken:
            delete_policy(control_plane, api, obj["metadata"]["name"])
