"""NOM-1: which new pod replaces which open relocation record."""
from __future__ import annotations

import pytest

from tests.unit.webhook.builders import (move, ms_pod, owner, pod, relocation, rs_pod, run, vcjob_pod)
from kubectl_repack.api.matching import RULE_CONTROLLER, RULE_SAME_NAME, RULE_SERVING_ROLE, match, match_identity, pod_identity
from kubectl_repack.api.relocations import RelocationIndex

JOB = owner("Job", "train")
STS = owner("StatefulSet", "db")
RS = owner("ReplicaSet", "web-7f8d9c")
MS = owner("ModelServing", "serve")


def index_of(*runs) -> RelocationIndex:
    return RelocationIndex.from_runs(runs)


VCJOB_RUN = run(relocations=[relocation("train-worker-0", group="train-pg"),
                             relocation("train-worker-1", group="train-pg", planned="node-c")],
                moves=[move("demo", "train-pg", JOB, ["train-worker-0", "train-worker-1"])])
STS_RUN = run(relocations=[relocation("db-1", group="db-pg")], moves=[move("demo", "db-pg", STS, ["db-1"])])
RS_RUN = run(relocations=[relocation("web-7f8d9c-x2k4p", group="podgroup-rs-uid")],
             moves=[move("demo", "podgroup-rs-uid", RS, ["web-7f8d9c-x2k4p"])])
MS_RUN = run(relocations=[relocation("serve-0-inference-0-1", group="serve-0")],
             moves=[move("demo", "serve-0", MS, ["serve-0-inference-0-1"])])


# (id, run, pod, expected victim or None, expected rule, expected replacement PodGroup)
CASES = [
    ("vcjob-same-name", VCJOB_RUN, vcjob_pod("train-worker-1", "train", "worker", group="train-pg"),
     "train-worker-1", RULE_SAME_NAME, ""),
    ("vcjob-same-name-without-plan-owner", run(relocations=[relocation("train-worker-0")]),
     vcjob_pod("train-worker-0", "train", "worker"), "train-worker-0", RULE_SAME_NAME, ""),
    ("statefulset-same-name", STS_RUN, pod("db-1", ctrl=STS), "db-1", RULE_SAME_NAME, ""),
    ("statefulset-same-name-derived-owner", run(relocations=[relocation("db-1")]), pod("db-1", ctrl=STS),
     "db-1", RULE_SAME_NAME, ""),
    ("replicaset-new-name-owner-and-hash", RS_RUN, rs_pod("web-7f8d9c", "7f8d9c"),
     "web-7f8d9c-x2k4p", RULE_CONTROLLER, ""),
    ("replicaset-owner-derived-from-victim-name", run(relocations=[relocation("web-7f8d9c-x2k4p")]),
     rs_pod("web-7f8d9c", "7f8d9c"), "web-7f8d9c-x2k4p", RULE_CONTROLLER, ""),
    ("replicaset-plan-owner-is-deployment", run(relocations=[relocation("web-7f8d9c-x2k4p", group="g")],
                                                moves=[move("demo", "g", owner("Deployment", "web"), [])]),
     rs_pod("web-7f8d9c", "7f8d9c"), "web-7f8d9c-x2k4p", RULE_CONTROLLER, ""),
    ("modelserving-group-recreated-same-names", MS_RUN, ms_pod("serve", 0, "inference", 0, 1),
     "serve-0-inference-0-1", RULE_SAME_NAME, ""),
    ("modelserving-group-recreated-new-podgroup", MS_RUN, ms_pod("serve", 3, "inference", 0, 1),
     "serve-0-inference-0-1", RULE_SERVING_ROLE, "serve-3"),
    ("modelserving-without-plan-owner", run(relocations=[relocation("serve-0-inference-0-1", group="serve-0")]),
     ms_pod("serve", 2, "inference", 0, 1), "serve-0-inference-0-1", RULE_SERVING_ROLE, "serve-2"),
    # --- no match
    ("other-namespace", VCJOB_RUN, vcjob_pod("train-worker-1", "train", "worker", ns="other"), None, None, None),
    ("other-vcjob-same-pod-name", VCJOB_RUN, vcjob_pod("train-worker-1", "other", "worker"), None, None, None),
    ("replicaset-other-owner", RS_RUN, rs_pod("api-5c6d7e", "5c6d7e"), None, None, None),
    ("replicaset-other-template", RS_RUN, rs_pod("web-99aa11", "99aa11"), None, None, None),
    ("replicaset-hash-label-disagrees", RS_RUN, rs_pod("web-7f8d9c", "0000000"), None, None, None),
    ("statefulset-other-owner", STS_RUN, pod("db-1", ctrl=owner("StatefulSet", "cache")), None, None, None),
    ("modelserving-entry-does-not-take-worker-record", MS_RUN, ms_pod("serve", 3, "inference", 0, 0),
     None, None, None),
    ("modelserving-other-role", MS_RUN, ms_pod("serve", 3, "prefill", 0, 1), None, None, None),
    ("modelserving-other-modelserving", MS_RUN, ms_pod("other", 0, "inference", 0, 1), None, None, None),
    ("bare-pod-same-name", STS_RUN, pod("db-1"), None, None, None),
    ("default-scheduler-pod", STS_RUN, pod("db-1", ctrl=STS, scheduler="default-scheduler"), None, None, None),
    ("already-bound-pod", STS_RUN, pod("db-1", ctrl=STS, node="node-a"), None, None, None),
    ("dryrun-run-ignored", run(mode="DryRun", relocations=[relocation("db-1")]), pod("db-1", ctrl=STS),
     None, None, None),
    ("finished-run-ignored", run(phase="Succeeded", relocations=[relocation("db-1")]), pod("db-1", ctrl=STS),
     None, None, None),
    ("eviction-rejected-ignored", run(relocations=[relocation("db-1", eviction="Rejected")]),
     pod("db-1", ctrl=STS), None, None, None),
    ("eviction-pending-ignored", run(relocations=[relocation("db-1", eviction="Pending")]),
     pod("db-1", ctrl=STS), None, None, None),
    ("replacement-already-recorded", run(relocations=[relocation("db-1", replacement="db-1")]),
     pod("db-1", ctrl=STS), None, None, None),
    ("placement-already-past-waiting", run(relocations=[relocation("db-1", placement="Nominated")]),
     pod("db-1", ctrl=STS), None, None, None),
]


