"""The creator record of RepackRuns (SEC-1): the webhook fills in the annotations
from the admission request's userInfo and keeps them over updates, the admission policy (enforced
by the API server; its rules are exercised in tests/e2e) checks them, the controller reads them,
trusts them only while the policy vouches and the record is fresh, and seals the records it
writes. Nothing is signed for a caller, so nothing a caller posts can be turned into trust."""
from __future__ import annotations

import base64
import copy
import datetime as dt
import json

import pytest

from kubectl_repack.api.control import (CREATOR_ANNOTATIONS, CREATOR_GROUPS_ANNOTATION, CREATOR_UID_ANNOTATION,
                                        CREATOR_USERNAME_ANNOTATION, RECORDS_SEAL_ANNOTATION, Creator,
                                        UntrustedCreator, cancel_requested, creator_of, creator_problem, seal,
                                        seal_problem)
from kubectl_repack.api.times import parse_time, rfc3339
from tests.unit.webhook.builders import PLACEMENT_KEY
from tests.unit.webhook.patching import apply_patch
from webhook.admission.review import AdmissionReviewError, record_creator

SPEC = {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]}
ALICE = {"username": "alice", "uid": "u-1", "groups": ["team-a", "system:authenticated"],
         "extra": {"scopes": ["x"]}}
NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)


