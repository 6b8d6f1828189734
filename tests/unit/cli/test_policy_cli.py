"""`kubectl repack policy create|get|suspend|resume|trigger` (POLICY-1, POLICY-2) against an in-memory API
server: what each sends, what it prints, and that a bad policy is refused before anything is sent."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from kubectl_repack.api.control import Creator
from kubectl_repack.api.policy import MANUAL_TRIGGER_ANNOTATION
from kubectl_repack.errors import Conflict
from kubectl_repack.kube import client as kclient
from kubectl_repack.kube.policies import PolicyStore
from tests.unit.cli.conftest import run
from tests.unit.kube.fake_server import FakeServer

REPO = Path(__file__).parents[3]
SAMPLE = REPO / "config" / "samples" / "ascend-nightly-policy.yaml"
POLICIES = "/apis/repack.volcano.sh/v1alpha1/repackpolicies"
ALICE = Creator("alice", "u-a", ("team-a",)).annotations()


@pytest.fixture
def server(monkeypatch):
    fake = FakeServer()
    monkeypatch.setattr(kclient, "connect", lambda kubeconfig=None, context=None, overrides=None: fake.api)
    return fake


def stored(name="ascend-nightly-policy", **status):
    obj = yaml.safe_load(SAMPLE.read_text())
    obj["metadata"]["annotations"] = dict(ALICE)
    obj["status"] = status
    return obj


def test_create_validates_then_posts_with_the_creator_record(server, tmp_path):
    obj = yaml.safe_load(SAMPLE.read_text())
    obj["metadata"]["annotations"] = dict(ALICE)    # as the SelfSubjectReview would fill in
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(obj))
    r = run("policy", "create", "-f", path)
    assert r.exit_code == 0, r.output
    assert r.stdout == "repackpolicy.repack.volcano.sh/ascend-nightly-policy created\n"
    (post,) = [q for q in server.requests if q[0] == "POST"]
    assert post[1] == POLICIES and post[2]["spec"]["trigger"] == {"cronSchedule": "0 2 * * *", "onFragAbovePercent": 20}
    r = run("policy", "create", "-f", path)
    assert r.exit_code == 1 and "already exists" in r.stderr


def test_create_refuses_a_bad_policy_naming_the_field_before_connecting(server, tmp_path):
    obj = yaml.safe_load(SAMPLE.read_text())
    obj["spec"]["trigger"]["cronSchedule"] = "0 2 31 2 * *"
    obj["spec"]["windows"][0].pop("duration")
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(obj))
    r = run("policy", "create", "-f", path)
    assert r.exit_code == 2 and r.stderr == "error: spec.windows[0].duration: required field is missing\n", r.stderr
    obj["spec"]["windows"][0]["duration"] = "4h"
    path.write_text(yaml.safe_dump(obj))
    r = run("policy", "create", "-f", path)
    assert r.exit_code == 2 and r.stderr.startswith("error: spec.trigger.cronSchedule: '0 2 31 2 * *' has 6 field(s)")
    assert "Traceback" not in r.output and server.requests == []


def test_get_shows_the_columns_and_why(server):
    server.objects[f"{POLICIES}/ascend-nightly-policy"] = stored(
        lastTriggerTime="2026-12-01T02:00:00Z", nextTriggerTime="2026-12-02T01:00:00Z",
        lastRunStatus={"reason": "ExecutionCompleted"},
        lastEvaluation={"triggered": False, "message": "no trigger fired: fragmentation is 0%, not above 20%"},
        conditions=[{"type": "Healthy", "status": "True", "reason": "ReconcileSucceeded"}])
    r = run("policy", "get", "ascend-nightly-policy", "-o", "wide")
    assert r.exit_code == 0, r.output
    head, row = r.stdout.splitlines()
    assert head.split() == ["NAME", "SUSPEND", "LAST-TRIGGER", "NEXT", "LAST-RESULT", "HEALTHY", "MESSAGE"]
    assert row.split()[:6] == ["ascend-nightly-policy", "false", "2026-12-01T02:00:00Z", "2026-12-02T01:00:00Z",
                               "ExecutionCompleted", "True"]
    assert row.endswith("no trigger fired: fragmentation is 0%, not above 20%")
    r = run("policy", "get", "ascend-nightly-policy", "-o", "json")
    assert json.loads(r.stdout)["metadata"]["name"] == "ascend-nightly-policy"
    r = run("policy", "get", "nope")
    assert r.exit_code == 1 and "not found" in r.stderr


def test_suspend_resume_and_trigger_are_merge_patches(server):
    server.objects[f"{POLICIES}/ascend-nightly-policy"] = stored()
    for verb, said in (("suspend", "suspended"), ("resume", "resumed")):
        r = run("policy", verb, "ascend-nightly-policy")
        assert r.exit_code == 0 and r.stdout == f"repackpolicy.repack.volcano.sh/ascend-nightly-policy {said}\n"
    patches = [q[2] for q in server.requests if q[0] == "PATCH"]
    assert patches == [{"spec": {"suspend": True}}, {"spec": {"suspend": False}}]
    r = run("policy", "trigger", "ascend-nightly-policy", "-o", "name")
    assert r.exit_code == 0 and r.stdout == "repackpolicy.repack.volcano.sh/ascend-nightly-policy\n"
    ann = server.objects[f"{POLICIES}/ascend-nightly-policy"]["metadata"]["annotations"]
    assert ann[MANUAL_TRIGGER_ANNOTATION].endswith("Z") and ann["repack.volcano.sh/creator-username"] == "alice"


def test_status_write_is_read_modify_write_and_retried_on_conflict(server):
    obj = stored()
    obj["metadata"]["uid"] = "uid-1"
    server.objects[f"{POLICIES}/ascend-nightly-policy"] = obj
    server._store(f"{POLICIES}/ascend-nightly-policy", obj)
    store = PolicyStore(server.api)
    calls = []

    def mutate(st):
        calls.append(copy.deepcopy(st))
        if len(calls) == 1:   # someone else writes meanwhile: the first PUT gets 409
            server._store(f"{POLICIES}/ascend-nightly-policy", server.objects[f"{POLICIES}/ascend-nightly-policy"])
        st["lastEvaluationTime"] = "2026-12-01T00:00:00Z"
    out = store.update_status("ascend-nightly-policy", "uid-1", mutate)
    assert len(calls) == 2 and out["status"]["lastEvaluationTime"] == "2026-12-01T00:00:00Z"
    assert store.update_status("ascend-nightly-policy", "another-incarnation", mutate) is None
    assert store.update_status("gone", "", mutate) is None
    with pytest.raises(Conflict):
        store.create(stored())
