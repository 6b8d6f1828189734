"""`apply` as a workflow over in-memory ports: TTL sweep, create-or-resume, the Lease wait, the
run, and releasing the Lease (with the completion time only when something was evicted)."""
from __future__ import annotations

import copy
import datetime as dt

import pytest

from kubectl_repack.api.run import Reason
from kubectl_repack.engine.mutex import LeaseDecision
from kubectl_repack.engine.workflow import ApplyRequest, apply_run
from kubectl_repack.errors import NotFound, ValidationError
from tests.unit.engine.fakes import T0, FakeClock, FakeCluster, FakeRuns, execute_run, seed_objects

PLANNED = {"train-worker-0": "n2", "train-worker-1": "n3"}


class Store(FakeRuns):
    """FakeRuns plus what the workflow needs of a RunStore: list, create, delete."""

    def get(self, name):
        if name not in self.runs:
            raise NotFound(f"repackrun {name} not found", 404)
        return super().get(name)

    def list(self):
        return [copy.deepcopy(r) for r in self.runs.values()]

    def create(self, obj):
        self.runs[obj["metadata"]["name"]] = copy.deepcopy(obj)
        return copy.deepcopy(obj)

    def annotate_all(self, name, annotations, uid=None):
        for key, value in annotations.items():
            self.annotate(name, key, value, uid)
        return copy.deepcopy(self.runs[name])

    def annotate(self, name, key, value, uid=None):
        ann = self.runs[name]["metadata"].setdefault("annotations", {})
        if value is None:
            ann.pop(key, None)
        else:
            ann[key] = value
        return copy.deepcopy(self.runs[name])

    def delete(self, name, uid=None, resource_version=None):
        return self.runs.pop(name, None) is not None


class Mutex:
    """Answers the scripted decisions in turn (then acquires); records what apply did with it."""

    def __init__(self, *decisions):
        self.decisions = list(decisions)
        self.calls = []

    def check(self):
        return None

    def stored_cooldown(self):
        return dt.timedelta(minutes=10)

    def try_acquire(self, me, now, cooldown, store_cooldown=None):
        self.calls.append(("try", cooldown, store_cooldown))
        return self.decisions.pop(0) if self.decisions else LeaseDecision(True)

    def start_renewing(self, me):
        self.calls.append(("renew",))

    def release(self, me, run_name, completed, store_cooldown=None):
        self.calls.append(("release", run_name, completed) + ((store_cooldown,) if store_cooldown else ()))


class Notes:
    def __init__(self):
        self.lines, self.progress_seen = [], 0

    def note(self, message):
        self.lines.append(message)

    def progress(self, progress):
        self.progress_seen += 1


def setup(*decisions, runs=()):
    clock = FakeClock()
    cluster = FakeCluster(seed_objects(), rebind=PLANNED, clock=clock)
    return clock, cluster, Store(runs), Mutex(*decisions), Notes()


def test_creates_takes_the_lease_executes_and_starts_the_cooldown():
    clock, cluster, store, mutex, notes = setup()
    result = apply_run(ApplyRequest("run-1", execute_run()), store, mutex, cluster, cluster, notes, clock=clock,
                       me="run-1@h/1")
    assert not result.pending and result.run["status"]["phase"] == "Succeeded"
    assert notes.lines[0] == "repackrun.repack.volcano.sh/run-1 created" and notes.progress_seen
    assert mutex.calls[0] == ("try", dt.timedelta(minutes=10), None)    # the stored cooldown gates a new run
    assert mutex.calls[-1][:2] == ("release", "run-1") and mutex.calls[-1][2] is not None   # evicted: cooldown


def test_a_busy_lease_marks_the_run_pending_and_gives_up_without_wait():
    busy = LeaseDecision(False, Reason.ANOTHER_RUN_ACTIVE, "RepackRun run-0 holds the execute Lease", 20)
    clock, cluster, store, mutex, notes = setup(busy)
    result = apply_run(ApplyRequest("run-1", execute_run(), wait=False), store, mutex, cluster, cluster, notes,
                       clock=clock)
    assert result.pending and "is Pending (AnotherRunActive)" in result.note
    st = result.run["status"]
    assert st["phase"] == "Pending" and st["conditions"][0]["reason"] == "AnotherRunActive"
    assert cluster.calls == [] and not any(c[0] == "release" for c in mutex.calls)   # never held


def test_waits_through_the_cooldown_then_runs():
    cooling = LeaseDecision(False, Reason.COOLDOWN, "cooldown ends soon", 3.0)
    clock, cluster, store, mutex, notes = setup(cooling, cooling)
    result = apply_run(ApplyRequest("run-1", execute_run(), cooldown=dt.timedelta(seconds=30)), store, mutex,
                       cluster, cluster, notes, clock=clock)
    assert result.run["status"]["phase"] == "Succeeded"
    assert [line for line in notes.lines if line.startswith("waiting:")] == [
        "waiting: ExecuteCooldownActive: cooldown ends soon"]           # once per reason
    assert clock.slept[:2] == [3.0, 3.0]
    assert mutex.calls[0] == ("try", dt.timedelta(seconds=30), dt.timedelta(seconds=30))   # --cooldown stored


