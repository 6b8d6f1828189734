"""The interfaces every side effect of the engine goes through (DESIGN convention 5).

The executor reads the cluster (`ClusterReader`), evicts (`Evictor`), writes its run's status
(`RunWriter`) and keeps time (`Clock`); the apply workflow also lists, creates and deletes runs
(`RunStore`), holds the execute Lease (`Mutex`) and talks to the user (`Reporter`). The kube
layer, the webhook's controller and the tests implement them. The events the engine emits
(`on_event(reason, message, warning)`, Events on the RepackRun) are named here too.
"""
from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional, Protocol

if TYPE_CHECKING:
    from .mutex import LeaseDecision

__all__ = ["Clock", "ClusterReader", "Evictor", "RunWriter", "RunStore", "Mutex", "Reporter", "Progress",
           "EvictionResponse"]

# Event reasons (shown by `kubectl describe repackrun`): one per step the run takes.
EV_STARTED, EV_EVICTED, EV_EVICTION_BLOCKED = "Started", "Evicted", "EvictionBlocked"
EV_NOMINATED, EV_PLACED, EV_PLACEMENT_TIMED_OUT = "Nominated", "Placed", "PlacementTimedOut"
EV_COMPLETED, EV_FAILED, EV_CANCELLED = "Completed", "Failed", "Cancelled"
EV_LEFT_OUT = "PodsLeftOut"     # the plan was not allowed to move some pods (the creator may not evict there)
EV_TARGET_CHANGED = "TargetChanged"   # a targeted run's target bound, was deleted or resized: no further eviction
EV_TARGET_BOUND = "TargetBound"         # RELIEF-3: the target was bound after the planned nodes were vacated
EV_TARGET_NOT_BOUND = "TargetNotBound"  # ... or not within the wait (a report, not a failure)
EV_NODE_TAKEN = "VacatedNodeTaken"   # a waiting workload took a node the run vacated ("<node> vacated; now used by ...")


class EvictionResponse(NamedTuple):
    """What the Eviction API answered: HTTP code (201 accepted, 0 unreachable) and the message."""
    code: int
    message: str = ""


@dataclass
class Progress:
    """How far a run is: what `on_progress` hears after every step."""
    evicted: int = 0
    total: int = 0
    bound: int = 0
    rejected: int = 0


class Clock:
    """Wall clock and sleeping, swappable in tests."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ClusterReader(Protocol):
    def snapshot_objects(self) -> list: ...
    def get_pod(self, namespace: str, name: str) -> Optional[dict]: ...
    def get_podgroup(self, namespace: str, name: str) -> Optional[dict]: ...   # read for targeted runs only
    def list_pods(self, namespace: str) -> list: ...
    def list_pdbs(self, namespace: str) -> list: ...


class Evictor(Protocol):
    def evict(self, namespace: str, name: str, uid: str, grace_seconds: Optional[int]) -> tuple:
        """(HTTP code, message) of the Eviction API, e.g. an EvictionResponse."""


class RunWriter(Protocol):
    def get(self, name: str) -> dict: ...
    def update_status(self, name: str, mutate: Callable[[dict], None]) -> dict: ...


class RunStore(Protocol):
    def get(self, name: str) -> dict: ...
    def list(self) -> list: ...
    def create(self, obj: dict) -> dict: ...
    def delete(self, name: str, uid: Optional[str] = None, resource_version: Optional[str] = None) -> bool: ...
    def update_status(self, name: str, mutate: Callable[[dict], None]) -> dict: ...


class Mutex(Protocol):
    def check(self) -> Optional[str]: ...    # None while the Lease is ours and confirmed; else why not
    def stored_cooldown(self) -> dt.timedelta: ...
    def try_acquire(self, me: str, now: dt.datetime, cooldown: dt.timedelta,
                    store_cooldown: Optional[dt.timedelta] = None) -> "LeaseDecision": ...
    def start_renewing(self, me: str) -> None: ...
    def release(self, me: str, run_name: str, completed: Optional[dt.datetime],
                store_cooldown: Optional[dt.timedelta] = None) -> None: ...


class Reporter(Protocol):
    def note(self, message: str) -> None: ...          # one line for the user (stderr)
    def progress(self, progress: Progress) -> None: ...
