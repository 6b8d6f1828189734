"""RepackPolicies on the real API server, attacked as the attacker would (SEC-1): impersonated users,
the admission policy `repack-run-creator` as install renders it, enforced by the API server itself.

* A policy's runs act on its creator's authority, so what the policy does is the creator's to
  change: a user who may `update repackpolicies` (what the README has admins grant for
  `kubectl repack policy suspend/resume/trigger`) but may not evict cannot turn another user's
  DryRun policy into an Execute, widen its scope or its windows, nor re-stamp it with their own
  record; suspend, resume and trigger still work for them, and the creator may change it.
* Policy squatting: the policy's runs are those the controller marked (the repack-policy label and
  the ownerReference, which only the controller's account may set at creation and nobody may add
  later). A user's run that claims them is refused; a bare ownerReference does not count
  (tests/unit/webhook/controller/test_policies.py)."""
from __future__ import annotations

import json
import uuid

import pytest
import yaml
from kubernetes import client

from kubectl_repack.api.control import CREATOR_USERNAME_ANNOTATION, Creator
from kubectl_repack.api.policy import MANUAL_TRIGGER_ANNOTATION, POLICY_LABEL
from kubectl_repack.deploy import manifests
from kubectl_repack.deploy.installer import delete_object, server_side_apply
from tests.e2e.helpers import repack, wait_for

pytestmark = pytest.mark.e2e

GROUP, VERSION = "repack.volcano.sh", "v1alpha1"
CONTROLLER = f"system:serviceaccount:{manifests.NAMESPACE}:{manifests.CONTROLLER_NAME}"
REFUSED = "ValidatingAdmissionPolicy 'repack-run-creator'"


def _policy(name: str, annotations: dict) -> dict:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackPolicy",
            "metadata": {"name": name, "annotations": dict(annotations)},
            "spec": {"trigger": {"cronSchedule": "0 3 * * *"},
                     "runTemplate": {"spec": {"mode": "DryRun", "goals": [{"resource": "huawei.com/ascend-1980"}],
                                              "scope": {"podGroups": {"include": {"selector": {"matchLabels": {"team": "a"}}}}}}}}}


def _run(name: str, annotations: dict, labels: dict | None = None, owners: list | None = None) -> dict:
    meta: dict = {"name": name, "annotations": dict(annotations), "labels": dict(labels or {})}
    if owners:
        meta["ownerReferences"] = owners
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackRun", "metadata": meta,
            "spec": {"mode": "DryRun", "goals": [{"resource": "huawei.com/ascend-1980"}]}}


def _whoami(control_plane, user: str) -> Creator:
    out = control_plane.kubectl("auth", "whoami", "-o", "json", f"--as={user}")
    return Creator.from_user_info(json.loads(out.stdout)["status"]["userInfo"])


def _create(control_plane, obj: dict, *extra):
    return control_plane.kubectl("create", "-f", "-", *extra, input=yaml.safe_dump(obj), check=False)


def _get(control_plane, kind: str, name: str) -> dict:
    return json.loads(control_plane.kubectl("get", kind, name, "-o", "json").stdout)


@pytest.fixture(scope="module")
def admission(control_plane):
    """The creator policy and its binding as install applies them, in force (waited for: a policy
    acts once the API server's informer has it), removed afterwards."""
    api = control_plane.api_client
    objs = [manifests.creator_policy(), manifests.creator_policy_binding()]
    for obj in objs:
        server_side_apply(api, obj)
    custom = client.CustomObjectsApi(api)

    def enforced():   # a run without a creator record is refused
        try:
            custom.create_cluster_custom_object(GROUP, VERSION, "repackruns", _run(f"probe-{uuid.uuid4().hex[:8]}", {}),
                                                dry_run="All")
        except client.ApiException as e:
            return e.status == 403 or None
        return None
    wait_for("the creator policy to be enforced", enforced, timeout=60)
    try:
        yield
    finally:
        for obj in reversed(objs):
            delete_object(api, obj)


