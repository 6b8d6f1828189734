"""The webhook's in-memory view of open relocation records, built from watched RepackRuns.

The admission path must answer in milliseconds and never call the API server, so everything
matching needs is folded here, once per RepackRun event, into an immutable `RelocationIndex`.
A record is *open* while its victim is gone (or going) and no replacement pod has been
identified yet; the webhook may hand each open record to at most one new pod.

Field names and phase values are the RepackRun API's (`repack.volcano.sh/v1alpha1`, shared with
the Go implementation in Volcano forks), so our objects stay interchangeable with it.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Iterable, Mapping, Optional, TypedDict

# --- constants of the RepackRun API (same strings as the Go types) -----------------------------
PLACEMENT_GATE = "repack.volcano.sh/placement"
PLACEMENT_GATE_OWNER_ANNOTATION = "repack.volcano.sh/placement-gate-owner"
PLACEMENT_LEASE_ANNOTATION = "repack.volcano.sh/placement-lease"
PLACEMENT_ACTIVE_LABEL = "repack.volcano.sh/placement-active"

MODE_EXECUTE = "Execute"
RUN_RUNNING = "Running"

EVICTION_PENDING = "Pending"
EVICTION_IN_PROGRESS = "InProgress"
EVICTION_ACCEPTED = "Accepted"
EVICTION_INDIRECTLY_REMOVED = "IndirectlyRemoved"
EVICTION_REJECTED = "Rejected"

PLACEMENT_WAITING_FOR_REPLACEMENT = "WaitingForReplacement"
PLACEMENT_WAITING_FOR_NODE_SELECTION = "WaitingForNodeSelection"
PLACEMENT_NOMINATED = "Nominated"
PLACEMENT_PLACED = "Placed"
PLACEMENT_TIMED_OUT = "TimedOut"

# Eviction phases after which the workload controller may already be re-creating the pod.
# InProgress counts because the Eviction call may have gone through before a crash.
OPEN_EVICTION_PHASES = frozenset({EVICTION_IN_PROGRESS, EVICTION_ACCEPTED, EVICTION_INDIRECTLY_REMOVED})

DEFAULT_CLAIM_TTL = timedelta(seconds=30)


# --- wire shapes (only the parts read here) ----------------------------------------------------
class WorkloadRefDict(TypedDict, total=False):
    apiVersion: str
    kind: str
    name: str


class PodRelocationDict(TypedDict, total=False):
    namespace: str
    podGroupName: str
    replacementPodGroupName: str
    victimPodName: str
    victimPodUID: str
    schedulingRequirementsHash: str
    plannedNodeName: str
    eviction: dict
    placement: dict


# --- domain data ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class WorkloadRef:
    """The controller that owns a victim's PodGroup, from `status.plan.moves[].owner`."""

    api_version: str
    kind: str
    name: str

    @property
    def group(self) -> str:
        """API group of the owner ("" for the core group)."""
        return self.api_version.split("/", 1)[0] if "/" in self.api_version else ""


RecordKey = tuple[str, int]
"""(run uid, index in status.relocations): stable because records are only ever appended."""


@dataclass(frozen=True)
class RelocationRecord:
    """One open relocation: a victim that was (or is being) evicted and awaits its replacement."""

    run_name: str
    run_uid: str
    index: int
    namespace: str
    victim_pod_name: str
    pod_group_name: str
    planned_node_name: str
    eviction_phase: str
    placement_phase: str
    owner: Optional[WorkloadRef] = None
    replacement_pod_group_name: str = ""

    @property
    def key(self) -> RecordKey:
        """Identity of the record across index rebuilds."""
        return (self.run_uid, self.index)

    @property
    def run_ref(self) -> str:
        """`<run name>/<run uid>`, the value format the Go implementation uses for run owners."""
        return f"{self.run_name}/{self.run_uid}"


@dataclass(frozen=True)
class RelocationIndex:
    """Open records of the active Execute run(s), oldest eviction first, minus claimed ones."""

    records: tuple[RelocationRecord, ...] = ()
    synced: bool = False
    claimed: frozenset[RecordKey] = frozenset()
    _by_namespace: Mapping[str, tuple[RelocationRecord, ...]] = field(
        default_factory=dict, repr=False, compare=False)
    # Lookups derived from `records` by other modules (matching), shared by `with_claims` copies.
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self._by_namespace or not self.records:
            return  # carried over by `with_claims`: the records did not change
        grouped: dict[str, list[RelocationRecord]] = {}
        for record in self.records:
            grouped.setdefault(record.namespace, []).append(record)
        object.__setattr__(self, "_by_namespace", {ns: tuple(rs) for ns, rs in grouped.items()})

    @classmethod
    def from_runs(cls, runs: Iterable[Mapping[str, Any]], synced: bool = True) -> "RelocationIndex":
        """Build the index from RepackRun objects as the API returns them (dicts)."""
        active = [run for run in runs if _is_active_execute(run)]
        active.sort(key=lambda run: (_meta(run).get("creationTimestamp") or "", _meta(run).get("name") or ""))
        records: list[RelocationRecord] = []
        for run in active:
            records.extend(open_records(run))
        return cls(records=tuple(records), synced=synced)

    def is_open(self, record: RelocationRecord) -> bool:
        """Not handed out yet."""
        return record.key not in self.claimed

    def open_in(self, namespace: str) -> tuple[RelocationRecord, ...]:
        """Unclaimed open records of one namespace, oldest eviction first."""
        return tuple(r for r in self._by_namespace.get(namespace, ()) if r.key not in self.claimed)

    def with_claims(self, keys: Iterable[RecordKey]) -> "RelocationIndex":
        """The same index with these records handed out (claims of unknown records are dropped)."""
        keys = frozenset(keys)
        if not keys and not self.claimed:
            return self
        known = {r.key for r in self.records}
        return replace(self, claimed=frozenset(k for k in keys if k in known))

    def __len__(self) -> int:
        return len(self.records) - len(self.claimed)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _is_active_execute(run: Mapping[str, Any]) -> bool:
    spec = run.get("spec") if isinstance(run.get("spec"), Mapping) else {}
    status = run.get("status") if isinstance(run.get("status"), Mapping) else {}
    if _meta(run).get("deletionTimestamp"):
        return False
    return spec.get("mode") == MODE_EXECUTE and status.get("phase") == RUN_RUNNING


