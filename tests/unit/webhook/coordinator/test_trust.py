"""The coordinator acts only on what it can verify (SEC-2, SEC-5): a pod's marks must carry the
webhook's MAC for that pod (keyed by the placement key), and the run's records must match their
records digest (no key: the coordinator cannot read the records-seal key). A status edit of
plannedNodeName, a digest missing, marks copied from a template, or no readable placement key: the
pod is neither recorded nor nominated, only released. One tick against fake ports; a fake clock."""
from __future__ import annotations

import copy

from kubectl_repack.api.control import RECORDS_DIGEST_ANNOTATION, RECORDS_SEAL_ANNOTATION
from kubectl_repack.api.gates import MAC_COVERED_MARKS, MARKS_MAC_ANNOTATION, PLACEMENT_GATE, marks_mac
from tests.unit.webhook.builders import PLACEMENT_KEY, SEAL_KEY, reseal
from tests.unit.webhook.coordinator.test_coordinator import (NOW, LEASE, FakeCluster, FakeElector, cluster,
                                                            replacement_pod, the_run)
from webhook.coordinator.loop import Coordinator, PlacementKey
from webhook.coordinator.placement import decide, replacement_of

OWNER_UID = "uid-train"


def marked(pod=None, key=PLACEMENT_KEY):
    """A replacement pod whose marks the webhook wrote (MAC over them, its namespace and owner)."""
    pod = pod or replacement_pod()
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "train",
                                           "uid": OWNER_UID, "controller": True}]
    ann = pod["metadata"]["annotations"]
    ann[MARKS_MAC_ANNOTATION] = marks_mac(key, "demo", OWNER_UID, {k: ann.get(k) for k in MAC_COVERED_MARKS})
    return pod


def coordinator(fake, read=lambda: PLACEMENT_KEY):
    return Coordinator(fake, fake, FakeElector(), clock=lambda: NOW, placement_lease=LEASE,
                       placement_key=PlacementKey(read, clock=lambda: 0.0))


def gates(fake):
    return [g["name"] for g in fake.pods[("demo", "train-worker-0")]["spec"]["schedulingGates"]]


def test_verified_marks_and_sealed_records_are_acted_on():
    fake = FakeCluster([marked()], [the_run()], cluster())
    coordinator(fake).tick()
    assert [c[0] for c in fake.calls] == ["status", "nominate", "status", "ungate"], fake.calls


def test_a_status_edit_of_the_planned_node_steers_nothing():
    """SEC-2: a repackruns/status writer points the record at another node; the records digest no
    longer matches, so the coordinator neither records the pod nor nominates: it only lifts the gate."""
    steered = the_run()
    steered["status"]["relocations"][0]["plannedNodeName"] = "node-a"
    fake = FakeCluster([marked()], [steered], cluster())
    coordinator(fake).tick()
    assert [c[0] for c in fake.calls] == ["ungate"], fake.calls
    assert not fake.pods[("demo", "train-worker-0")]["status"].get("nominatedNodeName")
    assert PLACEMENT_GATE not in gates(fake)
    assert fake.runs["run-1"]["status"]["relocations"][0]["placement"] == {"phase": "WaitingForReplacement"}


def test_a_record_added_by_a_status_writer_steers_nothing():
    unsealed = the_run()
    del unsealed["metadata"]["annotations"][RECORDS_DIGEST_ANNOTATION]
    fake = FakeCluster([marked()], [unsealed], cluster())
    coordinator(fake).tick()
    assert [c[0] for c in fake.calls] == ["ungate"], fake.calls


def test_a_seal_alone_is_not_enough_and_the_digest_needs_no_seal_key():
    """The coordinator verifies the digest, which needs no key; it never reads the seal key, so a
    run with a seal but no digest (an older controller, or a forged seal) steers nothing."""
    no_digest = the_run()
    del no_digest["metadata"]["annotations"][RECORDS_DIGEST_ANNOTATION]
    assert RECORDS_SEAL_ANNOTATION in no_digest["metadata"]["annotations"]
    fake = FakeCluster([marked()], [no_digest], cluster())
    coordinator(fake).tick()
    assert [c[0] for c in fake.calls] == ["ungate"], fake.calls
    digest_only = the_run()
    del digest_only["metadata"]["annotations"][RECORDS_SEAL_ANNOTATION]
    fake = FakeCluster([marked()], [digest_only], cluster())
    coordinator(fake).tick()
    assert [c[0] for c in fake.calls] == ["status", "nominate", "status", "ungate"], fake.calls


def test_marks_made_with_the_seal_key_do_not_verify():
    """The marks MAC is keyed by the placement key, not the records-seal key."""
    fake = FakeCluster([marked(key=SEAL_KEY)], [the_run()], cluster())
    coordinator(fake).tick()
    assert [c[0] for c in fake.calls] == ["ungate"], fake.calls


def test_marks_copied_onto_another_workloads_pod_take_no_record():
    """SEC-5: the marks (MAC included) of a genuine replacement copied into a template: the pod the
    template's controller creates has another owner UID, so its marks do not verify."""
    copied = marked()
    copied["metadata"]["ownerReferences"][0]["uid"] = "uid-attackers-replicaset"
    fake = FakeCluster([copied], [the_run()], cluster())
    coordinator(fake).tick()
    assert [c[0] for c in fake.calls] == ["ungate"], fake.calls
    assert fake.runs["run-1"]["status"]["relocations"][0]["placement"] == {"phase": "WaitingForReplacement"}


def test_without_a_readable_key_nothing_is_acted_on_and_the_key_is_read_again():
    reads = []
    fake = FakeCluster([marked()], [the_run()], cluster())
    now = [0.0]

    def read():
        reads.append(now[0])
        return None if len(reads) == 1 else PLACEMENT_KEY

    c = Coordinator(fake, fake, FakeElector(), clock=lambda: NOW, placement_lease=LEASE,
                    placement_key=PlacementKey(read, retry=5.0, refresh=300.0, clock=lambda: now[0]))
    c.tick()
    assert [call[0] for call in fake.calls] == ["ungate"]
    assert reads == [0.0]
    now[0] = 4.9
    c.placement_key.get()
    assert reads == [0.0]          # not before `retry`
    now[0] = 5.0
    assert c.placement_key.get() == PLACEMENT_KEY and reads == [0.0, 5.0]
    now[0] = 100.0
    c.placement_key.get()
    assert reads == [0.0, 5.0]     # known: read again only after `refresh`


def test_the_pure_decisions_take_the_checks():
    pod = marked()
    assert replacement_of(pod, lambda p: "copied").run_name == ""
    assert replacement_of(pod, lambda p: "").run_name == "run-1"
    d = decide(replacement_of(pod, lambda p: ""), the_run(), NOW, LEASE, lambda n: None, run_problem="records do not verify")
    assert d.ungate and not d.record and not d.nominate and "records do not verify" in d.reason
    resealed = reseal(copy.deepcopy(the_run()))
    assert decide(replacement_of(pod, lambda p: ""), resealed, NOW, LEASE, lambda n: None).nominate == "node-b"


def test_there_is_no_coordinator_and_no_replacement_reading_without_the_marks_check():
    """No unchecked mode for tests to use: the coordinator needs its placement key, and reading a
    replacement back needs the marks check; a test of the decision alone passes one that trusts."""
    import pytest

    fake = FakeCluster([marked()], [the_run()])
    with pytest.raises(TypeError, match="placement_key"):
        Coordinator(fake, fake, FakeElector(), clock=lambda: NOW, placement_lease=LEASE)
    with pytest.raises(TypeError, match="verify"):
        replacement_of(marked())
