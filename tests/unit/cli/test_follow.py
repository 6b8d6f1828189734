"""commands.follow (polling a run someone else carries out) and `kubectl repack status NAME -w`."""
import copy
import datetime as dt
import io

import pytest

from kubectl_repack import errors
from kubectl_repack.commands.follow import describe, follow, progress_key
from tests.unit.cli.conftest import run
from tests.unit.cli.test_snapshot_status import EXECUTE

NAME = "ascend-execute-001"


def state(phase, reason="", message="", evicted=0, bound=0, total=0, uid="u"):
    obj = copy.deepcopy(EXECUTE)
    obj["metadata"]["uid"] = uid
    ctype = {"Succeeded": "Complete", "Failed": "Failed"}.get(phase, "Progressing")
    st = {"phase": phase, "message": message}
    if reason:
        st["conditions"] = [{"type": ctype, "status": "True" if phase != "Pending" else "False",
                             "reason": reason, "message": message}]
    st["relocations"] = [{"namespace": "ns", "victimPodName": f"w-{i}",
                          "eviction": {"phase": "Accepted" if i < evicted else "Pending"},
                          "placement": {"phase": "Placed" if i < bound else ""}} for i in range(total)]
    obj["status"] = st
    return obj


class Script:
    """A RunStore whose get() answers the next scripted state (the last one repeats); an
    exception in the script is raised."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.reads = 0

    def get(self, name):
        assert name == NAME
        self.reads += 1
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return copy.deepcopy(answer)


class Clock:
    def __init__(self):
        self.t = 100.0
        self.slept = []

    def now(self):
        return self.t

    def sleep(self, s):
        self.slept.append(s)
        self.t += s


def run_follow(store, timeout=dt.timedelta(minutes=5), tty=False):
    out, clock = io.StringIO(), Clock()
    obj = follow(store, NAME, timeout, out, tty=tty, poll=2.0, sleep=clock.sleep, now=clock.now)
    return obj, out.getvalue(), clock


PENDING = [state("Pending", "AnotherRunActive", f"waiting for repack-execute-000: {s}s left") for s in (30, 28, 26)]
COOLDOWN = state("Pending", "ExecuteCooldownActive", "cooldown ends in 9m")
RUNNING = [state("Running", "Executing", "evicting", evicted=e, bound=b, total=2) for e, b in
           ((0, 0), (0, 0), (1, 0), (1, 1), (2, 1))]
DONE = state("Succeeded", "ExecutionCompleted", "goal met", evicted=2, bound=2, total=2)


def test_plain_lines_one_per_change_and_pending_said_once_per_reason():
    obj, out, clock = run_follow(Script(*PENDING, COOLDOWN, *RUNNING, DONE))
    assert obj["status"]["phase"] == "Succeeded"
    assert out.splitlines() == [
        "Pending (AnotherRunActive): waiting for repack-execute-000: 30s left",
        "Pending (ExecuteCooldownActive): cooldown ends in 9m",
        "Running (Executing): evictions 0/2, replacements bound 0/0; evicting",
        "Running (Executing): evictions 1/2, replacements bound 0/1; evicting",
        "Running (Executing): evictions 1/2, replacements bound 1/1; evicting",
        "Running (Executing): evictions 2/2, replacements bound 1/2; evicting",
        "Succeeded (ExecutionCompleted): evictions 2/2, replacements bound 2/2; goal met",
    ]
    assert "\r" not in out and set(clock.slept) == {2.0}


def test_timeout_returns_the_unfinished_run():
    store = Script(PENDING[0])
    obj, out, clock = run_follow(store, timeout=dt.timedelta(seconds=9))
    assert obj["status"]["phase"] == "Pending"
    assert out.count("\n") == 1 and clock.t - 100.0 == pytest.approx(9.0)
    assert clock.slept == [2.0, 2.0, 2.0, 2.0, 1.0]


def test_a_finished_run_is_read_once():
    store = Script(DONE)
    obj, out, clock = run_follow(store)
    assert store.reads == 1 and clock.slept == [] and out.startswith("Succeeded (ExecutionCompleted)")


def test_tty_rewrites_the_line_and_starts_a_new_one_per_phase():
    _, out, _ = run_follow(Script(PENDING[0], *RUNNING[:3], DONE), tty=True)
    assert out.endswith("\n")
    lines = out.split("\n")
    assert len(lines) == 4 and lines[-1] == ""   # Pending, Running (rewritten in place), Succeeded
    assert lines[0] == "\r\x1b[KPending (AnotherRunActive): waiting for repack-execute-000: 30s left [0m00s]"
    assert lines[1].count("\r\x1b[K") == 3 and lines[1].endswith("evictions 1/2, replacements bound 0/1; evicting [0m06s]")
    assert lines[2].startswith("\r\x1b[KSucceeded (ExecutionCompleted)")


def test_keyboard_interrupt_is_the_callers_and_the_tty_line_is_ended():
    out, clock = io.StringIO(), Clock()
    with pytest.raises(KeyboardInterrupt):
        follow(Script(RUNNING[0], KeyboardInterrupt()), NAME, dt.timedelta(minutes=1), out, tty=True,
               sleep=clock.sleep, now=clock.now)
    assert out.getvalue().endswith("\n")


def test_a_failed_read_is_retried_and_said_once():
    blip = errors.ClusterAPIError("reading repackrun x: cannot reach the API server: refused")
    obj, out, _ = run_follow(Script(RUNNING[0], blip, blip, RUNNING[0], DONE))
    assert obj["status"]["phase"] == "Succeeded"
    assert out.splitlines() == [
        "Running (Executing): evictions 0/2, replacements bound 0/0; evicting",
        f"cannot read repackrun {NAME} ({blip}); retrying",
        "Running (Executing): evictions 0/2, replacements bound 0/0; evicting",
        "Succeeded (ExecutionCompleted): evictions 2/2, replacements bound 2/2; goal met",
    ]


def test_the_first_read_fails_as_it_is():
    missing = errors.NotFound("reading repackrun x: not found (HTTP 404)", 404)
    with pytest.raises(errors.NotFound, match="^reading repackrun x: not found"):
        run_follow(Script(missing))
    with pytest.raises(errors.ClusterAPIError, match="refused"):
        run_follow(Script(errors.ClusterAPIError("refused")))


def test_a_run_deleted_or_recreated_while_followed():
    gone = errors.NotFound("reading repackrun x: not found (HTTP 404)", 404)
    with pytest.raises(errors.NotFound, match="was deleted while it was followed"):
        run_follow(Script(RUNNING[0], gone))
    with pytest.raises(errors.NotFound, match=r"deleted and created again .*\(uid u is now u2\)"):
        run_follow(Script(RUNNING[0], state("Pending", uid="u2")))


def test_progress_key_and_describe_of_a_run_without_status():
    bare = {k: v for k, v in EXECUTE.items() if k != "status"}
    assert progress_key(bare) == ("Pending", "", "", (0, 0, 0, 0))
    assert describe(bare) == "Pending"


# ---- status -w ----------------------------------------------------------------------------------
def test_status_watch_of_a_finished_run_prints_the_status(fake_cluster):
    fake_cluster["store"].runs[NAME] = DONE
    r = run("status", NAME, "-w")
    assert r.exit_code == 0, r.output
    assert r.stderr == "Succeeded (ExecutionCompleted): evictions 2/2, replacements bound 2/2; goal met\n"
    assert r.stdout == run("status", NAME).stdout


def test_status_watch_timeout_exits_4_and_says_the_run_goes_on(fake_cluster):
    fake_cluster["store"].runs[NAME] = COOLDOWN
    r = run("status", NAME, "-w", "--timeout", "0s")
    assert r.exit_code == 4, r.output
    assert r.stderr.splitlines() == [
        "Pending (ExecuteCooldownActive): cooldown ends in 9m",
        f"stopped following after 0s: the run is Pending (ExecuteCooldownActive); it goes on in the cluster: "
        f"kubectl repack status {NAME} -w"]
    assert "Phase:       Pending" in r.stdout


def test_status_watch_ctrl_c_exits_130(fake_cluster, monkeypatch):
    store = fake_cluster["store"]
    store.runs[NAME] = RUNNING[0]

    def interrupted(name):
        raise KeyboardInterrupt
    monkeypatch.setattr(store, "get", interrupted)
    r = run("status", NAME, "-w")
    assert r.exit_code == 130
    assert r.stderr == f"stopped following; the run goes on in the cluster: kubectl repack status {NAME} -w\n"
    assert r.stdout == ""


def test_status_watch_with_output_prints_only_the_object(fake_cluster):
    fake_cluster["store"].runs[NAME] = DONE
    r = run("status", NAME, "-w", "-o", "jsonpath={.status.phase}")
    assert (r.exit_code, r.stdout, r.stderr) == (0, "Succeeded", "")


def test_status_timeout_without_watch_is_a_usage_error(fake_cluster):
    r = run("status", NAME, "--timeout", "5m")
    assert r.exit_code == 2 and r.stderr.startswith("error: --timeout applies to -w/--watch only")
    assert fake_cluster["connected"] == []


def test_status_watch_of_a_missing_run_exits_1(fake_cluster):
    r = run("status", "nope", "-w")
    assert r.exit_code == 1
    assert r.stderr == 'error: reading repackrun nope: repackruns.repack.volcano.sh "nope" not found (HTTP 404)\n'
