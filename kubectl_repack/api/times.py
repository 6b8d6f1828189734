"""Kubernetes time stamps and Go durations, written and parsed in one place.

Durations use Go's `time.ParseDuration` syntax through `durationpy` (what the kubernetes client
uses too), plus a bare number of whole seconds as kubectl accepts for `--request-timeout`. A
fraction without a unit ("1.5") and negative durations are refused.
"""
from __future__ import annotations

import datetime as dt
import re
from typing import Any, Optional

import durationpy

_WHOLE_SECONDS = re.compile(r"\d+")


def utcnow() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.timezone.utc)


def _utc(t: dt.datetime) -> dt.datetime:
    """`t` in UTC; a naive time is taken as UTC already."""
    return t.replace(tzinfo=dt.timezone.utc) if t.tzinfo is None else t.astimezone(dt.timezone.utc)


def rfc3339(t: dt.datetime) -> str:
    """metav1.Time as the API server writes it (seconds, `Z`)."""
    return _utc(t).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: dt.datetime) -> str:
    """metav1.MicroTime as the API server writes it (Lease renewTime/acquireTime)."""
    return _utc(t).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: Any) -> Optional[dt.datetime]:
    """A Time/MicroTime string (or a datetime) as an aware datetime; None when absent or unreadable."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


def parse_duration(text: Any) -> dt.timedelta:
    """`90s`, `10m`, `1h30m`, `500ms`, `0s`, or whole seconds (`45`); ValueError otherwise."""
    text = str(text if text is not None else "").strip()
    if _WHOLE_SECONDS.fullmatch(text):
        return dt.timedelta(seconds=int(text))
    try:
        # Go refuses "1m 30s" and a sign after the start ("1h-5m"); durationpy takes both.
        if not text or any(c.isspace() for c in text) or any(c in "+-" for c in text[1:]):
            raise durationpy.DurationError(text)
        value = durationpy.from_str(text)
    except durationpy.DurationError as e:
        raise ValueError(f"{text!r} is not a duration such as 30s, 10m or 1h30m") from e
    if value < dt.timedelta(0):
        raise ValueError(f"{text!r}: a duration here cannot be negative")
    return value


def format_duration(d: dt.timedelta) -> str:
    """Go's Duration.String(): `10m`, `1m30s`, `500ms`, `0s`."""
    return durationpy.to_str(d) if d else "0s"
