"""The webhook's current RelocationIndex, rebuilt from watched RepackRuns, plus its claims.

Only runs whose relocation records match their records digest are indexed (SEC-2; the digest is
an annotation admission lets only the controller write, kubectl_repack.api.relocations.digest_problem):
a record added or changed by a `repackruns/status` writer (a `plannedNodeName` edited to steer a
replacement) is never handed to a pod. The webhook holds no records-seal key: a stolen webhook
token cannot forge what the controller evicts by. The store also holds the placement key (its own
Secret) the marks MAC of a replacement is keyed by (SEC-5). Claims only order which record a new pod gets
(kubectl_repack.api.matching.match): they come from admission requests, which anyone who reaches
the port can forge.

The index itself (which records are open, and the pure matching over them) is the run API's
(kubectl_repack.api.relocations); this module only holds it across threads: the watch thread
installs runs, the admission views take a snapshot and claim the record they hand out.
"""
from __future__ import annotations

import threading
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping, Optional

from kubectl_repack.api.relocations import RecordKey, RelocationIndex, digest_verified
from kubectl_repack.api.view import ObjectView

DEFAULT_CLAIM_TTL = timedelta(seconds=30)


class RelocationStore:
    """Thread-safe holder of the current index plus the records this process handed out.

    A claim lives until the run shows the record taken (replacementPodName written by the
    coordinator) or until `claim_ttl` passes, so a pod whose creation failed after admission
    does not keep its record forever.
    """

    def __init__(self, claim_ttl: timedelta = DEFAULT_CLAIM_TTL, key: Optional[bytes] = None):
        self._key = key   # the placement key (marks MAC); until it is read, no record is indexed
        self._verdicts: dict[tuple, bool] = {}   # (run uid, resourceVersion) -> digest matches
        self._lock = threading.Lock()
        self._runs: dict[str, Mapping[str, Any]] = {}
        self._base = RelocationIndex()
        self._claims: dict[RecordKey, datetime] = {}
        self._claim_ttl = claim_ttl
        # The last snapshot, reused until a claim, a rebuild or the oldest claim's expiry changes it:
        # every pod creation in the cluster takes a snapshot, and rebuilding one walks every record.
        self._snapshot: RelocationIndex | None = None
        self._snapshot_expires: datetime | None = None

    @property
    def lock(self) -> threading.Lock:
        """Held across review-and-claim so two concurrent admissions never take one record."""
        return self._lock

    def replace_all(self, runs: Iterable[Mapping[str, Any]]) -> None:
        """Install a full listing of RepackRuns (after a list or a watch restart) and mark synced."""
        with self._lock:
            self._runs = {self._run_key(r): r for r in runs}
            self._rebuild(synced=True)

    def upsert(self, run: Mapping[str, Any]) -> None:
        """Apply an ADDED/MODIFIED event."""
        with self._lock:
            self._runs[self._run_key(run)] = run
            self._rebuild(synced=self._base.synced)

    def delete(self, run: Mapping[str, Any]) -> None:
        """Apply a DELETED event."""
        with self._lock:
            self._runs.pop(self._run_key(run), None)
            self._rebuild(synced=self._base.synced)

    def snapshot_locked(self, now: datetime) -> RelocationIndex:
        """Current index with live claims applied; caller holds `lock`."""
        if self._snapshot is None or (self._snapshot_expires is not None and now >= self._snapshot_expires):
            self._claims = {k: t for k, t in self._claims.items() if now - t < self._claim_ttl}
            self._snapshot = self._base.with_claims(self._claims)
            # A claim stamped in the future (clock stepped back) expires no earlier than its stamp says.
            self._snapshot_expires = min(self._claims.values()) + self._claim_ttl if self._claims else None
        return self._snapshot

    def snapshot(self, now: datetime) -> RelocationIndex:
        """Current index with live claims applied."""
        with self._lock:
            return self.snapshot_locked(now)

    def claim_locked(self, key: RecordKey, now: datetime) -> None:
        """Hand a record out; caller holds `lock`."""
        self._claims[key] = now
        self._snapshot = None

    def set_key(self, key: Optional[bytes]) -> None:
        """Install the placement key (read from its Secret), which the marks MAC is keyed by; until
        there is one no record is indexed (marks without a MAC would be taken from anybody)."""
        with self._lock:
            if key != self._key:
                self._key = key
                self._rebuild(synced=self._base.synced)

    def _trusted(self, run: Any) -> bool:
        """Whether the run's records match their digest; remembered per (uid, resourceVersion),
        so a rebuild (every RepackRun event) re-verifies only the run that changed."""
        view = ObjectView(run)
        version = (view.uid, str(view.meta.get("resourceVersion") or ""))
        if not version[1]:
            return digest_verified(run)
        verdict = self._verdicts.get(version)
        if verdict is None:
            verdict = self._verdicts[version] = digest_verified(run)
        return verdict

    @property
    def key(self) -> Optional[bytes]:
        """The placement key (None while unknown): the marks MAC is keyed by it."""
        return self._key

    @property
    def synced(self) -> bool:
        """True once a full listing has been installed."""
        return self._base.synced

    @staticmethod
    def _run_key(run: Mapping[str, Any]) -> str:
        view = ObjectView(run)
        return view.uid or view.name

    def _rebuild(self, synced: bool) -> None:
        trusted = self._trusted if self._key is not None else (lambda run: False)
        self._base = RelocationIndex.from_runs(self._runs.values(), synced=synced, trusted=trusted)
        live = {(ObjectView(r).uid, str(ObjectView(r).meta.get("resourceVersion") or "")) for r in self._runs.values()}
        self._verdicts = {k: v for k, v in self._verdicts.items() if k in live}
        known = {r.key for r in self._base.records}
        # A record that left the open set (replacement recorded, run finished) frees its claim.
        self._claims = {k: t for k, t in self._claims.items() if k in known}
        self._snapshot = None