def review(obj, op="CREATE", user=ALICE, resource=("repack.volcano.sh", "repackruns"), old=None):
    request = {"uid": "r-1", "operation": op, "userInfo": user, "object": obj,
               "resource": {"group": resource[0], "version": "v1alpha1", "resource": resource[1]}}
    if old is not None:
        request["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


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


# ---- the webhook fills in, never vouches ----------------------------------------------------------
def test_a_created_run_gets_the_requesting_user_and_reads_back_as_that_creator():
    stored = admitted(run(), record_creator(review(run())))
    assert stored["metadata"]["annotations"] == {CREATOR_USERNAME_ANNOTATION: "alice", CREATOR_UID_ANNOTATION: "u-1",
                                                 CREATOR_GROUPS_ANNOTATION: "team-a,system:authenticated"}
    assert creator_of(stored) == Creator("alice", "u-1", ("team-a", "system:authenticated"))


@pytest.mark.parametrize("annotations", [{}, {"team": "x"}, None])
def test_existing_annotations_are_kept(annotations):
    obj = run(annotations=annotations)
    stored = admitted(obj, record_creator(review(obj)))
    for k, v in (annotations or {}).items():
        assert stored["metadata"]["annotations"][k] == v
    assert creator_of(stored).username == "alice"


def test_a_prefilled_creator_is_overwritten_with_the_real_user():
    forged = Creator("cluster-admin", "", ("system:masters",)).annotations()
    obj = run(annotations=dict(forged))
    stored = admitted(obj, record_creator(review(obj, user={"username": "mallory"})))
    assert creator_of(stored) == Creator("mallory")


def test_an_update_keeps_the_stored_creator_over_a_server_side_reapply_that_drops_or_changes_it():
    old = admitted(run(), record_creator(review(run())))
    for new_annotations in ({}, {CREATOR_USERNAME_ANNOTATION: "cluster-admin", "team": "x"}):
        obj = run(annotations=dict(new_annotations))
        stored = admitted(obj, record_creator(review(obj, op="UPDATE", user={"username": "bob"}, old=old)))
        assert {k: stored["metadata"]["annotations"][k] for k in CREATOR_ANNOTATIONS} == \
            {k: old["metadata"]["annotations"][k] for k in CREATOR_ANNOTATIONS}
    # a run stored without a record (made before the policy) gets none on update either
    bare = run()
    assert "patch" not in record_creator(review(bare, op="UPDATE", old=run()))["response"]


@pytest.mark.parametrize("user", [None, "alice", {"username": 7}, {"username": ""}, {"username": "a", "groups": "g"},
                                  {"username": "a", "groups": [1]}])
def test_a_malformed_user_info_is_a_400_reason_not_a_crash(user):
    with pytest.raises(AdmissionReviewError, match="userInfo"):
        record_creator(review(run(), user=user))


@pytest.mark.parametrize("op,resource", [("DELETE", ("repack.volcano.sh", "repackruns")), ("CREATE", ("", "pods"))])
def test_other_requests_pass_untouched(op, resource):
    assert "patch" not in record_creator(review(run(), op=op, resource=resource))["response"]


def test_the_app_serves_no_signing_endpoint():
    """Finding 1: /stamp-run signed whatever userInfo a caller posted; it is gone, and what
    /run-creator answers carries no signature anybody could replay."""
    from webhook.admission.app import create_app
    from webhook.admission.relocation_store import RelocationStore

    client = create_app(RelocationStore(key=PLACEMENT_KEY), lambda now: True).test_client()
    assert client.post("/stamp-run", json=review(run())).status_code == 404
    admin = {"username": "system:admin", "groups": ["system:masters"]}
    answer = client.post("/run-creator", json=review(run(), user=admin)).get_json()
    patched = json.loads(base64.b64decode(answer["response"]["patch"]))
    assert patched == [{"op": "add", "path": "/metadata/annotations", "value": Creator.from_user_info(admin).annotations()}]
    assert client.post("/run-creator", json=review(run(), user={"username": 3})).status_code == 400


# ---- what the controller reads --------------------------------------------------------------------
def test_no_record_and_a_legacy_stamp_are_untrusted_with_what_to_do():
    with pytest.raises(UntrustedCreator, match="no creator record"):
        creator_of(run())
    legacy = run(annotations={"repack.volcano.sh/creator": '{"username":"cluster-admin"}',
                              "repack.volcano.sh/creator-signature": "v1:00"})
    with pytest.raises(UntrustedCreator, match="older kubectl-repack.*re-create the run"):
        creator_of(legacy)
    with pytest.raises(UntrustedCreator, match="names no user"):
        creator_of(run(annotations={CREATOR_USERNAME_ANNOTATION: ""}))
    deep = run(annotations={CREATOR_USERNAME_ANNOTATION: "a", CREATOR_GROUPS_ANNOTATION: "[" * 100000})
    assert creator_of(deep).groups == ("[" * 100000,)    # read as text: nothing to recurse into


def _created(minutes_ago):
    obj = run(annotations=Creator("alice").annotations())
    obj["metadata"]["creationTimestamp"] = rfc3339(NOW - dt.timedelta(minutes=minutes_ago))
    return obj


@pytest.mark.parametrize("minutes_ago,policy_minutes_ago,expected", [
    (10, 60, ""),
    (59, 60, ""),
    (61, 120, "1h01m old, older than the 1h00m"),
    (10, 5, "created before the admission policy"),
    (10, None, "is not installed"),
])
def test_a_record_is_trusted_only_if_the_policy_checked_it_and_while_it_is_fresh(minutes_ago, policy_minutes_ago,
                                                                                  expected):
    since = None if policy_minutes_ago is None else NOW - dt.timedelta(minutes=policy_minutes_ago)
    problem = creator_problem(_created(minutes_ago), NOW, parse_time, since)
    assert (expected in problem) if expected else problem == "", problem


# ---- the records seal -----------------------------------------------------------------------------
RECORDS = [{"namespace": "demo", "podGroupName": "pg", "victimPodName": "w-0", "victimPodUID": "u0",
            "plannedNodeName": "n2", "eviction": {"phase": "Pending"}},
           {"namespace": "demo", "podGroupName": "pg", "victimPodName": "w-1", "victimPodUID": "u1",
            "plannedNodeName": "n3", "eviction": {"phase": "Pending"}}]
KEY = b"k" * 32


def sealed(records=RECORDS, uid="run-uid", key=KEY):
    obj = run()
    obj["metadata"]["uid"] = uid
    obj["metadata"]["annotations"] = {RECORDS_SEAL_ANNOTATION: seal(key, uid, records)}
    obj["status"] = {"relocations": copy.deepcopy(records)}
    return obj


def test_sealed_records_verify_and_what_the_coordinator_writes_does_not_matter():
    obj = sealed()
    assert seal_problem(obj, KEY) == ""
    obj["status"]["relocations"][0]["placement"] = {"phase": "Placed", "actualNodeName": "n9"}
    obj["status"]["relocations"][0]["eviction"] = {"phase": "Accepted"}
    assert seal_problem(obj, KEY) == ""


@pytest.mark.parametrize("tamper", ["victim", "uid", "node", "added", "removed", "order", "run", "key", "missing",
                                    "not-ascii"])
def test_a_seal_does_not_verify_once_a_victim_changes(tamper):
    obj, key = sealed(), KEY
    records = obj["status"]["relocations"]
    if tamper == "victim":
        records[1]["victimPodName"] = "coredns"
    elif tamper == "uid":
        records[1]["victimPodUID"] = "other"
    elif tamper == "node":
        records[1]["plannedNodeName"] = "n1"
    elif tamper == "added":
        records.append(dict(records[0], victimPodName="extra"))
    elif tamper == "removed":
        records.pop()
    elif tamper == "order":
        records.reverse()
    elif tamper == "run":
        obj["metadata"]["uid"] = "another-run"       # copied onto another run
    elif tamper == "key":
        key = b"other" * 8
    elif tamper == "missing":
        del obj["metadata"]["annotations"][RECORDS_SEAL_ANNOTATION]
    else:
        obj["metadata"]["annotations"][RECORDS_SEAL_ANNOTATION] = "v1:é" * 10
    assert seal_problem(obj, key) != ""


def test_cancel_and_delete_are_reasons_to_stop():
    assert cancel_requested(run()) == ""
    assert "cancelled" in cancel_requested(run(annotations={"repack.volcano.sh/cancel": "true"}))
    assert cancel_requested(run(annotations={"repack.volcano.sh/cancel": "false"})) == ""
    deleting = run()
    deleting["metadata"]["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    assert "deleted" in cancel_requested(deleting)


# ---- RepackPolicies (POLICY-1, POLICY-2) -------------------------------------------------------------------
def test_a_created_policy_gets_the_requesting_user():
    obj = {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackPolicy", "metadata": {"name": "p"},
           "spec": {"trigger": {"onFragAbovePercent": 20}, "runTemplate": {"spec": copy.deepcopy(SPEC)}}}
    stored = admitted(obj, record_creator(review(obj, resource=("repack.volcano.sh", "repackpolicies"))))
    assert creator_of(stored) == Creator("alice", "u-1", ("team-a", "system:authenticated"))


def test_a_policy_run_keeps_the_record_the_controller_copied_and_the_admission_policy_judges_it():
    owner = [{"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackPolicy", "name": "p", "uid": "x"}]
    bob = Creator("bob", "u-b", ("team-b",)).annotations()
    obj = run(annotations=dict(bob))
    obj["metadata"]["ownerReferences"] = owner
    controller = {"username": "system:serviceaccount:repack-system:repack-controller", "uid": "sa"}
    stored = admitted(obj, record_creator(review(obj, user=controller)))
    assert creator_of(stored) == Creator("bob", "u-b", ("team-b",))
    # without a record (or without the owner) the requesting user is filled in as for any run
    bare = run()
    bare["metadata"]["ownerReferences"] = owner
    assert creator_of(admitted(bare, record_creator(review(bare, user=controller)))).username == controller["username"]
    unowned = run(annotations=dict(bob))
    assert creator_of(admitted(unowned, record_creator(review(unowned, user=controller)))).username == \
        controller["username"]
