"""The coordinator's pods/status writes (RELIEF-3, SEC-3): the admission policy install renders for
them, its binding, and that install, the reference manifests and doctor all know it. (The policy's
CEL is evaluated by the real API server in tests/e2e/test_installed.py.)"""
from __future__ import annotations

from kubectl_repack.api.control import ADMISSION_POLICY_NAMES, NOMINATION_POLICY_NAME
from kubectl_repack.api.gates import PLANNED_NODE_ANNOTATION, TARGET_NODE_ANNOTATION, TARGET_RUN_ANNOTATION
from kubectl_repack.deploy import manifests
from kubectl_repack.deploy.policies import POD_STATUS_FIELDS, nomination_policy


def test_it_matches_the_coordinators_status_writes_only_and_fails_closed():
    spec = nomination_policy("ops")["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["pods/status"]}]
    (cond,) = spec["matchConditions"]
    assert cond["expression"] == "request.userInfo.username == 'system:serviceaccount:ops:repack-coordinator'"


def test_only_the_nominated_node_may_change_and_only_to_what_the_pods_marks_name():
    spec = nomination_policy("ops")["spec"]
    exprs = {v["name"]: v["expression"] for v in spec["variables"]}
    assert f"variables.node == variables.oldAnn['{PLANNED_NODE_ANNOTATION}']" in exprs["replacement"]
    assert "g.name == 'repack.volcano.sh/placement'" in exprs["replacement"]   # a gated replacement only
    assert f"variables.node == variables.oldAnn['{TARGET_NODE_ANNOTATION}']" in exprs["target"]
    assert f"'{TARGET_RUN_ANNOTATION}' in variables.oldAnn" in exprs["target"]
    assert "variables.unbound" in exprs["target"] and "oldObject.status.phase == 'Pending'" in exprs["target"]
    validations = [v["expression"] for v in spec["validations"]]
    assert "object.spec == oldObject.spec" in validations
    assert "variables.newAnn == variables.oldAnn" in validations
    status = next(v for v in validations if "object.status.podIP " in v or "object.status.podIP ==" in v)
    for name in POD_STATUS_FIELDS:
        assert f"object.status.{name} == oldObject.status.{name}" in status, name
    assert "nominatedNodeName" not in status
    assert "variables.node == variables.oldNode || variables.replacement || variables.target" in validations
    assert all(v["reason"] == "Forbidden" for v in spec["validations"])


def test_install_the_reference_manifests_and_doctor_know_it():
    rendered = manifests.render(namespace="ops")
    kinds = {(o["kind"], o["metadata"]["name"]) for o in rendered}
    assert ("ValidatingAdmissionPolicy", NOMINATION_POLICY_NAME) in kinds
    assert ("ValidatingAdmissionPolicyBinding", NOMINATION_POLICY_NAME) in kinds
    binding = next(o for o in rendered if o["kind"] == "ValidatingAdmissionPolicyBinding"
                   and o["metadata"]["name"] == NOMINATION_POLICY_NAME)
    assert binding["spec"] == {"policyName": NOMINATION_POLICY_NAME, "validationActions": ["Deny"]}
    reference = manifests.FILES["validatingadmissionpolicy.yaml"]("ops", "img")
    assert NOMINATION_POLICY_NAME in {o["metadata"]["name"] for o in reference}
    assert NOMINATION_POLICY_NAME in ADMISSION_POLICY_NAMES   # doctor's admission-policies check


def test_only_the_coordinator_and_controller_may_change_the_target_marks():
    (_, update) = manifests.replacement_pod_policy("ops")["spec"]["validations"]
    assert TARGET_RUN_ANNOTATION in update["expression"] and TARGET_NODE_ANNOTATION in update["expression"]
