"""SEC-1/SEC-2 on the controller's side, over in-memory ports (the attacks on the real API server are
in tests/e2e/test_security_runs.py): a status writer can neither restart a finished run nor have a
started one planned again, a resumed run acts on a fresh creator record only, annotations read
after the first eviction never leave a run halfway, and a DryRun shows nothing of a namespace its
creator may not evict in."""
from __future__ import annotations

import copy
import datetime as dt
import json

import pytest

from kubectl_repack.api.control import (RUN_STATE_ANNOTATION, STATE_FINISHED, STATE_STARTED, BadStateMark, RunState,
                                        read_state_mark, settled_outcomes, state_disagreement, state_mark)
from kubectl_repack.api.status import HIDDEN, redact
from tests import builders as b
from tests.unit.engine.fakes import execute_run, seed_objects
from tests.unit.webhook.controller.test_controller import (KEY, dry_run, make, recorded, stamped, tick,
                                                           two_namespaces)


def failed(c):
    return [x["reason"] for x in c["conditions"] if x["type"] == "Failed" and x["status"] == "True"]


# ---- the mark itself --------------------------------------------------------------------------------
def test_a_mark_verifies_for_its_own_run_only_and_not_once_edited():
    state = RunState(STATE_FINISHED, "2026-07-30T08:10:00Z", "Failed", "EvictionBlocked", ("Rejected", "Rejected"))
    run = {"metadata": {"uid": "u1", "annotations": {RUN_STATE_ANNOTATION: state_mark(KEY, "u1", state)}}}
    assert read_state_mark(run, KEY) == state
    assert read_state_mark({"metadata": {"uid": "u1"}}, KEY) is None
    other = copy.deepcopy(run)
    other["metadata"]["uid"] = "u2"                               # another run's mark, copied over
    edited = copy.deepcopy(run)
    value = json.loads(edited["metadata"]["annotations"][RUN_STATE_ANNOTATION])
    value["state"] = STATE_STARTED                                # "finished" turned back into "started"
    edited["metadata"]["annotations"][RUN_STATE_ANNOTATION] = json.dumps(value)
    for bad in (other, edited):
        with pytest.raises(BadStateMark, match="does not match its seal"):
            read_state_mark(bad, KEY)
    with pytest.raises(BadStateMark, match="not JSON"):
        read_state_mark({"metadata": {"uid": "u1", "annotations": {RUN_STATE_ANNOTATION: "Finished"}}}, KEY)
    with pytest.raises(BadStateMark):
        read_state_mark(run, b"k" * 32)                            # not the controller's key


def test_state_disagreement_names_what_the_status_changed():
    done = RunState(STATE_FINISHED, "", "Failed", "EvictionBlocked", ("Rejected",))
    status = {"phase": "Failed", "conditions": [{"type": "Failed", "status": "True", "reason": "EvictionBlocked"}],
              "relocations": [{"eviction": {"phase": "Rejected"}}]}
    assert state_disagreement({"status": status}, done) == ""
    running = dict(status, phase="Running")
    assert "status.phase Running" in state_disagreement({"status": running}, done)
    pending = copy.deepcopy(status)
    pending["relocations"][0]["eviction"]["phase"] = "Pending"
    assert "eviction phases" in state_disagreement({"status": pending}, done)
    later = RunState(STATE_STARTED, "2026-07-30T08:10:00Z")
    assert "executionDeadline 2026-08-30" in state_disagreement(
        {"status": {"executionDeadline": "2026-08-30T08:10:00Z"}}, later)


def test_redact_hides_keys_and_namespaces_outside_the_visible_ones():
    text = ("pod other/side-0: the run's creator may not evict pods in namespace other; PodGroup demo/train-pg "
            "blocks; create pods/eviction; nvidia.com/gpu")
    got = redact(text, {"demo"})
    assert "other" not in got and got.count(HIDDEN) == 2
    assert "PodGroup demo/train-pg" in got and "pods/eviction" in got and "nvidia.com/gpu" in got


# ---- finding 1 (A): a finished run stays finished ---------------------------------------------------------
def opted_out_and_failed():
    """An Execute the controller ended Failed with both records Rejected (its PodGroup opted out)."""
    ctl, store, cluster, *rest = make([stamped(execute_run())])
    ctl.pod_group_opt_out = lambda ns, group: f"PodGroup {ns}/{group} is annotated repack.volcano.sh/do-not-disrupt=true"
    tick(ctl)
    ctl.pod_group_opt_out = lambda ns, group: ""                  # the owner changed their mind since
    run = store.runs["run-1"]
    assert run["status"]["phase"] == "Failed" and cluster.calls == []
    assert read_state_mark(run, KEY) == RunState(STATE_FINISHED, run["status"]["executionDeadline"], "Failed",
                                                 failed(run["status"])[0], ("Rejected", "Rejected"))
    return ctl, store, cluster


