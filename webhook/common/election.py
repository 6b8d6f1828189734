"""Leader election on a Lease, through the kube layer's LeaseClient, for the two leader processes:
the coordinator (Lease repack-coordinator) and the controller (Lease repack-controller).

Leadership must end when renewals stop (the webhook gates pods only while the coordinator's Lease is
fresh; the controller evicts only while it leads): `is_leader` turns False once the last successful
write is older than the Lease duration.
"""
from __future__ import annotations

import logging
import os
import secrets
import socket
from datetime import datetime, timedelta
from typing import Callable, Optional

from kubectl_repack.api import installed
from kubectl_repack.api.times import utcnow
from kubectl_repack.errors import ClusterAPIError
from kubectl_repack.api.lease import LeaseObserver, LeaseRecord
from kubectl_repack.kube.lease import LeaseClient

log = logging.getLogger("webhook.election")

DEFAULT_LEASE_DURATION = 15          # seconds, both leaders' (--lease-duration / REPACK_LEASE_DURATION)


def leader_process_args(prog: str, description: str, env_prefix: str, lease_name: str, interval: str,
                        namespace_help: str, lease_duration_help: str = "leader Lease duration"):
    """The argparse parser shared by the in-cluster leader processes (coordinator, controller):
    --kubeconfig, --namespace, --lease-name, --lease-duration, --interval, --identity, --log-level,
    each also read from a REPACK_* variable (`env_prefix` names the process's own ones)."""
    import argparse

    env = os.environ.get
    p = argparse.ArgumentParser(prog=prog, description=description)
    p.add_argument("--kubeconfig", default=env("KUBECONFIG"), help="in-cluster configuration when absent")
    p.add_argument("--namespace", default=env(installed.NAMESPACE_ENV, installed.NAMESPACE), help=namespace_help)
    p.add_argument("--lease-name", default=env(f"{env_prefix}_LEASE", lease_name))
    p.add_argument("--lease-duration", default=env("REPACK_LEASE_DURATION", f"{DEFAULT_LEASE_DURATION}s"),
                   help=lease_duration_help)
    p.add_argument("--interval", default=env(f"{env_prefix}_INTERVAL", interval))
    p.add_argument("--identity", default=env(f"{env_prefix}_IDENTITY"))
    p.add_argument("--log-level", default=env("REPACK_LOG_LEVEL", "INFO"))
    return p


def process_identity(explicit: Optional[str] = None) -> str:
    """The holder identity of this process: unique per process instance, since hostname and PID
    repeat across pods and host-network containers."""
    return explicit or f"{os.environ.get('POD_NAME') or socket.gethostname()}_{os.getpid()}_{secrets.token_hex(4)}"


class LeaderElector:
    """Acquire/renew the Lease on resourceVersion (a 409 means someone else wrote: decide again)."""

    def __init__(self, leases: LeaseClient, identity: str, duration_seconds: int = DEFAULT_LEASE_DURATION,
                 clock: Callable[[], datetime] = utcnow):
        self.leases, self.identity = leases, identity
        self.duration = int(duration_seconds)
        self.clock = clock
        self._renewed_at: Optional[datetime] = None  # local time of our last successful write
        self.observer = LeaseObserver()  # another holder's expiry: by when WE saw its record, not its renewTime

    @property
    def is_leader(self) -> bool:
        """True while our last successful renewal is younger than the lease duration."""
        return self._renewed_at is not None and self.clock() < self._renewed_at + timedelta(seconds=self.duration)

    def _may_take(self, record: Optional[LeaseRecord], now: datetime) -> bool:
        return record is None or record.holder == self.identity or not self.observer.is_fresh(record, now)

    def ensure(self) -> bool:
        """Acquire or renew when due (after a third of the duration); returns whether we lead now."""
        now = self.clock()
        if self.is_leader and now < self._renewed_at + timedelta(seconds=self.duration / 3.0):
            return True
        was_leader = self.is_leader
        try:
            _, taken = self.leases.acquire(self.identity, self.duration, now,
                                           lambda record: self._may_take(record, self.clock()))
        except ClusterAPIError as e:
            log.warning("%s: %s", self.leases.ref, e)
            return self.is_leader
        if not taken:
            if was_leader:
                log.info("%s: lost to another holder", self.leases.ref)
            self._renewed_at = None
            return False
        if not was_leader:
            log.info("acquired %s as %s", self.leases.ref, self.identity)
        self._renewed_at = now
        return True

    def release(self) -> None:
        """Clear holderIdentity so a successor need not wait (the coordinator's: the webhook stops gating at once)."""
        if self._renewed_at is None:
            return
        self._renewed_at = None
        try:
            if self.leases.release(self.identity):
                log.info("released %s", self.leases.ref)
        except ClusterAPIError as e:
            log.warning("releasing %s: %s", self.leases.ref, e)
