"""The controller's live fragmentation gauge (POLICY-3): a cache of cluster state
refreshed every `--gauge-interval` (1m), from which planner.gauge computes the figures the
controller's /metrics serves (webhook.common.metrics.ControllerMetrics). A scrape reads what the
last refresh stored; it never reads the cluster or plans.

The cache is a fresh paged list of the kinds the planner reads (LiveCluster.snapshot_objects, the
read `kubectl repack plan` makes), once per interval, on the leader only: every figure is then
computed from one consistent read with the functions plan uses, and a standby replica neither
loads the API server nor serves figures that would disagree with the leader's. (A watch-backed
informer would save the relist; at one list per minute of the kinds plan reads anyway for every
DryRun, the relist was kept for its simplicity: nothing can drift between the cache and the API
server.) A refresh that fails (API server errors) keeps the last figures and is retried at the
next interval; `repack_gauge_last_refresh_timestamp_seconds` says how old they are.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Optional, Sequence

import planner
from planner.gauge import MAX_RESOURCES, measure
from planner.relief import extended
from planner.gcpause import paused_gc
from kubectl_repack.errors import RepackError

log = logging.getLogger("webhook.controller.gauge")

DEFAULT_GAUGE_INTERVAL = "1m"
LEADERSHIP_POLL_SECONDS = 2.0   # how soon a new leader computes its first figures


def gauge_resource_list(value: str) -> tuple:
    """The resources of `--gauge-resources` ("a.com/x,b.com/y"; "" for the default: every accelerator
    resource). ValueError naming the flag and the entry for anything but extended resources, or
    more than MAX_RESOURCES of them."""
    names = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    for name in names:
        if not extended(name):
            raise ValueError(f"--gauge-resources: {name!r}: a fully-qualified extended resource (e.g. "
                             "nvidia.com/gpu) is required")
    if len(names) > MAX_RESOURCES:
        raise ValueError(f"--gauge-resources: {len(names)} resources; at most {MAX_RESOURCES} (each is a label "
                         "value of every gauge)")
    return names


class GaugeRefresher:
    """Refreshes the gauge every `interval` seconds while `leading()`; clears it otherwise."""

    def __init__(self, read_objects: Callable[[], list], metrics, interval: float, leading: Callable[[], bool],
                 stop_event: threading.Event, resources: Optional[Sequence[str]] = None,
                 clock: Callable[[], float] = time.time):
        self.read_objects, self.metrics, self.interval = read_objects, metrics, interval
        self.leading, self.stop_event = leading, stop_event
        self.resources = tuple(resources) if resources else None
        self.clock = clock
        self.last_refresh: Optional[float] = None     # monotonic time of the last successful refresh

    def refresh(self):
        """Read the cluster once, compute the gauge, store it. Returns the planner.gauge.Gauge."""
        t0 = time.monotonic()
        objects = self.read_objects()
        with paused_gc():  # many small immutable objects, no cycles (as plan does)
            gauge = measure(planner.load_objects(objects), self.resources)
        seconds = time.monotonic() - t0
        self.metrics.set_gauge(gauge, self.clock(), seconds)
        self.last_refresh = time.monotonic()
        if gauge.resources_left_out:
            log.warning("gauge: only the first %d accelerator resources are measured; left out: %s (name them with "
                        "--gauge-resources)", MAX_RESOURCES, ", ".join(gauge.resources_left_out))
        if gauge.gangs_left_out:
            log.info("gauge: %d of %d waiting gangs not explained this refresh", gauge.gangs_left_out,
                     gauge.gangs_waiting)
        log.debug("gauge refreshed in %.2fs: %s", seconds,
                  ", ".join(f"{r.resource} {r.frag_percent}%" for r in gauge.resources))
        return gauge

    def due(self) -> bool:
        return self.last_refresh is None or time.monotonic() - self.last_refresh >= self.interval

    def run(self) -> None:
        while not self.stop_event.is_set():
            if not self.leading():
                self.metrics.clear_gauge()
                self.last_refresh = None
            elif self.due():
                try:
                    self.refresh()
                except RepackError as e:
                    log.warning("gauge refresh: %s (the last figures stay; retried in %ss)", e, self.interval)
                    self.last_refresh = time.monotonic()
                except Exception:  # noqa: BLE001 - the gauge must never stop the controller
                    log.exception("gauge refresh failed")
                    self.last_refresh = time.monotonic()
            self.stop_event.wait(min(LEADERSHIP_POLL_SECONDS, self.interval))

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run, name="gauge", daemon=True)
        thread.start()
        return thread