@pytest.mark.parametrize("the_run,the_pod,victim,rule,new_group",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_match_table(the_run, the_pod, victim, rule, new_group):
    found = match(the_pod, index_of(the_run))
    if victim is None:
        assert found is None
        return
    assert found is not None
    assert found.record.victim_pod_name == victim
    assert found.rule == rule
    assert found.replacement_pod_group_name == new_group


@pytest.mark.parametrize("eviction", ["Accepted", "InProgress", "IndirectlyRemoved"])
def test_open_eviction_phases_match(eviction):
    the_run = run(relocations=[relocation("db-1", eviction=eviction)])
    assert match(pod("db-1", ctrl=STS), index_of(the_run)).record.eviction_phase == eviction


def test_claimed_record_is_skipped_for_the_next_record():
    the_run = run(relocations=[relocation("web-7f8d9c-aaaaa", group="g"), relocation("web-7f8d9c-bbbbb", group="g")],
                  moves=[move("demo", "g", RS, ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"])])
    index = index_of(the_run)
    first = match(rs_pod("web-7f8d9c", "7f8d9c"), index)
    assert first.record.victim_pod_name == "web-7f8d9c-aaaaa"
    index = index.with_claims([first.record.key])
    second = match(rs_pod("web-7f8d9c", "7f8d9c"), index)
    assert second.record.victim_pod_name == "web-7f8d9c-bbbbb"
    index = index.with_claims([first.record.key, second.record.key])
    # Every record claimed: a claim only orders the choice (SEC-5: claims come from admission
    # requests, which anyone reaching the port can forge), so the oldest is handed out again and the
    # coordinator records whichever pod it observes first.
    assert match(rs_pod("web-7f8d9c", "7f8d9c"), index).record.victim_pod_name == "web-7f8d9c-aaaaa"
    assert match_identity(pod_identity(rs_pod("web-7f8d9c", "7f8d9c")), index) is None


def test_a_claimed_same_name_record_still_matches_its_replacement():
    index = index_of(STS_RUN)
    found = match(pod("db-1", ctrl=STS), index)
    assert match(pod("db-1", ctrl=STS), index.with_claims([found.record.key])).record == found.record


def test_oldest_eviction_first_across_runs_and_records():
    older = run("run-a", created="2026-07-30T09:00:00Z",
                relocations=[relocation("web-7f8d9c-ooooo", planned="node-old")])
    newer = run("run-b", created="2026-07-30T10:00:00Z",
                relocations=[relocation("web-7f8d9c-nnnnn", planned="node-new")])
    # listing order must not matter: creationTimestamp then record order decide
    found = match(rs_pod("web-7f8d9c", "7f8d9c"), index_of(newer, older))
    assert (found.record.run_name, found.record.planned_node_name) == ("run-a", "node-old")


def test_exact_name_beats_an_older_derived_match():
    the_run = run(relocations=[relocation("serve-0-inference-0-1", group="serve-0"),
                               relocation("serve-1-inference-0-1", group="serve-1")],
                  moves=[move("demo", "serve-0", MS, ["serve-0-inference-0-1"]),
                         move("demo", "serve-1", MS, ["serve-1-inference-0-1"])])
    found = match(ms_pod("serve", 1, "inference", 0, 1), index_of(the_run))
    assert found.record.victim_pod_name == "serve-1-inference-0-1"
    assert found.rule == RULE_SAME_NAME


def test_vcjob_other_task_does_not_take_the_record_by_controller_rule():
    the_run = run(relocations=[relocation("train-worker-0", group="train-pg")],
                  moves=[move("demo", "train-pg", JOB, ["train-worker-0"])])
    assert match(vcjob_pod("train-ps-0", "train", "ps"), index_of(the_run)) is None
