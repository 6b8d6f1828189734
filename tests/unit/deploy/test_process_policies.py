"""The admission policies on what a RepackPolicy's non-creator and the processes' tokens may change
(SEC-1, SEC-3): their shape, that their field lists come from the schemas, and that what our own
processes write stays inside them. (Their CEL is evaluated by the real API server in
tests/e2e/test_security_policies.py and tests/e2e/test_security_tokens.py.)"""
from __future__ import annotations

import copy

from kubectl_repack.api.policy import POLICY_LABEL
from kubectl_repack.api.run import write_placement_fields
from kubectl_repack.deploy import manifests
from kubectl_repack.deploy.controller import TLS_FINGERPRINT_ANNOTATION
from kubectl_repack.deploy.policies import (CONTROLLER_WRITES_POLICY_NAME, RUN_STATUS_POLICY_NAME,
                                            controller_write_policy, creator_policy, pod_write_policy,
                                            run_status_policy)
from kubectl_repack.policy_schema import policy_crd
from kubectl_repack.schema import load_crd


def _spec_properties(crd: dict) -> dict:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]


def test_a_policys_spec_is_compared_field_by_field_except_suspend():
    (rule,) = [v for v in creator_policy()["spec"]["validations"] if "object.kind != 'RepackPolicy'" in v["expression"]]
    fields = set(_spec_properties(policy_crd())["spec"]["properties"])
    assert "runTemplate" in fields and "suspend" in fields
    for field in fields - {"suspend"}:
        assert f"object.spec.{field} != oldObject.spec.{field}" in rule["expression"], field
    assert "object.spec.suspend" not in rule["expression"]
    assert "request.operation != 'UPDATE'" in rule["expression"] and rule["reason"] == "Forbidden"


def test_only_the_controller_marks_a_policys_runs():
    (rule,) = [v for v in creator_policy("ops")["spec"]["validations"] if POLICY_LABEL in v["expression"]]
    assert "variables.username == 'system:serviceaccount:ops:repack-controller'" in rule["expression"]
    assert "r.kind != 'RepackPolicy'" in rule["expression"]     # no ownerReference to a policy added later


def test_both_process_policies_fail_closed_are_bound_and_installed():
    rendered = manifests.render(namespace="ops")
    for make, name, account in ((controller_write_policy, CONTROLLER_WRITES_POLICY_NAME, "repack-controller"),
                                (run_status_policy, RUN_STATUS_POLICY_NAME, "repack-coordinator")):
        spec = make("ops")["spec"]
        assert spec["failurePolicy"] == "Fail"
        assert spec["matchConditions"][0]["expression"] == \
            f"request.userInfo.username == 'system:serviceaccount:ops:{account}'"
        kinds = {(o["kind"], o["metadata"]["name"]) for o in rendered}
        assert {("ValidatingAdmissionPolicy", name), ("ValidatingAdmissionPolicyBinding", name)} <= kinds
        assert name in {o["metadata"]["name"] for o in manifests.FILES["validatingadmissionpolicy.yaml"]("ops", "i")}


def test_the_run_status_policy_leaves_the_coordinator_exactly_the_fields_it_writes():
    status = _spec_properties(load_crd())["status"]["properties"]
    (top, records) = (v["expression"] for v in run_status_policy("ops")["spec"]["validations"])
    for field in set(status) - {"relocations"}:
        assert f"object.status.{field} == oldObject.status.{field}" in top, field
    record_fields = set(status["relocations"]["items"]["properties"])
    for field in record_fields - {"placement", "replacementPodGroupName"}:
        assert f"has(r.{field}) ? [r.{field}]" in records, field
    assert "r.placement" not in records and "r.replacementPodGroupName" not in records
    # what the coordinator writes (webhook.coordinator.loop.update_record) changes only those two
    record = {"namespace": "a", "victimPodName": "p", "plannedNodeName": "n", "eviction": {"phase": "Accepted"},
              "placement": {"phase": "WaitingForReplacement"}}
    before = copy.deepcopy(record)
    write_placement_fields(record, {"phase": "Placed", "selectedNodeName": "n", "actualNodeName": "n",
                                    "replacementPodName": "q", "replacementPodUID": "u",
                                    "replacementPodGroupName": "g"})
    assert {k for k in record if record.get(k) != before.get(k)} == {"placement", "replacementPodGroupName"}


def test_the_controller_may_change_only_the_ca_bundle_and_the_pod_templates_fingerprint():
    from webhook.controller.certmanager import FINGERPRINT

    assert FINGERPRINT == TLS_FINGERPRINT_ANNOTATION       # the annotation certmanager patches
    config, deployment = (v["expression"] for v in controller_write_policy("ops")["spec"]["validations"][-2:])
    assert "request.resource.resource != 'mutatingwebhookconfigurations'" in config
    assert "k in ['caBundle']" in config and "k in ['clientConfig']" in config
    assert "request.resource.resource != 'deployments'" in deployment
    assert f"k in ['{TLS_FINGERPRINT_ANNOTATION}']" in deployment and "k in ['template']" in deployment


def test_neither_process_may_steer_a_gated_pod():
    messages = [v["message"] for v in pod_write_policy("ops")["spec"]["validations"]]
    assert any(m.endswith("spec.nodeSelector") for m in messages)
    assert any(m.endswith("spec.affinity") for m in messages)