@pytest.fixture
def users(control_plane):
    """alice may create and change RepackPolicies and RepackRuns; mallory may read and update
    RepackPolicies (as an admin granted for suspend/resume/trigger) and create RepackRuns; neither
    may evict. The controller's account may create runs (its ClusterRole's rule)."""
    rbac = client.RbacAuthorizationV1Api(control_plane.api_client)
    tag = uuid.uuid4().hex[:6]
    grants = {
        f"alice-{tag}": [{"apiGroups": [GROUP], "resources": ["repackpolicies", "repackruns"],
                          "verbs": ["create", "get", "list", "watch", "patch", "update", "delete"]}],
        f"mallory-{tag}": [{"apiGroups": [GROUP], "resources": ["repackpolicies"],
                            "verbs": ["get", "list", "watch", "patch", "update"]},
                           {"apiGroups": [GROUP], "resources": ["repackruns"],
                            "verbs": ["create", "get", "list", "patch", "update", "delete"]}],
        CONTROLLER: [{"apiGroups": [GROUP], "resources": ["repackruns"], "verbs": ["create", "get"]}],
    }
    names = []
    for user, rules in grants.items():
        name = f"sec-pol-{uuid.uuid4().hex[:8]}"
        names.append(name)
        rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
        rbac.create_cluster_role_binding({"metadata": {"name": name}, "subjects": [
            {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "ClusterRole", "name": name, "apiGroup": "rbac.authorization.k8s.io"}})
    alice, mallory = list(grants)[:2]
    for user in (alice, mallory):   # neither may evict anywhere
        out = control_plane.kubectl("auth", "can-i", "create", "pods/eviction", "-A", f"--as={user}", check=False)
        assert out.stdout.strip() == "no", out.stdout
    yield alice, mallory
    for name in names:
        rbac.delete_cluster_role_binding(name)
        rbac.delete_cluster_role(name)


@pytest.fixture
def alices_policy(admission, users, control_plane):
    alice, _ = users
    name = f"sec-pol-{uuid.uuid4().hex[:6]}"
    out = _create(control_plane, _policy(name, _whoami(control_plane, alice).annotations()), f"--as={alice}")
    assert out.returncode == 0, out.stderr
    yield name
    control_plane.kubectl("delete", "repackpolicy", name, "--ignore-not-found", "--wait=false", check=False)


def test_another_user_cannot_turn_a_dry_run_policy_into_an_execute(alices_policy, users, control_plane):
    """The reported attack: mallory (no eviction rights, `update repackpolicies`) switches alice's
    DryRun policy to Execute and triggers it. The switch is refused, whichever way it is written,
    and so are a wider scope and a re-stamp with mallory's own record: the policy stays as alice
    made it, so the run the trigger asks for is still alice's DryRun."""
    alice, mallory = users
    name = alices_policy
    before = _get(control_plane, "repackpolicy", name)
    attacks = {
        "Execute (merge patch)": ["patch", "repackpolicy", name, "--type=merge", "-p",
                                  json.dumps({"spec": {"runTemplate": {"spec": {"mode": "Execute"}}}})],
        "Execute (JSON patch)": ["patch", "repackpolicy", name, "--type=json", "-p", json.dumps(
            [{"op": "replace", "path": "/spec/runTemplate/spec/mode", "value": "Execute"}])],
        "wider scope": ["patch", "repackpolicy", name, "--type=json", "-p", json.dumps(
            [{"op": "remove", "path": "/spec/runTemplate/spec/scope"}])],
        "another trigger": ["patch", "repackpolicy", name, "--type=merge", "-p",
                            json.dumps({"spec": {"trigger": {"onFragAbovePercent": 1}}})],
        "re-stamped as mallory": ["patch", "repackpolicy", name, "--type=merge", "-p", json.dumps(
            {"metadata": {"annotations": _whoami(control_plane, mallory).annotations()},
             "spec": {"runTemplate": {"spec": {"mode": "Execute"}}}})],
    }
    for what, args in attacks.items():
        out = control_plane.kubectl(*args, f"--as={mallory}", check=False)
        assert out.returncode != 0, what
        assert REFUSED in out.stderr, (what, out.stderr)
        if what != "re-stamped as mallory":
            assert f"only its creator ({alice}" in out.stderr and "policy suspend/resume/trigger" in out.stderr, \
                (what, out.stderr)
    # a full replace (kubectl apply of an edited copy) is the same UPDATE
    edited = _get(control_plane, "repackpolicy", name)
    edited["spec"]["runTemplate"]["spec"]["mode"] = "Execute"
    out = control_plane.kubectl("replace", "-f", "-", f"--as={mallory}", input=yaml.safe_dump(edited), check=False)
    assert out.returncode != 0 and REFUSED in out.stderr, out.stderr

    # the trigger still goes through: it asks for a run of alice's policy as alice wrote it
    kubeconfig = control_plane.kubeconfig
    out = repack(kubeconfig, "policy", "trigger", name, f"--as={mallory}")
    assert out.returncode == 0, out.stdout + out.stderr
    after = _get(control_plane, "repackpolicy", name)
    assert after["spec"] == before["spec"] and after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["metadata"]["annotations"][CREATOR_USERNAME_ANNOTATION] == alice
    assert after["metadata"]["annotations"].get(MANUAL_TRIGGER_ANNOTATION)


def test_suspend_resume_and_trigger_work_for_an_admin_and_the_creator_may_change_the_template(
        alices_policy, users, control_plane):
    alice, mallory = users
    name = alices_policy
    kubeconfig = control_plane.kubeconfig
    for command, suspended in (("suspend", True), ("resume", False)):
        out = repack(kubeconfig, "policy", command, name, f"--as={mallory}")
        assert out.returncode == 0, out.stdout + out.stderr
        assert _get(control_plane, "repackpolicy", name)["spec"]["suspend"] is suspended
    out = repack(kubeconfig, "policy", "trigger", name, f"--as={mallory}")
    assert out.returncode == 0, out.stdout + out.stderr
    # the creator changes her own policy (her record is the requester)
    out = control_plane.kubectl("patch", "repackpolicy", name, "--type=merge", "-p",
                                json.dumps({"spec": {"runTemplate": {"spec": {"mode": "Execute"}}}}),
                                f"--as={alice}", check=False)
    assert out.returncode == 0, out.stderr
    assert _get(control_plane, "repackpolicy", name)["spec"]["runTemplate"]["spec"]["mode"] == "Execute"


def test_a_users_run_cannot_pass_for_a_policys_run(alices_policy, users, control_plane):
    """Policy squatting: mallory's run carrying the controller's mark (label, ownerReference to the
    policy) is refused at creation, and the mark cannot be added to her run afterwards; the
    controller's account still creates a policy's run with the policy's record."""
    alice, mallory = users
    policy = _get(control_plane, "repackpolicy", alices_policy)
    owner = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackPolicy", "name": alices_policy,
             "uid": policy["metadata"]["uid"]}
    record = _whoami(control_plane, mallory).annotations()
    tag = uuid.uuid4().hex[:6]
    squatters = {"label and owner": _run(f"squat-a-{tag}", record, {POLICY_LABEL: alices_policy}, [owner]),
                 "label": _run(f"squat-b-{tag}", record, {POLICY_LABEL: alices_policy})}
    names = [f"plain-{tag}", f"owned-{tag}"]
    try:
        for what, run in squatters.items():
            out = _create(control_plane, run, f"--as={mallory}")
            assert out.returncode != 0, what
            assert REFUSED in out.stderr and f"the label {POLICY_LABEL}" in out.stderr, (what, out.stderr)
        # her own run, then the mark added later: refused too
        assert _create(control_plane, _run(names[0], record), f"--as={mallory}").returncode == 0
        for what, patch in (("label", {"metadata": {"labels": {POLICY_LABEL: alices_policy}}}),
                            ("owner", {"metadata": {"ownerReferences": [owner]}})):
            out = control_plane.kubectl("patch", "repackrun", names[0], "--type=merge", "-p", json.dumps(patch),
                                        f"--as={mallory}", check=False)
            assert out.returncode != 0 and REFUSED in out.stderr, (what, out.stderr)
        stored = _get(control_plane, "repackrun", names[0])
        assert POLICY_LABEL not in (stored["metadata"].get("labels") or {})
        assert not stored["metadata"].get("ownerReferences")
        # a bare ownerReference (no mark) is hers to write: the policy does not count such a run
        assert _create(control_plane, _run(names[1], record, owners=[owner]), f"--as={mallory}").returncode == 0

        # the controller's account, creating the policy's run with the policy's (alice's) record
        ours = _run(f"{alices_policy}-20260101000000", _whoami(control_plane, alice).annotations(),
                    {POLICY_LABEL: alices_policy}, [dict(owner, controller=True, blockOwnerDeletion=False)])
        out = _create(control_plane, ours, f"--as={CONTROLLER}", "--dry-run=server")
        assert out.returncode == 0, out.stderr
    finally:
        for name in names:
            control_plane.kubectl("delete", "repackrun", name, "--ignore-not-found", "--wait=false", check=False)
