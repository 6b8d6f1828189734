"""The install set: least-privilege RBAC and a fail-open webhook configuration."""
from __future__ import annotations

import base64
from pathlib import Path

import pytest
import yaml

from kubectl_repack.deploy import certs, manifests

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def bundle():
    return certs.generate("repack-webhook", "repack-system")


def by_kind(objs, kind):
    found = [o for o in objs if o["kind"] == kind]
    assert found, f"no {kind}"
    return found


def grants(rules, group, resource, verb):
    return any((group in r["apiGroups"] or "*" in r["apiGroups"])
               and (resource in r["resources"] or "*" in r["resources"])
               and (verb in r["verbs"] or "*" in r["verbs"]) for r in rules)


def all_rules(objs):
    return [rule for o in objs if o["kind"] in ("ClusterRole", "Role") for rule in o["rules"]]


def test_rbac_cannot_evict_or_delete_pods(bundle):
    """The webhook's and coordinator's roles (the controller's, which may evict, are tested below)."""
    rules = all_rules([o for o in manifests.render(certs=bundle) if o["metadata"]["name"].startswith(manifests.NAME)])
    assert not grants(rules, "", "pods/eviction", "create")
    for verb in ("delete", "deletecollection", "create", "update"):
        assert not grants(rules, "", "pods", verb), verb
    assert not any("*" in r["verbs"] or "*" in r["resources"] or "*" in r["apiGroups"] for r in rules)


@pytest.mark.parametrize("group,resource,verb", [
    ("", "pods", "watch"), ("", "pods", "patch"), ("", "pods/status", "patch"), ("", "nodes", "list"),
    ("", "persistentvolumes", "get"), ("", "persistentvolumeclaims", "watch"),
    ("scheduling.volcano.sh", "podgroups", "list"), ("repack.volcano.sh", "repackruns", "watch"),
    ("repack.volcano.sh", "repackruns/status", "patch"), ("repack.volcano.sh", "repackruns/status", "update"),
    ("coordination.k8s.io", "leases", "update"),
])
def test_rbac_grants_what_webhook_and_coordinator_need(group, resource, verb):
    assert grants(all_rules(manifests.render()), group, resource, verb)


def test_no_process_may_create_leases_and_each_updates_only_its_own():
    """Kubernetes cannot limit `create` by name, so install makes the Leases and each process is
    granted get/update (the webhook get/list/watch) on its own by name."""
    objs = manifests.render(namespace="repack-system")
    made = {o["metadata"]["name"] for o in by_kind(objs, "Lease")}
    assert made == {"repack-coordinator", "repack-controller", "repack-execute"}
    own = {}
    for role in by_kind(objs, "Role") + by_kind(objs, "ClusterRole"):
        for rule in role["rules"]:
            if "leases" in rule["resources"]:
                assert "create" not in rule["verbs"] and rule.get("resourceNames"), (role["metadata"]["name"], rule)
                own.setdefault(role["metadata"]["name"], set()).update(rule["resourceNames"])
    assert own == {"repack-webhook-leases": {"repack-coordinator"}, "repack-coordinator": {"repack-coordinator"},
                   "repack-controller": {"repack-controller", "repack-execute"}}


def test_leases_only_in_own_namespace():
    objs = manifests.render(namespace="repack-system")
    cluster_rules = by_kind(objs, "ClusterRole")[0]["rules"]
    assert not grants(cluster_rules, "coordination.k8s.io", "leases", "get")
    role = by_kind(objs, "Role")[0]
    assert role["metadata"]["namespace"] == "repack-system"
    binding = by_kind(objs, "RoleBinding")[0]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "repack-webhook", "namespace": "repack-system"}]


