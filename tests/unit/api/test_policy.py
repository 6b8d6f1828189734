"""RepackPolicy decisions (POLICY-1, POLICY-2), pure: cron slots with time zones and DST, a missed slot running
once, maintenance windows, history pruning, the moved-workload record of minWorkloadInterval, the
pending-blocked clock after TargetCannotFit, the run a policy creates, and field-naming errors."""
from __future__ import annotations

import datetime as dt

import pytest

from kubectl_repack.api import policy as P

UTC = dt.timezone.utc


def t(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def policy_obj(name="nightly", created="2026-01-01T00:00:00Z", annotations=None, **spec):
    spec.setdefault("trigger", {"cronSchedule": "0 2 * * *"})
    spec.setdefault("runTemplate", {"spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}]}})
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackPolicy",
            "metadata": {"name": name, "uid": "uid-1", "generation": 1, "creationTimestamp": created,
                         "annotations": annotations or {}},
            "spec": spec}


def parsed(**spec):
    return P.parse_policy(policy_obj(**spec))


# --- cron slots -----------------------------------------------------------------------------------
@pytest.mark.parametrize("cron,tz,anchor,now,due", [
    # the latest slot after the anchor, at or before now
    ("0 2 * * *", "", "2026-03-01T00:00:00Z", "2026-03-01T02:00:00Z", "2026-03-01T02:00:00Z"),
    ("0 2 * * *", "", "2026-03-01T00:00:00Z", "2026-03-01T01:59:59Z", None),
    # slot already consumed
    ("0 2 * * *", "", "2026-03-01T02:00:00Z", "2026-03-01T09:00:00Z", None),
    # a controller down for three days: one slot (the latest), not three
    ("0 2 * * *", "", "2026-03-01T02:00:00Z", "2026-03-04T09:00:00Z", "2026-03-04T02:00:00Z"),
    ("*/1 * * * *", "", "2026-03-01T10:00:00Z", "2026-03-01T10:07:30Z", "2026-03-01T10:07:00Z"),
    # in a time zone: 02:00 in Berlin (UTC+1 in winter) is 01:00 UTC
    ("0 2 * * *", "Europe/Berlin", "2026-01-10T00:00:00Z", "2026-01-10T01:00:00Z", "2026-01-10T01:00:00Z"),
    ("0 2 * * *", "Europe/Berlin", "2026-01-10T00:00:00Z", "2026-01-10T00:59:00Z", None),
    # summer time: 02:00 Berlin is 00:00 UTC
    ("0 2 * * *", "Europe/Berlin", "2026-07-10T00:00:00Z", "2026-07-11T00:00:00Z", "2026-07-11T00:00:00Z"),
    # spring forward (2026-03-29 02:00 -> 03:00 in Berlin): 02:30 does not exist, it fires right after the gap
    ("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T01:00:00Z"),
    # fall back (2026-10-25 03:00 -> 02:00): 02:30 happens twice, it fires at the first (00:30 UTC) only
    ("30 2 * * *", "Europe/Berlin", "2026-10-24T12:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T00:30:00Z"),
    ("30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-25T01:45:00Z", None),
    ("@hourly", "", "2026-03-01T10:00:00Z", "2026-03-01T11:00:00Z", "2026-03-01T11:00:00Z"),
])
def test_cron_slot_due(cron, tz, anchor, now, due):
    p = parsed(trigger={"cronSchedule": cron}, **({"timeZone": tz} if tz else {}))
    got = P.cron_due(p, t(anchor), t(now))
    assert (got and got.astimezone(UTC)) == (t(due) if due else None)


def test_anchor_is_the_last_slot_else_the_creation():
    p = parsed(created="2026-03-01T05:00:00Z")
    assert P.cron_anchor(p, {}) == t("2026-03-01T05:00:00Z")
    assert P.cron_anchor(p, {"lastScheduleTime": "2026-03-02T02:00:00Z"}) == t("2026-03-02T02:00:00Z")
    # created after today's slot: the first run is tomorrow's, not one for the slot before it existed
    assert P.cron_due(p, P.cron_anchor(p, {}), t("2026-03-01T06:00:00Z")) is None


@pytest.mark.parametrize("cron,tz,now,nxt", [
    ("0 2 * * *", "", "2026-03-01T02:00:00Z", "2026-03-02T02:00:00Z"),
    ("0 2 * * *", "America/New_York", "2026-01-05T12:00:00Z", "2026-01-06T07:00:00Z"),
    ("30 2 * * *", "Europe/Berlin", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"),   # not the repeated 02:30
])
def test_next_trigger_time(cron, tz, now, nxt):
    p = parsed(trigger={"cronSchedule": cron}, **({"timeZone": tz} if tz else {}))
    assert P.next_cron(p, t(now)) == t(nxt)


# --- windows --------------------------------------------------------------------------------------
@pytest.mark.parametrize("windows,now,is_open,end,next_open", [
    ([], "2026-03-01T12:00:00Z", True, None, None),
    ([{"schedule": "0 2 * * *", "duration": "2h"}], "2026-03-01T02:00:00Z", True, "2026-03-01T04:00:00Z", None),
    ([{"schedule": "0 2 * * *", "duration": "2h"}], "2026-03-01T03:59:59Z", True, "2026-03-01T04:00:00Z", None),
    # t <= now < t + duration: the end itself is outside
    ([{"schedule": "0 2 * * *", "duration": "2h"}], "2026-03-01T04:00:00Z", False, None, "2026-03-02T02:00:00Z"),
    ([{"schedule": "0 2 * * *", "duration": "2h"}], "2026-03-01T01:59:00Z", False, None, "2026-03-01T02:00:00Z"),
    # overlapping windows: the latest end
    ([{"schedule": "0 2 * * *", "duration": "2h"}, {"schedule": "0 3 * * *", "duration": "3h"}],
     "2026-03-01T03:30:00Z", True, "2026-03-01T06:00:00Z", None),
    # a window longer than its period: the earlier opening still covers now
    ([{"schedule": "0 * * * *", "duration": "90m"}], "2026-03-01T10:10:00Z", True, "2026-03-01T11:30:00Z", None),
])
def test_window_state(windows, now, is_open, end, next_open):
    p = parsed(windows=windows)
    w = P.window_state(p, t(now))
    assert (w.open, w.end, w.next_open) == (is_open, t(end) if end else None, t(next_open) if next_open else None)


def test_window_in_a_time_zone():
    p = parsed(windows=[{"schedule": "0 22 * * 1-5", "duration": "8h"}], timeZone="Asia/Tokyo")
    # Monday 22:00 Tokyo = 13:00 UTC; Tuesday 03:00 Tokyo = Monday 18:00 UTC
    assert P.window_state(p, t("2026-03-02T18:00:00Z")).end == t("2026-03-02T21:00:00Z")
    assert not P.window_state(p, t("2026-03-02T12:00:00Z")).open


# --- runs of a policy, history --------------------------------------------------------------------
def run(name, phase="", created="2026-03-01T00:00:00Z", uid="uid-1", completed=None, reason="", **spec):
    status = {"phase": phase} if phase else {}
    if completed:
        status["completionTime"] = completed
    if reason:
        status["conditions"] = [{"type": "Complete" if phase == "Succeeded" else "Failed", "status": "True",
                                 "reason": reason}]
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun",
            "metadata": {"name": name, "uid": f"u-{name}", "creationTimestamp": created,
                         "labels": {P.TRIGGER_LABEL: "cronSchedule", P.POLICY_LABEL: "nightly"},
                         "ownerReferences": [{"kind": "RepackPolicy", "uid": uid, "name": "nightly"}]},
            "spec": spec or {"mode": "Execute"}, "status": status}


def test_runs_of_a_policy_are_those_it_owns():
    runs = [run("a"), run("b", uid="other-incarnation"), run("c")]
    assert [r["metadata"]["name"] for r in P.runs_of(parsed().uid, "nightly", runs)] == ["a", "c"]


def test_a_run_with_only_an_owner_reference_is_not_the_policys():
    """Policy squatting: anybody may write an ownerReference to a policy on a run they create; only
    the controller's mark (the label, vouched for by admission) makes it one of the policy's runs."""
    squatter, other_name = run("squat"), run("other")
    del squatter["metadata"]["labels"][P.POLICY_LABEL]
    other_name["metadata"]["labels"][P.POLICY_LABEL] = "another-policy"
    assert P.runs_of(parsed().uid, "nightly", [squatter, other_name, run("mine")]) == [run("mine")]


@pytest.mark.parametrize("phases,succ,fail,deleted", [
    (["Succeeded"] * 3, 3, 3, []),
    (["Succeeded"] * 4, 3, 3, ["r0"]),
    (["Succeeded", "Failed", "Succeeded", "Failed", "Succeeded"], 1, 1, ["r0", "r1", "r2"]),
    (["Succeeded", "Running", "Failed"], 0, 0, ["r0", "r2"]),      # an unfinished run is never deleted
    (["Failed", "Failed", "Succeeded"], 3, 0, ["r0", "r1"]),
])
def test_history_to_delete(phases, succ, fail, deleted):
    owned = [run(f"r{i}", p, created=f"2026-03-01T00:0{i}:00Z") for i, p in enumerate(phases)]
    assert [r["metadata"]["name"] for r in P.history_to_delete(owned, succ, fail)] == deleted


def test_unfinished_and_the_newest_finished():
    owned = [run("a", "Succeeded", completed="2026-03-01T01:00:00Z"), run("b", "Failed", completed="2026-03-01T02:00:00Z"),
             run("c", "Pending")]
    assert [r["metadata"]["name"] for r in P.unfinished(owned)] == ["c"]
    assert P.newest_finished(owned)["metadata"]["name"] == "b"


def test_last_run_status_summarises_the_run():
    r = run("a", "Succeeded", completed="2026-03-01T01:00:00Z", reason="ExecutionCompleted", mode="Execute",
            goals=[{"resource": "huawei.com/ascend-1980"}])
    r["status"]["result"] = {"freedNodeCount": 1, "fragAfterPercent": 0, "relocations": "not copied"}
    got = P.last_run_status(r)
    assert got == {"name": "a", "mode": "Execute", "trigger": "cronSchedule", "phase": "Succeeded",
                   "reason": "ExecutionCompleted", "message": "", "resource": "huawei.com/ascend-1980",
                   "completionTime": "2026-03-01T01:00:00Z", "result": {"fragAfterPercent": 0, "freedNodeCount": 1}}


# --- minWorkloadInterval --------------------------------------------------------------------------
def moved_run(name, start, records, moves):
    r = run(name, "Succeeded", mode="Execute")
    r["status"].update(startTime=start, relocations=records, plan={"moves": moves})
    return r


def test_moved_workloads_by_owner_newest_first():
    owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train"}
    runs = [
        moved_run("r1", "2026-03-01T01:00:00Z",
                  [{"namespace": "ns", "podGroupName": "train-abc", "eviction": {"phase": "Accepted"}},
                   {"namespace": "ns", "podGroupName": "other", "eviction": {"phase": "Rejected"}}],
                  [{"namespace": "ns", "podGroupName": "train-abc", "owner": owner}]),
        moved_run("r2", "2026-03-01T03:00:00Z",
                  [{"namespace": "ns", "podGroupName": "train-abc", "eviction": {"phase": "Accepted"}}],
                  [{"namespace": "ns", "podGroupName": "train-abc", "owner": owner}]),
    ]
    dry = run("d", "Succeeded", mode="DryRun")   # a DryRun moves nothing
    got = P.moved_workloads(runs + [dry])
    assert got == [{"namespace": "ns", "podGroupName": "train-abc", "movedAt": "2026-03-01T03:00:00Z", "run": "r2",
                    "owner": owner}]


def test_record_outlives_the_runs_and_expires_with_the_interval():
    entry = {"namespace": "ns", "podGroupName": "train-abc", "movedAt": "2026-03-01T03:00:00Z", "run": "r2",
             "owner": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train"}}
    hour = dt.timedelta(hours=1)
    # the run is gone (TTL): the status keeps the entry while it is younger than the interval
    assert P.merge_moved([entry], [], t("2026-03-01T03:59:00Z"), hour) == [entry]
    assert P.merge_moved([entry], [], t("2026-03-01T04:00:00Z"), hour) == []
    newer = dict(entry, movedAt="2026-03-01T03:30:00Z", run="r3", podGroupName="train-def")
    assert P.merge_moved([entry], [newer], t("2026-03-01T03:40:00Z"), hour) == [newer]


def test_exclusions_follow_the_owner_to_a_recreated_podgroup():
    moved = [{"namespace": "ns", "podGroupName": "train-abc", "movedAt": "x",
              "owner": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train"}},
             {"namespace": "ns", "podGroupName": "bare", "movedAt": "x"}]
    podgroups = [("ns/train-def", "ns", "batch.volcano.sh", "Job", "train"),      # re-created by the same VCJob
                 ("ns/serve-1", "ns", "batch.volcano.sh", "Job", "serve"),
                 ("other/train-x", "other", "batch.volcano.sh", "Job", "train")]  # another namespace's "train"
    assert P.excluded_podgroups(moved, podgroups) == ["ns/bare", "ns/train-abc", "ns/train-def"]


# --- onPendingBlocked -----------------------------------------------------------------------------
@pytest.mark.parametrize("since,for_seconds,now,due", [
    ("2026-03-01T00:00:00Z", 60, "2026-03-01T00:00:59Z", False),
    ("2026-03-01T00:00:00Z", 60, "2026-03-01T00:01:00Z", True),
    ("2026-03-01T00:00:00Z", 0, "2026-03-01T00:00:00Z", True),
    (None, 0, "2026-03-01T00:00:00Z", False),
])
def test_blocked_for_long_enough(since, for_seconds, now, due):
    assert P.blocked_due({"podGroup": "ns/g", "blockedSince": since}, for_seconds, t(now)) is due


def test_after_target_cannot_fit_the_gang_waits_again():
    entries = [{"podGroup": "ns/big", "blockedSince": "2026-03-01T00:00:00Z"},
               {"podGroup": "ns/other", "blockedSince": "2026-03-01T00:00:00Z"}]
    failed = run("p-1", "Succeeded", completed="2026-03-01T00:05:00Z", reason="TargetCannotFit", mode="Execute",
                 target={"podGroups": ["ns/big"]})
    got = P.restart_after_cannot_fit(entries, [failed])
    assert got[0]["blockedSince"] == "2026-03-01T00:05:00Z" and got[1]["blockedSince"] == "2026-03-01T00:00:00Z"
    assert not P.blocked_due(got[0], 60, t("2026-03-01T00:05:30Z"))
    assert P.blocked_due(got[0], 60, t("2026-03-01T00:06:00Z"))


# --- the run a policy creates ---------------------------------------------------------------------
def test_build_run_name_labels_owner_creator_and_window():
    creator = {"repack.volcano.sh/creator-username": "alice", "repack.volcano.sh/creator-uid": "a1",
               "repack.volcano.sh/creator-groups": "team,system:authenticated"}
    obj = policy_obj(annotations=creator, runTemplate={
        "metadata": {"labels": {"team": "ml", P.POLICY_LABEL: "spoofed"},
                     "annotations": {"note": "x", "repack.volcano.sh/creator-username": "mallory",
                                     "repack.volcano.sh/executor": "local",
                                     "repack.volcano.sh/execute-cooldown": "5m"}},
        "spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}],
                 "scope": {"podGroups": {"exclude": {"names": ["ns/keep"]}}}}})
    p = P.parse_policy(obj)
    got = P.build_run(p, obj, P.TRIGGER_CRON, t("2026-03-01T02:00:07Z"), ["ns/moved", "ns/keep"],
                      t("2026-03-01T04:00:00Z"))
    meta = got["metadata"]
    assert meta["name"] == "nightly-20260301020007"
    assert meta["labels"] == {"team": "ml", P.POLICY_LABEL: "nightly", P.TRIGGER_LABEL: "cronSchedule"}
    assert meta["annotations"] == {"note": "x", "repack.volcano.sh/execute-cooldown": "5m",
                                   P.WINDOW_END_ANNOTATION: "2026-03-01T04:00:00Z", **creator}
    assert meta["ownerReferences"] == [{"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackPolicy",
                                        "name": "nightly", "uid": "uid-1", "controller": True,
                                        "blockOwnerDeletion": False}]
    assert got["spec"]["scope"]["podGroups"]["exclude"]["names"] == ["ns/keep", "ns/moved"]
    assert p.template_spec["scope"]["podGroups"]["exclude"]["names"] == ["ns/keep"]   # the template is untouched


def test_build_targeted_run():
    p = parsed(trigger={"onPendingBlocked": {"forSeconds": 0, "podGroupSelector": {}}},
               runTemplate={"spec": {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980",
                                                                    "minFragImprovementPercent": 10}],
                                     "networkTopology": {"hyperNodeTier": 1}}})
    got = P.build_run(p, policy_obj(), P.TRIGGER_BLOCKED, t("2026-03-01T02:00:00Z"), target="ns/large")
    assert got["spec"] == {"mode": "Execute", "goals": [{"resource": "huawei.com/ascend-1980"}],
                           "target": {"podGroups": ["ns/large"]}}
    assert P.WINDOW_END_ANNOTATION not in got["metadata"]["annotations"]


def test_window_timeout():
    assert P.window_timeout(None, t("2026-03-01T02:00:00Z")) is None
    assert P.window_timeout("2026-03-01T04:00:00Z", t("2026-03-01T02:00:00Z")) == dt.timedelta(hours=2)
    assert P.window_timeout("2026-03-01T01:00:00Z", t("2026-03-01T02:00:00Z")) == dt.timedelta(0)
    with pytest.raises(ValueError, match=r"metadata.annotations\[repack.volcano.sh/window-end\]"):
        P.window_timeout("soon", t("2026-03-01T02:00:00Z"))


# --- what the controller refuses, naming the field ------------------------------------------------
@pytest.mark.parametrize("change,field,words", [
    ({"trigger": {"cronSchedule": "61 * * * *"}}, "spec.trigger.cronSchedule", "out of range"),
    ({"trigger": {"cronSchedule": "0 2 * *"}}, "spec.trigger.cronSchedule", "has 4 field(s)"),
    ({"trigger": {"cronSchedule": "0 0 2 * * *"}}, "spec.trigger.cronSchedule", "has 6 field(s)"),
    ({"trigger": {"cronSchedule": "TZ=UTC 0 2 * * *"}}, "spec.trigger.cronSchedule", "spec.timeZone"),
    ({"trigger": {"cronSchedule": "every night"}}, "spec.trigger.cronSchedule", "field(s)"),
    ({"trigger": {}}, "spec.trigger", "at least one"),
    ({"trigger": {"onFragAbovePercent": 101}}, "spec.trigger.onFragAbovePercent", "outside 0-100"),
    ({"trigger": {"onPendingBlocked": {"forSeconds": 30}}}, "spec.trigger.onPendingBlocked.podGroupSelector",
     "required"),
    ({"timeZone": "Moon/Base"}, "spec.timeZone", "IANA"),
    ({"windows": [{"schedule": "0 2 * * *"}]}, "spec.windows[0].duration", "required"),
    ({"windows": [{"schedule": "0 2 * * *", "duration": "0s"}]}, "spec.windows[0].duration", "longer than 0s"),
    ({"windows": [{"schedule": "0 25 * * *", "duration": "1h"}]}, "spec.windows[0].schedule", "out of range"),
    ({"minWorkloadInterval": "a day"}, "spec.minWorkloadInterval", "not a duration"),
    ({"successfulRunsHistoryLimit": -1}, "spec.successfulRunsHistoryLimit", "less than 0"),
    ({"trigger": {"onFragAbovePercent": 20}, "runTemplate": {"spec": {"mode": "DryRun"}}},
     "spec.runTemplate.spec.goals", "onFragAbovePercent needs"),
    ({"runTemplate": {"spec": {"mode": "Execute", "target": {"podGroups": ["ns/x"]}}}},
     "spec.runTemplate.spec.target", "no target"),
])
def test_policy_errors_name_the_field(change, field, words):
    with pytest.raises(P.PolicyError) as e:
        P.parse_policy(policy_obj(**change))
    assert e.value.field == field and words in str(e.value), str(e.value)
    assert str(e.value).startswith(field + ": ")


def test_long_policy_name_is_refused():
    with pytest.raises(P.PolicyError, match=r"^metadata.name: .* longer than 48"):
        P.parse_policy(policy_obj(name="p" * 49))


def test_healthy_condition_transitions():
    st: dict = {}
    P.set_healthy(st, True, "ok", "2026-03-01T00:00:00Z", 1)
    P.set_healthy(st, True, "still ok", "2026-03-01T00:01:00Z", 1)
    assert P.healthy(st)["lastTransitionTime"] == "2026-03-01T00:00:00Z"
    P.set_healthy(st, False, "spec.trigger.cronSchedule: bad", "2026-03-01T00:02:00Z", 2)
    c = P.healthy(st)
    assert (c["status"], c["reason"], c["lastTransitionTime"], c["observedGeneration"]) == (
        "False", "ReconcileFailed", "2026-03-01T00:02:00Z", 2)


def test_a_run_that_moved_nothing_at_this_fragmentation_is_fruitless():
    idle = run("a", "Succeeded", completed="2026-03-01T01:00:00Z", reason="InsufficientImprovement")
    idle["status"]["plan"] = {"summary": {"fragBeforePercent": 33}}
    assert P.fruitless_at([idle], 33) is idle
    assert P.fruitless_at([idle], 34) is None
    moved = moved_run("b", "2026-03-01T02:00:00Z", [{"namespace": "ns", "podGroupName": "g",
                                                     "eviction": {"phase": "Accepted"}}], [])
    moved["status"].update(completionTime="2026-03-01T02:10:00Z", plan={"summary": {"fragBeforePercent": 33}})
    assert P.fruitless_at([idle, moved], 33) is None          # the newest one moved something
    assert P.fruitless_at([], 33) is None
