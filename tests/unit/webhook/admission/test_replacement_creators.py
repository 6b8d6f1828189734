"""Security finding 6 (SEC-5): only the workload controllers that re-create evicted pods can claim a
relocation record. A user's pod that copies the victim's labels, owner references and every
annotation claims nothing; the same pod created by the ReplicaSet controller does."""
from __future__ import annotations

import copy
import json

from kubectl_repack.api.gates import DEFAULT_REPLACEMENT_CREATORS
from tests.unit.webhook.builders import SEAL_KEY, move, owner, relocation, review_request, rs_pod, run
from tests.unit.webhook.patching import apply_patch, decode
from webhook.admission.app import create_app
from webhook.admission.relocation_store import RelocationStore

RS = owner("ReplicaSet", "web-7f8d9c")
RUN = run(relocations=[relocation("web-7f8d9c-aaaaa", group="g", planned="node-1")],
          moves=[move("demo", "g", RS, ["web-7f8d9c-aaaaa"])])


def client():
    store = RelocationStore(key=SEAL_KEY)
    store.replace_all([copy.deepcopy(RUN)])
    return create_app(store, lambda now: True, replacement_creators=frozenset(DEFAULT_REPLACEMENT_CREATORS)).test_client()


def reviewed(c, user):
    body = review_request(rs_pod("web-7f8d9c", "7f8d9c"))
    body["request"]["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    answer = c.post("/mutate", data=json.dumps(body), content_type="application/json")
    assert answer.status_code == 200
    return apply_patch(rs_pod("web-7f8d9c", "7f8d9c"), decode(answer.get_json()))


def test_a_pod_created_by_a_user_claims_no_record_however_alike_it_is():
    c = client()
    spoof = reviewed(c, "mallory")
    assert not (spoof["metadata"].get("annotations") or {})
    assert not spoof["spec"].get("schedulingGates")
    # the record is still open for the real replacement, which the ReplicaSet controller creates
    real = reviewed(c, "system:serviceaccount:kube-system:replicaset-controller")
    assert real["metadata"]["annotations"]["repack.volcano.sh/relocation-victim"] == "web-7f8d9c-aaaaa"


def test_every_default_creator_may_claim():
    for user in DEFAULT_REPLACEMENT_CREATORS:
        got = reviewed(client(), user)
        assert (got["metadata"].get("annotations") or {}).get("repack.volcano.sh/relocation-victim"), user


def test_the_replacement_policy_names_the_creators_and_exempts_only_cluster_admins():
    from kubectl_repack.deploy import manifests

    policy = manifests.replacement_pod_policy("repack-system", ["system:serviceaccount:ops:my-operator"])
    create_rule, update_rule = policy["spec"]["validations"]
    assert "'system:serviceaccount:ops:my-operator'" in create_rule["expression"]
    assert "replicaset-controller" not in create_rule["expression"]          # the option replaces the defaults
    assert "'system:serviceaccount:repack-system:repack-coordinator'" in update_rule["expression"]
    (condition,) = policy["spec"]["matchConditions"]
    assert "system:masters" in condition["expression"] and policy["spec"]["failurePolicy"] == "Fail"
    (dep,) = [o for o in manifests.render(replacement_creators=["u1", "u2"]) if o["kind"] == "Deployment"
              and o["metadata"]["name"] == manifests.NAME]
    env = {e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["REPACK_REPLACEMENT_CREATORS"] == "u1,u2"


def test_the_webhook_process_reads_the_creators_from_its_environment(monkeypatch):
    from webhook.admission import serve as server

    monkeypatch.setenv("REPACK_REPLACEMENT_CREATORS", "a, b")
    assert server.parse_args([]).replacement_creators == "a, b"
    monkeypatch.delenv("REPACK_REPLACEMENT_CREATORS")
    assert server.parse_args([]).replacement_creators.split(",") == list(DEFAULT_REPLACEMENT_CREATORS)
