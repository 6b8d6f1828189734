"""RelocationStore: claims hide a record until their TTL passes or the run shows it taken."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

from tests.unit.webhook.builders import PLACEMENT_KEY, reseal, move, owner, relocation, run
from webhook.admission.relocation_store import RelocationStore

RS = owner("ReplicaSet", "web-7f8d9c")
T0 = datetime(2026, 7, 30, 10, 0, tzinfo=timezone.utc)


def two_record_run(**kw):
    return run(relocations=[relocation("web-7f8d9c-aaaaa", group="g", planned="node-1", **kw),
                            relocation("web-7f8d9c-bbbbb", group="g", planned="node-2")],
               moves=[move("demo", "g", RS, ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"])])


def open_victims(store, now):
    with store.lock:
        index = store.snapshot_locked(now)
    return [r.victim_pod_name for r in index.records if index.is_open(r)]


def claim_first(store, now):
    with store.lock:
        index = store.snapshot_locked(now)
        first = next(r for r in index.records if index.is_open(r))
        store.claim_locked(first.key, now)


def test_a_claim_hides_its_record_until_the_ttl_passes():
    store = RelocationStore(claim_ttl=timedelta(seconds=30), key=PLACEMENT_KEY)
    store.replace_all([two_record_run()])
    assert open_victims(store, T0) == ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"]
    claim_first(store, T0)
    assert open_victims(store, T0) == ["web-7f8d9c-bbbbb"]
    assert open_victims(store, T0 + timedelta(seconds=29.9)) == ["web-7f8d9c-bbbbb"]
    assert open_victims(store, T0 + timedelta(seconds=30)) == ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"]


def test_the_oldest_claim_expiring_does_not_free_a_younger_one():
    store = RelocationStore(claim_ttl=timedelta(seconds=30), key=PLACEMENT_KEY)
    store.replace_all([two_record_run()])
    claim_first(store, T0)
    assert open_victims(store, T0 + timedelta(seconds=10)) == ["web-7f8d9c-bbbbb"]  # cached until the next change
    claim_first(store, T0 + timedelta(seconds=10))  # the second record, the first still open
    assert open_victims(store, T0 + timedelta(seconds=10)) == []
    assert open_victims(store, T0 + timedelta(seconds=30)) == ["web-7f8d9c-aaaaa"]
    assert open_victims(store, T0 + timedelta(seconds=40)) == ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"]


def test_an_unchanged_store_hands_out_the_same_snapshot():
    store = RelocationStore(key=PLACEMENT_KEY)
    store.replace_all([two_record_run()])
    claim_first(store, T0)
    with store.lock:
        a, b = store.snapshot_locked(T0), store.snapshot_locked(T0 + timedelta(seconds=1))
    assert a is b


def test_a_rebuild_shows_new_records_and_keeps_live_claims():
    store = RelocationStore(key=PLACEMENT_KEY)
    store.replace_all([two_record_run()])
    claim_first(store, T0)
    assert open_victims(store, T0) == ["web-7f8d9c-bbbbb"]
    updated = two_record_run()
    updated["status"]["relocations"].append(relocation("web-7f8d9c-ccccc", group="g", planned="node-3"))
    store.upsert(reseal(updated))            # the controller seals what it adds
    assert open_victims(store, T0) == ["web-7f8d9c-bbbbb", "web-7f8d9c-ccccc"]
    store.delete(updated)
    assert open_victims(store, T0) == []


def test_records_that_do_not_match_their_digest_are_not_indexed():
    """SEC-2: a status writer who edits a record (plannedNodeName, to steer a replacement) or adds one
    no longer matches the records digest; the webhook then hands out none of the run's records. It
    verifies without the seal key (any placement key will do); without a placement key it indexes nothing."""
    store = RelocationStore(key=PLACEMENT_KEY)
    store.replace_all([two_record_run()])
    assert open_victims(store, T0) == ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"]
    steered = two_record_run()
    steered["status"]["relocations"][0]["plannedNodeName"] = "attackers-node"
    store.upsert(steered)
    assert open_victims(store, T0) == []
    added = two_record_run()
    added["status"]["relocations"].append(relocation("web-7f8d9c-ccccc", group="g", planned="node-3"))
    store.upsert(added)
    assert open_victims(store, T0) == []
    store.upsert(two_record_run())
    assert open_victims(store, T0) == ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"]
    store.set_key(b"another placement key" * 2)
    assert open_victims(store, T0) == ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"]
    keyless = RelocationStore()
    keyless.replace_all([two_record_run()])
    assert open_victims(keyless, T0) == []


def test_a_seal_without_its_digest_is_not_indexed():
    """The digest is what the webhook checks: a seal alone (the webhook cannot verify it) is not enough."""
    from kubectl_repack.api.control import RECORDS_DIGEST_ANNOTATION

    no_digest = two_record_run()
    del no_digest["metadata"]["annotations"][RECORDS_DIGEST_ANNOTATION]
    store = RelocationStore(key=PLACEMENT_KEY)
    store.replace_all([no_digest])
    assert open_victims(store, T0) == []


def test_the_placement_key_poller_installs_the_key_once_the_controller_made_it():
    from webhook.admission.watches import PlacementKeyPoller

    answers = iter([None, RuntimeError("API server unreachable"), PLACEMENT_KEY])

    def read(api, namespace):
        assert namespace == "repack-system"
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    store = RelocationStore()
    store.replace_all([two_record_run()])
    poller = PlacementKeyPoller(store, "repack-system", object(), read=read)
    assert poller.once() is False and store.key is None and open_victims(store, T0) == []
    assert poller.once() is False and store.key is None      # a failed read keeps what there is
    assert poller.once() is True and store.key == PLACEMENT_KEY
    assert open_victims(store, T0) == ["web-7f8d9c-aaaaa", "web-7f8d9c-bbbbb"]
