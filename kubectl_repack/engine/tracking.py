"""Waiting for the replacement of each evicted victim: finding it among the pods of its namespace,
recording where it was bound (where the coordinator has not) and telling each placement step once.

`find_replacements` is pure and uses the run API's matching rules (NOM-1), the same the webhook
applies at admission, so both sides recognise the same pod; `PlacementTracker` polls over the
engine's ports (used by `apply` and the controller, with or without the webhook).
"""
from __future__ import annotations

import datetime as dt
from typing import Callable, Optional

from kubectl_repack.api.matching import match_identity, pod_identity
from kubectl_repack.api.relocations import RelocationIndex, open_records
from kubectl_repack.api.run import (PLACEMENT_NOMINATED, PLACEMENT_PLACED, PLACEMENT_TIMED_OUT, Placement,
                                    Relocation, RunView, write_placement_fields)
from kubectl_repack.api.times import parse_time
from kubectl_repack.api.view import ObjectView

from .ports import EV_NOMINATED, EV_PLACED, EV_PLACEMENT_TIMED_OUT, Clock, ClusterReader, RunWriter


def find_replacements(run, pods_by_ns: dict, not_before: Optional[dt.datetime]) -> dict:
    """{record index: (pod dict, replacementPodGroupName)} for records whose replacement exists.

    A candidate must be newer than the run's start (one second of clock skew allowed), not a
    victim itself, and not already recorded as another record's replacement. `run`: a dict or a
    RunView (whose records are then not parsed again).
    """
    view = RunView.of(run)
    records = view.relocations
    out = {}
    taken = {(r.namespace, r.placement.replacement_pod_name) for r in records if r.placement.replacement_pod_name}
    victims = {r.victim_pod_uid for r in records if r.victim_pod_uid}
    index = RelocationIndex(records=tuple(open_records(view)), synced=True)
    for ns in sorted({r.namespace for r in index.records}):
        for pod in sorted(pods_by_ns.get(ns, ()), key=lambda p: ObjectView(p).meta.get("creationTimestamp") or ""):
            meta = ObjectView(pod).meta
            if meta.get("uid") in victims or (ns, meta.get("name")) in taken:
                continue
            created = parse_time(meta.get("creationTimestamp"))
            if not_before is not None and created is not None and created < not_before - dt.timedelta(seconds=1):
                continue
            found = match_identity(pod_identity(pod, ns), index)
            if found is None:
                continue
            out[found.record.index] = (pod, found.replacement_pod_group_name)
            index = index.with_claims(set(index.claimed) | {found.record.key})
    return out


def record_placements(status: dict, observed: dict) -> None:
    """Record bound replacements {index: (pod, replacement PodGroup)} where the coordinator has not."""
    for i, (pod, group) in observed.items():
        raw = status["relocations"][i]
        rec = Relocation.from_dict(raw)
        pl = rec.placement
        if pl.placed or pl.actual_node_name:
            continue  # the coordinator already recorded it
        name = pod["metadata"]["name"]
        if pl.replacement_pod_name and pl.replacement_pod_name != name:
            continue
        fields = pl.changes(pl.with_replacement(name, pod["metadata"].get("uid", "")).placed_on(pod["spec"]["nodeName"]))
        if group and not rec.replacement_pod_group_name:
            fields["replacementPodGroupName"] = group
        write_placement_fields(raw, fields)


def time_out_placements(status: dict, indices: list) -> None:
    """The run's deadline passed: the records at `indices` not placed yet are TimedOut."""
    for i in indices:
        raw = status["relocations"][i]
        pl = Placement.from_dict(raw.get("placement"))
        if not pl.placed:
            write_placement_fields(raw, pl.changes(pl.timed_out()))


class PlacementTracker:
    """Waits until every evicted victim's replacement is bound, recording what it sees where the
    coordinator has not (placement tracking without the webhook); `events` tells each record's
    placement step once (Nominated, Placed, TimedOut) through `on_event`."""

    def __init__(self, reader: ClusterReader, runs: RunWriter, clock: Clock, poll_interval: float,
                 on_event: Callable[[str, str, bool], None], on_progress: Callable[[RunView], None]):
        self.reader, self.runs, self.clock, self.poll_interval = reader, runs, clock, poll_interval
        self.on_event, self.on_progress = on_event, on_progress
        self._told: dict = {}   # record index -> last placement phase an event was sent for

    def track(self, name: str, run: RunView, deadline: dt.datetime) -> tuple:
        """Poll until every evicted record is placed or `deadline` passes. Returns (run, timed_out)."""
        not_before = parse_time(run.status.get("startTime"))
        while True:
            relocs = run.relocations
            waiting = [i for i, r in enumerate(relocs) if r.eviction.evicted and not r.placement.placed]
            self.on_progress(run)
            self.events(relocs)
            if not waiting:
                return run, False
            pods_by_ns = {ns: self.reader.list_pods(ns) for ns in sorted({relocs[i].namespace for i in waiting})}
            found = find_replacements(run, pods_by_ns, not_before)
            observed = {}
            for i in waiting:
                pl = relocs[i].placement
                pod, group = None, ""
                if pl.replacement_pod_name:      # the coordinator (or we) identified it
                    pod = next((p for p in pods_by_ns.get(relocs[i].namespace, ())
                                if p["metadata"]["name"] == pl.replacement_pod_name
                                and (not pl.replacement_pod_uid or p["metadata"].get("uid") == pl.replacement_pod_uid)),
                               None)
                elif i in found:
                    pod, group = found[i]
                if pod is not None and ObjectView(pod).spec.get("nodeName"):
                    observed[i] = (pod, group)
            if observed:
                run = RunView(self.runs.update_status(name, lambda st, observed=observed: record_placements(st, observed)))
                continue
            if self.clock.now() >= deadline:
                run = RunView(self.runs.update_status(name, lambda st, waiting=waiting: time_out_placements(st, waiting)))
                self.events(run.relocations)
                return run, True
            self.clock.sleep(self.poll_interval)
            run = RunView(self.runs.get(name))

    def events(self, relocs) -> None:
        """One event per record and placement phase reached (Nominated, Placed, TimedOut)."""
        for i, r in enumerate(relocs):
            phase = r.placement.phase
            if not r.eviction.evicted or self._told.get(i) == phase:
                continue
            pl = r.placement
            if phase == PLACEMENT_NOMINATED:
                self.on_event(EV_NOMINATED, f"{r.namespace}/{pl.replacement_pod_name} (replacing {r.victim_pod_name}) "
                                            f"nominated to {pl.selected_node_name}", False)
            elif phase == PLACEMENT_PLACED:
                self.on_event(EV_PLACED, f"{r.namespace}/{pl.replacement_pod_name} (replacing {r.victim_pod_name}) "
                                         f"bound to {pl.actual_node_name} (planned {r.planned_node_name})", False)
            elif phase == PLACEMENT_TIMED_OUT:
                self.on_event(EV_PLACEMENT_TIMED_OUT, f"replacement of {r.victim} not bound before the deadline", True)
            else:
                continue
            self._told[i] = phase
