"""The RepackRun record: names, phases, reasons, conditions and relocation records.

Strings are the Go API's (`repack.volcano.sh/v1alpha1`, as in the Volcano forks' repackrun_types.go)
so objects stay interchangeable. A run is read through `RunView` (its relocation records parsed
once per object read) and its records through frozen `Relocation`, `Eviction` and `Placement`
values (`from_dict`) instead of digging in raw dicts. Status writers still edit the dicts they read
(read-modify-write keeps fields this code does not know about); the placement's transitions
(`Placement.with_replacement`, `nominated`, `placed_on`, `timed_out`) say what a writer sets, and
`write_placement_fields` sets it on a raw record. The status a plan becomes is `api.status`'s.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Optional

from planner.plan import REASON_INSUFFICIENT, REASON_NO_FRAGMENTATION, REASON_RECOMMENDED
from planner.plan_types import REASON_BLOCKS_NOT_MET, REASON_TARGET_CANNOT_FIT, REASON_TARGET_FITS

from .times import parse_time
from .view import ObjectView, as_map

GROUP, VERSION, PLURAL, KIND = "repack.volcano.sh", "v1alpha1", "repackruns", "RepackRun"
API_VERSION = f"{GROUP}/{VERSION}"

MODE_DRY_RUN, MODE_EXECUTE = "DryRun", "Execute"

PHASE_PENDING, PHASE_RUNNING, PHASE_SUCCEEDED, PHASE_FAILED = "Pending", "Running", "Succeeded", "Failed"
TERMINAL_PHASES = frozenset({PHASE_SUCCEEDED, PHASE_FAILED})

COND_PROGRESSING, COND_COMPLETE, COND_FAILED = "Progressing", "Complete", "Failed"

EVICTION_PENDING = "Pending"
EVICTION_IN_PROGRESS = "InProgress"
EVICTION_ACCEPTED = "Accepted"
EVICTION_INDIRECTLY_REMOVED = "IndirectlyRemoved"
EVICTION_REJECTED = "Rejected"
# The victim is gone (or going): its controller re-creates it.
EVICTED_PHASES = frozenset({EVICTION_ACCEPTED, EVICTION_INDIRECTLY_REMOVED})
# A replacement may already exist: InProgress counts because the Eviction call may have gone
# through before a crash.
OPEN_EVICTION_PHASES = EVICTED_PHASES | {EVICTION_IN_PROGRESS}

PLACEMENT_WAITING_FOR_REPLACEMENT = "WaitingForReplacement"
PLACEMENT_WAITING_FOR_NODE_SELECTION = "WaitingForNodeSelection"
PLACEMENT_NOMINATED = "Nominated"
PLACEMENT_PLACED = "Placed"
PLACEMENT_TIMED_OUT = "TimedOut"


class Reason:
    """Condition reasons (CamelCase, as the Go API). `check_reason` refuses anything else."""

    # outcome of the plan (DryRun, and an Execute whose live re-plan recommends nothing)
    RECOMMENDED = REASON_RECOMMENDED
    NO_FRAGMENTATION = REASON_NO_FRAGMENTATION
    INSUFFICIENT_IMPROVEMENT = REASON_INSUFFICIENT
    # spec.networkTopology.requiredNodeBlocks cannot be reached (the Go API's ReasonRequiredNodeBlocksNotMet)
    BLOCKS_NOT_MET = REASON_BLOCKS_NOT_MET
    # spec.target (RELIEF-2): the target fits without a move, or no plan within scope and budget makes room
    TARGET_FITS = REASON_TARGET_FITS
    TARGET_CANNOT_FIT = REASON_TARGET_CANNOT_FIT
    # ... and during an Execute: the target bound (Succeeded), was deleted or changed minMember (Failed)
    # before every planned eviction had started; none started after it
    TARGET_CHANGED = "TargetChanged"
    # an Execute waiting for the cluster-wide mutex
    ANOTHER_RUN_ACTIVE = "AnotherRunActive"
    COOLDOWN = "ExecuteCooldownActive"
    # an Execute in progress and how it ended
    EXECUTING = "Executing"
    COMPLETED = "ExecutionCompleted"
    COMPLETED_ALTERNATIVE = "ExecutionCompletedWithAlternativePlacement"
    PDB = "EvictionBlockedByPDB"
    EVICTION_REJECTED = "EvictionRejected"
    TIMED_OUT = "ReplacementTimedOut"
    NOT_FREED = "NodesNotFreed"
    # status.executionDeadline passed before every planned eviction had started: none started after it
    DEADLINE_EXCEEDED = "ExecutionDeadlineExceeded"
    # status.relocations do not match status.plan.moves (edited through repackruns/status): nothing
    # is evicted on their word
    INVALID_RECORDS = "RelocationRecordsInvalid"
    # in-cluster runs (api.control): stopped by the cancel annotation or a delete; a spec the CRD
    # accepts but the planner refuses; a creator who may not evict (or no trustworthy creator record)
    CANCELLED = "Cancelled"
    INVALID_SPEC = "InvalidSpec"
    NOT_AUTHORIZED = "EvictionNotAuthorized"


ALL_REASONS = frozenset(v for k, v in vars(Reason).items() if k.isupper())
# The plan's outcomes that recommend nothing: the pass ends Succeeded with no moves, and the CLI's
# `plan --exit-code` and `apply` exit 3 on them.
NOT_RECOMMENDED = frozenset({Reason.NO_FRAGMENTATION, Reason.INSUFFICIENT_IMPROVEMENT, Reason.BLOCKS_NOT_MET,
                             Reason.TARGET_FITS, Reason.TARGET_CANNOT_FIT})


class UnsetReason(ValueError):
    """A condition was about to be written with an empty or unknown reason: a bug, never data."""


def check_reason(reason: str) -> str:
    """`reason` if it is one of `Reason`; an unset or unknown reason raises (DESIGN convention 3)."""
    if reason not in ALL_REASONS:
        raise UnsetReason(f"condition reason {reason!r} is not one of the RepackRun API's reasons")
    return reason


# ---- conditions and phase -----------------------------------------------------------------------
def set_condition(status: dict, ctype: str, cstatus: str, reason: str, message: str, now: str) -> None:
    """Set one Job-style condition; lastTransitionTime changes only when the status flips."""
    check_reason(reason)
    conds = status.setdefault("conditions", [])
    for c in conds:
        if c.get("type") == ctype:
            if c.get("status") != cstatus:
                c["lastTransitionTime"] = now
            c.update(status=cstatus, reason=reason, message=message)
            break
    else:
        conds.append({"type": ctype, "status": cstatus, "reason": reason, "message": message,
                      "lastTransitionTime": now})


def derive_phase(status: Mapping[str, Any]) -> str:
    """phase is a projection of the conditions (Complete > Failed > Progressing)."""
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    if conds.get(COND_COMPLETE) == "True":
        return PHASE_SUCCEEDED
    if conds.get(COND_FAILED) == "True":
        return PHASE_FAILED
    if conds.get(COND_PROGRESSING) == "True":
        return PHASE_RUNNING
    return PHASE_PENDING


class RunView(ObjectView):
    """A RepackRun as read (a dict): what it says, with its relocation records parsed once.

    The records are parsed on first use and kept, so every reader of one object read shares one
    parse; `relocation(i)` parses only record i until then. A new read of the run is a new view."""

    __slots__ = ("_relocations",)

    def __init__(self, obj: Any):
        super().__init__(obj)
        self._relocations: Optional[tuple] = None

    @property
    def mode(self) -> str:
        """spec.mode ('' when absent)."""
        return str(self.spec.get("mode") or "")

    @property
    def phase(self) -> str:
        """status.phase ('' when absent)."""
        return str(self.status.get("phase") or "")

    @property
    def finished(self) -> bool:
        """Succeeded or Failed."""
        return self.phase in TERMINAL_PHASES

    @property
    def active_execute(self) -> bool:
        """A Running Execute run not being deleted: the only kind whose relocation records change."""
        return self.mode == MODE_EXECUTE and self.phase == PHASE_RUNNING and not self.deleting

    @property
    def reason(self) -> str:
        """Reason of the condition that decided the run's phase ('' while undecided)."""
        wanted = {PHASE_SUCCEEDED: COND_COMPLETE, PHASE_FAILED: COND_FAILED}.get(self.status.get("phase"),
                                                                                COND_PROGRESSING)
        for c in self.status.get("conditions") or ():
            if c.get("type") == wanted:
                return c.get("reason") or ""
        return ""

    @property
    def goal_resource(self) -> str:
        """spec.goals[0].resource, else (a targeted run without goals, RELIEF-2) the resource its plan
        made room in (status.plan.summary.target.resource); '' when neither says."""
        goals = self.spec.get("goals") or []
        found = str(as_map(goals[0]).get("resource") or "") if goals else ""
        return found or str(as_map(as_map(self.plan.get("summary")).get("target")).get("resource") or "")

    @property
    def plan(self) -> Mapping[str, Any]:
        """status.plan ({} when absent)."""
        return as_map(self.status.get("plan"))

    @property
    def has_records(self) -> bool:
        """status.relocations is not empty: the run has started (EXEC-3 wrote its records)."""
        return bool(self.status.get("relocations"))

    @property
    def relocations(self) -> tuple:
        """The Relocation records, in record order (parsed once per view)."""
        if self._relocations is None:
            self._relocations = tuple(Relocation.from_dict(r) for r in self.status.get("relocations") or ())
        return self._relocations

    def relocation(self, index: int) -> "Relocation":
        """Record `index` (IndexError when there is none)."""
        if self._relocations is not None:
            return self._relocations[index]
        return Relocation.from_dict((self.status.get("relocations") or ())[index])

    def finished_at(self) -> Optional[dt.datetime]:
        """When a finished run finished: completionTime, else its latest condition transition."""
        done = parse_time(self.status.get("completionTime"))
        if done is None:
            times = [t for t in (parse_time(as_map(c).get("lastTransitionTime"))
                                 for c in self.status.get("conditions") or ()) if t is not None]
            done = max(times) if times else None
        return done

    def ttl_expired(self, now: dt.datetime) -> bool:
        """Finished, not being deleted, and `ttlSecondsAfterFinished` has passed since it finished (EXEC-7)."""
        ttl = self.spec.get("ttlSecondsAfterFinished")
        if not self.finished or not isinstance(ttl, int) or isinstance(ttl, bool) or self.deleting:
            return False
        done = self.finished_at()
        return done is not None and now >= done + dt.timedelta(seconds=ttl)


