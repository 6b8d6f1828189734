"""Network topology in the output (TOPO-3/4): the HYPERNODES table of a plan (the
HyperNodes that change most, "M more: -o wide"; all of them wide), the block goal's summary line,
RequiredNodeBlocksNotMet as a not-recommended outcome (exit 3), and `status` / `apply` showing
status.plan.summary.nodeBlocks and status.result.nodeBlocks.

The plans are the seed's, with the topology fields set by hand (dataclasses.replace): what is
tested is the printing, whatever planner fills them in."""
from __future__ import annotations

import copy
import dataclasses

import pytest
import yaml

import planner
from kubectl_repack import render
from kubectl_repack.commands import apply as apply_cmd
from planner.plan_types import REASON_BLOCKS_NOT_MET, HyperNodeRow, NodeBlocks

from .conftest import GUARDED, NOW, SEED3, flatten, run, seed3_objects
from .test_scale_output import section
from .test_snapshot_status import EXECUTE


@pytest.fixture(scope="module")
def seed():
    """(run, snapshot, plan) of the seed's guarded DryRun: frees ascend-node-01."""
    with open(GUARDED, encoding="utf-8") as f:
        spec_run = yaml.safe_load(f)
    snapshot = planner.load_objects(flatten(seed3_objects()))
    return spec_run, snapshot, planner.plan(snapshot, planner.RunSpec.from_spec(spec_run["spec"]))


