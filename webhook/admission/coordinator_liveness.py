"""Is the coordinator alive? The latest observed leader Lease, checked per admission.

The webhook only gates a pod while this holds, so a dead coordinator never leaves pods gated.
"""
from __future__ import annotations

import threading
from datetime import datetime
from typing import Any, Mapping, Optional

from kubectl_repack.api.lease import lease_is_fresh


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
