"""Background watches that keep the webhook's in-memory state current (the only API I/O it does).

The list-then-watch streams themselves are the kube layer's (kubectl_repack.kube.watching); this
module decides what each event does to the state the admission path reads.

One thread lists and watches RepackRuns into a `RelocationStore`; another watches the
coordinator's leader Lease into a `LeaseState`; a third reads the placement key (a Secret the
controller creates, readable by name by the webhook's and the coordinator's accounts only; the
marks MAC is keyed by it) into the store, until it exists and then now and then
(`PlacementKeyPoller`). The admission path only reads these, so it never
waits on the API server. On any error (410 Gone, a dropped connection) a thread re-lists.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Optional

from kubectl_repack.kube import watching
from webhook.admission.coordinator_liveness import LeaseState
from webhook.admission.relocation_store import RelocationStore

log = logging.getLogger(__name__)


class _Loop(threading.Thread):
    """List, then apply each watched change, until stopped; any failure: pause, list again."""

    def __init__(self, name: str, backoff: float, source: watching.ListWatch) -> None:
        super().__init__(name=name, daemon=True)
        self._stop_event = threading.Event()
        self._backoff = backoff
        self._source = source

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

    def once(self) -> None:
        """One listing and the watch that follows it (until the API server ends it)."""
        items, version = self._source.list()
        self.listed(items)
        for kind, obj in self._source.events(version, self._stop_event.is_set):
            if kind in ("ADDED", "MODIFIED"):
                self.changed(obj)
            elif kind == "DELETED":
                self.deleted(obj)
            elif kind == "ERROR":
                raise RuntimeError(f"watch error: {obj}")

    def listed(self, items: list) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def changed(self, obj: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def deleted(self, obj: Any) -> None:  # pragma: no cover - overridden
        raise NotImplementedError


class RepackRunWatcher(_Loop):
    """List + watch every RepackRun (they are few, cluster-scoped) into the store."""

    def __init__(self, store: RelocationStore, api_client: Any = None, backoff: float = 2.0,
                 watch_factory: Optional[Callable[[], Any]] = None, api: Any = None) -> None:
        super().__init__("repackrun-watch", backoff, watching.repackruns(api_client, api, watch_factory))
        self._store = store

    def listed(self, items: list) -> None:
        self._store.replace_all(items)

    def changed(self, obj: Any) -> None:
        self._store.upsert(obj)

    def deleted(self, obj: Any) -> None:
        self._store.delete(obj)


class LeaseWatcher(_Loop):
    """Watch one Lease by name into a LeaseState."""

    def __init__(self, state: LeaseState, namespace: str, name: str, api_client: Any = None,
                 backoff: float = 2.0, watch_factory: Optional[Callable[[], Any]] = None, api: Any = None) -> None:
        super().__init__("lease-watch", backoff, watching.lease(namespace, name, api_client, api, watch_factory))
        self._state = state

    def listed(self, items: list) -> None:
        self._state.set(items[0] if items else None)

    def changed(self, obj: Any) -> None:
        self._state.set(obj)

    def deleted(self, obj: Any) -> None:
        self._state.set(None)


class PlacementKeyPoller(threading.Thread):
    """Read the placement key into the store: every `retry` seconds until the Secret exists
    (the controller creates it on its first start), then every `refresh` seconds."""

    def __init__(self, store: RelocationStore, namespace: str, api_client: Any,
                 read: Optional[Callable[[Any, str], Optional[bytes]]] = None,
                 retry: float = 5.0, refresh: float = 60.0) -> None:
        super().__init__(name="placement-key", daemon=True)
        if read is None:
            from kubectl_repack.api.gates import PLACEMENT_KEY_SECRET_NAME
            from kubectl_repack.kube.incluster import read_key

            def read(api: Any, namespace: str) -> Optional[bytes]:
                return read_key(api, namespace, PLACEMENT_KEY_SECRET_NAME)
        self._store, self._namespace, self._api = store, namespace, api_client
        self._read, self._retry, self._refresh = read, retry, refresh
        self._stop_event = threading.Event()

    def stop(self) -> None:
        self._stop_event.set()

    def once(self) -> bool:
        """One read; True when the store holds a key afterwards."""
        try:
            key = self._read(self._api, self._namespace)
        except Exception as exc:  # noqa: BLE001 - keep the key we have; try again later
            log.warning("placement-key: %s", exc)
            return self._store.key is not None
        if key is None and self._store.key is None:
            log.info("placement-key: no placement key yet (the controller creates it): no pod is marked")
        if key is not None:
            self._store.set_key(key)
        return key is not None

    def run(self) -> None:
        while not self._stop_event.is_set():
            self._stop_event.wait(self._refresh if self.once() else self._retry)
