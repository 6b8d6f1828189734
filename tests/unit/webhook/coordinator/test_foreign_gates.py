"""Repack's placement gate next to someone else's: Volcano 1.15 lifts its queue-allocation gate only
when it is a pod's *only* gate (its removal rule, tests/harness/volcano_gates.py, from
pkg/scheduler/gate and pkg/scheduler/api in volcano.sh/volcano@v1.15.1). So ours must go first, theirs
must never be touched, and a pod that still carries only theirs is not ours to count or wait on."""
from __future__ import annotations

import copy

from kubectl_repack.api.gates import PLACEMENT_GATE, expired_gate_patches, has_gate, ungate_patch
from tests.harness.volcano_gates import (QUEUE_ALLOCATION_ANNOTATION, QUEUE_ALLOCATION_GATE, has_only_volcano_gate,
                                         volcano_lifts_its_gate)
from tests.unit.webhook.patching import apply_patch
from webhook.coordinator.placement import replacement_of


def pod(*gates, opted_in=True, annotations=None):
    ann = {QUEUE_ALLOCATION_ANNOTATION: "true"} if opted_in else {}
    ann.update(annotations or {})
    return {"metadata": {"name": "w-0", "namespace": "demo", "annotations": ann},
            "spec": {"schedulingGates": [{"name": g} for g in gates]}}


def test_volcanos_removal_rule_as_its_source_has_it():
    assert volcano_lifts_its_gate(pod(QUEUE_ALLOCATION_GATE))
    assert not volcano_lifts_its_gate(pod(QUEUE_ALLOCATION_GATE, opted_in=False))       # not opted in
    assert not volcano_lifts_its_gate(pod(QUEUE_ALLOCATION_GATE, PLACEMENT_GATE))        # not its only gate
    assert not volcano_lifts_its_gate(pod(PLACEMENT_GATE, QUEUE_ALLOCATION_GATE))        # in either order
    assert not volcano_lifts_its_gate(pod())                                             # no gate at all
    assert not has_only_volcano_gate(pod(QUEUE_ALLOCATION_GATE, QUEUE_ALLOCATION_GATE))  # len == 1, exactly


def test_lifting_ours_leaves_theirs_untouched_and_lets_volcano_lift_its_own():
    both = pod(QUEUE_ALLOCATION_GATE, PLACEMENT_GATE)
    assert not volcano_lifts_its_gate(both)   # while ours is there, Volcano never lifts its gate
    after = apply_patch(copy.deepcopy(both), [op for op in ungate_patch(both) if op["op"] != "test"])
    assert after["spec"]["schedulingGates"] == [{"name": QUEUE_ALLOCATION_GATE}]
    assert volcano_lifts_its_gate(after)      # ... and once ours is gone, it does


def test_a_pod_gated_only_by_someone_else_is_not_ours():
    theirs = pod(QUEUE_ALLOCATION_GATE)
    assert not has_gate(theirs)
    assert replacement_of(theirs, lambda p: "") is None            # not counted as a replacement the coordinator holds
    assert ungate_patch(theirs) == []                # nothing of theirs is ever removed
    assert expired_gate_patches([theirs], now=None) == []   # the fail-open sweep leaves it alone
