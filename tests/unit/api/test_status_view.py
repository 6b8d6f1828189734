"""The run record's typed home: object and run views, the placement transitions both writers use,
and the status a plan becomes (api.status)."""
from __future__ import annotations

import pytest

import planner
from kubectl_repack.api import run as runapi
from kubectl_repack.api.run import Placement, RunView, UnsetReason, write_placement_fields
from kubectl_repack.api.status import mark_finished, plan_status
from kubectl_repack.api.view import ObjectView
from tests.builders import gang, node, spec

RECORD = {"namespace": "demo", "podGroupName": "train", "victimPodName": "w0", "victimPodUID": "u1",
          "plannedNodeName": "n2", "eviction": {"phase": "Accepted"},
          "placement": {"phase": "WaitingForReplacement", "futureField": "kept"}}


@pytest.mark.parametrize("obj", [None, {}, {"metadata": None, "spec": "junk", "status": []}, "junk"],
                         ids=["none", "empty", "junk-fields", "not-an-object"])
def test_views_read_absent_or_malformed_fields_as_empty(obj):
    view = RunView(obj)
    assert (view.meta, view.spec, view.status) == ({}, {}, {})
    assert (view.name, view.uid, view.phase, view.mode, view.reason) == ("", "", "", "", "")
    assert view.relocations == () and not view.has_records and not view.finished and not view.deleting


def test_object_view_reads_the_dict_it_is_given():
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "labels": {"a": "1"},
                        "annotations": {"b": "2"}, "deletionTimestamp": "2026-01-01T00:00:00Z"},
           "spec": {"nodeName": "n1"}}
    view = ObjectView(pod)
    assert (view.name, view.namespace, view.uid) == ("p", "ns", "u")
    assert view.labels == {"a": "1"} and view.annotations == {"b": "2"} and view.deleting
    assert view.spec is pod["spec"] and ObjectView.of(view) is view


def test_a_run_view_parses_its_records_once(monkeypatch):
    calls = []
    parse = runapi.Relocation.from_dict.__func__
    monkeypatch.setattr(runapi.Relocation, "from_dict",
                        classmethod(lambda cls, d: calls.append(1) or parse(cls, d)))
    run = {"spec": {"mode": "Execute"}, "status": {"phase": "Running", "relocations": [RECORD, RECORD, RECORD]}}
    view = RunView(run)
    assert view.relocation(2).victim == "demo/w0" and len(calls) == 1   # one record, not the list
    assert len(view.relocations) == 3 and len(calls) == 4
    assert view.relocations[0] is view.relocation(0) and len(calls) == 4
    assert runapi.relocations(view) == list(view.relocations) and len(calls) == 4
    assert view.active_execute and RunView.of(view) is view and runapi.is_active_execute(view)


def test_placement_transitions_and_what_a_writer_sets():
    stored = Placement.from_dict(RECORD["placement"])
    found = stored.with_replacement("w0", "u2")
    assert found.phase == "WaitingForNodeSelection"
    assert stored.changes(found) == {"phase": "WaitingForNodeSelection", "replacementPodName": "w0",
                                     "replacementPodUID": "u2"}
    assert found.changes(found.nominated("n2")) == {"phase": "Nominated", "selectedNodeName": "n2"}
    placed = found.nominated("n2").placed_on("n3")
    assert placed.placed and (placed.selected_node_name, placed.actual_node_name) == ("n2", "n3")
    # identified again after it was placed or timed out: the phase stays
    assert placed.with_replacement("w0", "u3").phase == "Placed"
    assert stored.timed_out().with_replacement("w0", "u2").phase == "TimedOut"
    assert stored.changes(stored) == {}


def test_write_placement_fields_keeps_what_it_does_not_set():
    record = {k: (dict(v) if isinstance(v, dict) else v) for k, v in RECORD.items()}
    write_placement_fields(record, {"replacementPodGroupName": "train-2", "phase": "Placed", "actualNodeName": "n2"})
    assert record["replacementPodGroupName"] == "train-2"
    assert record["placement"] == {"phase": "Placed", "futureField": "kept", "actualNodeName": "n2"}
    bare = {"namespace": "demo"}
    write_placement_fields(bare, {"phase": "TimedOut"})
    assert bare == {"namespace": "demo", "placement": {"phase": "TimedOut"}}


def _plan():
    objs = [node("n1"), node("n2"), node("n3")] + gang("train", workers=["n1", "n2"])
    return planner.plan(planner.load_objects(objs), planner.RunSpec.from_spec(spec()))