def phase_of(run: Optional[Mapping[str, Any]]) -> str:
    """status.phase ('' when absent)."""
    return RunView.of(run).phase


def is_finished(run: Optional[Mapping[str, Any]]) -> bool:
    """Succeeded or Failed."""
    return RunView.of(run).finished


def is_active_execute(run: Optional[Mapping[str, Any]]) -> bool:
    """A Running Execute run not being deleted: the only kind whose relocation records change."""
    return isinstance(run, (Mapping, RunView)) and RunView.of(run).active_execute


def run_reason(run: Mapping[str, Any]) -> str:
    """Reason of the condition that decided the run's phase ('' while undecided)."""
    return RunView.of(run).reason


def goal_resource(run: Optional[Mapping[str, Any]]) -> str:
    """spec.goals[0].resource ('' when absent)."""
    return RunView.of(run).goal_resource


def finished_at(run: Mapping[str, Any]) -> Optional[dt.datetime]:
    """When a finished run finished: completionTime, else its latest condition transition."""
    return RunView.of(run).finished_at()


def ttl_expired(run: Mapping[str, Any], now: dt.datetime) -> bool:
    """Finished, not being deleted, and `ttlSecondsAfterFinished` has passed since it finished (EXEC-7)."""
    return RunView.of(run).ttl_expired(now)