def test_webhook_configuration_fields(bundle):
    mwc = by_kind(manifests.render(namespace="repack-system", certs=bundle), "MutatingWebhookConfiguration")[0]
    hook, stamp = mwc["webhooks"]
    assert hook["admissionReviewVersions"] == ["v1"]
    assert hook["failurePolicy"] == "Ignore"
    assert hook["sideEffects"] == "None"
    assert hook["timeoutSeconds"] == 5
    assert hook["reinvocationPolicy"] == "IfNeeded"
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                              "resources": ["pods"], "scope": "Namespaced"}]
    assert hook["namespaceSelector"] == {"matchExpressions": [{
        "key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "repack-system"]}]}
    cc = hook["clientConfig"]
    assert base64.b64decode(cc["caBundle"]) == bundle.ca_cert_pem
    assert cc["service"] == {"namespace": "repack-system", "name": "repack-webhook", "path": "/mutate", "port": 443}
    # the creator record of RepackRuns: filled in on CREATE, kept on UPDATE, fail open (the
    # admission policy checks it and refuses a run without it)
    assert stamp["name"] == manifests.STAMP_WEBHOOK_NAME and stamp["failurePolicy"] == "Ignore"
    assert stamp["rules"] == [{"apiGroups": ["repack.volcano.sh"], "apiVersions": ["v1alpha1"],
                               "operations": ["CREATE", "UPDATE"], "resources": ["repackruns", "repackpolicies"],
                               "scope": "Cluster"}]
    assert stamp["clientConfig"]["service"] == dict(cc["service"], path="/run-creator")
    assert stamp["clientConfig"]["caBundle"] == cc["caBundle"]


def test_the_creator_policy_fails_closed_and_is_bound_to_deny(bundle):
    objs = manifests.render(namespace="repack-system", certs=bundle)
    policy, *_others = by_kind(objs, "ValidatingAdmissionPolicy")
    binding, *_ = by_kind(objs, "ValidatingAdmissionPolicyBinding")
    assert objs[:2] == [policy, binding]           # in force before anything that could create a run
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [{
        "apiGroups": ["repack.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
        "resources": ["repackruns", "repackpolicies"]}]
    assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_only_the_controller_reads_the_seal_key_and_only_the_webhook_and_coordinator_the_placement_key(bundle):
    from kubectl_repack.api.control import SEAL_SECRET_NAME
    from kubectl_repack.api.gates import PLACEMENT_KEY_SECRET_NAME

    objs = manifests.render(namespace="repack-system", certs=bundle)
    rules = {(o["kind"], o["metadata"]["name"]): o["rules"] for o in objs if o["kind"] in ("Role", "ClusterRole")}
    readable = {}
    for (kind, name), role_rules in rules.items():
        secret_rules = [r for r in role_rules if "secrets" in r["resources"] and "get" in r["verbs"]]
        assert all(r.get("resourceNames") for r in secret_rules), (kind, name)   # never every Secret
        readable.setdefault(name, set()).update(n for r in secret_rules for n in r["resourceNames"])
    # SEC-2: the webhook and the coordinator verify records by their digest (no key), so a stolen
    # token of theirs cannot forge what the controller evicts by; SEC-5: they MAC and verify a
    # replacement's marks with the placement key, which the controller creates but never reads.
    assert readable[manifests.NAME] == set() and readable[manifests.NAME + "-leases"] == {PLACEMENT_KEY_SECRET_NAME}
    assert readable[manifests.COORDINATOR_NAME] == {PLACEMENT_KEY_SECRET_NAME}
    assert SEAL_SECRET_NAME in readable[manifests.CONTROLLER_NAME]
    assert PLACEMENT_KEY_SECRET_NAME not in readable[manifests.CONTROLLER_NAME]
    assert [name for name, names in readable.items() if SEAL_SECRET_NAME in names] == [manifests.CONTROLLER_NAME]


def test_only_the_controller_may_evict_and_it_has_what_a_run_needs(bundle):
    objs = manifests.render(namespace="repack-system", certs=bundle)
    roles = {o["metadata"]["name"]: o["rules"] for o in by_kind(objs, "ClusterRole")}
    def grants(rules, resource, verb):
        return any(resource in r["resources"] and verb in r["verbs"] for r in rules)
    assert grants(roles[manifests.CONTROLLER_NAME], "pods/eviction", "create")
    assert not grants(roles[manifests.NAME], "pods/eviction", "create")
    for resource, verb in (("subjectaccessreviews", "create"), ("repackruns/status", "update"),
                           ("repackruns/finalizers", "update"), ("events", "create"), ("repackruns", "patch")):
        assert grants(roles[manifests.CONTROLLER_NAME], resource, verb), (resource, verb)
    deps = {d["metadata"]["name"]: d for d in by_kind(objs, "Deployment")}
    ctl = deps[manifests.CONTROLLER_NAME]["spec"]["template"]["spec"]
    assert ctl["serviceAccountName"] == manifests.CONTROLLER_NAME
    assert ctl["containers"][0]["command"] == ["python", "-m", "webhook.controller"]
    assert deps[manifests.NAME]["spec"]["template"]["spec"]["serviceAccountName"] == manifests.NAME


def test_url_mode_for_loopback(bundle):
    mwc = by_kind(manifests.render(ca_bundle_pem=bundle.ca_cert_pem, url="https://127.0.0.1:8443/mutate"),
                  "MutatingWebhookConfiguration")[0]
    cc = mwc["webhooks"][0]["clientConfig"]
    assert cc["url"] == "https://127.0.0.1:8443/mutate" and "service" not in cc
    assert base64.b64decode(cc["caBundle"]) == bundle.ca_cert_pem


def test_secret_service_deployment(bundle):
    objs = manifests.render(namespace="ns-x", image="img:1", certs=bundle)
    sec = by_kind(objs, "Secret")[0]
    assert sec["type"] == "kubernetes.io/tls" and sec["metadata"]["namespace"] == "ns-x"
    assert {k: base64.b64decode(v) for k, v in sec["data"].items()} == bundle.as_secret_data()
    svc = by_kind(objs, "Service")[0]
    assert svc["spec"]["ports"][0]["port"] == 443 and svc["spec"]["ports"][0]["targetPort"] == 8443
    dep = by_kind(objs, "Deployment")[0]
    pod_spec = dep["spec"]["template"]["spec"]
    assert [c["name"] for c in pod_spec["containers"]] == ["webhook"]
    assert all(c["image"] == "img:1" for c in pod_spec["containers"])
    assert pod_spec["serviceAccountName"] == "repack-webhook"
    assert svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert pod_spec["volumes"][0]["secret"]["secretName"] == sec["metadata"]["name"]
    assert [o["kind"] for o in objs][:14] == ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"] * 6 + [
        "Namespace", "ServiceAccount"]
    assert objs[-1]["kind"] == "MutatingWebhookConfiguration"  # registered last, once the server exists


def test_yaml_round_trip_and_reference_copies_current():
    objs = manifests.render()
    assert list(yaml.safe_load_all(manifests.to_yaml(objs))) == objs
    for name, make in manifests.FILES.items():
        text = (ROOT / "config" / "webhook" / name).read_text()
        assert list(yaml.safe_load_all(text)) == make(manifests.NAMESPACE, manifests.DEFAULT_IMAGE), name
        assert "caBundle:" not in text and "tls.key" not in text


def test_the_readme_lists_every_service_accounts_verbs_as_install_grants_them():
    """The security section's table is generated from the rendered roles; a role changed without
    `python -m kubectl_repack.deploy.manifests` (which rewrites it) fails here."""
    text = (ROOT / "README.md").read_text()
    assert manifests.readme_with_table(text) == text, "run `python -m kubectl_repack.deploy.manifests` and commit"
    table = manifests.rbac_table()
    assert "| repack-webhook | cluster | repack.volcano.sh/repackruns | get, list, watch | any |" in table
    assert not [line for line in table.splitlines() if line.startswith("| repack-webhook |")
                and any(v in line for v in ("patch", "create", "update", "delete"))]


def test_the_pod_write_policy_leaves_the_owners_opt_out_alone():
    (rule,) = [v for v in manifests.pod_write_policy("repack-system")["spec"]["validations"]
               if "newAnn" in v["expression"]]
    assert "k != 'repack.volcano.sh/do-not-disrupt'" in rule["expression"]
