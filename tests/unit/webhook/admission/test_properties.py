"""Invariants of `review` over generated pods: never a rejection, and the patch always applies."""
from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.unit.webhook.builders import move, owner, relocation, review_request, run
from tests.unit.webhook.patching import apply_patch, decode
from kubectl_repack.api.gates import PLACEMENT_GATE, RELOCATION_RUN_ANNOTATION
from webhook.admission.review import review
from kubectl_repack.api.relocations import RelocationIndex

NOW = datetime(2026, 7, 30, 10, 0, tzinfo=timezone.utc)
INDEX = RelocationIndex.from_runs([run(
    relocations=[relocation("train-worker-0", group="pg"), relocation("db-0", group="db"),
                 relocation("web-abc12-xxxxx", group="web"), relocation("serve-0-infer-0-1", group="serve-0")],
    moves=[move("demo", "pg", owner("Job", "train"), ["train-worker-0"]),
           move("demo", "db", owner("StatefulSet", "db"), ["db-0"]),
           move("demo", "web", owner("ReplicaSet", "web-abc12"), ["web-abc12-xxxxx"]),
           move("demo", "serve-0", owner("ModelServing", "serve"), ["serve-0-infer-0-1"])])])

keys = st.sampled_from(["a", "x/y", "we~ird/key", "repack.volcano.sh/relocation-victim", "volcano.sh/job-name",
                        "scheduling.k8s.io/group-name", "pod-template-hash", "modelserving.volcano.sh/role"])
str_maps = st.one_of(st.none(), st.dictionaries(keys, st.text(max_size=8), max_size=4))
owners = st.one_of(st.none(), st.sampled_from([owner("Job", "train"), owner("StatefulSet", "db"),
                                               owner("ReplicaSet", "web-abc12"), owner("ModelServing", "serve"),
                                               owner("Deployment", "web")]))
gates = st.one_of(st.none(), st.lists(st.sampled_from([{"name": PLACEMENT_GATE}, {"name": "example.com/g"}]),
                                      max_size=2))


@st.composite
def pods(draw):
    meta = {"namespace": draw(st.sampled_from(["demo", "demo", "demo", "other"]))}
    name = draw(st.sampled_from(["", "train-worker-0", "db-0", "serve-0-infer-0-1", "serve-3-infer-0-1", "x"]))
    if name:
        meta["name"] = name
    for field in ("labels", "annotations"):
        value = draw(str_maps)
        if value is not None or draw(st.booleans()):
            meta[field] = value
    own = draw(owners)
    if own:
        meta["ownerReferences"] = [dict(own, uid="u", controller=True)]
    spec = {"containers": [{"name": "c"}], "schedulerName": draw(st.sampled_from(["volcano", "volcano", "volcano", "default-scheduler"]))}
    g = draw(gates)
    if g is not None or draw(st.booleans()):
        spec["schedulingGates"] = g
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if draw(st.integers(0, 20)) == 0:
        del obj["spec"]
    return obj


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(obj=pods(), gate_allowed=st.booleans(), op=st.sampled_from(["CREATE", "CREATE", "UPDATE"]))
def test_never_rejects_and_patch_applies(obj, gate_allowed, op):
    out = review(review_request(obj, operation=op), INDEX, gate_allowed, NOW)
    assert out["response"]["allowed"] is True
    result = apply_patch(obj, decode(out))  # raises if any op does not apply
    gates_after = (result.get("spec") or {}).get("schedulingGates") or []
    assert sum(1 for g in gates_after if g == {"name": PLACEMENT_GATE}) <= max(
        1, sum(1 for g in ((obj.get("spec") or {}).get("schedulingGates") or []) if g == {"name": PLACEMENT_GATE}))
    # reviewing the patched pod again changes nothing (reinvocation)
    if decode(out):
        assert RELOCATION_RUN_ANNOTATION in result["metadata"]["annotations"]
        again = review(review_request(result, operation=op), INDEX, gate_allowed, NOW)
        assert decode(again) == []


@settings(max_examples=200)
@given(annotations=str_maps, labels=str_maps, g=gates, gate_allowed=st.booleans(), drop_spec_gates=st.booleans())
def test_matched_replacement_patch_applies_whatever_its_metadata(annotations, labels, g, gate_allowed,
                                                                  drop_spec_gates):
    annotations = None if annotations is None else {k: v for k, v in annotations.items()
                                                    if k != RELOCATION_RUN_ANNOTATION}
    meta = {"name": "train-worker-0", "namespace": "demo", "annotations": annotations, "labels": labels,
            "ownerReferences": [dict(owner("Job", "train"), uid="u", controller=True)]}
    spec = {"containers": [{"name": "c"}], "schedulerName": "volcano"}
    if not drop_spec_gates:
        spec["schedulingGates"] = g
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    out = review(review_request(obj), INDEX, gate_allowed, NOW)
    assert out["response"]["allowed"] is True
    result = apply_patch(obj, decode(out))
    assert result["metadata"]["annotations"][RELOCATION_RUN_ANNOTATION] == "run-1/uid-run-1"
    has_gate = {"name": PLACEMENT_GATE} in (result["spec"].get("schedulingGates") or [])
    had_gate = {"name": PLACEMENT_GATE} in (g or []) and not drop_spec_gates
    assert has_gate == (gate_allowed or had_gate)
