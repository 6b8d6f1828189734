"""Attacks on the placement path, on the real kube-apiserver with the webhook and the coordinator
running (the `stack` of test_webhook.py: install, the records-seal and placement keys, both processes):

* a status writer edits a record's plannedNodeName (SEC-2): the records digest no longer matches,
  so the webhook hands the record to nobody and the coordinator nominates nothing; and the digest
  itself is written by the controller's account only (the admission policy refuses anybody else,
  on another user's run and on create), except on a local run by a user who may read the seal key;
* the webhook's and the coordinator's accounts (a stolen token) may not read the records-seal key:
  they verify records by the digest and MAC marks with their own placement key;
* a namespace user's ReplicaSet whose template carries the replacement marks (SEC-5): the pod the
  ReplicaSet controller creates has the marks stripped at admission and takes no record; the
  genuine replacement is still matched, gated and nominated;
* forged AdmissionReviews from a raw TLS client that reaches the webhook port (SEC-5): they claim
  nothing a genuine replacement needs.
"""
from __future__ import annotations

import json
import os
import socket
import ssl
import time
import uuid

import pytest
from kubernetes import client

from kubectl_repack.api.gates import (MARKS_MAC_ANNOTATION, PLACEMENT_GATE, PLANNED_NODE_ANNOTATION,
                                      RELOCATION_INDEX_ANNOTATION, RELOCATION_RUN_ANNOTATION,
                                      RELOCATION_VICTIM_ANNOTATION, REPLACEMENT_MARKS)
from tests.e2e.helpers import wait_for
from tests.e2e.test_webhook import (deployment, gates, live_pods, placement_table, relocation_for, running_on,
                                    stack)  # noqa: F401 - `stack` is the module fixture
from tests.harness import npu_node

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module", autouse=True)
def _install_namespace_gone(control_plane):
    """Another module's stack uninstalled just before: its namespace must be gone before `stack`
    installs into it again."""
    from kubernetes.client.rest import ApiException

    core = client.CoreV1Api(control_plane.api_client)

    def gone():
        try:
            core.read_namespace("repack-system")
            return False
        except ApiException as e:
            return e.status == 404
    wait_for("namespace repack-system gone", gone, 120)


def victim_and_run(stack, fake_nodes, make_namespace, prefix):
    """A Deployment's pod (the victim) Running, and an admin's sealed Execute run whose record plans
    it onto an empty node. Returns (namespace, victim, planned node, another node, run name)."""
    core = stack.core
    ns = make_namespace(prefix)
    fake_nodes(npu_node(f"{ns}-src", cards=8, pool=ns))
    client.AppsV1Api(stack.api).create_namespaced_deployment(ns, deployment("serve", ns, replicas=1, cards=4))
    (victim,) = wait_for("the victim Running", lambda: running_on(core, ns, "serve", 1), 90)
    planned, other = fake_nodes(npu_node(f"{ns}-planned", cards=8, pool=ns), npu_node(f"{ns}-other", cards=8, pool=ns))
    run_name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    record, move = relocation_for(ns, victim, planned)
    stack.create_run(run_name, [record], [move])
    time.sleep(1.0)  # the webhook's RepackRun watch sees the sealed record
    return ns, victim, planned, other, run_name


def grant(stack, user, rules, ns=None):
    """Give `user` these RBAC rules (cluster-wide, or in `ns`)."""
    rbac = client.RbacAuthorizationV1Api(stack.api)
    ref = {"kind": "Role" if ns else "ClusterRole", "name": user, "apiGroup": "rbac.authorization.k8s.io"}
    subjects = [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]
    if ns:
        rbac.create_namespaced_role(ns, {"metadata": {"name": user}, "rules": rules})
        rbac.create_namespaced_role_binding(ns, {"metadata": {"name": user}, "subjects": subjects, "roleRef": ref})
    else:
        rbac.create_cluster_role({"metadata": {"name": user}, "rules": rules})
        rbac.create_cluster_role_binding({"metadata": {"name": user}, "subjects": subjects, "roleRef": ref})


def the_replacement(core, ns, victim):
    pods = [p for p in live_pods(core, ns, "serve") if p.metadata.name != victim.metadata.name]
    return pods[0] if pods else None


def repack_marks(pod):
    return {k: v for k, v in (pod.metadata.annotations or {}).items() if k in REPLACEMENT_MARKS}


def placement(stack, run_name):
    return stack.run(run_name)["status"]["relocations"][0]["placement"]


