"""One run's plan fits in one RepackRun: its status (plan.moves plus one relocation record per
moved pod, filled in as the run goes) stays within the etcd object limit and the CRD's maxItems.
Before the cap, a 12,000-node plan had 3,859 freed nodes (maxItems 2048) and 8,356 relocations
(4096), so `plan --save`, `apply` and every `--resume` met a 422."""
from __future__ import annotations

import json

import planner
from kubectl_repack.api.run import Eviction, Placement, Relocation
from kubectl_repack.api.status import plan_status
from planner.prepare import STATUS_BYTES_BUDGET, STATUS_MAX_FREED, STATUS_MAX_PODS
from tests.builders import R, gang, node, spec

ETCD_OBJECT_LIMIT = 1_572_864
REST_OF_STATUS = 100_000   # summary, conditions, message: a few kB in fact


def _long(prefix, n):
    return (prefix + "-" + "x" * n)[:n]


def _half_full_cluster(nodes, name_len, ns_len, node_len):
    """`nodes` 8-card nodes with one 4-card single-pod gang each: every other node can be freed."""
    objs = []
    ns = _long("ns", ns_len)
    for i in range(nodes):
        n = _long(f"n{i:05d}", node_len)
        objs.append(node(n, cards=8))
        objs += gang(_long(f"g{i:05d}", name_len - 12), ns=ns, workers=[n], cards=4)
    return planner.load_objects(objs)


def _finished_status(plan) -> dict:
    """The status after the run finished, every record filled to its longest: replacement names,
    UIDs, selected and actual nodes, a 200-character eviction message."""
    st = plan_status(plan, "2026-11-30T00:00:00Z")
    st["relocations"] = [
        Relocation(namespace=m.pod.namespace, victim_pod_name=m.pod.name, pod_group_name=m.pod.group_name,
                   victim_pod_uid="0" * 36, planned_node_name=m.to_node,
                   replacement_pod_group_name=m.pod.group_name,
                   eviction=Eviction("Accepted", "m" * 200),
                   placement=Placement("Placed", m.to_node, m.pod.name, "1" * 36, m.to_node)).to_dict()
        for m in plan.moves]
    return st


def test_long_names_make_the_byte_budget_stop_the_plan_and_say_so():
    snap = _half_full_cluster(nodes=1000, name_len=253, ns_len=63, node_len=63)
    plan = planner.plan(snap, planner.RunSpec.from_spec(spec()))
    size = len(json.dumps(_finished_status(plan), separators=(",", ":")))
    assert 0 < len(plan.moves) < 500        # 500 nodes could be freed; the status holds fewer
    assert size <= STATUS_BYTES_BUDGET + REST_OF_STATUS < ETCD_OBJECT_LIMIT
    assert size > STATUS_BYTES_BUDGET * 0.6  # the estimate is an upper bound, not a wild one
    capped = [v for v in plan.verdicts if v.reason == "BudgetExceeded"]
    assert capped and "past what one RepackRun holds" in capped[0].message
    assert "a later run continues from here" in capped[0].message


def test_short_names_are_capped_by_the_crd_limits_not_bytes():
    snap = _half_full_cluster(nodes=6000, name_len=20, ns_len=8, node_len=12)
    plan = planner.plan(snap, planner.RunSpec.from_spec(spec()))
    st = _finished_status(plan)
    assert len(st["relocations"]) <= STATUS_MAX_PODS
    assert len(st["plan"].get("freedNodes", [])) <= STATUS_MAX_FREED
    assert sum(len(m["pods"]) for m in st["plan"]["moves"]) == len(plan.moves)
    assert len(json.dumps(st, separators=(",", ":"))) <= STATUS_BYTES_BUDGET + REST_OF_STATUS
    assert any("past what one RepackRun holds" in v.message for v in plan.verdicts)
    # The run still frees as many nodes as its status allows, not a handful.
    assert len(plan.freed_nodes) > 700


def test_the_12000_node_cluster_that_overflowed_now_fits(tmp_path):
    """The reported case itself: 12,000 generated nodes, no budget."""
    import subprocess
    import sys

    from planner.gcpause import paused_gc

    path = tmp_path / "cluster.json"
    subprocess.run([sys.executable, "-m", "bench.generate", "--nodes", "12000", "--seed", "7", "-o", str(path)],
                   check=True, timeout=600)
    with paused_gc():
        plan = planner.plan(planner.load_file(path), planner.RunSpec.from_spec(spec()))
    st = _finished_status(plan)
    assert len(plan.freed_nodes) <= STATUS_MAX_FREED and len(st["relocations"]) <= STATUS_MAX_PODS
    assert len(json.dumps(st, separators=(",", ":"))) <= STATUS_BYTES_BUDGET + REST_OF_STATUS
    assert len(plan.freed_nodes) > 100 and plan.outcome == "RepackRecommended"