def rows(n, changed=(), blocks_changed=()):
    """n tier-1 HyperNodes hn-00.. of 4 nodes, 1 free each; `changed` gain a free node, and
    `blocks_changed` a free node that completes a block of 2."""
    out = []
    for i in range(n):
        name = f"hn-{i:02d}"
        gain = 1 if name in changed or name in blocks_changed else 0
        free_before = 1
        out.append(HyperNodeRow(name, 1, 4, free_before, free_before + gain, free_before // 2,
                                (free_before + gain) // 2 if name in blocks_changed else free_before // 2))
    return tuple(out)


GOAL = NodeBlocks(tier=1, size=2, required=1, mode="", before=0, after=1)


def summary(seed, wide=False, **changes):
    spec_run, snapshot, plan = seed
    return render.plan_summary(spec_run, dataclasses.replace(plan, **changes), "seed", wide=wide,
                               pools=render.node_pools(snapshot, plan.resource))


def test_no_hypernodes_no_table(seed):
    out = summary(seed)
    assert "HYPERNODES" not in out and "Node blocks:" not in out


def test_without_a_goal_free_nodes_per_hypernode_and_no_blocks_column(seed):
    out = summary(seed, hypernodes=rows(3, changed={"hn-01"}))
    assert section(out, "HYPERNODES (tier 1: free nodes before -> after)") == [
        "HYPERNODE   TIER   NODES   FREE",
        "hn-00       1      4       1 -> 1",
        "hn-01       1      4       1 -> 2",
        "hn-02       1      4       1 -> 1",
    ]
    # after the pools and before the moves, like the other per-group views (the card map is -o wide's)
    assert out.index("\nPOOLS") < out.index("\nHYPERNODES") < out.index("\nMOVES BY PODGROUP")
    wide = summary(seed, wide=True, hypernodes=rows(3, changed={"hn-01"}))
    assert wide.index("\nPOOLS") < wide.index("\nHYPERNODES") < wide.index("\nCARDS")


def test_default_shows_the_few_that_change_most_in_name_order_then_counts_the_rest(seed):
    many = rows(20, changed={"hn-03", "hn-17"}, blocks_changed={"hn-12"})
    out = summary(seed, hypernodes=many, node_blocks=GOAL)
    header, *body, last = section(out, "HYPERNODES (tier 1: free nodes and blocks of 2, before -> after)")
    assert header.split() == ["HYPERNODE", "TIER", "NODES", "FREE", "BLOCKS"]
    names = [r.split()[0] for r in body]
    assert len(names) == render.HYPERNODE_ROWS and names == sorted(names)
    assert {"hn-03", "hn-12", "hn-17"} <= set(names)       # every one that changes is listed
    assert last == f"{20 - render.HYPERNODE_ROWS} more: -o wide"
    assert [r for r in body if r.startswith("hn-12")][0].split() == ["hn-12", "1", "4", "1", "->", "2", "0", "->", "1"]


def test_block_changes_outrank_free_node_changes_when_rows_run_out(seed):
    many = rows(12, changed={f"hn-{i:02d}" for i in range(9)}, blocks_changed={"hn-11"})
    shown = [r.split()[0] for r in section(summary(seed, hypernodes=many, node_blocks=GOAL), "HYPERNODES")[1:-1]]
    assert "hn-11" in shown and len(shown) == render.HYPERNODE_ROWS


def test_wide_lists_every_hypernode(seed):
    out = summary(seed, wide=True, hypernodes=rows(20), node_blocks=GOAL)
    body = section(out, "HYPERNODES")[1:]
    assert [r.split()[0] for r in body] == [f"hn-{i:02d}" for i in range(20)]
    assert "more: -o wide" not in out


def test_a_block_goal_adds_a_summary_line(seed):
    out = summary(seed, hypernodes=rows(2), node_blocks=NodeBlocks(1, 2, 3, "spread", 0, 1))
    assert "\nNode blocks:    0 -> 1 (tier 1, size 2, required 3, spread)\n" in out
    out = summary(seed, hypernodes=rows(2), node_blocks=GOAL)
    assert "\nNode blocks:    0 -> 1 (tier 1, size 2, required 1)\n" in out


def test_blocks_not_met_is_labelled_and_says_what_the_goal_lacks(seed):
    out = summary(seed, hypernodes=rows(2), outcome=REASON_BLOCKS_NOT_MET,
                  node_blocks=NodeBlocks(1, 2, 3, "", 0, 1))
    assert "Outcome:        RequiredNodeBlocksNotMet" in out
    assert "Node blocks:    0 -> 1 (tier 1, size 2, required 3) (best plan found, not recommended)" in out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("Recommendable:")]
    assert "it leaves 1 block(s) of 2 free node(s) in tier-1 HyperNodes and the run requires 3" in line


def test_plan_exit_code_is_3_when_the_required_blocks_are_not_met(monkeypatch):
    real = planner.plan

    def not_met(snapshot, spec, **kw):
        return dataclasses.replace(real(snapshot, spec, **kw), outcome=REASON_BLOCKS_NOT_MET, moves=(),
                                   freed_nodes=(), node_blocks=NodeBlocks(1, 2, 1, "", 0, 0))
    monkeypatch.setattr(planner, "plan", not_met)
    r = run("plan", "--snapshot", SEED3, "-f", GUARDED, "--now", NOW, "--exit-code")
    assert r.exit_code == 3, r.output
    assert "Outcome:        RequiredNodeBlocksNotMet" in r.stdout and "Traceback" not in r.output
    r = run("plan", "--snapshot", SEED3, "-f", GUARDED, "--now", NOW, "-o", "json")
    assert r.exit_code == 0, r.output
    assert '"nodeBlocks": {\n' in r.stdout and '"reason": "RequiredNodeBlocksNotMet"' in r.stdout


def _with_blocks(result=True):
    obj = copy.deepcopy(EXECUTE)
    obj["status"]["plan"]["summary"]["nodeBlocks"] = {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 2}
    if result:
        obj["status"]["result"]["nodeBlocks"] = {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 1}
    return obj


def test_status_shows_planned_and_observed_blocks(fake_cluster):
    fake_cluster["store"].runs["ascend-execute-001"] = _with_blocks()
    r = run("status", "ascend-execute-001")
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    (row,) = [ln for ln in lines if ln.startswith("Blocks")]
    assert row.split() == ["Blocks", "(tier", "1,", "size", "2)", "0", "->", "2", "1"]
    # in the plan-vs-result table, right after the freed-node count
    assert lines[lines.index(row) - 1].startswith("Freed nodes")


def test_status_of_a_planned_block_goal_without_a_result_yet(fake_cluster):
    fake_cluster["store"].runs["ascend-execute-001"] = _with_blocks(result=False)
    (row,) = [ln for ln in run("status", "ascend-execute-001").stdout.splitlines() if ln.startswith("Blocks")]
    assert row.split()[-4:] == ["0", "->", "2", "-"]


def test_status_without_a_block_goal_has_no_blocks_row(fake_cluster):
    fake_cluster["store"].runs["ascend-execute-001"] = EXECUTE
    assert "Blocks" not in run("status", "ascend-execute-001").stdout


def test_apply_summary_and_exit_code_of_blocks(monkeypatch):
    obj = _with_blocks()
    text = apply_cmd._summary(obj)
    assert "freed 1, moved 2 card(s), blocks 0 -> 2" in text
    assert "moved 2 card(s), blocks 1, verified true" in text
    not_met = copy.deepcopy(EXECUTE)
    not_met["status"]["conditions"] = [{"type": "Complete", "status": "True", "reason": REASON_BLOCKS_NOT_MET,
                                        "message": "live re-plan: 0 of 1 required block(s); nothing was evicted"}]
    assert apply_cmd._exit_code(not_met) == apply_cmd.EXIT_NOT_RECOMMENDED == 3
