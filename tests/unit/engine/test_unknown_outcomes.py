"""Eviction calls whose outcome is unknown (security review, finding 9): no answer (a client-side
timeout, a dropped connection), a 500 other than the several-PDBs refusal, 502, 503, 504. The
API server may have evicted the pod before the answer was lost, so such an answer is never
recorded Rejected on its word: the victim is read by name and its UID compared, as resume does."""
from __future__ import annotations

import datetime as dt

import pytest

from kubectl_repack.errors import ClusterAPIError
from tests.unit.engine.fakes import NS, T0, engine_for
from tests.unit.engine.test_faults import _setup
W0, W1 = "train-worker-0", "train-worker-1"

UNKNOWN_ANSWERS = [
    pytest.param((0, f"evicting pod {NS}/{W0}: cannot reach the API server: Read timed out. (read timeout=5)"),
                 id="client-timeout"),
    pytest.param((500, "etcdserver: request timed out"), id="500-other"),
    pytest.param((502, "Bad Gateway"), id="502"),
    pytest.param((503, "the server is currently unable to handle the request"), id="503"),
    pytest.param((504, "Timeout: request did not complete within requested timeout"), id="504"),
]


def _answer_lost(cluster, name, answer, terminating=False):
    """The first Eviction call for `name` goes through (the pod is evicted and re-created as
    planned) but its answer is lost: the engine hears `answer`. With `terminating`, the first read
    of the pod afterwards still shows the victim, same UID, with deletionTimestamp set."""
    real_evict, real_get = cluster.evict, cluster.get_pod
    state = {"lost": False, "terminating": None}
    victim = real_get(NS, name)
    victim["metadata"]["deletionTimestamp"] = "2026-07-30T08:00:00Z"

    def evict(namespace, pod, uid, grace):
        got = real_evict(namespace, pod, uid, grace)
        if pod == name and not state["lost"]:
            state["lost"] = True
            if terminating:
                state["terminating"] = victim
            return answer
        return got

    def get_pod(namespace, pod):
        if pod == name and state["terminating"] is not None:
            seen, state["terminating"] = state["terminating"], None
            return seen
        return real_get(namespace, pod)

    cluster.evict, cluster.get_pod = evict, get_pod
    return state


def _phase(run, i):
    return run["status"]["relocations"][i]["eviction"]


@pytest.mark.parametrize("answer", UNKNOWN_ANSWERS)
def test_an_eviction_that_went_through_behind_an_unknown_answer_is_accepted_and_its_replacement_tracked(answer):
    clock, cluster, runs, eng = _setup()
    _answer_lost(cluster, W0, answer)
    run = eng.execute("run-1")
    # before the fix: Rejected on the answer's word, the gang stopped half-moved, the replacement untracked
    first = _phase(run, 0)
    assert first["phase"] == "Accepted", first
    assert "outcome of the Eviction call is unknown" in first["message"] and "went through" in first["message"]
    assert [c[0] for c in cluster.calls] == [W0, W1]          # the evicted victim is not evicted again
    assert [(r["eviction"]["phase"], r["placement"]["phase"]) for r in run["status"]["relocations"]] == \
        [("Accepted", "Placed")] * 2
    assert run["status"]["phase"] == "Succeeded"


def test_a_victim_seen_terminating_after_an_unknown_answer_is_accepted():
    clock, cluster, runs, eng = _setup()
    _answer_lost(cluster, W0, (504, "Timeout: request did not complete within requested timeout"), terminating=True)
    run = eng.execute("run-1")
    first = _phase(run, 0)
    assert first["phase"] == "Accepted" and "was terminating when read afterwards" in first["message"]
    assert [c[0] for c in cluster.calls] == [W0, W1]
    assert run["status"]["phase"] == "Succeeded"


@pytest.mark.parametrize("answer", UNKNOWN_ANSWERS)
def test_an_unknown_answer_with_the_victim_still_running_is_retried_with_backoff(answer):
    clock, cluster, runs, eng = _setup(responses={W0: [answer, 201]})
    run = eng.execute("run-1")
    # before the fix: one call, Rejected, the second victim never touched
    assert [c[:2] for c in cluster.calls] == [(W0, f"uid-{NS}-{W0}"), (W0, f"uid-{NS}-{W0}"),
                                              (W1, f"uid-{NS}-{W1}")]   # the retry keeps the UID precondition
    assert clock.slept[0] == 1.0                                  # the existing backoff
    assert _phase(run, 0)["phase"] == "Accepted"
    assert run["status"]["phase"] == "Succeeded"


def test_unknown_answers_until_the_retry_timeout_reject_saying_the_outcome_was_unknown_and_the_pod_runs():
    clock, cluster, runs, eng = _setup(responses={W0: [503] * 100}, eviction_retry_timeout=dt.timedelta(seconds=20))
    run = eng.execute("run-1")
    assert len(cluster.calls) > 1 and {c[0] for c in cluster.calls} == {W0}
    assert (clock.now() - T0).total_seconds() == pytest.approx(20, abs=0.01)
    first, second = _phase(run, 0), _phase(run, 1)
    assert first["phase"] == "Rejected"
    assert "outcome of the Eviction call is unknown" in first["message"]
    assert f"uid-{NS}-{W0} is still running" in first["message"] and "after retrying until" in first["message"]
    assert second["phase"] == "Rejected" and "stopped moving" in second["message"]
    assert run["status"]["phase"] == "Failed"


