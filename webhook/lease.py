"""Is the coordinator alive? Freshness of its leader Lease (coordination.k8s.io/v1), pure.

The webhook only gates a pod while this holds, so a dead coordinator never leaves pods gated.
"""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping, Optional

def parse_time(value: Any) -> Optional[datetime]:
    """Parse a Kubernetes MicroTime/Time string (or pass a datetime through); None if unusable."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().replace("Z", "+00:00")
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def lease_is_fresh(lease: Optional[Mapping[str, Any]], now: datetime) -> bool:
    """True while `renewTime + leaseDurationSeconds` lies in the future and a holder is named."""
    if not isinstance(lease, Mapping):
        return False
    spec = lease.get("spec") if isinstance(lease.get("spec"), Mapping) else {}
    if not spec.get("holderIdentity"):
        return False
    renewed = parse_time(spec.get("renewTime") or spec.get("acquireTime"))
    duration = spec.get("leaseDurationSeconds")
    if renewed is None or not isinstance(duration, int) or duration <= 0:
        return False
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    return now < renewed + timedelta(seconds=duration)


class LeaseState:
    """Latest observed coordinator Lease, updated by the watch thread, read per admission."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lease: Optional[Mapping[str, Any]] = None

    def set(self, lease: Optional[Mapping[str, Any]]) -> None:
        """Store the latest Lease object (None when deleted)."""
        with self._lock:
            self._lease = lease

    def fresh(self, now: datetime) -> bool:
        """Whether gating is allowed at `now`."""
        with self._lock:
            lease = self._lease
        return lease_is_fresh(lease, now)
