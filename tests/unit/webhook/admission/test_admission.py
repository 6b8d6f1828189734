"""NOM-2/NOM-3: the AdmissionReview answer and its JSONPatch."""
from __future__ import annotations

from datetime import datetime, timezone

import pytest

from tests.unit.webhook.builders import move, owner, pod, relocation, review_request, run, vcjob_pod, ms_pod
from tests.unit.webhook.patching import apply_patch, decode
from kubectl_repack.api.gates import (GATED_AT_ANNOTATION, PLACEMENT_GATE, PLACEMENT_GATE_OWNER_ANNOTATION,
                                      RELOCATION_INDEX_ANNOTATION, RELOCATION_RUN_ANNOTATION,
                                      RELOCATION_VICTIM_ANNOTATION, REPLACEMENT_PODGROUP_ANNOTATION, escape_pointer)
from webhook.admission.review import AdmissionReviewError, review, review_outcome
from kubectl_repack.api.relocations import RelocationIndex

NOW = datetime(2026, 7, 30, 10, 5, tzinfo=timezone.utc)
JOB = owner("Job", "train")
RUN = run(relocations=[relocation("train-worker-1", group="train-pg")],
          moves=[move("demo", "train-pg", JOB, ["train-worker-1"])])
INDEX = RelocationIndex.from_runs([RUN])


def replacement(**kw):
    return vcjob_pod("train-worker-1", "train", "worker", group="train-pg", **kw)


def patched(obj, gate_allowed=True, index=INDEX):
    out = review(review_request(obj), index, gate_allowed, NOW)
    return out, apply_patch(obj, decode(out))


def test_uid_echoed_and_allowed():
    req = review_request(pod("x"), uid="abc-123")
    out = review(req, INDEX, True, NOW)
    assert out["apiVersion"] == "admission.k8s.io/v1" and out["kind"] == "AdmissionReview"
    assert out["response"]["uid"] == "abc-123"
    assert out["response"]["allowed"] is True


def test_unmatched_pod_is_returned_unchanged():
    out = review(review_request(pod("someone-else")), INDEX, True, NOW)
    assert "patch" not in out["response"] and "patchType" not in out["response"]


def test_matched_pod_gets_gate_and_annotations():
    out, result = patched(replacement())
    assert out["response"]["patchType"] == "JSONPatch"
    assert result["spec"]["schedulingGates"] == [{"name": PLACEMENT_GATE}]
    ann = result["metadata"]["annotations"]
    assert ann[RELOCATION_RUN_ANNOTATION] == "run-1/uid-run-1"
    assert ann[PLACEMENT_GATE_OWNER_ANNOTATION] == "run-1/uid-run-1"
    assert ann[RELOCATION_INDEX_ANNOTATION] == "0"
    assert ann[RELOCATION_VICTIM_ANNOTATION] == "train-worker-1"
    assert ann[GATED_AT_ANNOTATION] == "2026-07-30T10:05:00Z"
    assert ann["volcano.sh/job-name"] == "train"  # existing annotations kept


def test_gate_appended_to_existing_gates():
    _, result = patched(replacement(gates=[{"name": "example.com/other"}]))
    assert result["spec"]["schedulingGates"] == [{"name": "example.com/other"}, {"name": PLACEMENT_GATE}]


def test_gate_and_annotations_created_when_absent():
    obj = replacement()
    del obj["metadata"]["annotations"]
    out, result = patched(obj)
    paths = [op["path"] for op in decode(out)]
    assert "/metadata/annotations" in paths and "/spec/schedulingGates" in paths
    assert result["metadata"]["annotations"][RELOCATION_VICTIM_ANNOTATION] == "train-worker-1"


def test_annotation_paths_escape_slash():
    out = review(review_request(replacement()), INDEX, True, NOW)
    paths = [op["path"] for op in decode(out)]
    assert "/metadata/annotations/repack.volcano.sh~1relocation-run" in paths
    assert all("/" not in p[len("/metadata/annotations/"):] for p in paths if p.startswith("/metadata/annotations/"))
    assert escape_pointer("a~b/c") == "a~0b~1c"


def test_no_gate_when_lease_not_fresh():
    out, result = patched(replacement(), gate_allowed=False)
    assert "schedulingGates" not in result["spec"]
    ann = result["metadata"]["annotations"]
    assert ann[RELOCATION_RUN_ANNOTATION] == "run-1/uid-run-1"
    assert PLACEMENT_GATE_OWNER_ANNOTATION not in ann and GATED_AT_ANNOTATION not in ann
    assert review_outcome(review_request(replacement()), INDEX, False, NOW).gated is False


def test_reinvocation_is_idempotent():
    first, once = patched(replacement())
    again = review(review_request(once), INDEX, True, NOW)
    assert "patch" not in again["response"]
    assert apply_patch(once, decode(again)) == once
    assert once["spec"]["schedulingGates"].count({"name": PLACEMENT_GATE}) == 1


def test_existing_gate_not_duplicated_and_equal_annotation_not_repatched():
    obj = replacement(gates=[{"name": PLACEMENT_GATE}])
    obj["metadata"]["annotations"][RELOCATION_VICTIM_ANNOTATION] = "train-worker-1"
    out, result = patched(obj)
    paths = [op["path"] for op in decode(out)]
    assert not any(p.startswith("/spec/schedulingGates") for p in paths)
    assert "/metadata/annotations/repack.volcano.sh~1relocation-victim" not in paths
    assert result["spec"]["schedulingGates"] == [{"name": PLACEMENT_GATE}]


def test_modelserving_replacement_podgroup_annotated():
    ms_run = run(relocations=[relocation("serve-0-inference-0-1", group="serve-0")],
                 moves=[move("demo", "serve-0", owner("ModelServing", "serve"), ["serve-0-inference-0-1"])])
    obj = ms_pod("serve", 4, "inference", 0, 1)
    _, result = patched(obj, index=RelocationIndex.from_runs([ms_run]))
    assert result["metadata"]["annotations"][REPLACEMENT_PODGROUP_ANNOTATION] == "serve-4"


@pytest.mark.parametrize("operation,resource,sub", [("UPDATE", "pods", ""), ("DELETE", "pods", ""),
                                                    ("CREATE", "pods", "binding"),
                                                    ("CREATE", "configmaps", "")],
                         ids=["update", "delete", "subresource", "other-resource"])
def test_only_pod_create_is_considered(operation, resource, sub):
    outcome = review_outcome(review_request(replacement(), operation=operation, resource=resource,
                                            sub_resource=sub), INDEX, True, NOW)
    assert outcome.considered is False and outcome.match is None
    assert outcome.response["response"] == {"uid": outcome.response["response"]["uid"], "allowed": True}


def test_dry_run_is_patched_and_flagged():
    outcome = review_outcome(review_request(replacement(), dry_run=True), INDEX, True, NOW)
    assert outcome.dry_run is True and outcome.match is not None and outcome.patch


MALFORMED = [
    ("not-an-object", [1, 2]),
    ("wrong-api-version", {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "u"}}),
    ("wrong-kind", {"apiVersion": "admission.k8s.io/v1", "kind": "Pod", "request": {"uid": "u"}}),
    ("no-request", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
    ("empty-uid", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": ""}}),
    ("pod-create-without-object", review_request(None)),
]


@pytest.mark.parametrize("body", [m[1] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_input_raises_typed_error(body):
    with pytest.raises(AdmissionReviewError) as err:
        review(body, INDEX, True, NOW)
    assert str(err.value)
