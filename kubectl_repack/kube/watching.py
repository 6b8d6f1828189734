"""List-then-watch of one kind: the event streams the webhook process keeps its memory current from.

Watches stream events, which the request/response calls of `client` do not cover. A `ListWatch`
lists the objects now, then streams their changes from that listing's resourceVersion; every
object comes out as the raw JSON the API server sent (a dict), whichever client API read it. What
the events mean, and re-listing after an error, is the caller's (webhook.admission.watches).
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Optional

from kubectl_repack.api.view import ObjectView
from kubectl_repack.api.run import GROUP, PLURAL, VERSION

WATCH_TIMEOUT_SECONDS = 300   # the API server ends a watch after this; the caller lists again


def to_dict(api_client: Any, obj: Any) -> Any:
    """An object as raw JSON: dicts as they are, the client's models serialised."""
    return obj if isinstance(obj, dict) else api_client.sanitize_for_serialization(obj)


class ListWatch:
    """One kind's objects: `list()` them now, then `events(version)` from that listing on."""

    def __init__(self, api_client: Any, list_call: Callable[..., Any], args: tuple = (), kwargs: Optional[dict] = None,
                 watch_factory: Optional[Callable[[], Any]] = None) -> None:
        if watch_factory is None:
            from kubernetes import watch

            watch_factory = watch.Watch
        self._api_client, self._list, self._args = api_client, list_call, args
        self._kwargs = dict(kwargs or {})
        self._watch_factory = watch_factory

    def list(self) -> tuple[list, Optional[str]]:
        """The objects (raw JSON) and the listing's resourceVersion."""
        listing = to_dict(self._api_client, self._list(*self._args, **self._kwargs))
        return list(listing.get("items") or []), ObjectView(listing).meta.get("resourceVersion")

    def events(self, resource_version: Optional[str], stopped: Callable[[], bool]) -> Iterator[tuple[str, Any]]:
        """(type, object as raw JSON) of each change after `resource_version`, until the API server
        ends the watch or `stopped()` is true when the next event arrives."""
        w = self._watch_factory()
        for event in w.stream(self._list, *self._args, resource_version=resource_version,
                              timeout_seconds=WATCH_TIMEOUT_SECONDS, **self._kwargs):
            if stopped():
                w.stop()
                return
            yield event.get("type"), to_dict(self._api_client, event.get("object"))


def repackruns(api_client: Any = None, api: Any = None, watch_factory: Optional[Callable[[], Any]] = None) -> ListWatch:
    """Every RepackRun (they are few, cluster-scoped); `api` replaces the CustomObjectsApi (tests)."""
    from kubernetes import client

    api_client = api_client or client.ApiClient()
    api = api or client.CustomObjectsApi(api_client)
    return ListWatch(api_client, api.list_cluster_custom_object, (GROUP, VERSION, PLURAL), watch_factory=watch_factory)


def lease(namespace: str, name: str, api_client: Any = None, api: Any = None,
          watch_factory: Optional[Callable[[], Any]] = None) -> ListWatch:
    """One Lease, by name; `api` replaces the CoordinationV1Api (tests)."""
    from kubernetes import client

    api_client = api_client or client.ApiClient()
    api = api or client.CoordinationV1Api(api_client)
    return ListWatch(api_client, api.list_namespaced_lease, (namespace,), {"field_selector": f"metadata.name={name}"},
                     watch_factory=watch_factory)
