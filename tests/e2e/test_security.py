"""The creator record on the real API server (SEC-1): the ValidatingAdmissionPolicy
that `kubectl repack install` renders, enforced by the API server itself, without the mutating
webhook. A user who may create and patch RepackRuns (as `cancel` needs) but not evict cannot make
a run name anyone but themselves, cannot change the record afterwards, and cannot replay an
admin's record; their own correct record, and the plugin's (SelfSubjectReview), go through, and
re-applying the same manifest client-side and server-side works.

The controller's side (refusing forged records, evicting nothing) runs against the installed
controller in test_installed.py."""
from __future__ import annotations

import json
import time
import uuid

import pytest
import yaml
from kubernetes import client

from kubectl_repack.api.control import (CREATOR_GROUPS_ANNOTATION, CREATOR_UID_ANNOTATION, CREATOR_USERNAME_ANNOTATION,
                                        Creator)
from kubectl_repack.deploy.installer import delete_object, server_side_apply
from kubectl_repack.deploy import manifests
from tests.e2e.helpers import wait_for


def _run(name: str, annotations: dict | None = None) -> dict:
    meta: dict = {"name": name}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": meta,
            "spec": {"mode": "DryRun", "goals": [{"resource": "huawei.com/ascend-1980"}]}}


def _apply(control_plane, tmp_path, obj, *extra):
    path = tmp_path / f"{obj['metadata']['name']}-{uuid.uuid4().hex[:6]}.yaml"
    path.write_text(yaml.safe_dump(obj))
    return control_plane.kubectl("apply", "-f", str(path), *extra, check=False)


def _whoami(control_plane, *extra) -> Creator:
    out = control_plane.kubectl("auth", "whoami", "-o", "json", *extra)
    return Creator.from_user_info(json.loads(out.stdout)["status"]["userInfo"])


