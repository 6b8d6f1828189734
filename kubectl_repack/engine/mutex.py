"""The cluster-wide execute mutex (EXEC-2), pure: who may take the execute Lease now.

One Execute at a time, and a cooldown after each. The cooldown setting and the last Execute's
completion live in the Lease's annotations, so every `apply` in the cluster sees the same values;
`execute_lease.ExecuteLease` takes, renews and releases the Lease through the kube layer.
"""
from __future__ import annotations

import datetime as dt
import os
import socket
from dataclasses import dataclass
from typing import Callable, Optional

from kubectl_repack.api.lease import LeaseRecord
from kubectl_repack.api.run import Reason
from kubectl_repack.api.times import format_duration, parse_time, rfc3339

LEASE_NAMESPACE_ENV = "REPACK_NAMESPACE"
DEFAULT_LEASE_NAMESPACE = "repack-system"
LEASE_NAME = "repack-execute"
LEASE_DURATION_SECONDS = 30
RENEW_SECONDS = 10
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


def holder_identity(run_name: str, host: Optional[str] = None, pid: Optional[int] = None) -> str:
    """`<run>@<host>/<pid>`: names the run and the process that holds the Lease."""
    return f"{run_name}@{host or socket.gethostname()}/{pid or os.getpid()}"


def parse_identity(identity: str) -> tuple:
    """(run, host, pid) from holder_identity's format; pid -1 when unreadable."""
    run, _, rest = (identity or "").rpartition("@")
    host, _, pid = rest.rpartition("/")
    try:
        return run, host, int(pid)
    except ValueError:
        return run, host, -1


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holder_is_dead(holder: str, me: str, pid_alive: Callable[[int], bool] = _pid_alive) -> bool:
    """A holder for the same run on this very host whose process is gone (apply was killed):
    `apply --resume` may take over at once instead of waiting for the Lease to expire."""
    h_run, h_host, h_pid = parse_identity(holder)
    m_run, m_host, _ = parse_identity(me)
    return h_run == m_run and h_host == m_host and not pid_alive(h_pid)


def lease_decision(lease: Optional[LeaseRecord], me: str, now: dt.datetime, cooldown: dt.timedelta,
                   pid_alive: Callable[[int], bool] = _pid_alive) -> LeaseDecision:
    """May `me` take the cluster-wide execute Lease now?

    Held by someone else and not expired -> AnotherRunActive (unless it is our own run's dead
    process on this host); free but within the cooldown after the last Execute -> cooldown.
    """
    if lease is None:
        return LeaseDecision(True)
    if lease.holder and lease.holder != me:
        if lease.is_fresh(now) and not holder_is_dead(lease.holder, me, pid_alive):
            run = parse_identity(lease.holder)[0] or lease.holder
            return LeaseDecision(False, Reason.ANOTHER_RUN_ACTIVE,
                                 f"RepackRun {run} holds the execute Lease ({lease.holder}); "
                                 "one Execute runs at a time per cluster",
                                 max((lease.expires() - now).total_seconds(), 1.0))
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