# ---- relocation records -------------------------------------------------------------------------
@dataclass(frozen=True)
class Eviction:
    """status.relocations[].eviction."""
    phase: str = ""
    message: str = ""

    @classmethod
    def from_dict(cls, d: Any) -> "Eviction":
        d = as_map(d)
        return cls(str(d.get("phase") or ""), str(d.get("message") or ""))

    def to_dict(self) -> dict:
        return {"phase": self.phase, **({"message": self.message} if self.message else {})}

    @property
    def evicted(self) -> bool:
        """Accepted or IndirectlyRemoved: the victim is gone (or going)."""
        return self.phase in EVICTED_PHASES


@dataclass(frozen=True)
class Placement:
    """status.relocations[].placement: where the replacement went (the coordinator's fields)."""
    phase: str = ""
    selected_node_name: str = ""
    replacement_pod_name: str = ""
    replacement_pod_uid: str = ""
    actual_node_name: str = ""

    _FIELDS = (("phase", "phase"), ("selected_node_name", "selectedNodeName"),
               ("replacement_pod_name", "replacementPodName"), ("replacement_pod_uid", "replacementPodUID"),
               ("actual_node_name", "actualNodeName"))

    @classmethod
    def from_dict(cls, d: Any) -> "Placement":
        d = as_map(d)
        return cls(**{attr: str(d.get(key) or "") for attr, key in cls._FIELDS})

    def to_dict(self) -> dict:
        return {key: getattr(self, attr) for attr, key in self._FIELDS if getattr(self, attr)}

    @property
    def placed(self) -> bool:
        """The replacement is bound."""
        return self.phase == PLACEMENT_PLACED

    # Transitions: the placement after a step (a writer sets `changes` of the result on the freshest record).
    def with_replacement(self, name: str, uid: str) -> "Placement":
        """The replacement pod identified; a record not yet nominated, bound or timed out waits for a node."""
        phase = self.phase if self.phase in _PAST_NODE_SELECTION else PLACEMENT_WAITING_FOR_NODE_SELECTION
        return replace(self, replacement_pod_name=name, replacement_pod_uid=uid, phase=phase)

    def nominated(self, node: str) -> "Placement":
        """The planned node still fits: the replacement is nominated to it."""
        return replace(self, selected_node_name=node, phase=PLACEMENT_NOMINATED)

    def placed_on(self, node: str) -> "Placement":
        """The replacement is bound to `node` (named so: `placed` says whether it is)."""
        return replace(self, actual_node_name=node, phase=PLACEMENT_PLACED)

    def timed_out(self) -> "Placement":
        """The replacement was not placed in time (placement lease, or the run's deadline)."""
        return replace(self, phase=PLACEMENT_TIMED_OUT)

    def changes(self, new: "Placement") -> dict:
        """The wire fields of `new` that differ from this placement: what a writer sets."""
        return {key: getattr(new, attr) for attr, key in self._FIELDS if getattr(new, attr) != getattr(self, attr)}