def test_an_existing_run_with_another_spec_is_refused_before_anything_happens():
    other = execute_run()
    other["spec"]["maxPerRun"] = {"podGroups": 9}
    clock, cluster, store, mutex, notes = setup(runs=[other])
    with pytest.raises(ValidationError) as exc:
        apply_run(ApplyRequest("run-1", execute_run()), store, mutex, cluster, cluster, notes, clock=clock)
    assert "exists with a different spec" in str(exc.value) and mutex.calls == []


def test_resume_of_a_missing_run_is_not_found():
    clock, cluster, store, mutex, notes = setup()
    with pytest.raises(NotFound):
        apply_run(ApplyRequest("nope"), store, mutex, cluster, cluster, notes, clock=clock)


def test_sweeps_expired_runs_and_reports_a_finished_one_without_taking_the_lease():
    old = execute_run("old")
    old["spec"]["ttlSecondsAfterFinished"] = 60
    old["status"] = {"phase": "Failed", "completionTime": "2026-07-30T07:00:00Z"}
    done = execute_run("run-1")
    done["spec"]["ttlSecondsAfterFinished"] = 60
    done["status"] = {"phase": "Succeeded", "completionTime": "2026-07-30T07:00:00Z"}
    clock, cluster, store, mutex, notes = setup(runs=[old, done])
    result = apply_run(ApplyRequest("run-1"), store, mutex, cluster, cluster, notes, clock=clock)
    assert "old" not in store.runs and "run-1" in store.runs      # the run being applied is kept
    assert notes.lines[0] == "repackrun.repack.volcano.sh/old deleted (ttlSecondsAfterFinished passed)"
    assert result.note == "repackrun run-1 already finished" and mutex.calls == []
    assert clock.now() == T0