def test_a_status_writer_cannot_restart_a_failed_run():
    ctl, store, cluster = opted_out_and_failed()
    before = copy.deepcopy(store.runs["run-1"]["status"])
    st = store.runs["run-1"]["status"]                            # what `update repackruns/status` can write
    st["phase"] = "Running"
    st["conditions"] = [{"type": "Progressing", "status": "True", "reason": "Executing", "message": "go"}]
    for r in st["relocations"]:
        r["eviction"] = {"phase": "Pending"}
    st["executionDeadline"] = "2099-01-01T00:00:00Z"
    ctl.clock.t += dt.timedelta(minutes=5)
    seen = recorded(ctl)
    tick(ctl)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert cluster.calls == [], "nothing is evicted on a rewritten status"
    assert st["phase"] == "Failed" and failed(st) == failed(before)
    assert [r["eviction"]["phase"] for r in st["relocations"]] == ["Rejected", "Rejected"]
    assert "restored from annotation repack.volcano.sh/run-state" in st["message"]
    assert any(r == "StatusRestored" for r, _ in seen)


# ---- finding 1 (B): a started run is never planned again -------------------------------------------------
def test_clearing_a_succeeded_runs_status_does_not_execute_it_again():
    ctl, store, cluster, *_ = make([stamped(execute_run())])
    tick(ctl)
    assert store.runs["run-1"]["status"]["phase"] == "Succeeded" and len(cluster.calls) == 2
    store.runs["run-1"]["status"] = {}
    tick(ctl)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert len(cluster.calls) == 2, "one authorization, one set of evictions"
    assert st["phase"] == "Succeeded" and "never resumed" in st["message"]


def interrupted(objects=None):
    """An Execute that evicted its first victim, then lost leadership (records: Accepted, Pending)."""
    ctl, store, cluster, *rest = make([stamped(execute_run())], objects=objects)
    leading = iter([True] * 2 + [False])
    ctl.leading = lambda: None if next(leading, False) else "this controller is no longer the leader"
    tick(ctl)
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]
    assert read_state_mark(store.runs["run-1"], KEY).state == STATE_STARTED
    ctl.leading = lambda: None
    return ctl, store, cluster


def test_a_started_run_whose_records_were_cleared_is_not_planned_again():
    ctl, store, cluster = interrupted()
    store.runs["run-1"]["status"] = {}
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert [c[0] for c in cluster.calls] == ["train-worker-0"] and "plan" not in st
    assert st["phase"] == "Failed" and failed(st) == ["RelocationRecordsInvalid"]
    assert "never planned again" in st["message"]


def test_a_started_run_whose_deadline_was_moved_evicts_nothing_further_and_settles_every_record():
    ctl, store, cluster = interrupted()
    st = store.runs["run-1"]["status"]
    st["executionDeadline"] = "2099-01-01T00:00:00Z"
    st["relocations"][1]["eviction"] = {"phase": "InProgress"}    # as a crash leaves it: the call may have gone
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]
    assert st["phase"] == "Failed" and failed(st) == ["RelocationRecordsInvalid"]
    assert "executionDeadline 2099-01-01T00:00:00Z is not the" in st["message"]
    assert [r["eviction"]["phase"] for r in st["relocations"]] == ["Accepted", "Pending"]   # the victim still runs
    assert "the run ended (RelocationRecordsInvalid) before" in st["relocations"][1]["eviction"]["message"]


def test_a_resumed_run_needs_a_fresh_creator_record_too():
    ctl, store, cluster = interrupted()
    ctl.clock.t += dt.timedelta(hours=2)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]
    assert st["phase"] == "Failed" and failed(st) == ["EvictionNotAuthorized"]
    assert "older than the 1h00m" in st["message"] and "nothing further was evicted" in st["message"]


# ---- finding 7: annotations read after the first eviction never end a run halfway -------------------------
@pytest.mark.parametrize("annotation,value,read", [("repack.volcano.sh/execution-timeout", "soon", True),
                                                   ("repack.volcano.sh/execute-cooldown", "876000000h", True),
                                                   ("repack.volcano.sh/window-end", "tonight", False)])
