"""A coordination.k8s.io/v1 Lease as our decisions read it: who holds it, until when, and the
annotations the execute mutex keeps on it. Pure; the kube layer's LeaseClient reads and writes it."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from .times import parse_time


@dataclass(frozen=True)
class LeaseRecord:
    """The parts of a Lease object the decisions read."""
    holder: str = ""
    renew_time: Optional[dt.datetime] = None
    duration_seconds: int = 0
    transitions: int = 0
    annotations: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, lease: Optional[Mapping[str, Any]]) -> Optional["LeaseRecord"]:
        if not isinstance(lease, Mapping):
            return None
        spec = lease.get("spec") if isinstance(lease.get("spec"), Mapping) else {}
        meta = lease.get("metadata") if isinstance(lease.get("metadata"), Mapping) else {}
        duration = spec.get("leaseDurationSeconds")
        return cls(holder=str(spec.get("holderIdentity") or ""),
                   renew_time=parse_time(spec.get("renewTime") or spec.get("acquireTime")),
                   duration_seconds=duration if isinstance(duration, int) and not isinstance(duration, bool) else 0,
                   transitions=int(spec.get("leaseTransitions") or 0),
                   annotations=dict(meta.get("annotations") or {}))

    def expires(self) -> Optional[dt.datetime]:
        """renewTime + leaseDurationSeconds (None when either is missing)."""
        if self.renew_time is None or self.duration_seconds <= 0:
            return None
        return self.renew_time + dt.timedelta(seconds=self.duration_seconds)

    def is_fresh(self, now: dt.datetime) -> bool:
        """A holder is named and the Lease has not expired at `now`."""
        expires = self.expires()
        if now.tzinfo is None:
            now = now.replace(tzinfo=dt.timezone.utc)
        return bool(self.holder) and expires is not None and now < expires


def lease_is_fresh(lease: Optional[Mapping[str, Any]], now: dt.datetime) -> bool:
    """Whether the Lease object (a dict as the API returns it) is held and unexpired at `now`."""
    record = LeaseRecord.from_dict(lease)
    return record is not None and record.is_fresh(now)
