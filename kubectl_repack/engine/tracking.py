"""Finding the replacement of each evicted victim among the pods of its namespace, pure.

Uses the run API's matching rules (NOM-1), the same the webhook applies at admission, so both
sides recognise the same pod; used by `apply` when no webhook recorded the replacement.
"""
from __future__ import annotations

import datetime as dt
from typing import Optional

from kubectl_repack.api.matching import match_identity, pod_identity
from kubectl_repack.api.relocations import RelocationIndex, open_records
from kubectl_repack.api.run import relocations
from kubectl_repack.api.times import parse_time


def find_replacements(run: dict, pods_by_ns: dict, not_before: Optional[dt.datetime]) -> dict:
    """{record index: (pod dict, replacementPodGroupName)} for records whose replacement exists.

    A candidate must be newer than the run's start (one second of clock skew allowed), not a
    victim itself, and not already recorded as another record's replacement.
    """
    records = relocations(run)
    out = {}
    taken = {(r.namespace, r.placement.replacement_pod_name) for r in records if r.placement.replacement_pod_name}
    victims = {r.victim_pod_uid for r in records if r.victim_pod_uid}
    index = RelocationIndex(records=tuple(open_records(run)), synced=True)
    for ns in sorted({r.namespace for r in index.records}):
        for pod in sorted(pods_by_ns.get(ns, ()), key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or ""):
            meta = pod.get("metadata") or {}
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
