"""The interfaces the engine's side effects go through (DESIGN convention 5)."""
from __future__ import annotations

import datetime as dt
import time
from typing import Callable, NamedTuple, Optional, Protocol

__all__ = ["Clock", "ClusterReader", "Evictor", "RunWriter", "EvictionResponse"]


class EvictionResponse(NamedTuple):
    """What the Eviction API answered: HTTP code (201 accepted, 0 unreachable) and the message."""
    code: int
    message: str = ""


class Clock:
    """Wall clock and sleeping, swappable in tests."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ClusterReader(Protocol):
    def snapshot_objects(self) -> list: ...
    def get_pod(self, namespace: str, name: str) -> Optional[dict]: ...
    def list_pods(self, namespace: str) -> list: ...
    def list_pdbs(self, namespace: str) -> list: ...


class Evictor(Protocol):
    def evict(self, namespace: str, name: str, uid: str, grace_seconds: Optional[int]) -> tuple:
        """(HTTP code, message) of the Eviction API, e.g. an EvictionResponse."""


class RunWriter(Protocol):
    def get(self, name: str) -> dict: ...
    def update_status(self, name: str, mutate: Callable[[dict], None]) -> dict: ...
