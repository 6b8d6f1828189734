"""Background watches that keep the webhook's in-memory state current (the only API I/O it does).

Watches stream events, which the kube layer's request/response calls do not cover; they are the
one place outside kubectl_repack.kube that talks to the kubernetes client.

One thread lists and watches RepackRuns into a `RelocationStore`; another watches the
coordinator's leader Lease into a `LeaseState`. The admission path only reads these, so it never
waits on the API server. On any error (410 Gone, a dropped connection) a thread re-lists.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional

from kubectl_repack.api.run import GROUP, PLURAL, VERSION
from webhook.admission.coordinator_liveness import LeaseState
from webhook.admission.relocation_store import RelocationStore

log = logging.getLogger(__name__)

WATCH_TIMEOUT_SECONDS = 300


def _to_dict(api_client: Any, obj: Any) -> Any:
    return obj if isinstance(obj, dict) else api_client.sanitize_for_serialization(obj)


class _Loop(threading.Thread):
    def __init__(self, name: str, backoff: float) -> None:
        super().__init__(name=name, daemon=True)
        self._stop_event = threading.Event()
        self._backoff = backoff

    def stop(self) -> None:
        """Ask the loop to end after the current watch call returns."""
        self._stop_event.set()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                self.once()
            except Exception as exc:  # noqa: BLE001 - any failure means: re-list after a pause
                log.warning("%s: %s; re-listing in %.1fs", self.name, exc, self._backoff)
                self._stop_event.wait(self._backoff)

    def once(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class RepackRunWatcher(_Loop):
    """List + watch every RepackRun (they are few, cluster-scoped) into the store."""

    def __init__(self, store: RelocationStore, api_client: Any = None, backoff: float = 2.0,
                 watch_factory: Optional[Callable[[], Any]] = None, api: Any = None) -> None:
        super().__init__("repackrun-watch", backoff)
        from kubernetes import client, watch  # imported here so pure modules stay client-free
        self._api_client = api_client or client.ApiClient()
        self._api = api or client.CustomObjectsApi(self._api_client)
        self._watch_factory = watch_factory or watch.Watch
        self._store = store

    def once(self) -> None:
        listing = self._api.list_cluster_custom_object(GROUP, VERSION, PLURAL)
        self._store.replace_all(listing.get("items") or [])
        version = (listing.get("metadata") or {}).get("resourceVersion")
        w = self._watch_factory()
        for event in w.stream(self._api.list_cluster_custom_object, GROUP, VERSION, PLURAL,
                              resource_version=version, timeout_seconds=WATCH_TIMEOUT_SECONDS):
            if self._stop_event.is_set():
                w.stop()
                return
            kind, obj = event.get("type"), _to_dict(self._api_client, event.get("object"))
            if kind in ("ADDED", "MODIFIED"):
                self._store.upsert(obj)
            elif kind == "DELETED":
                self._store.delete(obj)
            elif kind == "ERROR":
                raise RuntimeError(f"watch error: {obj}")


class LeaseWatcher(_Loop):
    """Watch one Lease by name into a LeaseState."""

    def __init__(self, state: LeaseState, namespace: str, name: str, api_client: Any = None,
                 backoff: float = 2.0) -> None:
        super().__init__("lease-watch", backoff)
        from kubernetes import client, watch
        self._api_client = api_client or client.ApiClient()
        self._api = client.CoordinationV1Api(self._api_client)
        self._watch = watch
        self._state, self._namespace, self._lease_name = state, namespace, name

    def once(self) -> None:
        selector = f"metadata.name={self._lease_name}"
        listing = self._api.list_namespaced_lease(self._namespace, field_selector=selector)
        items = listing.items or []
        self._state.set(_to_dict(self._api_client, items[0]) if items else None)
        w = self._watch.Watch()
        for event in w.stream(self._api.list_namespaced_lease, self._namespace, field_selector=selector,
                              resource_version=listing.metadata.resource_version,
                              timeout_seconds=WATCH_TIMEOUT_SECONDS):
            if self._stop_event.is_set():
                w.stop()
                return
            kind, obj = event.get("type"), event.get("object")
            if kind in ("ADDED", "MODIFIED"):
                self._state.set(_to_dict(self._api_client, obj))
            elif kind == "DELETED":
                self._state.set(None)
            elif kind == "ERROR":
                raise RuntimeError(f"watch error: {obj}")