def test_plan_status_is_a_finished_dry_run_with_a_checked_reason():
    p = _plan()
    st = plan_status(p, "2026-01-01T00:00:00Z")
    assert list(st) == ["phase", "conditions", "message", "plan", "startTime", "completionTime"]
    assert st["phase"] == "Succeeded" and st["message"] == p.message
    assert st["conditions"] == [{"type": "Complete", "status": "True", "reason": p.outcome, "message": p.message,
                                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]
    assert st["plan"]["summary"] == p.summary()
    assert list(plan_status(p)) == ["phase", "conditions", "message", "plan"]
    with pytest.raises(UnsetReason):
        plan_status(type("Bogus", (), {"outcome": "", "message": "m", "summary": p.summary,
                                       "moves_by_group": p.moves_by_group, "freed_nodes": ()})())


def test_mark_finished_derives_the_phase_and_keeps_the_first_completion_time():
    st = {"completionTime": "earlier", "relocations": ["kept"]}
    mark_finished(st, "Failed", "ReplacementTimedOut", "late", None, "now")
    assert st["phase"] == "Failed" and st["completionTime"] == "earlier" and st["relocations"] == ["kept"]
    assert "result" not in st
    with pytest.raises(UnsetReason):
        mark_finished({}, "Failed", "NotAReason", "m", None, "now")


def test_required_node_blocks_not_met_is_a_not_recommended_outcome_that_evicts_nothing():
    """TOPO-3: the planner's RequiredNodeBlocksNotMet is a checked reason and, like
    InsufficientImprovement, ends an Execute's live re-plan Succeeded with no records; the block
    counts the plan found go into status.plan.summary.nodeBlocks."""
    import dataclasses

    from kubectl_repack.api.status import mark_started
    from planner.plan_types import REASON_BLOCKS_NOT_MET, NodeBlocks

    assert runapi.Reason.BLOCKS_NOT_MET == REASON_BLOCKS_NOT_MET == "RequiredNodeBlocksNotMet"
    assert runapi.check_reason(REASON_BLOCKS_NOT_MET) == REASON_BLOCKS_NOT_MET
    assert runapi.NOT_RECOMMENDED == {"NoFragmentation", "InsufficientImprovement", "RequiredNodeBlocksNotMet",
                                      "TargetAlreadyFits", "TargetCannotFit"}
    p = dataclasses.replace(_plan(), outcome=REASON_BLOCKS_NOT_MET, moves=(), freed_nodes=(),
                            message="1 of 3 required block(s) of 2 node(s) in tier-1 HyperNodes",
                            node_blocks=NodeBlocks(tier=1, size=2, required=3, mode="", before=0, after=1))
    st = {}
    mark_started(st, p, "now", "deadline")
    assert st["phase"] == "Succeeded" and "relocations" not in st and "executionDeadline" not in st
    assert RunView({"status": st}).reason == REASON_BLOCKS_NOT_MET
    assert st["message"].endswith("nothing was evicted")
    assert st["plan"]["summary"]["nodeBlocks"] == {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 1}
    assert plan_status(p)["conditions"][0]["reason"] == REASON_BLOCKS_NOT_MET


@pytest.mark.parametrize("outcome", ["TargetAlreadyFits", "TargetCannotFit"])
def test_a_targeted_run_that_needs_no_move_or_finds_none_evicts_nothing(outcome):
    """RELIEF-2: like the other not-recommended outcomes, an Execute's live re-plan ending
    TargetAlreadyFits or TargetCannotFit is Succeeded with no records; the target's fit goes into
    status.plan.summary.target."""
    import dataclasses

    from kubectl_repack.api.status import mark_started
    from planner.plan_types import TargetFit

    fit = TargetFit(("ns/pg",), outcome == "TargetAlreadyFits", (("ns/p-0", "n1"),) if outcome == "TargetAlreadyFits" else ())
    p = dataclasses.replace(_plan(), outcome=outcome, moves=(), freed_nodes=(), message="why", target=fit)
    st = {}
    mark_started(st, p, "now", "deadline")
    assert st["phase"] == "Succeeded" and "relocations" not in st
    assert RunView({"status": st}).reason == outcome
    assert st["plan"]["summary"]["target"]["podGroups"] == ["ns/pg"]


def test_a_targeted_run_without_goals_takes_its_resource_from_its_plan():
    """The executor verifies the run on goal_resource: a targeted run may name no goal (RELIEF-2),
    so the resource its plan made room in is read from status.plan.summary.target (without it the
    verification saw no provider at all and called every planned node not freed)."""
    from planner import load_objects, plan
    from tests.unit.planner.test_relief import seed, target_spec

    p = plan(load_objects(seed()), target_spec("default/large-pg", goals=False))
    run = {"spec": target_spec("default/large-pg", goals=False), "status": {"plan": plan_status(p)["plan"]}}
    assert RunView(run).goal_resource == "huawei.com/ascend-1980"