def test_a_victim_that_cannot_be_read_after_an_unknown_answer_stays_inprogress_and_resume_settles_it():
    clock, cluster, runs, eng = _setup()
    lost = _answer_lost(cluster, W0, (504, "Timeout: request did not complete within requested timeout"))
    real_get, reads = cluster.get_pod, []

    def get_pod(namespace, name):
        if name == W0 and lost["lost"]:     # the engine's read after the lost answer
            reads.append(name)
            raise ClusterAPIError(f"reading pod {namespace}/{name}: cannot reach the API server: timed out")
        return real_get(namespace, name)
    cluster.get_pod = get_pod
    with pytest.raises(ClusterAPIError, match=r"stays InProgress.*--resume run-1"):
        eng.execute("run-1")
    assert reads and [c[0] for c in cluster.calls] == [W0]
    stored = runs.get("run-1")
    # before the fix: Rejected (and the run finished Failed with the replacement untracked)
    assert [_phase(stored, i)["phase"] for i in (0, 1)] == ["InProgress", "Pending"]
    assert stored["status"]["phase"] == "Running"

    cluster.get_pod = real_get       # the API server answers again: `apply --resume`
    run = engine_for(cluster, runs, clock).execute("run-1")
    assert [c[0] for c in cluster.calls] == [W0, W1]
    assert _phase(run, 0)["phase"] == "Accepted" and "when apply resumed" in _phase(run, 0)["message"]
    assert run["status"]["phase"] == "Succeeded"


def test_a_429_after_an_unknown_answer_is_the_first_calls_doing_when_the_victim_is_terminating():
    """The first call timed out while the server was still evicting; the retry meets the PDB whose
    budget that eviction used up. The victim, read again, is terminating: Accepted, not Rejected."""
    clock, cluster, runs, eng = _setup(responses={W0: [(504, "Timeout"), 429]},
                                       eviction_retry_timeout=dt.timedelta(seconds=20))

    def late_eviction(name):
        if name == W0 and len(cluster.calls) == 2:
            for o in cluster.objects:
                if o["kind"] == "Pod" and o["metadata"]["name"] == W0:
                    o["metadata"]["deletionTimestamp"] = "2026-07-30T08:00:01Z"
    cluster.on_evict = late_eviction
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == [W0, W0, W1]            # no third call for the first victim
    first = _phase(run, 0)
    assert first["phase"] == "Accepted", first
    assert "then blocked by a PodDisruptionBudget" in first["message"] and "terminating" in first["message"]


def _cancel_while_backing_off(late_eviction):
    """The first victim's Eviction call answers 503 with the victim still running (as the engine
    reads it right afterwards); the user cancels the run while the engine backs off. With
    `late_eviction` the server finishes that eviction meanwhile (the victim is replaced)."""
    clock, cluster, runs, eng = _setup(responses={W0: [(503, "unavailable")]})
    cancel, answered = [], []
    eng.cancelled = lambda run: "the run was cancelled (annotation)" if cancel else ""
    real_evict, real_get = cluster.evict, cluster.get_pod

    def evict(namespace, name, uid, grace):
        got = real_evict(namespace, name, uid, grace)
        answered.append(name)
        return got

    def get_pod(namespace, name):
        pod = real_get(namespace, name)
        if name == W0 and answered and not cancel:    # the engine's read right after the 503
            cancel.append(True)
            if late_eviction:
                cluster.remove(namespace, name)
                cluster.recreate(namespace, name, "n2", pod)
        return pod
    cluster.evict, cluster.get_pod = evict, get_pod
    return clock, cluster, runs, eng


def test_a_cancel_during_the_backoff_after_an_unknown_answer_puts_a_running_victim_back_to_pending():
    clock, cluster, runs, eng = _cancel_while_backing_off(late_eviction=False)
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == [W0]
    first = _phase(run, 0)
    assert first["phase"] == "Pending" and "cancelled" in first["message"]
    assert run["status"]["phase"] == "Failed"


def test_a_cancel_during_the_backoff_after_an_unknown_answer_settles_a_late_eviction_as_accepted():
    clock, cluster, runs, eng = _cancel_while_backing_off(late_eviction=True)
    run = eng.execute("run-1")
    assert [c[0] for c in cluster.calls] == [W0]
    first = _phase(run, 0)
    assert first["phase"] == "Accepted" and "went through" in first["message"], first   # not Pending
    assert run["status"]["relocations"][0]["placement"]["phase"] == "Placed"      # its replacement is tracked
    assert _phase(run, 1)["phase"] == "Pending"
