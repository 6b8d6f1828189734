"""Table tests of the Execute engine's pure decisions: resume per record phase, PDB pre-check,
eviction answers, backoff to a deadline, the Lease/cooldown decision, TTL expiry, durations,
conditions and phase."""
from __future__ import annotations

import datetime as dt

import pytest

from kubectl_repack.api.run import ALL_REASONS, Reason, Relocation, UnsetReason, ttl_expired
from kubectl_repack.engine import evictions
from kubectl_repack.engine import mutex
from kubectl_repack.engine import ports
from kubectl_repack.api import run as runapi
from kubectl_repack.api import times
from kubectl_repack.api.lease import LeaseRecord

T0 = dt.datetime(2026, 7, 30, 8, 0, 0, tzinfo=dt.timezone.utc)


def rec(phase, uid="u1"):
    return {"namespace": "ns", "victimPodName": "p", "victimPodUID": uid, "plannedNodeName": "n2",
            "eviction": {"phase": phase}, "placement": {"phase": "WaitingForReplacement"}}


def live(uid="u1", deleting=False):
    meta = {"name": "p", "namespace": "ns", "uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-07-30T08:00:00Z"
    return {"metadata": meta}


@pytest.mark.parametrize("phase, pod, action", [
    pytest.param("Pending", live(), evictions.RESUME_EVICT, id="pending-evicts"),
    pytest.param("Pending", None, evictions.RESUME_EVICT, id="pending-gone-still-evict-path"),
    pytest.param("InProgress", None, evictions.RESUME_DONE_GONE, id="inprogress-gone"),
    pytest.param("InProgress", live(uid="u2"), evictions.RESUME_DONE_GONE, id="inprogress-replaced-same-name"),
    pytest.param("InProgress", live(deleting=True), evictions.RESUME_DONE_ACCEPTED, id="inprogress-terminating"),
    pytest.param("InProgress", live(), evictions.RESUME_EVICT, id="inprogress-still-running-re-evict"),
    pytest.param("Accepted", live(), evictions.RESUME_SKIP, id="accepted-final"),
    pytest.param("IndirectlyRemoved", None, evictions.RESUME_SKIP, id="indirectly-removed-final"),
    pytest.param("Rejected", live(), evictions.RESUME_SKIP, id="rejected-final"),
])
def test_resume_action_per_phase(phase, pod, action):
    got, message = evictions.resume_action(Relocation.from_dict(rec(phase)), pod)
    assert got == action
    if action in (evictions.RESUME_DONE_GONE, evictions.RESUME_DONE_ACCEPTED):
        assert "u1" in message and "when apply resumed" in message


def pdb(name, selector, allowed, generation=1, observed=1):
    st = {"disruptionsAllowed": allowed}
    if observed is not None:
        st["observedGeneration"] = observed
    return {"metadata": {"name": name, "namespace": "ns", "generation": generation},
            "spec": {"selector": selector}, "status": st}


def pod(name, **labels):
    return {"metadata": {"name": name, "labels": labels}}


APP = {"matchLabels": {"app": "train"}}


@pytest.mark.parametrize("victims, pdbs, blocked", [
    pytest.param([pod("a", app="train")], [], [], id="no-pdb"),
    pytest.param([pod("a", app="train"), pod("b", app="train")], [pdb("p", APP, 2)], [], id="allows-exactly"),
    pytest.param([pod("a", app="train"), pod("b", app="train")], [pdb("p", APP, 1)], [("ns/p", 1, 2)],
                 id="allows-fewer-than-the-gang"),
    pytest.param([pod("a", app="train")], [pdb("p", APP, 0)], [("ns/p", 0, 1)], id="max-unavailable-0"),
    pytest.param([pod("a", app="other")], [pdb("p", APP, 0)], [], id="selects-other-pods"),
    pytest.param([pod("a", app="train")], [pdb("p", {}, 0)], [("ns/p", 0, 1)], id="empty-selector-selects-all"),
    pytest.param([pod("a", app="train")], [pdb("p", APP, 5, generation=2, observed=1)], [("ns/p", 0, 1)],
                 id="stale-status-counts-as-0"),
    pytest.param([pod("a", app="train", tier="x")],
                 [pdb("p", {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]}, 0)],
                 [("ns/p", 0, 1)], id="match-expressions"),
    pytest.param([pod("a", app="train")],
                 [pdb("p", {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, 0)], [],
                 id="exists-not-matching"),
    pytest.param([pod("a", app="train"), pod("b", app="train")], [pdb("p", APP, 5), pdb("q", APP, 1)],
                 [("ns/q", 1, 2)], id="each-pdb-checked"),
])
def test_pdb_precheck(victims, pdbs, blocked):
    got = evictions.pdb_blocks(victims, pdbs)
    assert [(b.pdb, b.allowed, b.needed) for b in got] == blocked
    for b in got:
        assert b.pdb in b.message()


@pytest.mark.parametrize("code, message, verdict", [
    (201, "", evictions.ACCEPTED), (200, "", evictions.ACCEPTED),
    (429, "Cannot evict pod as it would violate the pod's disruption budget.", evictions.RETRY),
    (404, "not found", evictions.GONE),
    (409, "Precondition failed: UID in precondition", evictions.GONE),
    (500, "This pod has more than one PodDisruptionBudget", evictions.REJECTED),
    (500, "internal error", evictions.UNKNOWN),
    (0, "evicting pod ns/p: cannot reach the API server: Read timed out.", evictions.UNKNOWN),
    (502, "Bad Gateway", evictions.UNKNOWN),
    (503, "the server is currently unable to handle the request", evictions.UNKNOWN),
    (504, "Timeout: request did not complete within requested timeout", evictions.UNKNOWN),
    (403, "forbidden", evictions.REJECTED),
])
def test_eviction_answers(code, message, verdict):
    got, text = evictions.classify_eviction(ports.EvictionResponse(code, message))
    assert got == verdict
    assert message in text


@pytest.mark.parametrize("pod, verdict, said", [
    pytest.param(None, evictions.ACCEPTED, "was gone when read afterwards", id="gone"),
    pytest.param(live(uid="u2"), evictions.ACCEPTED, "was gone when read afterwards", id="replaced-same-name"),
    pytest.param(live(deleting=True), evictions.ACCEPTED, "was terminating when read afterwards", id="terminating"),
    pytest.param(live(), evictions.UNKNOWN, "is still running", id="still-running"),
])
def test_an_unknown_outcome_is_settled_by_the_victims_uid(pod, verdict, said):
    got, message = evictions.settle_unknown("u1", pod, "the outcome of the Eviction call is unknown (504)")
    assert got == verdict
    assert message.startswith("the outcome of the Eviction call is unknown (504); the victim uid u1 ")
    assert said in message


def test_backoff_doubles_up_to_the_cap_and_stops_at_the_deadline():
    b = evictions.Backoff(initial=1, factor=2, cap=10)
    deadline = T0 + dt.timedelta(seconds=30)
    now, delays = T0, []
    while True:
        d = b.next_delay(now, deadline)
        if d is None:
            break
        delays.append(d)
        now += dt.timedelta(seconds=d)
    assert delays == [1, 2, 4, 8, 10, 5]   # the last one only up to the deadline
    assert now == deadline


ME = "run-b@host-1/200/aaaa"


def lease(holder="", renewed=T0, duration=30, done=None, last=""):
    ann = {}
    if done is not None:
        ann[mutex.LAST_COMPLETION_ANNOTATION] = times.rfc3339(done)
    if last:
        ann[mutex.LAST_RUN_ANNOTATION] = last
    return LeaseRecord(holder=holder, renew_time=renewed, duration_seconds=duration, annotations=ann)


@pytest.mark.parametrize("view, cooldown_s, seen_s, acquire, reason", [
    pytest.param(None, 600, 0, True, "", id="no-lease-yet"),
    pytest.param(lease(), 600, 0, True, "", id="released-no-history"),
    pytest.param(lease("run-a@host-1/100/bbbb"), 600, 0, False, Reason.ANOTHER_RUN_ACTIVE, id="held-by-another"),
    pytest.param(lease("run-a@host-1/100/bbbb"), 0, 31, True, "", id="held-but-unchanged-for-its-duration"),
    pytest.param(lease("run-a@host-1/100/bbbb", renewed=T0 - dt.timedelta(seconds=31)), 0, 0, False,
                 Reason.ANOTHER_RUN_ACTIVE, id="renewTime-old-on-our-clock-but-just-observed"),
    pytest.param(lease(ME), 600, 0, True, "", id="held-by-me"),
    # The same run, host and PID (a PID namespace, host-network containers) but another instance:
    # a live holder whose Lease is fresh; before #13 a dead-looking PID let it be taken over.
    pytest.param(lease("run-b@host-1/200/cccc"), 600, 0, False, Reason.ANOTHER_RUN_ACTIVE,
                 id="same-run-host-pid-other-instance"),
    pytest.param(lease("run-b@host-1/199/cccc"), 600, 0, False, Reason.ANOTHER_RUN_ACTIVE,
                 id="my-run-other-pid-same-host-fresh"),
    pytest.param(lease("run-b@host-1/199/cccc"), 0, 30, True, "", id="my-run-other-pid-expired"),
    pytest.param(lease(done=T0 - dt.timedelta(seconds=60), last="run-a"), 600, 0, False, Reason.COOLDOWN,
                 id="cooldown-running"),
    pytest.param(lease(done=T0 - dt.timedelta(seconds=601), last="run-a"), 600, 0, True, "",
                 id="cooldown-over"),
    pytest.param(lease(done=T0 - dt.timedelta(seconds=1), last="run-a"), 0, 0, True, "", id="cooldown-0s"),
    pytest.param(lease(done=T0 - dt.timedelta(seconds=1), last="run-b"), 600, 0, True, "",
                 id="own-completion-does-not-block-itself"),
])
def test_lease_decision_table(view, cooldown_s, seen_s, acquire, reason):
    """`seen_s`: how long ago (our clock) this process first observed the record as it is."""
    got = mutex.lease_decision(view, ME, T0, dt.timedelta(seconds=cooldown_s),
                               observed_at=T0 - dt.timedelta(seconds=seen_s))
    assert (got.acquire, got.reason) == (acquire, reason)
    if reason == Reason.ANOTHER_RUN_ACTIVE:
        assert "holds the execute Lease" in got.message and got.retry_after > 0
    if reason == Reason.COOLDOWN:
        assert "run-a" in got.message and "10m" in got.message
        assert got.retry_after == pytest.approx(540)


def test_holder_identity_is_unique_per_process_instance():
    ident = mutex.holder_identity("ascend-execute-001", host="h", pid=42, instance="i1")
    assert ident == "ascend-execute-001@h/42/i1"
    assert mutex.parse_identity(ident) == ("ascend-execute-001", "h", 42)
    assert mutex.parse_identity("garbage") == ("", "", -1)
    # the same run, host and PID twice (host-network containers, PID 1 in two pods): two identities
    assert mutex.holder_identity("r", host="h", pid=1) != mutex.holder_identity("r", host="h", pid=1)
    assert not hasattr(mutex, "holder_is_dead") and not hasattr(mutex, "_pid_alive")


@pytest.mark.parametrize("text, seconds", [("0s", 0), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("45", 45),
                                           ("500ms", 0.5)])
def test_parse_duration(text, seconds):
    assert times.parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "10x", "m", "-5s", "1 m"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        times.parse_duration(text)


def run_obj(name, phase, done=None, ttl=None, deleting=False):
    meta = {"name": name, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-07-30T08:00:00Z"
    spec = {"mode": "Execute"}
    if ttl is not None:
        spec["ttlSecondsAfterFinished"] = ttl
    st = {"phase": phase}
    if done:
        st["completionTime"] = done
    return {"metadata": meta, "spec": spec, "status": st}


def test_ttl_expiry():
    runs = [run_obj("old", "Succeeded", "2026-07-30T07:00:00Z", ttl=60),
            run_obj("failed-old", "Failed", "2026-07-30T07:59:00Z", ttl=60),
            run_obj("fresh", "Succeeded", "2026-07-30T07:59:30Z", ttl=60),
            run_obj("no-ttl", "Succeeded", "2026-07-30T07:00:00Z"),
            run_obj("running", "Running", None, ttl=0),
            run_obj("pending-with-time", "Pending", "2026-07-30T07:00:00Z", ttl=0),
            run_obj("being-deleted", "Succeeded", "2026-07-30T07:00:00Z", ttl=0, deleting=True),
            run_obj("mine", "Succeeded", "2026-07-30T07:00:00Z", ttl=0)]
    assert [r["metadata"]["name"] for r in runs if ttl_expired(r, T0)] == ["old", "failed-old", "mine"]


def test_ttl_falls_back_to_the_last_condition_without_completion_time():
    """One rule for apply's sweep and the coordinator: a finished run without completionTime
    expires from its latest condition transition (apply's sweep used to keep it forever)."""
    by_condition = run_obj("by-condition", "Failed", None, ttl=60)
    by_condition["status"]["conditions"] = [{"type": "Failed", "status": "True",
                                             "lastTransitionTime": "2026-07-30T07:58:00Z"}]
    assert ttl_expired(by_condition, T0)
    assert not ttl_expired(by_condition, T0 - dt.timedelta(minutes=1, seconds=1))
    no_time = run_obj("no-time", "Failed", None, ttl=0)
    assert not ttl_expired(no_time, T0)


def test_an_unset_or_unknown_condition_reason_is_refused():
    for reason in ("", None, "Completed", "executing"):
        with pytest.raises(UnsetReason):
            runapi.set_condition({}, "Progressing", "True", reason, "m", "t")
    assert runapi.check_reason("ExecutionCompleted") == "ExecutionCompleted"
    # Every reason constant is set and CamelCase; the planner's outcomes are among them.
    assert all(r and r[0].isupper() and " " not in r for r in ALL_REASONS)
    assert {"RepackRecommended", "NoFragmentation", "InsufficientImprovement"} <= ALL_REASONS


def test_conditions_keep_transition_times_and_derive_the_phase():
    st = {}
    runapi.set_condition(st, "Progressing", "False", "AnotherRunActive", "m1", "t1")
    assert runapi.derive_phase(st) == "Pending"
    runapi.set_condition(st, "Progressing", "False", "ExecuteCooldownActive", "m2", "t2")
    assert st["conditions"][0]["lastTransitionTime"] == "t1"        # same status: time kept
    runapi.set_condition(st, "Progressing", "True", "Executing", "m3", "t3")
    assert st["conditions"][0]["lastTransitionTime"] == "t3" and runapi.derive_phase(st) == "Running"
    runapi.set_condition(st, "Failed", "True", "EvictionBlockedByPDB", "m4", "t4")
    assert runapi.derive_phase(st) == "Failed"
    st2 = {}
    runapi.set_condition(st2, "Complete", "True", "ExecutionCompleted", "m", "t")
    assert runapi.derive_phase(st2) == "Succeeded"
    assert runapi.run_reason({"status": {**st2, "phase": "Succeeded"}}) == "ExecutionCompleted"