def test_a_bad_annotation_on_a_started_run_is_ignored_and_the_run_goes_on(annotation, value, read):
    """A window's end matters before the first eviction only (it caps the deadline the run starts
    with): once started it is not read at all; the durations are, and a bad one is ignored."""
    ctl, store, cluster = interrupted()
    store.runs["run-1"]["metadata"]["annotations"][annotation] = value
    seen = recorded(ctl)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert st["phase"] == "Succeeded", st["message"]
    assert [c[0] for c in cluster.calls] == ["train-worker-0", "train-worker-1"]
    assert all(r["eviction"]["phase"] == "Accepted" for r in st["relocations"])
    assert any(r == "AnnotationIgnored" and annotation in m for r, m in seen) == read, seen


# ---- finding 6: a DryRun shows only what its creator may evict ------------------------------------------
def test_a_dry_run_names_nothing_of_a_namespace_its_creator_may_not_evict_in():
    ctl, store, cluster, _, _, asked = make([dry_run()], objects=two_namespaces(), denied_namespaces={"other"})
    seen = recorded(ctl)
    tick(ctl)
    st = store.runs["dry-1"]["status"]
    text = json.dumps(st)
    assert st["phase"] == "Succeeded" and cluster.calls == []
    assert "side" not in text and "other" not in text.replace("left out", ""), text   # pods, PodGroup, namespace
    assert {m["namespace"] for m in st["plan"]["moves"]} == {"demo"}
    assert "left out: pods in 1 namespace(s) where alice may not evict" in st["message"]
    assert ("PodsLeftOut", st["message"].split("; ", 1)[1]) in seen or any(r == "PodsLeftOut" for r, _ in seen)
    assert asked == [("alice", ["demo"]), ("alice", ["other"])]


def test_a_dry_run_of_a_creator_who_may_evict_nowhere_gets_no_plan():
    ctl, store, cluster, _, _, asked = make([dry_run(), dry_run("dry-bare")], objects=two_namespaces(),
                                            denied_namespaces={"demo", "other"})
    store.runs["dry-bare"]["metadata"]["annotations"] = {}
    tick(ctl)
    for name, words in (("dry-1", "may create pods/eviction in none of the 2 namespace(s)"),
                        ("dry-bare", "no trustworthy creator record")):
        st = store.runs[name]["status"]
        assert st["phase"] == "Failed" and failed(st) == ["EvictionNotAuthorized"] and "plan" not in st
        assert words in st["message"] and "demo" not in st["message"] and "other" not in st["message"], st["message"]


def test_an_executes_verification_names_only_what_lies_where_the_run_moved_or_aims():
    """After the evictions: the workloads that took a vacated node, and the pods that still hold a
    planned one, are named only in the namespaces the run moved pods in (or aims at)."""
    from kubectl_repack.engine.outcome import Verification, scoped_verification, taken_messages, vacated_nodes

    ver = Verification(0, (), ("n2",), 1, 1, True, taken={"n1": ("other/waiting-0", "demo/replacement-0")},
                       vacated={"n1": ("other/waiting", "demo/train")}, held={"n2": ("other/stuck-0",)})
    got = scoped_verification(ver, {"demo"})
    assert got.vacated == {"n1": (HIDDEN, "demo/train")} and got.held == {"n2": (HIDDEN,)}
    assert got.taken == {"n1": (HIDDEN, "demo/replacement-0")}
    shown = json.dumps([vacated_nodes(got), taken_messages(got)])
    assert "other" not in shown and "demo/train" in shown
    assert scoped_verification(None, {"demo"}) is None


# ---- finding 1, while a run is going: every settled outcome is sealed as it settles --------------------
def side_gang_first():
    """The seed plus a one-card gang `side` alone on n4 and room on n5: the plan moves demo/side-pg
    first, then the training gang."""
    objs = seed_objects() + [b.node("n4"), b.node("n5")] + b.gang("side", ns="demo", workers=["n4"],
                                                                       labels={"app": "side"})
    objs.append(b.pod("fixed-n5", cards=6, on="n5", ns="demo", scheduler="default-scheduler",
                      owner=("ReplicaSet", "fixed-n5-abc")))
    for o in objs:
        if o["kind"] == "Pod":
            o["metadata"]["creationTimestamp"] = "2026-07-30T07:00:00Z"
    return objs