def assert_genuine_replacement_placed(stack, ns, victim, run_name, planned):
    """The genuine replacement is marked (MAC included), recorded and nominated onto the planned node."""
    core = stack.core
    new = wait_for("the genuine replacement", lambda: the_replacement(core, ns, victim), 30)
    ann = new.metadata.annotations or {}
    assert ann.get(RELOCATION_RUN_ANNOTATION, "").startswith(run_name + "/"), ann
    assert ann.get(MARKS_MAC_ANNOTATION, "").startswith("v1:"), ann

    def nominated():
        pl = placement(stack, run_name)
        return pl if pl.get("selectedNodeName") else None

    pl = wait_for("the replacement nominated onto the planned node", nominated, 60)
    print("\n" + placement_table(stack.run(run_name)))
    assert pl["replacementPodUID"] == new.metadata.uid and pl["selectedNodeName"] == planned, pl


# ----- SEC-2: a status edit of plannedNodeName ---------------------------------------------------------------
def test_a_status_edit_of_the_planned_node_steers_nothing(stack, fake_nodes, make_namespace):
    """A user who may write repackruns/status (what `plan --save` needs) points the admin's record
    at another node. The digest no longer matches: the replacement is neither marked nor gated, and
    nobody nominates it anywhere."""
    core = stack.core
    ns, victim, planned, other, run_name = victim_and_run(stack, fake_nodes, make_namespace, "sec-steer")
    writer = f"mallory-{uuid.uuid4().hex[:6]}"
    grant(stack, writer, [{"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns"], "verbs": ["get"]},
                          {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns/status"],
                           "verbs": ["get", "patch", "update"]}])
    edit = [{"op": "replace", "path": "/status/relocations/0/plannedNodeName", "value": other}]
    out = stack.cluster.kubectl("patch", "repackrun", run_name, "--subresource=status", "--type=json",
                                "-p", json.dumps(edit), f"--as={writer}", check=False)
    assert out.returncode == 0, out.stderr
    assert stack.run(run_name)["status"]["relocations"][0]["plannedNodeName"] == other
    time.sleep(1.0)  # the webhook's watch sees the edit

    stack.evict(ns, victim.metadata.name, run_name, 0)
    new = wait_for("the re-created pod", lambda: the_replacement(core, ns, victim), 30)
    assert repack_marks(new) == {} and PLACEMENT_GATE not in gates(new), new.metadata.annotations
    wait_for("the re-created pod bound", lambda: core.read_namespaced_pod(new.metadata.name, ns).spec.node_name, 60)
    time.sleep(2.0)  # four coordinator ticks: had it trusted the record, it would have written it by now
    pod = core.read_namespaced_pod(new.metadata.name, ns)
    assert (pod.status.nominated_node_name or "") != other
    pl = placement(stack, run_name)
    assert not pl.get("selectedNodeName") and not pl.get("replacementPodName"), pl


# ----- SEC-2: the digest is the controller's; the webhook and the coordinator cannot seal -------------------
def impersonating(stack, user):
    return client.ApiClient(stack.api.configuration, header_name="Impersonate-User", header_value=user)


def test_the_webhooks_and_the_coordinators_tokens_cannot_read_the_seal_key(stack):
    """As the API server answers their tokens (impersonated): the seal key is refused (403), so a
    stolen token cannot seal records the controller evicts by; the placement key is theirs to read."""
    from kubernetes.client.rest import ApiException

    from kubectl_repack.api.control import SEAL_SECRET_NAME
    from kubectl_repack.api.gates import PLACEMENT_KEY_SECRET_NAME

    ns = "repack-system"
    for account in ("repack-webhook", "repack-coordinator"):
        core = client.CoreV1Api(impersonating(stack, f"system:serviceaccount:{ns}:{account}"))
        with pytest.raises(ApiException) as refused:
            core.read_namespaced_secret(SEAL_SECRET_NAME, ns)
        assert refused.value.status == 403, (account, refused.value.body)
        assert core.read_namespaced_secret(PLACEMENT_KEY_SECRET_NAME, ns).data["key"]
    controller = client.CoreV1Api(impersonating(stack, f"system:serviceaccount:{ns}:repack-controller"))
    with pytest.raises(ApiException) as refused:
        controller.read_namespaced_secret(PLACEMENT_KEY_SECRET_NAME, ns)
    assert refused.value.status == 403


def patch_annotations(stack, run_name, user, annotations):
    return stack.cluster.kubectl("patch", "repackrun", run_name, "--type=merge", "-p",
                                 json.dumps({"metadata": {"annotations": annotations}}), f"--as={user}", check=False)


