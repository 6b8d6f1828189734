"""The execute mutex on the cluster: `ExecuteLease` takes the Lease race-free when `mutex.lease_decision`
allows it, renews it in the background and releases it, through the kube layer's LeaseClient (the
same client the coordinator's leader election uses).

Time is the executor's clock (`ports.Clock`) only: expiry of someone else's Lease is judged by when
this process observed the record (LeaseObserver), and our own Lease counts as held only while a
renewal confirmed it within CONFIRMED_SECONDS; a renewal that fails is retried every
RENEW_RETRY_SECONDS and never swallowed. `check()` is the executor's guard before every eviction.
"""
from __future__ import annotations

import datetime as dt
import os
import threading
from typing import Optional

from kubectl_repack.api.lease import LeaseObserver, LeaseRecord
from kubectl_repack.api.run import Reason
from kubectl_repack.api.times import format_duration, parse_duration, rfc3339
from kubectl_repack.errors import ClusterAPIError
from kubectl_repack.kube.lease import LeaseClient

from .mutex import (CONFIRMED_SECONDS, COOLDOWN_ANNOTATION, DEFAULT_COOLDOWN, DEFAULT_LEASE_NAMESPACE,
                    LAST_COMPLETION_ANNOTATION, LAST_RUN_ANNOTATION, LEASE_DURATION_SECONDS, LEASE_NAME,
                    LEASE_NAMESPACE_ENV, LEASE_REQUEST_TIMEOUT, RENEW_RETRY_SECONDS, RENEW_SECONDS, LeaseDecision,
                    lease_decision)
from .ports import Clock


class ExecuteLease:
    """The execute mutex on the cluster: take (race-free), renew in the background, release."""

    def __init__(self, api, namespace: Optional[str] = None, name: str = LEASE_NAME, clock: Optional[Clock] = None):
        namespace = namespace or os.environ.get(LEASE_NAMESPACE_ENV) or DEFAULT_LEASE_NAMESPACE
        self.client = LeaseClient(api, namespace, name, timeout=LEASE_REQUEST_TIMEOUT)
        self.clock = clock or Clock()
        self.observer = LeaseObserver()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.lost = threading.Event()
        self.confirmed_at: Optional[dt.datetime] = None   # our clock, when the last write confirmed it
        self.last_error = ""
        self._why_lost = ""

    def stored_cooldown(self) -> dt.timedelta:
        """The cluster-wide cooldown setting (annotation on the Lease), or the default."""
        record = LeaseRecord.from_dict(self.client.read())
        text = record.annotations.get(COOLDOWN_ANNOTATION) if record else None
        try:
            return parse_duration(text) if text else DEFAULT_COOLDOWN
        except ValueError:
            return DEFAULT_COOLDOWN

    def try_acquire(self, me: str, now: dt.datetime, cooldown: dt.timedelta,
                    store_cooldown: Optional[dt.timedelta] = None) -> LeaseDecision:
        """Take the Lease for `me` if the decision allows it (and store `store_cooldown` as the
        cluster-wide setting). `now` is stamped as renewTime; expiry is judged on self.clock."""
        annotations = {COOLDOWN_ANNOTATION: format_duration(store_cooldown)} if store_cooldown is not None else None
        sent = self.clock.now()

        def decide(record):
            local = self.clock.now()
            return lease_decision(record, me, local, cooldown, self.observer.observe(record, local))
        decision, taken = self.client.acquire(me, LEASE_DURATION_SECONDS, now, decide, annotations)
        if decision and not taken:
            return LeaseDecision(False, Reason.ANOTHER_RUN_ACTIVE, "the execute Lease kept changing under us", 1.0)
        if taken:
            self.confirmed_at, self.last_error, self._why_lost = sent, "", ""
            self.lost.clear()
        return decision

    # -- holding it --
    def renew_once(self, me: str) -> bool:
        """One renewal. True while the Lease is (still) ours; False once it is lost: taken by
        someone else, or not confirmed for CONFIRMED_SECONDS (then it stays lost, as in client-go:
        a holder that could not renew in time stops for good, even if a later write would pass)."""
        if self.lost.is_set():
            return False
        sent = self.clock.now()
        try:
            if self.client.renew(me, sent):
                self.confirmed_at, self.last_error = sent, ""
            else:
                self._lose(f"the execute Lease {self.client.ref} is no longer held by {me}")
                return False
        except ClusterAPIError as e:
            self.last_error = str(e)
        return self.check() is None

    def check(self) -> Optional[str]:
        """None while the Lease is ours and confirmed within CONFIRMED_SECONDS; else why not (and
        the Lease counts as lost from then on). The executor asks this before every eviction."""
        if not self.lost.is_set() and self.confirmed_at is not None:
            age = (self.clock.now() - self.confirmed_at).total_seconds()
            if age >= CONFIRMED_SECONDS:
                self._lose(f"the execute Lease {self.client.ref} could not be renewed for {age:.0f}s "
                           f"(last confirmed at {rfc3339(self.confirmed_at)}; it lasts {LEASE_DURATION_SECONDS}s)"
                           + (f": {self.last_error}" if self.last_error else ""))
        if self.lost.is_set():
            return self._why_lost or "the execute Lease was lost"
        return None

    def _lose(self, why: str) -> None:
        if not self.lost.is_set():
            self._why_lost = why
            self.lost.set()

    def start_renewing(self, me: str) -> None:
        """Renew every RENEW_SECONDS (every RENEW_RETRY_SECONDS after a failure) until stopped or lost."""
        def loop():
            wait = RENEW_SECONDS
            while not self._stop.wait(wait):
                if not self.renew_once(me):
                    return
                wait = RENEW_RETRY_SECONDS if self.last_error else RENEW_SECONDS
        self._stop.clear()
        self._thread = threading.Thread(target=loop, name="repack-lease-renew", daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=LEASE_REQUEST_TIMEOUT + 1)
            self._thread = None

    def release(self, me: str, run_name: str, completed: Optional[dt.datetime],
                store_cooldown: Optional[dt.timedelta] = None) -> None:
        """Give the Lease up; `completed` (an Execute that evicted something finished then) starts
        the cooldown for everyone; `store_cooldown` becomes the cluster-wide setting."""
        self.stop_renewing()
        annotations = ({LAST_COMPLETION_ANNOTATION: rfc3339(completed), LAST_RUN_ANNOTATION: run_name}
                       if completed is not None else {})
        if store_cooldown is not None:
            annotations[COOLDOWN_ANNOTATION] = format_duration(store_cooldown)
        self.client.release(me, annotations or None)
