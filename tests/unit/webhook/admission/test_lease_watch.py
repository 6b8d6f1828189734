"""Coordinator Lease freshness and the RepackRun watch loop (with a fake API and watch)."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from tests.unit.webhook.builders import PLACEMENT_KEY, relocation, run
from kubectl_repack.api.lease import lease_is_fresh
from webhook.admission.coordinator_liveness import LeaseState
from webhook.admission.relocation_store import RelocationStore
from webhook.admission.watches import RepackRunWatcher

NOW = datetime(2026, 7, 30, 10, 0, 30, tzinfo=timezone.utc)


def lease(renew="2026-07-30T10:00:20.000000Z", duration=15, holder="coordinator-0"):
    return {"metadata": {"name": "repack-coordinator"},
            "spec": {"holderIdentity": holder, "renewTime": renew, "leaseDurationSeconds": duration}}


@pytest.mark.parametrize("obj,fresh", [
    (lease(), True),
    (lease(renew="2026-07-30T10:00:14Z"), False),           # renewed 16 s ago, 15 s lease
    (lease(renew="2026-07-30T10:00:15.000001+00:00"), True),
    (lease(holder=""), False),                               # released
    (lease(duration=None), False),
    (lease(renew="garbage"), False),
    (None, False),
], ids=["renewed-10s-ago", "expired", "just-inside", "no-holder", "no-duration", "bad-time", "no-lease"])
def test_lease_is_fresh(obj, fresh):
    assert lease_is_fresh(obj, NOW) is fresh


def test_lease_state_follows_updates():
    state = LeaseState()
    assert state.fresh(NOW) is False
    state.set(lease())
    assert state.fresh(NOW) is True
    assert state.fresh(NOW + timedelta(seconds=6)) is False
    state.set(None)
    assert state.fresh(NOW) is False


class FakeApi:
    def __init__(self, items):
        self.items, self.lists = items, 0

    def list_cluster_custom_object(self, group, version, plural, **kw):
        self.lists += 1
        return {"items": list(self.items), "metadata": {"resourceVersion": "7"}}


class FakeWatch:
    def __init__(self, events):
        self.events, self.stopped, self.kwargs = events, False, None

    def stream(self, fn, *args, **kwargs):
        self.kwargs = kwargs
        yield from self.events

    def stop(self):
        self.stopped = True


def test_watcher_lists_then_applies_events():
    r1 = run("r1", relocations=[relocation("db-0")])
    r2 = run("r2", relocations=[relocation("db-1")], created="2026-07-30T11:00:00Z")
    r1_done = run("r1", relocations=[relocation("db-0", replacement="db-0")])
    store, api = RelocationStore(key=PLACEMENT_KEY), FakeApi([r1])
    fake = FakeWatch([{"type": "ADDED", "object": r2}, {"type": "MODIFIED", "object": r1_done},
                      {"type": "DELETED", "object": r2}])
    watcher = RepackRunWatcher(store, api_client=object(), api=api, watch_factory=lambda: fake)
    assert store.synced is False
    watcher.once()
    assert store.synced is True and api.lists == 1
    assert fake.kwargs["resource_version"] == "7"
    assert store.snapshot(NOW).records == ()  # r1 took its replacement, r2 was deleted


def test_watcher_error_event_raises_so_the_loop_relists():
    store = RelocationStore(key=PLACEMENT_KEY)
    fake = FakeWatch([{"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}])
    watcher = RepackRunWatcher(store, api_client=object(), api=FakeApi([run()]), watch_factory=lambda: fake)
    with pytest.raises(RuntimeError, match="410"):
        watcher.once()
    assert store.synced is True  # the listing before the watch was installed


class FakeLeaseApi:
    """CoordinationV1Api's listing: client models, as the real one returns them."""

    def __init__(self, lease_obj):
        from kubernetes import client

        self.model = client.ApiClient().deserialize(_Response(lease_obj), "V1Lease")
        self.selectors = []

    def list_namespaced_lease(self, namespace, field_selector=None, **kw):
        from kubernetes import client

        self.selectors.append((namespace, field_selector))
        return client.V1LeaseList(items=[self.model], metadata=client.V1ListMeta(resource_version="9"))


class _Response:
    def __init__(self, obj):
        import json

        self.data = json.dumps(obj)


def test_lease_watcher_lists_the_lease_by_name_then_follows_it_as_raw_json():
    from webhook.admission.watches import LeaseWatcher

    held = lease()
    held["metadata"] = {"name": "repack-coordinator", "namespace": "ops"}
    api = FakeLeaseApi(held)
    fake = FakeWatch([{"type": "MODIFIED", "object": api.model}])
    state = LeaseState()
    watcher = LeaseWatcher(state, "ops", "repack-coordinator", api_client=None, api=api, watch_factory=lambda: fake)
    watcher.once()
    assert api.selectors == [("ops", "metadata.name=repack-coordinator")]
    assert fake.kwargs["resource_version"] == "9" and fake.kwargs["field_selector"] == "metadata.name=repack-coordinator"
    assert state.fresh(NOW) is True
    fake.events = [{"type": "DELETED", "object": api.model}]
    watcher.once()
    assert state.fresh(NOW) is False
