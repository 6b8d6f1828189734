"""The controller's own API calls (kubectl_repack.kube.incluster) over a scripted `request`: the owners'
audit Events of an eviction, whether a PodGroup or its workload opted out, and the creator's
SubjectAccessReviews."""
from __future__ import annotations

import pytest

from kubectl_repack.api.control import Creator
from kubectl_repack.errors import ClusterAPIError, NotFound
from kubectl_repack.kube import incluster
from tests import builders as b

PG_PATH = "/apis/scheduling.volcano.sh/v1beta1/namespaces/demo/podgroups/train-pg"
JOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train", "uid": "uid-train"}


class API:
    """Answers GETs from `objects` (path -> object or exception) and POSTs with `answers` in turn
    (else the body back); records every call."""

    def __init__(self, objects=None, post_error=None, answers=()):
        self.objects = dict(objects or {})
        self.post_error = post_error
        self.answers = list(answers)
        self.calls = []

    def __call__(self, api, method, path, body=None, query=None, content_type=None):
        self.calls.append((method, path, body))
        if method == "GET":
            got = self.objects.get(path, NotFound(f"{path} not found", 404))
            if isinstance(got, Exception):
                raise got
            return got
        if self.post_error:
            raise self.post_error
        return self.answers.pop(0) if self.answers else body


@pytest.fixture
def api(monkeypatch):
    def install(objects=None, **kw):
        fake = API(objects, **kw)
        monkeypatch.setattr(incluster, "request", fake)
        return fake
    return install


def podgroup(annotations=None, owner=("Job", "train")):
    pg = b.podgroup("train-pg", ns="demo", owner=owner)
    pg["metadata"]["uid"] = "uid-pg"
    if annotations:
        pg["metadata"]["annotations"] = annotations
    return pg


def posted(fake):
    return [(body["metadata"]["namespace"], body["involvedObject"], body["reason"], body["message"])
            for method, path, body in fake.calls if method == "POST"]


def test_an_eviction_leaves_an_event_on_the_podgroup_and_on_the_victims_owner(api):
    fake = api({PG_PATH: podgroup()})
    rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "uid-rs"}
    incluster.record_eviction(None, "demo", "train-pg", rs, "RepackEvicted", "pod p evicted by RepackRun r", "c")
    assert posted(fake) == [
        ("demo", {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "name": "train-pg",
                  "namespace": "demo", "uid": "uid-pg"}, "RepackEvicted", "pod p evicted by RepackRun r"),
        ("demo", {**rs, "namespace": "demo"}, "RepackEvicted", "pod p evicted by RepackRun r")]
    assert all(path == "/api/v1/namespaces/demo/events" for method, path, _ in fake.calls if method == "POST")


def test_without_the_pods_owner_the_podgroups_owner_gets_the_event(api):
    fake = api({PG_PATH: podgroup()})
    incluster.record_eviction(None, "demo", "train-pg", None, "RepackEvicted", "m", "c")
    assert [o for _, o, _, _ in posted(fake)][1] == {**JOB, "namespace": "demo"}
    # a PodGroup without a controlling owner: only its own Event
    fake = api({PG_PATH: podgroup(owner=None)})
    incluster.record_eviction(None, "demo", "train-pg", None, "RepackEvicted", "m", "c")
    assert [o["kind"] for _, o, _, _ in posted(fake)] == ["PodGroup"]


def test_an_unreadable_podgroup_or_a_refused_event_never_raises(api):
    fake = api({PG_PATH: ClusterAPIError("forbidden", 403)})
    incluster.record_eviction(None, "demo", "train-pg", JOB, "RepackEvicted", "m", "c")
    assert [o["kind"] for _, o, _, _ in posted(fake)] == ["Job"]           # the owner still hears of it
    fake = api({PG_PATH: podgroup()}, post_error=ClusterAPIError("events are forbidden", 403))
    incluster.record_eviction(None, "demo", "train-pg", JOB, "RepackEvicted", "m", "c")
    assert len([c for c in fake.calls if c[0] == "POST"]) == 2


def test_controlling_owner_is_the_controller_reference_with_every_field():
    pod = b.pod("p", group="train-pg", ns="demo")
    assert incluster.controlling_owner(pod) == JOB
    pod["metadata"]["ownerReferences"][0]["controller"] = False
    assert incluster.controlling_owner(pod) is None
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "X", "name": "x", "controller": True}]
    assert incluster.controlling_owner(pod) is None                          # no uid: no Event can name it
    assert incluster.controlling_owner(None) is None and incluster.controlling_owner({"metadata": []}) is None


JOB_PATH = "/apis/batch.volcano.sh/v1alpha1/namespaces/demo/jobs/train"


@pytest.mark.parametrize("objects,expected", [
    ({PG_PATH: podgroup()}, ""),
    ({PG_PATH: podgroup({"repack.volcano.sh/do-not-disrupt": "true"})},
     "PodGroup demo/train-pg is annotated repack.volcano.sh/do-not-disrupt=true"),
    ({PG_PATH: podgroup(), JOB_PATH: {"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}},
     "VCJob demo/train is annotated karpenter.sh/do-not-disrupt=true"),
    ({PG_PATH: podgroup(), JOB_PATH: {"metadata": {"annotations": {"repack.volcano.sh/do-not-disrupt": "false"}}}},
     ""),
    ({}, ""),                                                                   # the PodGroup is gone
    ({PG_PATH: podgroup(owner=("ReplicaSet", "rs", "apps/v1"))}, ""),          # no workload that could opt out
], ids=["none", "podgroup", "vcjob", "vcjob-false", "gone", "other-owner"])
def test_pod_group_opt_out_reads_the_podgroup_and_its_workload(api, objects, expected):
    api(objects)
    assert incluster.pod_group_opt_out(None, "demo", "train-pg") == expected


def test_pod_group_opt_out_does_not_guess_when_it_cannot_read(api):
    api({PG_PATH: ClusterAPIError("forbidden", 403)})
    with pytest.raises(ClusterAPIError):
        incluster.pod_group_opt_out(None, "demo", "train-pg")


def test_eviction_denied_asks_as_the_creator_per_namespace_until_the_first_refusal(api):
    fake = api(answers=[{"status": {"allowed": True}}, {"status": {"allowed": False, "reason": "no rule"}}])
    why = incluster.eviction_denied(None, Creator("alice", "uid-a", ("team",)), ["a", "b", "c"])
    assert why == "user 'alice' (the run's creator) may not create pods/eviction in namespace 'b' (no rule)"
    specs = [body["spec"] for _, _, body in fake.calls]
    assert [s["resourceAttributes"]["namespace"] for s in specs] == ["a", "b"]
    assert specs[0] == {"user": "alice", "groups": ["team"], "uid": "uid-a",
                        "resourceAttributes": {"namespace": "a", "verb": "create", "group": "", "version": "v1",
                                               "resource": "pods", "subresource": "eviction"}}
