"""The run API's one-home rules: relocation records round-trip, times and durations, the owner and
PodGroup identity rule the planner and the webhook share."""
from __future__ import annotations

import datetime as dt

import pytest

from kubectl_repack.api import times
from kubectl_repack.api.lease import LeaseRecord, lease_is_fresh
from kubectl_repack.api.matching import pod_identity
from kubectl_repack.api.run import Eviction, Placement, Relocation, relocations
from planner.model import controller_of, pod_group_name

RECORD = {"namespace": "demo", "podGroupName": "train", "victimPodName": "train-worker-0", "victimPodUID": "u1",
          "plannedNodeName": "n2", "replacementPodGroupName": "train-2",
          "eviction": {"phase": "Accepted", "message": "Eviction API accepted the eviction"},
          "placement": {"phase": "Placed", "selectedNodeName": "n2", "replacementPodName": "train-worker-0",
                        "replacementPodUID": "u2", "actualNodeName": "n2"}}


def test_relocation_records_round_trip_and_read_defensively():
    rec = Relocation.from_dict(RECORD)
    assert rec.to_dict() == RECORD
    assert rec.eviction.evicted and rec.placement.placed and rec.victim == "demo/train-worker-0"
    bare = Relocation.from_dict({"namespace": "demo", "victimPodName": "p", "eviction": None, "placement": "junk"})
    assert bare.eviction == Eviction() and bare.placement == Placement() and not bare.eviction.evicted
    assert relocations({"spec": {}, "status": {"relocations": [RECORD]}}) == [rec]
    assert relocations({"relocations": [RECORD]}) == [rec]


@pytest.mark.parametrize("text, seconds", [("0s", 0), ("0", 0), ("45", 45), ("90s", 90), ("1h30m", 5400),
                                           ("500ms", 0.5), ("1.5s", 1.5)])
def test_durations_are_go_durations_or_whole_seconds(text, seconds):
    assert times.parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "1.5", "soon", "-5s", "1m 30s", " ", None])
def test_durations_refused(text):
    with pytest.raises(ValueError):
        times.parse_duration(text)


def test_durations_print_as_go_does():
    assert [times.format_duration(dt.timedelta(seconds=s)) for s in (0, 90, 600, 3600, 0.5)] == \
        ["0s", "1m30s", "10m", "1h", "500ms"]


def test_times_are_written_and_read_in_one_format():
    t = dt.datetime(2026, 7, 30, 8, 0, 1, 250000, tzinfo=dt.timezone.utc)
    assert times.rfc3339(t) == "2026-07-30T08:00:01Z"
    assert times.micro_time(t) == "2026-07-30T08:00:01.250000Z"
    assert times.parse_time(times.micro_time(t)) == t
    assert times.parse_time("2026-07-30T08:00:01") == t.replace(microsecond=0)     # naive: UTC
    assert times.parse_time("yesterday") is None and times.parse_time(None) is None


def test_lease_freshness_needs_a_holder_a_duration_and_a_future_expiry():
    now = dt.datetime(2026, 7, 30, 8, 0, 10, tzinfo=dt.timezone.utc)
    lease = {"spec": {"holderIdentity": "a", "renewTime": "2026-07-30T08:00:00.000000Z", "leaseDurationSeconds": 15}}
    assert lease_is_fresh(lease, now)
    assert not lease_is_fresh(lease, now + dt.timedelta(seconds=5))
    assert not lease_is_fresh({"spec": {**lease["spec"], "holderIdentity": None}}, now)
    assert not lease_is_fresh({"spec": {**lease["spec"], "leaseDurationSeconds": "15"}}, now)
    assert LeaseRecord.from_dict(None) is None


OWNERS = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"},
          {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7f8d9c", "controller": True}]


def test_the_controller_is_the_controller_reference_only():
    """As apimachinery's GetControllerOf: a non-controller owner manages nothing."""
    assert controller_of(OWNERS).name == "web-7f8d9c" and controller_of(OWNERS).group == "apps"
    assert controller_of(OWNERS[:1]) is None and controller_of(None) is None
    pod = {"metadata": {"name": "web-7f8d9c-x", "namespace": "demo", "ownerReferences": OWNERS[:1]}}
    assert pod_identity(pod).controller is None


def test_one_podgroup_key_set_for_planner_and_webhook():
    for anns, labels, want in [({"scheduling.k8s.io/group-name": "a", "scheduling.volcano.sh/group-name": "b"},
                                       {}, "a"),
                                      ({"scheduling.volcano.sh/group-name": "b"}, {}, "b"),
                                      ({}, {"volcano.sh/podgroup": "c"}, "c"),
                                      ({}, {}, "")]:
        assert pod_group_name(anns, labels) == want
        pod = {"metadata": {"name": "p", "annotations": anns, "labels": labels}}
        assert pod_identity(pod, "ns").group_name == want
