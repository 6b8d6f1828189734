"""Which gates the controller lifts when the coordinator is down (security finding 10): ours, once
older than the placement lease; never another controller's gate, never a fresh one."""
from __future__ import annotations

import datetime as dt

from kubectl_repack.api.gates import (GATED_AT_ANNOTATION, PLACEMENT_GATE, PLACEMENT_GATE_OWNER_ANNOTATION,
                                      PLACEMENT_LEASE, expired_gate_patches)
from kubectl_repack.api.times import rfc3339

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.timezone.utc)


def pod(name, gates, gated_seconds_ago=None):
    ann = {PLACEMENT_GATE_OWNER_ANNOTATION: "run/uid"}
    if gated_seconds_ago is not None:
        ann[GATED_AT_ANNOTATION] = rfc3339(NOW - dt.timedelta(seconds=gated_seconds_ago))
    return {"metadata": {"namespace": "demo", "name": name, "annotations": ann},
            "spec": {"schedulingGates": [{"name": g} for g in gates]}}


def test_only_our_gates_past_the_lease_are_lifted_and_other_gates_stay():
    lease = PLACEMENT_LEASE.total_seconds()
    pods = [pod("fresh", [PLACEMENT_GATE], lease - 1), pod("old", [PLACEMENT_GATE, "other.io/gate"], lease),
            pod("unknown-age", [PLACEMENT_GATE]), pod("foreign", ["other.io/gate"], lease * 10)]
    patches = {name: ops for _, name, ops in expired_gate_patches(pods, NOW)}
    assert set(patches) == {"old", "unknown-age"}
    assert patches["old"] == [
        {"op": "test", "path": "/spec/schedulingGates", "value": [{"name": PLACEMENT_GATE}, {"name": "other.io/gate"}]},
        {"op": "replace", "path": "/spec/schedulingGates", "value": [{"name": "other.io/gate"}]},
        {"op": "remove", "path": "/metadata/annotations/repack.volcano.sh~1placement-gate-owner"}]
