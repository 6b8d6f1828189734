"""The cluster-wide execute mutex (EXEC-2), pure: who may take the execute Lease now.

One Execute at a time, and a cooldown after each. The cooldown setting and the last Execute's
completion live in the Lease's annotations, so every `apply` in the cluster sees the same values;
`execute_lease.ExecuteLease` takes, renews and releases the Lease through the kube layer.
"""
from __future__ import annotations

import datetime as dt
import os
import secrets
import socket
from dataclasses import dataclass
from typing import Optional

from kubectl_repack.api import installed
from kubectl_repack.api.control import EXECUTE_LEASE_NAME
from kubectl_repack.api.lease import LeaseRecord
from kubectl_repack.api.run import Reason
from kubectl_repack.api.times import format_duration, parse_time, rfc3339

LEASE_NAMESPACE_ENV = "REPACK_NAMESPACE"
DEFAULT_LEASE_NAMESPACE = installed.NAMESPACE
LEASE_NAME = EXECUTE_LEASE_NAME
LEASE_DURATION_SECONDS = 30
RENEW_SECONDS = 10
RENEW_RETRY_SECONDS = 2     # after a failed renewal
# The holder stops issuing evictions once it could not confirm the Lease for this long: a candidate
# may take over LEASE_DURATION_SECONDS after it observed our last renewal (never before we sent it),
# which leaves LEASE_DURATION_SECONDS - CONFIRMED_SECONDS for an eviction call already in flight.
CONFIRMED_SECONDS = 20
LEASE_REQUEST_TIMEOUT = 5   # seconds per Lease call: a hanging renewal must not outlast the Lease
COOLDOWN_ANNOTATION = "repack.volcano.sh/execute-cooldown"
LAST_COMPLETION_ANNOTATION = "repack.volcano.sh/last-execute-completion"
LAST_RUN_ANNOTATION = "repack.volcano.sh/last-execute-run"
DEFAULT_COOLDOWN = dt.timedelta(minutes=10)


@dataclass(frozen=True)
class LeaseDecision:
    acquire: bool
    reason: str = ""           # Reason.ANOTHER_RUN_ACTIVE | Reason.COOLDOWN when not acquired
    message: str = ""
    retry_after: float = 0.0   # seconds until it may be worth trying again

    def __bool__(self) -> bool:
        return self.acquire


def holder_identity(run_name: str, host: Optional[str] = None, pid: Optional[int] = None,
                    instance: Optional[str] = None) -> str:
    """`<run>@<host>/<pid>/<instance>`: names the run and the process that holds the Lease; the
    random instance id makes it unique even where hostname and PID repeat (two hosts with one
    name, host-network containers, PID namespaces), so no process ever mistakes another's Lease for
    its own."""
    return f"{run_name}@{host or socket.gethostname()}/{pid or os.getpid()}/{instance or secrets.token_hex(6)}"


def parse_identity(identity: str) -> tuple:
    """(run, host, pid) from holder_identity's format; pid -1 when unreadable."""
    run, at, rest = (identity or "").rpartition("@")
    host, _, pid = rest.partition("/") if at else ("", "", "")
    try:
        return run, host, int(pid.partition("/")[0])
    except ValueError:
        return run, host, -1


def lease_decision(lease: Optional[LeaseRecord], me: str, now: dt.datetime, cooldown: dt.timedelta,
                   observed_at: Optional[dt.datetime] = None) -> LeaseDecision:
    """May `me` take the cluster-wide execute Lease now?

    Held by someone else and not expired -> AnotherRunActive; free but within the cooldown after
    the last Execute -> cooldown. Expiry is judged as client-go's leader election does: by the
    local time `observed_at` at which this process first saw the record as it is (LeaseObserver),
    never by the holder's renewTime, which is on the holder's clock. A record seen for the first
    time (`observed_at` None) counts as renewed now. Nothing else (hostname, PID) lets a fresh
    Lease be taken over: a killed apply's Lease expires like any other, and `--resume` waits.
    """
    if lease is None:
        return LeaseDecision(True)
    if lease.holder and lease.holder != me:
        seen = observed_at or now
        until = seen + dt.timedelta(seconds=max(lease.duration_seconds, 0))
        if now < until:
            run = parse_identity(lease.holder)[0] or lease.holder
            return LeaseDecision(False, Reason.ANOTHER_RUN_ACTIVE,
                                 f"RepackRun {run} holds the execute Lease ({lease.holder}); "
                                 "one Execute runs at a time per cluster",
                                 max((until - now).total_seconds(), 1.0))
    my_run = parse_identity(me)[0]
    last_completion = parse_time(lease.annotations.get(LAST_COMPLETION_ANNOTATION))
    last_run = lease.annotations.get(LAST_RUN_ANNOTATION) or ""
    if last_completion is not None and cooldown.total_seconds() > 0 and last_run != my_run:
        until = last_completion + cooldown
        if until > now:
            return LeaseDecision(False, Reason.COOLDOWN,
                                 f"the last Execute ({last_run or 'unknown'}) finished at "
                                 f"{rfc3339(last_completion)}; the cluster-wide cooldown of "
                                 f"{format_duration(cooldown)} ends at {rfc3339(until)}",
                                 (until - now).total_seconds())
    return LeaseDecision(True)
