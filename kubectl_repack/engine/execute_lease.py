"""The execute mutex on the cluster: `ExecuteLease` takes the Lease race-free when `mutex.lease_decision`
allows it, renews it in the background and releases it, through the kube layer's LeaseClient (the
same client the coordinator's leader election uses)."""
from __future__ import annotations

import datetime as dt
import os
import threading
from typing import Optional

from kubectl_repack.api.lease import LeaseRecord
from kubectl_repack.api.run import Reason
from kubectl_repack.api.times import format_duration, parse_duration, rfc3339, utcnow
from kubectl_repack.errors import ClusterAPIError
from kubectl_repack.kube.lease import LeaseClient

from .mutex import (COOLDOWN_ANNOTATION, DEFAULT_COOLDOWN, DEFAULT_LEASE_NAMESPACE, LAST_COMPLETION_ANNOTATION,
                    LAST_RUN_ANNOTATION, LEASE_DURATION_SECONDS, LEASE_NAME, LEASE_NAMESPACE_ENV, RENEW_SECONDS,
                    LeaseDecision, lease_decision)


class ExecuteLease:
    """The execute mutex on the cluster: take (race-free), renew in the background, release."""

    def __init__(self, api, namespace: Optional[str] = None, name: str = LEASE_NAME):
        namespace = namespace or os.environ.get(LEASE_NAMESPACE_ENV) or DEFAULT_LEASE_NAMESPACE
        self.client = LeaseClient(api, namespace, name)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.lost = threading.Event()

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
        cluster-wide setting)."""
        annotations = {COOLDOWN_ANNOTATION: format_duration(store_cooldown)} if store_cooldown is not None else None
        decision, taken = self.client.acquire(me, LEASE_DURATION_SECONDS, now,
                                              lambda record: lease_decision(record, me, now, cooldown), annotations)
        if decision and not taken:
            return LeaseDecision(False, Reason.ANOTHER_RUN_ACTIVE, "the execute Lease kept changing under us", 1.0)
        return decision

    def start_renewing(self, me: str) -> None:
        """Renew every RENEW_SECONDS until stopped; `lost` is set once the Lease is not ours."""
        def loop():
            while not self._stop.wait(RENEW_SECONDS):
                try:
                    if not self.client.renew(me, utcnow()):
                        self.lost.set()
                        return
                except ClusterAPIError:
                    pass  # transient; the next tick tries again within the Lease duration
        self._stop.clear()
        self._thread = threading.Thread(target=loop, name="repack-lease-renew", daemon=True)
        self._thread.start()

    def stop_renewing(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def release(self, me: str, run_name: str, completed: Optional[dt.datetime]) -> None:
        """Give the Lease up; `completed` (an Execute that evicted something finished then) starts
        the cooldown for everyone."""
        self.stop_renewing()
        annotations = ({LAST_COMPLETION_ANNOTATION: rfc3339(completed), LAST_RUN_ANNOTATION: run_name}
                       if completed is not None else None)
        self.client.release(me, annotations)
