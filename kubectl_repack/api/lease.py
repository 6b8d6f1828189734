"""A coordination.k8s.io/v1 Lease as our decisions read it: who holds it, until when, and the
annotations the execute mutex keeps on it. Pure; the kube layer's LeaseClient reads and writes it."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from .times import parse_time
from .view import ObjectView


@dataclass(frozen=True)
class LeaseRecord:
    """The parts of a Lease object the decisions read."""
    holder: str = ""
    renew_time: Optional[dt.datetime] = None
    duration_seconds: int = 0
    transitions: int = 0
    annotations: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""

    @classmethod
    def from_dict(cls, lease: Optional[Mapping[str, Any]]) -> Optional["LeaseRecord"]:
        if not isinstance(lease, Mapping):
            return None
        view = ObjectView(lease)
        spec, meta = view.spec, view.meta
        duration = spec.get("leaseDurationSeconds")
        return cls(holder=str(spec.get("holderIdentity") or ""),
                   renew_time=parse_time(spec.get("renewTime") or spec.get("acquireTime")),
                   duration_seconds=duration if isinstance(duration, int) and not isinstance(duration, bool) else 0,
                   transitions=int(spec.get("leaseTransitions") or 0),
                   annotations=dict(meta.get("annotations") or {}),
                   resource_version=str(meta.get("resourceVersion") or ""))

    @property
    def observation_key(self) -> tuple:
        """What identifies one write of the Lease: a new holder, renewal or any other write changes it."""
        return (self.holder, self.renew_time, self.duration_seconds, self.transitions, self.resource_version)

    def expires(self) -> Optional[dt.datetime]:
        """renewTime + leaseDurationSeconds (None when either is missing). On the *holder's* clock:
        a candidate judges expiry by when it observed the record (LeaseObserver), never by this."""
        if self.renew_time is None or self.duration_seconds <= 0:
            return None
        return self.renew_time + dt.timedelta(seconds=self.duration_seconds)

    def is_fresh(self, now: dt.datetime) -> bool:
        """A holder is named and the Lease has not expired at `now`."""
        expires = self.expires()
        if now.tzinfo is None:
            now = now.replace(tzinfo=dt.timezone.utc)
        return bool(self.holder) and expires is not None and now < expires


class LeaseObserver:
    """When this process first saw the Lease as it is now (client-go leaderelection's observedTime).

    A candidate judges a holder's Lease expired only after it has seen the very same record for
    leaseDurationSeconds of its OWN clock: comparing the holder's renewTime with the local clock
    lets clock skew between hosts (20 s of it against a 30 s Lease) hand a live Lease to a second
    holder. A record never seen before counts as renewed just now."""

    def __init__(self) -> None:
        self._key: Optional[tuple] = None
        self._at: Optional[dt.datetime] = None

    def observe(self, record: Optional[LeaseRecord], now: dt.datetime) -> dt.datetime:
        """Local time at which the current record was first observed (`now` when it just changed)."""
        key = record.observation_key if record is not None else None
        if key != self._key or self._at is None:
            self._key, self._at = key, now
        return self._at

    def is_fresh(self, record: Optional[LeaseRecord], now: dt.datetime) -> bool:
        """A holder is named and the record has not been seen unchanged for its duration."""
        if record is None or not record.holder:
            self.observe(record, now)
            return False
        observed = self.observe(record, now)
        duration = record.duration_seconds if record.duration_seconds > 0 else 0
        return now < observed + dt.timedelta(seconds=duration)

    def expires(self, record: Optional[LeaseRecord], now: dt.datetime) -> dt.datetime:
        """Local time at which the current record may be taken over, if it does not change."""
        duration = record.duration_seconds if record is not None and record.duration_seconds > 0 else 0
        return self.observe(record, now) + dt.timedelta(seconds=duration)


def lease_is_fresh(lease: Optional[Mapping[str, Any]], now: dt.datetime) -> bool:
    """Whether the Lease object (a dict as the API returns it) is held and unexpired at `now`."""
    record = LeaseRecord.from_dict(lease)
    return record is not None and record.is_fresh(now)