@pytest.fixture(scope="module")
def creator_policy(control_plane):
    """The policy and its binding as install applies them, in force (a policy acts once the API
    server's informer has it: wait until a run without a record is refused), removed afterwards."""
    api = control_plane.api_client
    objs = [manifests.creator_policy(), manifests.creator_policy_binding(),
            manifests.replacement_pod_policy("repack-system"), manifests.replacement_pod_policy_binding()]
    for obj in objs:
        server_side_apply(api, obj)
    custom = client.CustomObjectsApi(api)

    def enforced():
        try:
            custom.create_cluster_custom_object("repack.volcano.sh", "v1alpha1", "repackruns",
                                                _run(f"probe-{uuid.uuid4().hex[:8]}"), dry_run="All")
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
def bob(control_plane):
    """A user who may create, get, patch and delete RepackRuns (and write their status), nothing else."""
    rbac = client.RbacAuthorizationV1Api(control_plane.api_client)
    name = f"bob-{uuid.uuid4().hex[:6]}"
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": [
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns", "repackruns/status"],
         "verbs": ["create", "get", "list", "watch", "patch", "update", "delete"]}]})
    rbac.create_cluster_role_binding({"metadata": {"name": name}, "subjects": [
        {"kind": "User", "name": name, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "ClusterRole", "name": name, "apiGroup": "rbac.authorization.k8s.io"}})
    yield name
    rbac.delete_cluster_role_binding(name)
    rbac.delete_cluster_role(name)


def _cleanup(control_plane, *names):
    for name in names:
        control_plane.kubectl("delete", "repackrun", name, "--ignore-not-found", "--wait=false", check=False)


def test_a_run_without_its_creators_record_is_refused_saying_what_to_add(creator_policy, bob, control_plane, tmp_path):
    me = _whoami(control_plane, f"--as={bob}")
    assert me.username == bob and "system:authenticated" in me.groups
    name = f"sec-bare-{uuid.uuid4().hex[:6]}"
    try:
        out = _apply(control_plane, tmp_path, _run(name), f"--as={bob}")
        assert out.returncode != 0
        assert "ValidatingAdmissionPolicy 'repack-run-creator'" in out.stderr, out.stderr
        assert "the creator annotations must name the user creating it" in out.stderr, out.stderr
        assert f'{CREATOR_USERNAME_ANNOTATION}: "{bob}"' in out.stderr, out.stderr
        assert f'{CREATOR_GROUPS_ANNOTATION}: "{",".join(me.groups)}"' in out.stderr, out.stderr
        assert "kubectl auth whoami" in out.stderr

        # with the record the message asks for (what `kubectl auth whoami` says), it is accepted,
        # and the same manifest re-applies client-side and server-side
        mine = _run(name, me.annotations())
        for extra in ((), (), ("--server-side",), ("--server-side",)):
            out = _apply(control_plane, tmp_path, mine, f"--as={bob}", *extra)
            assert out.returncode == 0, (extra, out.stderr)
        stored = json.loads(control_plane.kubectl("get", "repackrun", name, "-o", "json").stdout)
        assert Creator.from_user_info({"username": stored["metadata"]["annotations"][CREATOR_USERNAME_ANNOTATION]}) \
            .username == bob
    finally:
        _cleanup(control_plane, name)


def test_naming_someone_else_or_forging_groups_is_refused(creator_policy, bob, control_plane, tmp_path):
    """Finding 1's goal (a record naming an admin, however obtained) and a record with an added
    group: the API server compares with the authenticated user, not with what anybody signed."""
    me = _whoami(control_plane, f"--as={bob}")
    admin = _whoami(control_plane)
    forgeries = {
        "admin": admin.annotations(),
        "masters": Creator(bob, me.uid, me.groups + ("system:masters",)).annotations(),
        "uid": dict(me.annotations(), **{CREATOR_UID_ANNOTATION: "someone-else"}),
        "partial": {CREATOR_USERNAME_ANNOTATION: bob},
    }
    names = []
    try:
        for what, forged in forgeries.items():
            name = f"sec-forged-{what}-{uuid.uuid4().hex[:6]}"
            names.append(name)
            out = _apply(control_plane, tmp_path, _run(name, forged), f"--as={bob}")
            assert out.returncode != 0, what
            assert "the creator annotations must name the user creating it" in out.stderr, (what, out.stderr)
            assert control_plane.kubectl("get", "repackrun", name, check=False).returncode != 0, what
    finally:
        _cleanup(control_plane, *names)


def test_the_record_cannot_be_changed_or_removed_but_cancel_still_works(creator_policy, bob, control_plane, tmp_path):
    me = _whoami(control_plane, f"--as={bob}")
    name = f"sec-update-{uuid.uuid4().hex[:6]}"
    try:
        assert _apply(control_plane, tmp_path, _run(name, me.annotations()), f"--as={bob}").returncode == 0
        for patch in ({CREATOR_USERNAME_ANNOTATION: "system:admin"},
                      {CREATOR_GROUPS_ANNOTATION: "system:masters"},
                      {CREATOR_USERNAME_ANNOTATION: None}):
            out = control_plane.kubectl("patch", "repackrun", name, "--type=merge", "-p",
                                        json.dumps({"metadata": {"annotations": patch}}), f"--as={bob}", check=False)
            assert out.returncode != 0 and "cannot be added, changed or removed" in out.stderr, (patch, out.stderr)
        out = control_plane.kubectl("annotate", "repackrun", name, "repack.volcano.sh/cancel=true", f"--as={bob}",
                                    check=False)
        assert out.returncode == 0, out.stderr
        stored = json.loads(control_plane.kubectl("get", "repackrun", name, "-o", "json").stdout)
        assert stored["metadata"]["annotations"][CREATOR_USERNAME_ANNOTATION] == bob
    finally:
        _cleanup(control_plane, name)


def test_an_admins_record_cannot_be_replayed_after_the_run_is_gone(creator_policy, bob, control_plane, tmp_path):
    """Finding 2: bob read an admin's run; after it is deleted (TTL) he re-creates it with the same
    annotations. Nothing about the record is a secret, so nothing can be replayed: refused."""
    admin = _whoami(control_plane)
    name = f"sec-replay-{uuid.uuid4().hex[:6]}"
    try:
        assert _apply(control_plane, tmp_path, _run(name, admin.annotations())).returncode == 0
        copied = json.loads(control_plane.kubectl("get", "repackrun", name, "-o", "json", f"--as={bob}").stdout)
        control_plane.kubectl("delete", "repackrun", name)
        replay = _run(name, {k: v for k, v in copied["metadata"]["annotations"].items()
                             if k.startswith("repack.volcano.sh/")})
        out = _apply(control_plane, tmp_path, replay, f"--as={bob}")
        assert out.returncode != 0 and "must name the user creating it" in out.stderr, out.stderr
    finally:
        _cleanup(control_plane, name)


def test_the_plugin_fills_in_the_record_from_a_self_subject_review(creator_policy, bob, control_plane):
    """`plan --save` and `apply` create runs through RunStore.create: as bob, no annotations given."""
    from kubectl_repack.kube.client import Overrides, connect
    from kubectl_repack.kube.runs import RunStore

    name = f"sec-plugin-{uuid.uuid4().hex[:6]}"
    try:
        stored = RunStore(connect(control_plane.kubeconfig, overrides=Overrides(as_user=bob))).create(_run(name))
        ann = stored["metadata"]["annotations"]
        assert ann[CREATOR_USERNAME_ANNOTATION] == bob and "system:authenticated" in ann[CREATOR_GROUPS_ANNOTATION]
    finally:
        _cleanup(control_plane, name)


def test_the_policy_is_evaluated_fast_enough_to_be_always_on(creator_policy, control_plane, tmp_path):
    """Not a timing assertion: how long 20 refused and 20 accepted creates take, printed."""
    admin = _whoami(control_plane)
    custom = client.CustomObjectsApi(control_plane.api_client)
    started, refused = time.monotonic(), 0
    for i in range(20):
        try:
            custom.create_cluster_custom_object("repack.volcano.sh", "v1alpha1", "repackruns",
                                                _run(f"sec-speed-{i}"), dry_run="All")
        except client.ApiException as e:
            refused += e.status == 403
    for i in range(20):
        custom.create_cluster_custom_object("repack.volcano.sh", "v1alpha1", "repackruns",
                                            _run(f"sec-speed-{i}", admin.annotations()), dry_run="All")
    print(f"\n40 dry-run creates through the creator policy: {time.monotonic() - started:.2f}s")
    assert refused == 20


def test_a_users_pod_cannot_carry_the_marks_of_a_replacement(creator_policy, control_plane, make_namespace):
    """Finding 6 on the real API server: a user who may create and patch pods copies a replacement's
    repack annotations (or its placement gate) onto a pod of their own, at creation or later; the
    replacement policy refuses both, so the coordinator never sees such a pod. Their plain pod,
    and a cluster admin's, are admitted."""
    from kubectl_repack.api.gates import (PLACEMENT_GATE, PLANNED_NODE_ANNOTATION, RELOCATION_INDEX_ANNOTATION,
                                          RELOCATION_RUN_ANNOTATION, RELOCATION_VICTIM_ANNOTATION)

    ns = make_namespace("sec-pods")
    rbac = client.RbacAuthorizationV1Api(control_plane.api_client)
    user = f"eve-{uuid.uuid4().hex[:6]}"
    rbac.create_namespaced_role(ns, {"metadata": {"name": user}, "rules": [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "get", "patch", "update"]}]})
    rbac.create_namespaced_role_binding(ns, {"metadata": {"name": user}, "subjects": [
        {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": user, "apiGroup": "rbac.authorization.k8s.io"}})
    marks = {RELOCATION_RUN_ANNOTATION: "admins-run/uid-1", RELOCATION_INDEX_ANNOTATION: "0",
             RELOCATION_VICTIM_ANNOTATION: "train-worker-0", PLANNED_NODE_ANNOTATION: "gpu-node-7"}

    def pod(name, annotations=None, gate=False):
        spec = {"containers": [{"name": "c", "image": "registry.invalid/x:1"}],
                "nodeSelector": {"repack-e2e/nowhere": "true"}}
        if gate:
            spec["schedulingGates"] = [{"name": PLACEMENT_GATE}]
        return yaml.safe_dump({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": ns, "annotations": annotations or {}}, "spec": spec})

    for name, text in (("copied-marks", pod("copied-marks", marks)), ("copied-gate", pod("copied-gate", gate=True))):
        out = control_plane.kubectl("create", "-f", "-", f"--as={user}", input=text, check=False)
        assert out.returncode != 0 and "ValidatingAdmissionPolicy 'repack-replacement-pods'" in out.stderr, out.stderr
        assert f"{user} may not create a pod carrying the repack.volcano.sh relocation annotations" in out.stderr
    out = control_plane.kubectl("create", "-f", "-", f"--as={user}", input=pod("plain", {"team": "a"}), check=False)
    assert out.returncode == 0, out.stderr
    out = control_plane.kubectl("-n", ns, "annotate", "pod", "plain", f"{RELOCATION_RUN_ANNOTATION}=admins-run/uid-1",
                                f"--as={user}", check=False)
    assert out.returncode != 0 and "changed by its coordinator and controller only" in out.stderr, out.stderr
    out = control_plane.kubectl("-n", ns, "annotate", "pod", "plain", "team=b", "--overwrite", f"--as={user}",
                                check=False)
    assert out.returncode == 0, out.stderr
    out = control_plane.kubectl("create", "-f", "-", input=pod("by-admin", marks, gate=True), check=False)
    assert out.returncode == 0, out.stderr                 # system:masters is not checked (uninstall lifts gates)