# ---- in-cluster hooks (EXEC-8): cancel, authorize, events ------------------------------------------
def test_cancel_between_evictions_stops_the_next_one_tracks_what_moved_and_says_so():
    clock, cluster, store, mutex, notes = setup()
    events = []

    def cancel_after_first(name):          # the user runs `kubectl repack cancel` after one eviction
        if len(cluster.calls) == 1:
            store.runs["run-1"]["metadata"].setdefault("annotations", {})["repack.volcano.sh/cancel"] = "true"
    cluster.on_evict = cancel_after_first
    from kubectl_repack.api.control import cancel_requested
    result = apply_run(ApplyRequest("run-1", execute_run()), store, mutex, cluster, cluster, notes, clock=clock,
                       cancelled=cancel_requested, on_event=lambda r, m, w: events.append((r, w)))
    st = result.run["status"]
    assert [c[0] for c in cluster.calls] == ["train-worker-0"]        # the second was never called
    assert st["phase"] == "Failed" and [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["Cancelled"]
    assert "1 of 2 planned eviction(s) done" in st["message"] and "not evicted: " in st["message"]
    assert [r["eviction"]["phase"] for r in st["relocations"]] == ["Accepted", "Pending"]
    assert st["relocations"][1]["eviction"]["message"].startswith("not evicted: cancelled")
    assert st["relocations"][0]["placement"]["phase"] == "Placed"     # the moved pod was still tracked
    assert [e[0] for e in events] == ["Started", "Evicted", "Placed", "Cancelled"]
    assert mutex.calls[-1][2] is not None     # something was evicted: the cooldown starts


def test_cancel_before_start_ends_the_run_without_taking_the_lease():
    run = execute_run()
    run["metadata"]["annotations"] = {"repack.volcano.sh/cancel": "true"}
    clock, cluster, store, mutex, notes = setup(runs=[run])
    from kubectl_repack.api.control import cancel_requested
    result = apply_run(ApplyRequest("run-1"), store, mutex, cluster, cluster, notes, clock=clock,
                       cancelled=cancel_requested)
    assert result.run["status"]["phase"] == "Failed" and "nothing was evicted" in result.run["status"]["message"]
    assert cluster.calls == [] and mutex.calls == []


def test_a_denied_creator_ends_the_run_before_any_eviction_naming_the_namespace():
    clock, cluster, store, mutex, notes = setup()
    asked = []

    def authorize(namespaces):
        asked.append(namespaces)
        return f"user 'bob' may not create pods/eviction in namespace {namespaces[0]!r}"
    result = apply_run(ApplyRequest("run-1", execute_run()), store, mutex, cluster, cluster, notes, clock=clock,
                       authorize=authorize)
    st = result.run["status"]
    assert cluster.calls == [] and asked == [["demo"]]
    assert st["phase"] == "Failed" and "EvictionNotAuthorized" in [c["reason"] for c in st["conditions"]]
    assert "namespace 'demo'" in st["message"]
    assert mutex.calls[-1][2] is None        # nothing evicted: no cooldown


def test_an_allowed_creator_runs_as_before():
    clock, cluster, store, mutex, notes = setup()
    result = apply_run(ApplyRequest("run-1", execute_run()), store, mutex, cluster, cluster, notes, clock=clock,
                       authorize=lambda namespaces: "")
    assert result.run["status"]["phase"] == "Succeeded" and len(cluster.calls) == 2


def test_a_started_run_waiting_for_the_lease_stays_running():
    """After a fail-over the new holder waits for the dead one's Lease: the run it continues must
    stay Running, or the webhook and coordinator stop steering the pods already evicted."""
    run = execute_run()
    run["status"] = {"phase": "Running", "relocations": [{"namespace": "demo"}],
                     "conditions": [{"type": "Progressing", "status": "True", "reason": "Executing",
                                     "message": "executing", "lastTransitionTime": "2026-07-30T07:00:00Z"}]}
    busy = LeaseDecision(False, Reason.ANOTHER_RUN_ACTIVE, "the dead holder's Lease", 20)
    clock, cluster, store, mutex, notes = setup(busy, runs=[run])
    result = apply_run(ApplyRequest("run-1", wait=False), store, mutex, cluster, cluster, notes, clock=clock)
    assert result.pending and store.runs["run-1"]["status"]["phase"] == "Running"


# ---- screen: plan only pods the creator may evict (SEC-1) ---------------------------------------
def test_a_screen_refusal_ends_the_run_before_it_is_planned_or_authorized():
    from kubectl_repack.engine.workflow import Screening

    clock, cluster, store, mutex, notes = setup()
    asked, authorized = [], []
    result = apply_run(ApplyRequest("run-1", execute_run()), store, mutex, cluster, cluster, notes, clock=clock,
                       authorize=lambda namespaces: authorized.append(namespaces) or "",
                       screen=lambda namespaces: asked.append(namespaces) or Screening(refused="the record is stale"))
    st = result.run["status"]
    assert asked == [["demo"]] and authorized == [] and cluster.calls == [] and "plan" not in st
    assert st["phase"] == "Failed" and st["message"] == "the record is stale; nothing was evicted"
    assert [c["reason"] for c in st["conditions"] if c["type"] == "Failed"] == ["EvictionNotAuthorized"]


def test_denied_namespaces_are_left_out_and_a_run_denied_everywhere_it_could_move_ends_not_authorized():
    from kubectl_repack.engine.workflow import Screening, left_out_line, not_evictable_reasons

    line = left_out_line(["team-a", "team-b"], "alice")
    assert line.startswith("left out: pods in 2 namespace(s) where alice may not evict") and "team-" not in line
    assert not_evictable_reasons(["a"], "alice") == {"a": "the run's creator alice may not evict pods in namespace a"}
    clock, cluster, store, mutex, notes = setup()
    result = apply_run(ApplyRequest("run-1", execute_run()), store, mutex, cluster, cluster, notes, clock=clock,
                       authorize=lambda namespaces: "",
                       screen=lambda namespaces: Screening(denied={ns: f"no rights in {ns}" for ns in namespaces},
                                                           creator="bob"))
    st = result.run["status"]
    assert cluster.calls == [] and st["phase"] == "Failed" and st["message"].endswith("; nothing was evicted")
    assert "user 'bob' (the run's creator) may create pods/eviction in none of the 1 namespace(s)" in st["message"]
    assert "demo" not in st["message"]       # SEC-1: a refusal names no namespace the creator may not see
    # a denial elsewhere (no movable pod there) leaves the plan as it was
    clock, cluster, store, mutex, notes = setup()
    result = apply_run(ApplyRequest("run-1", execute_run()), store, mutex, cluster, cluster, notes, clock=clock,
                       authorize=lambda namespaces: "",
                       screen=lambda namespaces: Screening(denied={"elsewhere": "no"}, creator="bob"))
    assert result.run["status"]["phase"] == "Succeeded" and len(cluster.calls) == 2
    assert "left out" not in result.run["status"]["message"]


def test_a_continued_run_is_not_screened_and_the_plugin_path_has_no_screen():
    from tests.unit.engine.fakes import started

    clock, cluster, store, mutex, notes = setup(runs=[execute_run()])
    started(cluster, store, clock)                      # records written, nothing evicted yet
    asked = []
    result = apply_run(ApplyRequest("run-1"), store, mutex, cluster, cluster, notes, clock=clock,
                       authorize=lambda namespaces: "", screen=lambda namespaces: asked.append(namespaces))
    assert asked == [] and result.run["status"]["phase"] == "Succeeded" and len(cluster.calls) == 2