def _owners_by_pod(status: Mapping[str, Any]) -> tuple[dict, dict]:
    """Map (namespace, pod name) and (namespace, PodGroup) to the plan's workload owner."""
    by_pod: dict[tuple[str, str], WorkloadRef] = {}
    by_group: dict[tuple[str, str], WorkloadRef] = {}
    plan = status.get("plan") if isinstance(status.get("plan"), Mapping) else {}
    for move in plan.get("moves") or ():
        if not isinstance(move, Mapping):
            continue
        owner = move.get("owner")
        if not isinstance(owner, Mapping) or not owner.get("kind") or not owner.get("name"):
            continue
        ref = WorkloadRef(str(owner.get("apiVersion") or ""), str(owner["kind"]), str(owner["name"]))
        ns = str(move.get("namespace") or "")
        by_group[(ns, str(move.get("podGroupName") or ""))] = ref
        for pod in move.get("pods") or ():
            if isinstance(pod, Mapping) and pod.get("name"):
                by_pod[(ns, str(pod["name"]))] = ref
    return by_pod, by_group


def open_records(run: Mapping[str, Any]) -> list[RelocationRecord]:
    """The open relocation records of one RepackRun, in record order (= eviction order)."""
    meta = _meta(run)
    status = run.get("status") if isinstance(run.get("status"), Mapping) else {}
    by_pod, by_group = _owners_by_pod(status)
    out: list[RelocationRecord] = []
    for i, rel in enumerate(status.get("relocations") or ()):
        if not isinstance(rel, Mapping):
            continue
        eviction = rel.get("eviction") if isinstance(rel.get("eviction"), Mapping) else {}
        placement = rel.get("placement") if isinstance(rel.get("placement"), Mapping) else {}
        if eviction.get("phase") not in OPEN_EVICTION_PHASES:
            continue
        if placement.get("phase") != PLACEMENT_WAITING_FOR_REPLACEMENT or placement.get("replacementPodName"):
            continue
        ns = str(rel.get("namespace") or "")
        victim = str(rel.get("victimPodName") or "")
        group = str(rel.get("podGroupName") or "")
        if not ns or not victim:
            continue  # nothing to recognise a replacement by
        out.append(RelocationRecord(
            run_name=str(meta.get("name") or ""),
            run_uid=str(meta.get("uid") or ""),
            index=i,
            namespace=ns,
            victim_pod_name=victim,
            pod_group_name=group,
            planned_node_name=str(rel.get("plannedNodeName") or ""),
            eviction_phase=str(eviction.get("phase")),
            placement_phase=str(placement.get("phase")),
            owner=by_pod.get((ns, victim)) or by_group.get((ns, group)),
            replacement_pod_group_name=str(rel.get("replacementPodGroupName") or ""),
        ))
    return out


class RelocationStore:
    """Thread-safe holder of the current index plus the records this process handed out.

    A claim lives until the run shows the record taken (replacementPodName written by the
    coordinator) or until `claim_ttl` passes, so a pod whose creation failed after admission
    does not keep its record forever.
    """

    def __init__(self, claim_ttl: timedelta = DEFAULT_CLAIM_TTL):
        self._lock = threading.Lock()
        self._runs: dict[str, Mapping[str, Any]] = {}
        self._base = RelocationIndex()
        self._claims: dict[RecordKey, datetime] = {}
        self._claim_ttl = claim_ttl

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
        self._claims = {k: t for k, t in self._claims.items() if now - t < self._claim_ttl}
        return self._base.with_claims(self._claims)

    def snapshot(self, now: datetime) -> RelocationIndex:
        """Current index with live claims applied."""
        with self._lock:
            return self.snapshot_locked(now)

    def claim_locked(self, key: RecordKey, now: datetime) -> None:
        """Hand a record out; caller holds `lock`."""
        self._claims[key] = now

    @property
    def synced(self) -> bool:
        """True once a full listing has been installed."""
        return self._base.synced

    @staticmethod
    def _run_key(run: Mapping[str, Any]) -> str:
        meta = _meta(run)
        return str(meta.get("uid") or meta.get("name") or "")

    def _rebuild(self, synced: bool) -> None:
        self._base = RelocationIndex.from_runs(self._runs.values(), synced=synced)
        known = {r.key for r in self._base.records}
        # A record that left the open set (replacement recorded, run finished) frees its claim.
        self._claims = {k: t for k, t in self._claims.items() if k in known}
