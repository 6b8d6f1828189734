"""SEC-5 at admission, pure: the webhook's marks carry a MAC over the marks, the namespace and the
pod's controlling owner; marks a pod arrives with (a ReplicaSet template carrying them) are
stripped before matching; matching needs the victim's controller UID (Volcano's PodGroup name);
and claims, which come from reviews anyone reaching the port can forge, never withhold a record."""
from __future__ import annotations

import json
from datetime import datetime, timezone

from kubectl_repack.api.gates import (MARKS_MAC_ANNOTATION, PLACEMENT_GATE, PLANNED_NODE_ANNOTATION,
                                      RELOCATION_INDEX_ANNOTATION, RELOCATION_RUN_ANNOTATION, REPLACEMENT_MARKS,
                                      marks_problem)
from kubectl_repack.api.matching import match
from kubectl_repack.api.relocations import RelocationIndex
from tests.unit.webhook.builders import PLACEMENT_KEY, move, owner, relocation, review_request, rs_pod, run
from tests.unit.webhook.patching import apply_patch, decode
from webhook.admission.app import create_app
from webhook.admission.relocation_store import RelocationStore
from webhook.admission.review import review_outcome

NOW = datetime(2026, 7, 30, 10, 0, tzinfo=timezone.utc)
RS_UID = "0b0c0d0e-1111-4222-8333-444455556666"
GROUP = f"podgroup-{RS_UID}"          # what vc-controller names a ReplicaSet's PodGroup
RS = owner("ReplicaSet", "web-7f8d9c")
ADMIN_RUN = run("admin-run", relocations=[relocation("web-7f8d9c-aaaaa", group=GROUP, planned="node-1"),
                                         relocation("web-7f8d9c-bbbbb", group=GROUP, planned="node-2")],
                moves=[move("demo", GROUP, RS, ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"])])
INDEX = RelocationIndex.from_runs([ADMIN_RUN])


def genuine(**kw):
    """A pod the victim's ReplicaSet creates: its owner reference carries the ReplicaSet's UID."""
    p = rs_pod("web-7f8d9c", "7f8d9c", **kw)
    p["metadata"]["ownerReferences"][0]["uid"] = RS_UID
    return p


def reviewed(obj, index=INDEX, key=PLACEMENT_KEY):
    outcome = review_outcome(review_request(obj), index, True, NOW, mac_key=key)
    return outcome, apply_patch(obj, decode(outcome.response))


def test_the_webhook_marks_verify_and_a_reinvocation_leaves_them():
    outcome, pod = reviewed(genuine())
    ann = pod["metadata"]["annotations"]
    assert outcome.match is not None and ann[RELOCATION_RUN_ANNOTATION].startswith("admin-run/")
    assert ann[MARKS_MAC_ANNOTATION].startswith("v1:")
    assert marks_problem(pod, PLACEMENT_KEY) == ""
    again, _ = reviewed(pod)
    assert decode(again.response) == []


def test_marks_that_change_or_move_do_not_verify():
    _, pod = reviewed(genuine())
    steered = json.loads(json.dumps(pod))
    steered["metadata"]["annotations"][PLANNED_NODE_ANNOTATION] = "attackers-node"
    assert "do not match their MAC" in marks_problem(steered, PLACEMENT_KEY)
    other_owner = json.loads(json.dumps(pod))
    other_owner["metadata"]["ownerReferences"][0]["uid"] = "ffffffff-1111-4222-8333-444455556666"
    assert "do not match their MAC" in marks_problem(other_owner, PLACEMENT_KEY)
    other_ns = json.loads(json.dumps(pod))
    other_ns["metadata"]["namespace"] = "elsewhere"
    assert marks_problem(other_ns, PLACEMENT_KEY)
    assert "carry no MAC" in marks_problem(genuine(annotations={RELOCATION_RUN_ANNOTATION: "admin-run/uid-admin-run"}),
                                           PLACEMENT_KEY)
    assert marks_problem(pod, b"another key" * 3)
    assert marks_problem(pod, None)


def test_a_template_that_carries_the_marks_gets_them_stripped_and_claims_nothing():
    """A user's own ReplicaSet (another UID) in the namespace, whose template carries a genuine
    replacement's marks (MAC included) under the victim's names and labels: created by the
    ReplicaSet controller, an allowed creator. The marks go; it matches no record."""
    _, real = reviewed(genuine())
    copied = {k: v for k, v in real["metadata"]["annotations"].items() if k in REPLACEMENT_MARKS}
    attacker = rs_pod("web-7f8d9c", "7f8d9c", annotations=dict(copied, keep="me"))
    attacker["metadata"]["ownerReferences"][0]["uid"] = "ffffffff-1111-4222-8333-444455556666"
    attacker["spec"]["schedulingGates"] = []
    outcome, pod = reviewed(attacker)
    assert outcome.match is None
    ann = pod["metadata"]["annotations"]
    assert ann == {"keep": "me"}, ann
    assert PLACEMENT_GATE not in [g["name"] for g in pod["spec"]["schedulingGates"]]


def test_a_genuine_pod_that_arrives_with_stale_marks_is_matched_afresh():
    stale = genuine(annotations={RELOCATION_RUN_ANNOTATION: "other/uid", RELOCATION_INDEX_ANNOTATION: "7",
                                 PLANNED_NODE_ANNOTATION: "attackers-node"})
    outcome, pod = reviewed(stale)
    ann = pod["metadata"]["annotations"]
    assert outcome.match is not None
    assert ann[RELOCATION_RUN_ANNOTATION] == "admin-run/uid-admin-run" and ann[PLANNED_NODE_ANNOTATION] == "node-1"
    assert marks_problem(pod, PLACEMENT_KEY) == ""


def test_matching_needs_the_victims_controller_uid_from_the_podgroup_name():
    assert match(genuine(), INDEX) is not None
    same_names = rs_pod("web-7f8d9c", "7f8d9c")     # same ReplicaSet name and labels, another UID
    same_names["metadata"]["ownerReferences"][0]["uid"] = "ffffffff-1111-4222-8333-444455556666"
    assert match(same_names, INDEX) is None
    hand_named = RelocationIndex.from_runs([run(relocations=[relocation("web-7f8d9c-aaaaa", group="my-group")],
                                                moves=[move("demo", "my-group", RS, ["web-7f8d9c-aaaaa"])])])
    assert match(same_names, hand_named) is not None   # no UID in the name: names and labels only (README)


def test_forged_reviews_claim_nothing_a_genuine_review_needs():
    """SEC-5: any TLS client reaching the port may send reviews; 200 forged reviews for every record
    leave the genuine replacements patched."""
    store = RelocationStore(key=PLACEMENT_KEY)
    store.replace_all([ADMIN_RUN])
    client = create_app(store, lambda now: True, clock=lambda: NOW).test_client()

    def post(obj):
        resp = client.post("/mutate", data=json.dumps(review_request(obj)), content_type="application/json")
        return apply_patch(obj, decode(resp.get_json()))

    for _ in range(200):
        post(genuine())
    for _ in range(2):
        pod = post(genuine())
        assert pod["metadata"]["annotations"].get(RELOCATION_RUN_ANNOTATION) == "admin-run/uid-admin-run"
        assert PLACEMENT_GATE in [g["name"] for g in pod["spec"].get("schedulingGates") or ()]
        assert marks_problem(pod, PLACEMENT_KEY) == ""


def test_without_the_seal_key_no_record_is_handed_out():
    store = RelocationStore()
    store.replace_all([ADMIN_RUN])
    client = create_app(store, lambda now: True, clock=lambda: NOW).test_client()
    resp = client.post("/mutate", data=json.dumps(review_request(genuine())), content_type="application/json")
    assert "patch" not in resp.get_json()["response"]