def side_rejected_then_interrupted():
    """An Execute whose first PodGroup (side-pg) was Rejected (it opted out), then the controller
    lost leadership before evicting the second: a started run, to be continued."""
    ctl, store, cluster, *_ = make([stamped(execute_run())], objects=side_gang_first())
    cluster.rebind["side-worker-0"] = "n2"
    ctl.pod_group_opt_out = lambda ns, group: (f"PodGroup {ns}/{group} is annotated repack.volcano.sh/"
                                               "do-not-disrupt=true" if group == "side-pg" else "")
    ctl.leading = lambda: "this controller is no longer the leader"
    tick(ctl)
    run = store.runs["run-1"]
    phases = [(r["victimPodName"], r["eviction"]["phase"]) for r in run["status"]["relocations"]]
    assert phases == [("side-worker-0", "Rejected"), ("train-worker-0", "Pending"), ("train-worker-1", "Pending")]
    assert cluster.calls == [] and run["status"]["phase"] == "Running"
    mark = read_state_mark(run, KEY)
    assert mark.state == STATE_STARTED and settled_outcomes(mark.evictions) == {0: "Rejected"}
    ctl.leading = lambda: None
    ctl.pod_group_opt_out = lambda ns, group: ""                   # the owner changed their mind since
    return ctl, store, cluster


def test_a_rejected_record_turned_back_to_pending_is_restored_and_not_evicted_when_the_run_continues():
    ctl, store, cluster = side_rejected_then_interrupted()
    store.runs["run-1"]["status"]["relocations"][0]["eviction"] = {"phase": "Pending"}   # the status writer
    seen = recorded(ctl)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert [c[0] for c in cluster.calls] == ["train-worker-0", "train-worker-1"], "side-worker-0 is not evicted"
    assert [r["eviction"]["phase"] for r in st["relocations"]] == ["Rejected", "Accepted", "Accepted"]
    assert st["relocations"][0]["eviction"]["message"] == f"restored from annotation {RUN_STATE_ANNOTATION}"
    assert any(r == "StatusRestored" and "demo/side-worker-0" in m for r, m in seen), seen
    assert read_state_mark(store.runs["run-1"], KEY).evictions == ("Rejected", "Accepted", "Accepted")


def test_a_settled_record_rewritten_while_the_run_waits_is_not_counted_and_the_run_ends_on_the_sealed_outcome():
    """The status writer acts while the run waits on a PDB's 429s for the training gang: the side
    record goes back to Pending; the run never evicts it and ends with it Rejected, as sealed."""
    ctl, store, cluster = side_rejected_then_interrupted()
    cluster.responses["train-worker-0"] = [429, 429]

    def rewrite(name):
        if len(cluster.calls) == 2:
            store.runs["run-1"]["status"]["relocations"][0]["eviction"] = {"phase": "Pending"}
    cluster.on_evict = rewrite
    seen = recorded(ctl)
    tick(ctl)
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert [c[0] for c in cluster.calls] == ["train-worker-0"] * 3 + ["train-worker-1"]
    assert [r["eviction"]["phase"] for r in st["relocations"]] == ["Rejected", "Accepted", "Accepted"]
    assert st["phase"] == "Failed" and failed(st) == ["EvictionRejected"], st["message"]
    assert any(r == "StatusRestored" and "demo/side-worker-0" in m for r, m in seen), seen
    assert read_state_mark(store.runs["run-1"], KEY).evictions == ("Rejected", "Accepted", "Accepted")


def test_an_outcome_sealed_right_before_a_crash_wins_over_the_write_ahead_left_in_the_status():
    """The mark is written before the status that settles a record: a crash between the two leaves
    the record InProgress in the status and Rejected in the mark; the continued run keeps Rejected."""
    ctl, store, cluster = side_rejected_then_interrupted()
    store.runs["run-1"]["status"]["relocations"][0]["eviction"] = {"phase": "InProgress"}
    tick(ctl)
    st = store.runs["run-1"]["status"]
    assert [c[0] for c in cluster.calls] == ["train-worker-0", "train-worker-1"]
    assert st["relocations"][0]["eviction"]["phase"] == "Rejected"


def test_each_eviction_costs_one_mark_write_and_a_rejected_pod_group_one_in_all():
    ctl, store, cluster = side_rejected_then_interrupted()
    writes = []
    annotate = store.annotate
    store.annotate = lambda name, key, value, **kw: (writes.append(json.loads(value)["evictions"])
                                                     if key == RUN_STATE_ANNOTATION else None,
                                                     annotate(name, key, value, **kw))[1]
    tick(ctl)
    assert writes == [["Rejected", "Accepted"], ["Rejected", "Accepted", "Accepted"],
                      ["Rejected", "Accepted", "Accepted"]]   # two evictions, then the Finished mark