def test_a_run_writer_without_the_seal_key_cannot_write_the_digest(stack, fake_nodes, make_namespace):
    """A user who may patch RepackRuns and their status edits the admin's record and writes the
    digest that matches the edit: admission refuses the digest (only the controller's account), so
    the records stay unverified; nor may a run be created carrying a digest. A user who may read
    the seal key may write it on a locally executed run only (as apply --local does)."""
    from kubectl_repack.api.control import (EXECUTOR_ANNOTATION, RECORDS_DIGEST_ANNOTATION, SEAL_SECRET_NAME,
                                            records_digest)
    from kubectl_repack.api.relocations import digest_problem

    ns, _victim, _planned, other, run_name = victim_and_run(stack, fake_nodes, make_namespace, "sec-digest")
    run = stack.run(run_name)
    mallory = f"mallory-{uuid.uuid4().hex[:6]}"
    grant(stack, mallory, [{"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns"],
                            "verbs": ["get", "create", "patch", "update"]},
                           {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns/status"],
                            "verbs": ["get", "patch", "update"]}])
    edit = [{"op": "replace", "path": "/status/relocations/0/plannedNodeName", "value": other}]
    out = stack.cluster.kubectl("patch", "repackrun", run_name, "--subresource=status", "--type=json",
                                "-p", json.dumps(edit), f"--as={mallory}", check=False)
    assert out.returncode == 0, out.stderr
    forged = records_digest(run["metadata"]["uid"], stack.run(run_name)["status"]["relocations"])
    refusal = f"annotation {RECORDS_DIGEST_ANNOTATION} is written by the repack controller only"
    out = patch_annotations(stack, run_name, mallory, {RECORDS_DIGEST_ANNOTATION: forged})
    assert out.returncode != 0 and refusal in out.stderr, out.stderr
    out = patch_annotations(stack, run_name, mallory, {RECORDS_DIGEST_ANNOTATION: None})   # nor remove it
    assert out.returncode != 0 and refusal in out.stderr, out.stderr
    # marking the run local does not help without the seal key (nor is the executor mark enough)
    out = patch_annotations(stack, run_name, mallory, {EXECUTOR_ANNOTATION: "local", RECORDS_DIGEST_ANNOTATION: forged})
    assert out.returncode != 0 and refusal in out.stderr, out.stderr
    after = stack.run(run_name)
    assert after["metadata"]["annotations"][RECORDS_DIGEST_ANNOTATION] == run["metadata"]["annotations"][
        RECORDS_DIGEST_ANNOTATION]
    assert "do not match their digest" in digest_problem(after)

    # on create: not even with a correct creator record
    name = f"sec-digest-new-{uuid.uuid4().hex[:6]}"
    body = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name, "annotations": {
        "repack.volcano.sh/creator-username": mallory, "repack.volcano.sh/creator-uid": "",
        "repack.volcano.sh/creator-groups": "system:authenticated", EXECUTOR_ANNOTATION: "local"}},
        "spec": {"mode": "DryRun", "goals": [{"resource": "huawei.com/ascend-1980"}]}}
    with_digest = json.loads(json.dumps(body))
    with_digest["metadata"]["annotations"][RECORDS_DIGEST_ANNOTATION] = records_digest("any", [])
    out = stack.cluster.kubectl("create", "-f", "-", f"--as={mallory}", input=json.dumps(with_digest), check=False)
    assert out.returncode != 0 and "no run is created with it" in out.stderr, out.stderr
    out = stack.cluster.kubectl("create", "-f", "-", f"--as={mallory}", input=json.dumps(body), check=False)
    assert out.returncode == 0, out.stderr          # the same run without the digest: created
    stack.created_runs.append(name)

    # mallory's own local run: the digest only once mallory may read the seal key
    out = patch_annotations(stack, name, mallory, {RECORDS_DIGEST_ANNOTATION: records_digest("x", [])})
    assert out.returncode != 0 and refusal in out.stderr, out.stderr
    grant(stack, mallory, [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SEAL_SECRET_NAME],
                            "verbs": ["get"]}], ns="repack-system")

    def may_write():
        out = patch_annotations(stack, name, mallory, {RECORDS_DIGEST_ANNOTATION: records_digest("x", [])})
        return out.returncode == 0   # the new RoleBinding is seen by the authorizer within a moment
    wait_for("a seal-key reader writing the digest of a local run", may_write, 30)
    # and still not on the admin's (not local) run
    out = patch_annotations(stack, run_name, mallory, {RECORDS_DIGEST_ANNOTATION: forged})
    assert out.returncode != 0 and refusal in out.stderr, out.stderr