_PAST_NODE_SELECTION = frozenset({PLACEMENT_NOMINATED, PLACEMENT_PLACED, PLACEMENT_TIMED_OUT})


def write_placement_fields(record: dict, fields: Mapping[str, Any]) -> None:
    """Set placement-owned fields on one raw status.relocations[] record: replacementPodGroupName on
    the record, everything else (`Placement.changes`) in its placement; other fields are kept."""
    placement = record.setdefault("placement", {})
    for key, value in fields.items():
        if key == "replacementPodGroupName":
            record[key] = value
        else:
            placement[key] = value


@dataclass(frozen=True)
class Relocation:
    """One status.relocations[] record: a victim pod, its planned node, eviction and placement."""
    namespace: str
    victim_pod_name: str
    pod_group_name: str = ""
    victim_pod_uid: str = ""
    planned_node_name: str = ""
    replacement_pod_group_name: str = ""
    eviction: Eviction = field(default_factory=Eviction)
    placement: Placement = field(default_factory=Placement)

    @classmethod
    def from_dict(cls, d: Any) -> "Relocation":
        d = as_map(d)
        return cls(namespace=str(d.get("namespace") or ""), victim_pod_name=str(d.get("victimPodName") or ""),
                   pod_group_name=str(d.get("podGroupName") or ""), victim_pod_uid=str(d.get("victimPodUID") or ""),
                   planned_node_name=str(d.get("plannedNodeName") or ""),
                   replacement_pod_group_name=str(d.get("replacementPodGroupName") or ""),
                   eviction=Eviction.from_dict(d.get("eviction")), placement=Placement.from_dict(d.get("placement")))

    def to_dict(self) -> dict:
        out = {"namespace": self.namespace, "podGroupName": self.pod_group_name,
               "victimPodName": self.victim_pod_name, "victimPodUID": self.victim_pod_uid,
               "plannedNodeName": self.planned_node_name}
        if self.replacement_pod_group_name:
            out["replacementPodGroupName"] = self.replacement_pod_group_name
        out["eviction"] = self.eviction.to_dict()
        out["placement"] = self.placement.to_dict()
        return out

    @property
    def victim(self) -> str:
        """`namespace/victim` for messages."""
        return f"{self.namespace}/{self.victim_pod_name}"


def relocations(run_or_status: Optional[Mapping[str, Any]]) -> list:
    """The Relocation records of a run (or of its status), in record order."""
    if isinstance(run_or_status, RunView):
        return list(run_or_status.relocations)
    st = as_map(run_or_status)
    if "status" in st or "spec" in st:
        st = RunView(st).status
    return [Relocation.from_dict(r) for r in st.get("relocations") or ()]
