"""The creator stamp of RepackRuns (issue 12): written by the webhook from the admission
request's userInfo, verified by the controller; nothing a user writes can pass for it."""
from __future__ import annotations

import base64
import copy
import json

import pytest

from kubectl_repack.api.control import (CREATOR_ANNOTATION, CREATOR_SIGNATURE_ANNOTATION, Creator, UntrustedCreator,
                                        cancel_requested, sign, verified_creator)
from tests.unit.webhook.patching import apply_patch
from webhook.admission import stamp_run

KEY = b"k" * 32
SPEC = {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]}
ALICE = {"username": "alice", "uid": "u-1", "groups": ["team-a", "system:authenticated"],
         "extra": {"scopes": ["x"]}}


def review(obj, op="CREATE", user=ALICE, resource=("repack.volcano.sh", "repackruns")):
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "r-1", "operation": op, "userInfo": user, "object": obj,
                        "resource": {"group": resource[0], "version": "v1alpha1", "resource": resource[1]}}}


def run(name="r1", annotations=None):
    meta = {"name": name}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": meta,
            "spec": copy.deepcopy(SPEC)}


def admitted(obj, answer):
    resp = answer["response"]
    assert resp["allowed"] is True
    if "patch" not in resp:
        return copy.deepcopy(obj)
    return apply_patch(obj, json.loads(base64.b64decode(resp["patch"])))


def test_a_created_run_is_stamped_with_the_requesting_user_and_verifies():
    obj = run()
    stored = admitted(obj, stamp_run(review(obj), KEY))
    creator = verified_creator(stored, KEY)
    assert creator == Creator.from_user_info(ALICE)
    assert json.loads(stored["metadata"]["annotations"][CREATOR_ANNOTATION])["username"] == "alice"


@pytest.mark.parametrize("annotations", [{}, {"team": "x"}, None])
def test_existing_annotations_are_kept(annotations):
    obj = run(annotations=annotations)
    stored = admitted(obj, stamp_run(review(obj), KEY))
    for k, v in (annotations or {}).items():
        assert stored["metadata"]["annotations"][k] == v
    assert verified_creator(stored, KEY).username == "alice"


def test_a_prefilled_stamp_is_overwritten_with_the_real_user():
    forged = {CREATOR_ANNOTATION: json.dumps({"username": "cluster-admin"}),
              CREATOR_SIGNATURE_ANNOTATION: "v1:" + "0" * 64}
    obj = run(annotations=dict(forged))
    stored = admitted(obj, stamp_run(review(obj, user={"username": "mallory"}), KEY))
    assert verified_creator(stored, KEY).username == "mallory"


def test_without_the_key_a_prefilled_stamp_is_removed_not_trusted():
    forged = {CREATOR_ANNOTATION: json.dumps({"username": "cluster-admin"}), CREATOR_SIGNATURE_ANNOTATION: "v1:ab",
              "keep": "me"}
    obj = run(annotations=forged)
    stored = admitted(obj, stamp_run(review(obj), None))
    assert stored["metadata"]["annotations"] == {"keep": "me"}
    with pytest.raises(UntrustedCreator, match="no creator record"):
        verified_creator(stored, KEY)


@pytest.mark.parametrize("tamper", ["spec", "name", "user", "key", "signature"])
def test_a_stamp_does_not_verify_once_anything_it_covers_changes(tamper):
    obj = run()
    stored = admitted(obj, stamp_run(review(obj), KEY))
    key = KEY
    if tamper == "spec":
        stored["spec"]["maxPerRun"] = {"podGroups": 9}
    elif tamper == "name":
        stored["metadata"]["name"] = "r2"
    elif tamper == "user":
        stored["metadata"]["annotations"][CREATOR_ANNOTATION] = json.dumps({"username": "cluster-admin"})
    elif tamper == "key":
        key = b"other" * 8
    else:
        stored["metadata"]["annotations"][CREATOR_SIGNATURE_ANNOTATION] = sign(b"guess", "r1", SPEC,
                                                                                 Creator("alice"))
    with pytest.raises(UntrustedCreator, match="does not verify|not a user record|names no user"):
        verified_creator(stored, key)


def test_generate_name_gets_no_stamp_and_a_warning():
    obj = run(name="")
    answer = stamp_run(review(obj), KEY)
    assert "patch" not in answer["response"] and "generateName" in answer["response"]["warnings"][0]


@pytest.mark.parametrize("op,resource", [("UPDATE", ("repack.volcano.sh", "repackruns")),
                                         ("CREATE", ("", "pods"))])
def test_other_requests_pass_untouched(op, resource):
    obj = run()
    assert "patch" not in stamp_run(review(obj, op=op, resource=resource), KEY)["response"]


def test_cancel_and_delete_are_reasons_to_stop():
    assert cancel_requested(run()) == ""
    assert "cancelled" in cancel_requested(run(annotations={"repack.volcano.sh/cancel": "true"}))
    assert cancel_requested(run(annotations={"repack.volcano.sh/cancel": "false"})) == ""
    deleting = run()
    deleting["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    assert "deleted" in cancel_requested(deleting)