# ----- SEC-5: marks in a ReplicaSet template ------------------------------------------------------------------
def test_a_template_carrying_the_marks_claims_no_record_and_the_genuine_replacement_is_placed(
        stack, fake_nodes, make_namespace):
    """A user who may create ReplicaSets in the namespace (not pods with repack's marks: the admission
    policy refuses that) writes the admin's record into a template. The ReplicaSet controller, an
    allowed replacement creator, creates the pod: the webhook strips the marks, the coordinator
    records nothing for it, and the genuine replacement gets the record and the planned node."""
    core = stack.core
    ns, victim, planned, _, run_name = victim_and_run(stack, fake_nodes, make_namespace, "sec-tmpl")
    run_uid = stack.run(run_name)["metadata"]["uid"]
    eve = f"eve-{uuid.uuid4().hex[:6]}"
    grant(stack, eve, [{"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["create", "get"]},
                       {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}], ns=ns)
    marks = {RELOCATION_RUN_ANNOTATION: f"{run_name}/{run_uid}", RELOCATION_INDEX_ANNOTATION: "0",
             RELOCATION_VICTIM_ANNOTATION: victim.metadata.name, PLANNED_NODE_ANNOTATION: planned,
             MARKS_MAC_ANNOTATION: "v1:" + "0" * 64}
    template_spec = deployment("serve", "nowhere", 1, 4)["spec"]["template"]["spec"]   # stays Pending
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "eve", "namespace": ns},
          "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "eve"}},
                   "template": {"metadata": {"labels": {"app": "eve"}, "annotations": marks}, "spec": template_spec}}}
    out = stack.cluster.kubectl("create", "-f", "-", f"--as={eve}", input=json.dumps(rs), check=False)
    assert out.returncode == 0, out.stderr

    def eves_pod():
        pods = core.list_namespaced_pod(ns, label_selector="app=eve").items
        return pods[0] if pods else None

    pod = wait_for("the pod the ReplicaSet controller made from eve's template", eves_pod, 30)
    assert repack_marks(pod) == {}, pod.metadata.annotations
    assert PLACEMENT_GATE not in gates(pod)
    time.sleep(2.0)  # four coordinator ticks
    assert not placement(stack, run_name).get("replacementPodName"), placement(stack, run_name)

    stack.evict(ns, victim.metadata.name, run_name, 0)
    assert_genuine_replacement_placed(stack, ns, victim, run_name, planned)
    assert repack_marks(core.read_namespaced_pod(pod.metadata.name, ns)) == {}


# ----- SEC-5: forged AdmissionReviews on the webhook port ---------------------------------------------------
def forged_review(ns, victim):
    """An AdmissionReview for a pod exactly like the replacement the victim's ReplicaSet would make."""
    meta = victim.metadata
    owners = [{"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid, "controller": o.controller}
              for o in meta.owner_references]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "generateName": meta.generate_name, "namespace": ns, "labels": dict(meta.labels),
        "annotations": dict(meta.annotations or {}), "ownerReferences": owners},
        "spec": deployment("serve", ns, 1, 4)["spec"]["template"]["spec"]}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": ns, "operation": "CREATE",
        "object": pod, "dryRun": False,
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"}}}


def post_raw(port, ctx, body: bytes) -> dict:
    """One POST /mutate over a raw TLS connection of its own (any client can open one); the JSON answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        buf = b""
        while True:
            chunk = tls.recv(65536)
            if not chunk:
                break
            buf += chunk
    head, _, rest = buf.partition(b"\r\n\r\n")
    assert head.split(b" ", 2)[1] == b"200", head
    return json.loads(rest)


def test_forged_admission_reviews_claim_nothing_a_genuine_replacement_needs(stack, fake_nodes, make_namespace):
    """Any client that reaches the port (here: a raw TLS client trusting the install's CA) sends
    reviews for pods exactly like the replacement: each is answered (allowed, with a patch that only
    describes a pod that does not exist), and the genuine replacement created right after is still
    marked, recorded and nominated onto the planned node."""
    ns, victim, planned, _, run_name = victim_and_run(stack, fake_nodes, make_namespace, "sec-forge")
    ctx = ssl.create_default_context(cafile=os.path.join(stack.cert_dir, "ca.crt"))
    patched = 0
    for _ in range(50):
        answer = post_raw(stack.port, ctx, json.dumps(forged_review(ns, victim)).encode())
        assert answer["response"]["allowed"] is True
        patched += "patch" in answer["response"]
    print(f"\n50 forged reviews answered ({patched} with a patch)")
    stack.evict(ns, victim.metadata.name, run_name, 0)
    assert_genuine_replacement_placed(stack, ns, victim, run_name, planned)
