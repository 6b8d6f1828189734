"""Open relocation records, folded into an immutable index a new pod is matched against.

The admission path must answer in milliseconds and never call the API server, so everything
matching needs is folded here, once per RepackRun event, into an immutable `RelocationIndex`.
A record is *open* while its victim is gone (or going) and no replacement pod has been
identified yet; each open record is handed to at most one new pod. The webhook keeps the index
current from a watch (webhook.admission.relocation_store); `apply` builds one from the run it executes to
recognise replacements when no webhook is installed.
"""
from __future__ import annotations

import hmac
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Mapping, Optional

from planner.model import OwnerRef

from .control import RECORDS_DIGEST_ANNOTATION, records_digest
from .run import OPEN_EVICTION_PHASES, PLACEMENT_WAITING_FOR_REPLACEMENT, RunView, as_map

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
    owner: Optional[OwnerRef] = None
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
    # Lookups derived from `records` by other modules (matching), shared by `with_claims` copies.
    derived: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_runs(cls, runs: Iterable[Any], synced: bool = True,
                  trusted: Optional[Callable[[RunView], bool]] = None) -> "RelocationIndex":
        """Build the index from RepackRun objects as the API returns them (dicts, or RunViews of them).

        `trusted(run)`: whether the run's records may be acted on (the webhook passes `digest_verified`:
        records that do not match their digest were written or changed by someone other than the
        controller, SEC-2); None: every run (a run `apply` executes itself)."""
        active = [view for view in map(RunView.of, runs) if view.active_execute]
        active.sort(key=lambda view: (view.meta.get("creationTimestamp") or "", view.meta.get("name") or ""))
        records: list[RelocationRecord] = []
        for run in active:
            found = open_records(run)
            if found and (trusted is None or trusted(run)):   # a run with nothing open needs no verifying
                records.extend(found)
        return cls(records=tuple(records), synced=synced)

    def is_open(self, record: RelocationRecord) -> bool:
        """Not handed out yet."""
        return record.key not in self.claimed

    def with_claims(self, keys: Iterable[RecordKey]) -> "RelocationIndex":
        """The same index with these records handed out (claims of unknown records are dropped)."""
        keys = frozenset(keys)
        if not keys and not self.claimed:
            return self
        known = {r.key for r in self.records}
        return replace(self, claimed=frozenset(k for k in keys if k in known))

    def __len__(self) -> int:
        return len(self.records) - len(self.claimed)


def _owners_by_pod(status: Mapping[str, Any]) -> tuple[dict, dict]:
    """Map (namespace, pod name) and (namespace, PodGroup) to the plan's workload owner."""
    by_pod: dict[tuple[str, str], OwnerRef] = {}
    by_group: dict[tuple[str, str], OwnerRef] = {}
    for move in as_map(status.get("plan")).get("moves") or ():
        if not isinstance(move, Mapping):
            continue
        owner = move.get("owner")
        if not isinstance(owner, Mapping) or not owner.get("kind") or not owner.get("name"):
            continue
        ref = OwnerRef(str(owner.get("apiVersion") or ""), str(owner["kind"]), str(owner["name"]), True)
        ns = str(move.get("namespace") or "")
        by_group[(ns, str(move.get("podGroupName") or ""))] = ref
        for pod in move.get("pods") or ():
            if isinstance(pod, Mapping) and pod.get("name"):
                by_pod[(ns, str(pod["name"]))] = ref
    return by_pod, by_group


def open_records(run: Any) -> list[RelocationRecord]:
    """The open relocation records of one RepackRun (a dict or a RunView), in record order (= eviction order)."""
    view = RunView.of(run)
    by_pod, by_group = _owners_by_pod(view.status)
    out: list[RelocationRecord] = []
    for i, rel in enumerate(view.relocations):   # a record that is not an object parses empty: never open
        if rel.eviction.phase not in OPEN_EVICTION_PHASES:
            continue
        if rel.placement.phase != PLACEMENT_WAITING_FOR_REPLACEMENT or rel.placement.replacement_pod_name:
            continue
        if not rel.namespace or not rel.victim_pod_name:
            continue  # nothing to recognise a replacement by
        out.append(RelocationRecord(
            run_name=view.name, run_uid=view.uid, index=i,
            namespace=rel.namespace, victim_pod_name=rel.victim_pod_name, pod_group_name=rel.pod_group_name,
            planned_node_name=rel.planned_node_name, eviction_phase=rel.eviction.phase,
            placement_phase=rel.placement.phase,
            owner=by_pod.get((rel.namespace, rel.victim_pod_name)) or by_group.get((rel.namespace, rel.pod_group_name)),
            replacement_pod_group_name=rel.replacement_pod_group_name,
        ))
    return out


def digest_problem(run: Any) -> str:
    """'' when the run's records are the ones its records digest names (RECORDS_DIGEST_ANNOTATION,
    which admission lets only the controller's account write, or on a locally executed run a user
    who may read the seal key: kubectl_repack.deploy.policies); else why they may not be acted on.

    This is how the webhook and the coordinator check the controller's records (SEC-2) without
    the seal key: holding it would let whoever steals their token forge records the controller
    evicts by. The controller still checks its own seal before every eviction."""
    view = RunView.of(run)
    records = view.status.get("relocations")
    if not isinstance(records, list):
        return "status.relocations is not a list"
    got = view.annotations.get(RECORDS_DIGEST_ANNOTATION)
    if not isinstance(got, str) or not got:
        return (f"the relocation records carry no digest (annotation {RECORDS_DIGEST_ANNOTATION}): the controller "
                "did not write them")
    if not hmac.compare_digest(got.encode("utf-8", "replace"), records_digest(view.uid, records).encode()):
        return (f"the relocation records do not match their digest (annotation {RECORDS_DIGEST_ANNOTATION}): "
                "they were added or changed by someone other than the controller")
    return ""


def digest_verified(run: Any) -> bool:
    """A `trusted` predicate for `from_runs`: the run's records match their records digest."""
    return not digest_problem(run)
