"""The Execute engine of `kubectl repack apply`: live re-plan, write-ahead relocation records,
PodGroup-by-PodGroup eviction, placement tracking, verification on live state (EXEC-1..7).

Why a separate engine: the orchestration must survive a crash at any point, so every decision is
taken from the RepackRun's persisted records, never from memory, and every side effect goes
through a small interface (DESIGN convention 5): a cluster reader, an evictor, a run-status
writer and a mutex. `execute_api` implements them on the Kubernetes API; unit tests swap in
in-memory ones. Nothing here imports `kubernetes`.

Ownership of the status (DESIGN "Two writers"): this engine writes plan, eviction records,
result, conditions, phase, times; the webhook's coordinator owns each record's placement. The
engine fills placement fields only where they are still empty (no webhook installed), and always
through a read-modify-write function applied to the freshest object.
"""
from __future__ import annotations

import datetime as dt
import os
import socket
from dataclasses import dataclass
from typing import Callable, Optional, Protocol

import planner
from planner import frag as fragmod

# ---- API constants (same strings as the Go RepackRun types) -------------------------------------
EVICTION_PENDING = "Pending"
EVICTION_IN_PROGRESS = "InProgress"
EVICTION_ACCEPTED = "Accepted"
EVICTION_INDIRECTLY_REMOVED = "IndirectlyRemoved"
EVICTION_REJECTED = "Rejected"
EVICTED_PHASES = frozenset({EVICTION_ACCEPTED, EVICTION_INDIRECTLY_REMOVED})

PLACEMENT_WAITING_FOR_REPLACEMENT = "WaitingForReplacement"
PLACEMENT_WAITING_FOR_NODE_SELECTION = "WaitingForNodeSelection"
PLACEMENT_NOMINATED = "Nominated"
PLACEMENT_PLACED = "Placed"
PLACEMENT_TIMED_OUT = "TimedOut"

PHASE_PENDING, PHASE_RUNNING, PHASE_SUCCEEDED, PHASE_FAILED = "Pending", "Running", "Succeeded", "Failed"
COND_PROGRESSING, COND_COMPLETE, COND_FAILED = "Progressing", "Complete", "Failed"

REASON_ANOTHER_RUN_ACTIVE = "AnotherRunActive"
REASON_COOLDOWN = "ExecuteCooldownActive"
REASON_EXECUTING = "Executing"
REASON_COMPLETED = "ExecutionCompleted"
REASON_COMPLETED_ALTERNATIVE = "ExecutionCompletedWithAlternativePlacement"
REASON_PDB = "EvictionBlockedByPDB"
REASON_EVICTION_REJECTED = "EvictionRejected"
REASON_TIMED_OUT = "ReplacementTimedOut"
REASON_NOT_FREED = "NodesNotFreed"
REASON_PLAN_INFEASIBLE = "PlanNoLongerFeasible"

TERMINAL_PHASES = frozenset({PHASE_SUCCEEDED, PHASE_FAILED})

# Test hook: exit the process (as a SIGKILL would) right after the Nth Eviction API call
# returned, before its outcome is persisted. Used by the crash/resume e2e test only.
CRASH_AFTER_EVICTIONS_ENV = "REPACK_TEST_CRASH_AFTER_EVICTIONS"


# ---- time ---------------------------------------------------------------------------------------
def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value) -> Optional[dt.datetime]:
    if not isinstance(value, str) or not value:
        return None
    try:
        t = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc)


class Clock:
    """Wall clock and sleeping, swappable in tests."""

    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.timezone.utc)

    def sleep(self, seconds: float) -> None:
        import time
        time.sleep(seconds)


# ---- interfaces ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class EvictionResponse:
    """What the Eviction API answered: HTTP code (201 accepted) and the server's message."""
    code: int
    message: str = ""


class ClusterReader(Protocol):
    def snapshot_objects(self) -> list: ...
    def get_pod(self, namespace: str, name: str) -> Optional[dict]: ...
    def list_pods(self, namespace: str) -> list: ...
    def list_pdbs(self, namespace: str) -> list: ...


class Evictor(Protocol):
    def evict(self, namespace: str, name: str, uid: str, grace_seconds: Optional[int]) -> EvictionResponse: ...


class RunWriter(Protocol):
    def get(self, name: str) -> dict: ...
    def update_status(self, name: str, mutate: Callable[[dict], None]) -> dict: ...


# ---- conditions and phase -----------------------------------------------------------------------
def set_condition(status: dict, ctype: str, cstatus: str, reason: str, message: str, now: str) -> None:
    """Set one Job-style condition; lastTransitionTime changes only when the status flips."""
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


def derive_phase(status: dict) -> str:
    """phase is a projection of the conditions (Complete > Failed > Progressing)."""
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or ()}
    if conds.get(COND_COMPLETE) == "True":
        return PHASE_SUCCEEDED
    if conds.get(COND_FAILED) == "True":
        return PHASE_FAILED
    if conds.get(COND_PROGRESSING) == "True":
        return PHASE_RUNNING
    return PHASE_PENDING


def is_finished(run: dict) -> bool:
    return ((run.get("status") or {}).get("phase")) in TERMINAL_PHASES


def run_reason(run: dict) -> str:
    """Reason of the condition that decided the run's phase ('' while undecided)."""
    st = run.get("status") or {}
    wanted = {PHASE_SUCCEEDED: COND_COMPLETE, PHASE_FAILED: COND_FAILED}.get(st.get("phase"), COND_PROGRESSING)
    for c in st.get("conditions") or ():
        if c.get("type") == wanted:
            return c.get("reason") or ""
    return ""


# ---- the mutex decision (Lease + cooldown), pure -------------------------------------------------
@dataclass(frozen=True)
class LeaseView:
    """The parts of the execute Lease the decision needs."""
    holder: str = ""
    renew_time: Optional[dt.datetime] = None
    duration_seconds: int = 0
    last_completion: Optional[dt.datetime] = None
    last_run: str = ""


@dataclass(frozen=True)
class LeaseDecision:
    acquire: bool
    reason: str = ""           # AnotherRunActive | ExecuteCooldownActive when not acquired
    message: str = ""
    retry_after: float = 0.0   # seconds until it may be worth trying again


def holder_identity(run_name: str, host: Optional[str] = None, pid: Optional[int] = None) -> str:
    """`<run>@<host>/<pid>`: names the run and the process that holds the Lease."""
    return f"{run_name}@{host or socket.gethostname()}/{pid or os.getpid()}"


def parse_identity(identity: str) -> tuple:
    """(run, host, pid) from holder_identity's format; pid -1 when unreadable."""
    run, _, rest = (identity or "").rpartition("@")
    host, _, pid = rest.rpartition("/")
    try:
        return run, host, int(pid)
    except ValueError:
        return run, host, -1


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holder_is_dead(holder: str, me: str, pid_alive: Callable[[int], bool] = _pid_alive) -> bool:
    """A holder for the same run on this very host whose process is gone (apply was killed):
    `apply --resume` may take over at once instead of waiting for the Lease to expire."""
    h_run, h_host, h_pid = parse_identity(holder)
    m_run, m_host, _ = parse_identity(me)
    return h_run == m_run and h_host == m_host and not pid_alive(h_pid)


def lease_decision(lease: Optional[LeaseView], me: str, now: dt.datetime, cooldown: dt.timedelta,
                   pid_alive: Callable[[int], bool] = _pid_alive) -> LeaseDecision:
    """May `me` take the cluster-wide execute Lease now? (EXEC-2)

    Held by someone else and not expired -> AnotherRunActive (unless it is our own run's dead
    process on this host); free but within the cooldown after the last Execute -> cooldown.
    """
    if lease is None:
        return LeaseDecision(True)
    if lease.holder and lease.holder != me:
        expires = (lease.renew_time + dt.timedelta(seconds=lease.duration_seconds)
                   if lease.renew_time else None)
        fresh = expires is not None and expires > now
        if fresh and not holder_is_dead(lease.holder, me, pid_alive):
            run = parse_identity(lease.holder)[0] or lease.holder
            return LeaseDecision(False, REASON_ANOTHER_RUN_ACTIVE,
                                 f"RepackRun {run} holds the execute Lease ({lease.holder}); "
                                 "one Execute runs at a time per cluster",
                                 max((expires - now).total_seconds(), 1.0))
    my_run = parse_identity(me)[0]
    if lease.last_completion is not None and cooldown.total_seconds() > 0 and lease.last_run != my_run:
        until = lease.last_completion + cooldown
        if until > now:
            return LeaseDecision(False, REASON_COOLDOWN,
                                 f"the last Execute ({lease.last_run or 'unknown'}) finished at "
                                 f"{rfc3339(lease.last_completion)}; the cluster-wide cooldown of "
                                 f"{format_duration(cooldown)} ends at {rfc3339(until)}",
                                 (until - now).total_seconds())
    return LeaseDecision(True)


def format_duration(d: dt.timedelta) -> str:
    s = int(d.total_seconds())
    if s % 3600 == 0 and s:
        return f"{s // 3600}h"
    if s % 60 == 0 and s:
        return f"{s // 60}m"
    return f"{s}s"


def parse_duration(text: str) -> dt.timedelta:
    """Go-style durations as kubectl takes them: 90s, 10m, 1h30m, 0s, or bare seconds."""
    import re
    text = (text or "").strip()
    if re.fullmatch(r"\d+", text):
        return dt.timedelta(seconds=int(text))
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise ValueError(f"{text!r} is not a duration such as 30s, 10m or 1h")
    unit = {"h": 3600, "m": 60, "s": 1, "ms": 0.001}
    return dt.timedelta(seconds=sum(float(a) * unit[b] for a, b in parts))


# ---- PDB pre-check, pure -------------------------------------------------------------------------
def selector_matches(selector: Optional[dict], labels: dict) -> bool:
    """metav1.LabelSelector semantics; a PDB with an empty selector matches every pod (policy/v1)."""
    if selector is None:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


@dataclass(frozen=True)
class PDBBlock:
    pdb: str            # namespace/name
    allowed: int
    needed: int

    def message(self) -> str:
        return (f"PodDisruptionBudget {self.pdb} allows {self.allowed} disruption(s), the PodGroup needs "
                f"{self.needed}; no pod of this PodGroup was evicted")


def pdb_blocks(victims: list, pdbs: list) -> list:
    """PDBs that do not allow evicting all `victims` (pod dicts) now, before any is evicted.

    A PDB whose status is missing or stale (observedGeneration behind) counts as allowing 0, as
    the API server's eviction check would refuse then too.
    """
    out = []
    for pdb in pdbs:
        meta, spec, st = pdb.get("metadata") or {}, pdb.get("spec") or {}, pdb.get("status") or {}
        covered = [v for v in victims if selector_matches(spec.get("selector"),
                                                           (v.get("metadata") or {}).get("labels") or {})]
        if not covered:
            continue
        allowed = int(st.get("disruptionsAllowed") or 0)
        if st.get("observedGeneration") is not None and meta.get("generation") is not None \
                and st["observedGeneration"] < meta["generation"]:
            allowed = 0
        if allowed < len(covered):
            out.append(PDBBlock(f"{meta.get('namespace')}/{meta.get('name')}", allowed, len(covered)))
    return out


# ---- eviction outcomes and backoff, pure ---------------------------------------------------------
RETRY, ACCEPTED, GONE, REJECTED = "retry", "accepted", "gone", "rejected"


def classify_eviction(resp: EvictionResponse) -> tuple:
    """(verdict, message) for one Eviction API answer.

    201/200 accepted; 429 a PDB forbids it now (retried until the deadline); 404 the pod is gone;
    409 the UID precondition failed (the victim is gone, a same-name replacement exists); 500 with
    several PDBs and anything else is a rejection the run reports.
    """
    if resp.code in (200, 201):
        return ACCEPTED, "Eviction API accepted the eviction"
    if resp.code == 429:
        return RETRY, f"blocked by a PodDisruptionBudget: {resp.message}"
    if resp.code == 404:
        return GONE, f"the victim no longer exists ({resp.message})"
    if resp.code == 409:
        return GONE, f"the victim's UID precondition failed; it was replaced ({resp.message})"
    if resp.code == 500 and "more than one" in resp.message.lower():
        return REJECTED, f"several PodDisruptionBudgets select the pod: {resp.message}"
    return REJECTED, f"Eviction API answered {resp.code}: {resp.message}"


@dataclass
class Backoff:
    """Exponential backoff with a cap, bounded by a deadline."""
    initial: float = 1.0
    factor: float = 2.0
    cap: float = 10.0
    attempt: int = 0

    def next_delay(self, now: dt.datetime, deadline: dt.datetime) -> Optional[float]:
        """Seconds to wait before the next try, or None when the deadline leaves no room."""
        left = (deadline - now).total_seconds()
        if left <= 0:
            return None
        delay = min(self.initial * (self.factor ** self.attempt), self.cap)
        self.attempt += 1
        return min(delay, left)


# ---- resume, pure -------------------------------------------------------------------------------
RESUME_EVICT, RESUME_DONE_ACCEPTED, RESUME_DONE_GONE, RESUME_SKIP = "evict", "accepted", "gone", "skip"


def resume_action(record: dict, live_pod: Optional[dict]) -> tuple:
    """What to do with one persisted record when apply (re)starts: (action, message).

    Pending -> evict (after the PDB check). InProgress: the call may have gone through before a
    crash, so look at the victim UID: gone or terminating -> record it as evicted; still running
    -> evict again (the UID precondition makes a replayed call harmless to a replacement).
    Accepted / IndirectlyRemoved / Rejected are final.
    """
    phase = (record.get("eviction") or {}).get("phase")
    uid = record.get("victimPodUID") or ""
    if phase == EVICTION_PENDING:
        return RESUME_EVICT, ""
    if phase != EVICTION_IN_PROGRESS:
        return RESUME_SKIP, ""
    live_uid = ((live_pod or {}).get("metadata") or {}).get("uid")
    if live_pod is None or (uid and live_uid != uid):
        return RESUME_DONE_GONE, (f"victim uid {uid} was gone when apply resumed: the eviction issued "
                                  "before the restart went through")
    if (live_pod.get("metadata") or {}).get("deletionTimestamp"):
        return RESUME_DONE_ACCEPTED, (f"victim uid {uid} was terminating when apply resumed: the eviction "
                                      "issued before the restart went through")
    return RESUME_EVICT, ""


# ---- placement tracking, pure -------------------------------------------------------------------
def find_replacements(run: dict, pods_by_ns: dict, not_before: Optional[dt.datetime]) -> dict:
    """{record index: (pod dict, replacementPodGroupName)} for records whose replacement exists.

    Uses the webhook's matching rules (NOM-1) so both sides recognise the same pod; a candidate
    must be newer than the run's start and not the victim itself.
    """
    from kubectl_repack.api.matching import match_identity, pod_identity
    from kubectl_repack.api.relocations import RelocationIndex, open_records

    relocs = (run.get("status") or {}).get("relocations") or []
    out = {}
    taken = {(r.get("namespace"), (r.get("placement") or {}).get("replacementPodName"))
             for r in relocs if (r.get("placement") or {}).get("replacementPodName")}
    victims = {r.get("victimPodUID") for r in relocs if r.get("victimPodUID")}
    # open_records needs an active run; the index only folds what we pass in.
    records = open_records(run)
    index = RelocationIndex(records=tuple(records), synced=True)
    for ns in sorted({r.namespace for r in records}):
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


# ---- verification on live state, pure ----------------------------------------------------------
@dataclass(frozen=True)
class Verification:
    frag_after: int
    freed_nodes: tuple        # plan.freedNodes verified empty of R
    not_freed: tuple          # plan.freedNodes still holding R
    occupied: int
    minimum: int
    exact: bool


def verify(objects: list, resource: str, planned_freed: list) -> Verification:
    """Live fragmentation and freed nodes from a fresh snapshot, with planner.frag's metric."""
    snapshot = planner.load_objects(objects)
    alloc, used, items = fragmod.usage(snapshot, resource)
    caps = sorted(alloc.values(), reverse=True)
    minimum = fragmod.theoretical_min(items, caps)
    occupied = sum(1 for n in alloc if used.get(n, 0) > 0)
    frag = fragmod.percent_int(fragmod.frag_percent(occupied, minimum.value, len(alloc)))
    # A node outside the providers (allocatable dropped to 0) counts as not freed: it can't host R.
    freed = tuple(sorted(n for n in planned_freed if n in alloc and used.get(n, 0) == 0))
    not_freed = tuple(sorted(n for n in planned_freed if n not in freed))
    return Verification(frag, freed, not_freed, occupied, minimum.value, minimum.exact)


# ---- status builders -----------------------------------------------------------------------------
def initial_relocations(plan: "planner.Plan") -> list:
    """One record per planned pod move, in eviction order (PodGroup by PodGroup)."""
    out = []
    groups = {}
    for m in plan.moves:
        groups.setdefault((m.pod.namespace, m.pod.group_name), []).append(m)
    for (ns, group), moves in groups.items():
        for m in moves:
            out.append({
                "namespace": ns, "podGroupName": group, "victimPodName": m.pod.name,
                "victimPodUID": m.pod.uid, "plannedNodeName": m.to_node,
                "eviction": {"phase": EVICTION_PENDING},
                "placement": {"phase": PLACEMENT_WAITING_FOR_REPLACEMENT},
            })
    return out


def cards_by_pod(status: dict) -> dict:
    """(namespace, pod name) -> cards, from status.plan.moves."""
    out = {}
    for move in (status.get("plan") or {}).get("moves") or ():
        for p in move.get("pods") or ():
            out[(move.get("namespace"), p.get("name"))] = int(p.get("cards") or 0)
    return out


@dataclass(frozen=True)
class Outcome:
    """How a finished run ended: phase, the deciding condition, and the result (if any)."""
    phase: str
    reason: str
    message: str
    result: Optional[dict] = None


def decide_outcome(status: dict, ver: Optional[Verification], timed_out: bool) -> Outcome:
    """The terminal condition from the records and the live verification (EXEC-6)."""
    relocs = status.get("relocations") or []
    planned_freed = (status.get("plan") or {}).get("freedNodes") or []
    cards = cards_by_pod(status)
    evicted = [r for r in relocs if (r.get("eviction") or {}).get("phase") in EVICTED_PHASES]
    rejected = [r for r in relocs if (r.get("eviction") or {}).get("phase") == EVICTION_REJECTED]
    placed = [r for r in evicted if (r.get("placement") or {}).get("phase") == PLACEMENT_PLACED]
    moved = sum(cards.get((r.get("namespace"), r.get("victimPodName")), 0) for r in evicted)
    verified = ver is not None and not timed_out and len(placed) == len(evicted)
    result = None
    if evicted or ver is not None:
        fb = ((status.get("plan") or {}).get("summary") or {}).get("fragBeforePercent", 0)
        result = {"fragAfterPercent": ver.frag_after if verified else fb,
                  "freedNodeCount": len(ver.freed_nodes) if ver else 0,
                  "movedCardCount": moved, "metricsVerified": bool(verified)}
        if ver and ver.freed_nodes:
            result["freedNodes"] = list(ver.freed_nodes)
    if rejected:
        pdb = [r for r in rejected if "PodDisruptionBudget" in ((r.get("eviction") or {}).get("message") or "")]
        first = (pdb or rejected)[0]
        reason = REASON_PDB if pdb else REASON_EVICTION_REJECTED
        msg = (f"{len(rejected)} of {len(relocs)} planned eviction(s) rejected; "
               f"{first['namespace']}/{first.get('victimPodName')}: {(first.get('eviction') or {}).get('message')}")
        return Outcome(PHASE_FAILED, reason, msg, result)
    if timed_out or len(placed) < len(evicted):
        waiting = [f"{r['namespace']}/{r.get('victimPodName')}" for r in evicted
                   if (r.get("placement") or {}).get("phase") != PLACEMENT_PLACED]
        return Outcome(PHASE_FAILED, REASON_TIMED_OUT,
                       f"{len(waiting)} replacement(s) not bound before status.executionDeadline: "
                       + ", ".join(waiting[:5]), result)
    if ver is not None and ver.not_freed:
        back = [f"{r['namespace']}/{(r.get('placement') or {}).get('replacementPodName')}"
                f" on {(r.get('placement') or {}).get('actualNodeName')}"
                for r in placed if (r.get("placement") or {}).get("actualNodeName") in ver.not_freed]
        why = (f"; the scheduler bound replacement(s) back onto them: {', '.join(back[:5])} (without the "
               "placement webhook nothing hints the planned node)") if back else ""
        return Outcome(PHASE_FAILED, REASON_NOT_FREED,
                       f"planned node(s) {', '.join(ver.not_freed)} still hold the resource after all "
                       f"replacements were bound; live frag {ver.frag_after}%{why}", result)
    alternative = [r for r in placed
                   if (r.get("placement") or {}).get("actualNodeName") != r.get("plannedNodeName")]
    summary = (f"freed {len(planned_freed)} node(s) ({', '.join(planned_freed)}), moved {moved} card(s), "
               f"live frag {ver.frag_after if ver else '?'}%")
    if alternative:
        return Outcome(PHASE_SUCCEEDED, REASON_COMPLETED_ALTERNATIVE,
                       f"{summary}; {len(alternative)} of {len(placed)} replacement(s) bound off their planned node",
                       result)
    return Outcome(PHASE_SUCCEEDED, REASON_COMPLETED, f"{summary}; every replacement on its planned node", result)


# ---- the engine ---------------------------------------------------------------------------------
@dataclass
class Options:
    execution_timeout: dt.timedelta = dt.timedelta(minutes=10)
    eviction_retry_timeout: dt.timedelta = dt.timedelta(seconds=60)
    poll_interval: float = 1.0
    crash_after_evictions: int = 0


@dataclass
class Progress:
    evicted: int = 0
    total: int = 0
    bound: int = 0
    rejected: int = 0


class LeaseLost(planner.RepackError):
    """The execute Lease was lost while running: no further eviction may be issued."""


class Executor:
    """Carries out one Execute RepackRun from its persisted records; safe to re-run after a crash.

    `guard()` is asked before every Eviction call; a message back means stop (e.g. the Lease was
    lost), raising LeaseLost with the records as they are, to be continued by `--resume`.
    """

    def __init__(self, reader: ClusterReader, evictor: Evictor, runs: RunWriter, clock: Clock = None,
                 options: Options = None, on_progress: Callable[[Progress], None] = None,
                 guard: Callable[[], Optional[str]] = None):
        self.reader, self.evictor, self.runs = reader, evictor, runs
        self.clock = clock or Clock()
        self.options = options or Options()
        self.on_progress = on_progress or (lambda p: None)
        self.guard = guard or (lambda: None)
        self.eviction_calls = 0

    # -- status writes (each a read-modify-write of only the fields apply owns) --
    def _update(self, name: str, mutate: Callable[[dict], None]) -> dict:
        return self.runs.update_status(name, mutate)

    def mark_pending(self, name: str, reason: str, message: str) -> dict:
        now = rfc3339(self.clock.now())

        def mutate(st):
            set_condition(st, COND_PROGRESSING, "False", reason, message, now)
            st["phase"] = derive_phase(st)
            st["message"] = message
        return self._update(name, mutate)

    def _set_eviction(self, name: str, index: int, phase: str, message: str = "") -> dict:
        def mutate(st):
            rec = st["relocations"][index]
            rec["eviction"] = {"phase": phase, **({"message": message} if message else {})}
        return self._update(name, mutate)

    def _finish(self, name: str, outcome: Outcome) -> dict:
        now = rfc3339(self.clock.now())

        def mutate(st):
            if outcome.phase == PHASE_SUCCEEDED:
                set_condition(st, COND_COMPLETE, "True", outcome.reason, outcome.message, now)
            else:
                set_condition(st, COND_FAILED, "True", outcome.reason, outcome.message, now)
            set_condition(st, COND_PROGRESSING, "False", outcome.reason, outcome.message, now)
            if outcome.result is not None:
                st["result"] = outcome.result
            st["phase"] = derive_phase(st)
            st["message"] = outcome.message
            st.setdefault("completionTime", now)
        return self._update(name, mutate)

    # -- planning --
    def plan_live(self, run: dict) -> "planner.Plan":
        """EXEC-1: always a fresh plan on live state."""
        spec = planner.RunSpec.from_spec(run["spec"])
        return planner.plan(planner.load_objects(self.reader.snapshot_objects()), spec)

    def start(self, name: str, plan: "planner.Plan") -> dict:
        """Persist the plan and every relocation record BEFORE the first eviction (EXEC-3); or end
        the run at once when the live plan recommends nothing."""
        now_t = self.clock.now()
        now = rfc3339(now_t)
        ps = plan.status(now)

        def mutate(st):
            st["plan"] = ps["plan"]
            st.setdefault("startTime", now)
            if plan.outcome != "RepackRecommended":
                set_condition(st, COND_COMPLETE, "True", plan.outcome,
                              f"live re-plan: {plan.message}; nothing was evicted", now)
                set_condition(st, COND_PROGRESSING, "False", plan.outcome, "nothing to execute", now)
                st["message"] = f"live re-plan: {plan.message}; nothing was evicted"
                st["completionTime"] = now
            else:
                st["relocations"] = initial_relocations(plan)
                st["executionDeadline"] = rfc3339(now_t + self.options.execution_timeout)
                msg = (f"executing: {len(st['relocations'])} eviction(s) over "
                       f"{len(plan.moves_by_group())} PodGroup(s) to free {', '.join(plan.freed_nodes)}")
                set_condition(st, COND_PROGRESSING, "True", REASON_EXECUTING, msg, now)
                st["message"] = msg
            st["phase"] = derive_phase(st)
        return self._update(name, mutate)

    # -- the main loop --
    def execute(self, name: str) -> dict:
        """Evict PodGroup by PodGroup, wait for the replacements, verify, finish. Returns the run."""
        run = self.runs.get(name)
        st = run.get("status") or {}
        if is_finished(run):
            return run
        deadline = parse_time(st.get("executionDeadline")) or (self.clock.now() + self.options.execution_timeout)
        run = self._evict_all(name, run, deadline)
        run, timed_out = self._track_placements(name, run, deadline)
        st = run.get("status") or {}
        ver = None
        if any((r.get("eviction") or {}).get("phase") in EVICTED_PHASES for r in st.get("relocations") or ()):
            ver = verify(self.reader.snapshot_objects(), run["spec"]["goals"][0]["resource"],
                         (st.get("plan") or {}).get("freedNodes") or [])
        return self._finish(name, decide_outcome(st, ver, timed_out))

    def _progress(self, run: dict) -> None:
        relocs = (run.get("status") or {}).get("relocations") or []
        p = Progress(
            evicted=sum(1 for r in relocs if (r.get("eviction") or {}).get("phase") in EVICTED_PHASES),
            total=len(relocs),
            bound=sum(1 for r in relocs if (r.get("placement") or {}).get("phase") == PLACEMENT_PLACED),
            rejected=sum(1 for r in relocs if (r.get("eviction") or {}).get("phase") == EVICTION_REJECTED))
        self.on_progress(p)

    def _groups(self, relocs: list) -> list:
        order, groups = [], {}
        for i, r in enumerate(relocs):
            key = (r.get("namespace"), r.get("podGroupName"))
            if key not in groups:
                order.append(key)
                groups[key] = []
            groups[key].append(i)
        return [(k, groups[k]) for k in order]

    def _evict_all(self, name: str, run: dict, deadline: dt.datetime) -> dict:
        relocs = (run.get("status") or {}).get("relocations") or []
        grace = ((run.get("spec") or {}).get("eviction") or {}).get("gracePeriodSeconds")
        for (ns, group), indices in self._groups(relocs):
            # 1. resolve InProgress records left by a crash; collect what still needs evicting
            todo = []
            for i in indices:
                rec = run["status"]["relocations"][i]
                live = self.reader.get_pod(ns, rec.get("victimPodName"))
                action, msg = resume_action(rec, live)
                if action == RESUME_DONE_GONE or action == RESUME_DONE_ACCEPTED:
                    run = self._set_eviction(name, i, EVICTION_ACCEPTED, msg)
                elif action == RESUME_EVICT:
                    if live is None or (rec.get("victimPodUID") and
                                        (live.get("metadata") or {}).get("uid") != rec.get("victimPodUID")):
                        if (rec.get("eviction") or {}).get("phase") == EVICTION_PENDING:
                            # Gone before we touched it: the plan no longer holds for this pod.
                            run = self._set_eviction(name, i, EVICTION_INDIRECTLY_REMOVED,
                                                     f"victim uid {rec.get('victimPodUID')} was gone before "
                                                     "its eviction")
                            continue
                    todo.append((i, live))
            self._progress(run)
            if not todo:
                continue
            # 2. PDB pre-check for the whole PodGroup, so a gang is not left half-moved
            pending = [(i, live) for i, live in todo
                       if run["status"]["relocations"][i]["eviction"]["phase"] == EVICTION_PENDING]
            if pending:
                blocks = pdb_blocks([live for _, live in pending if live], self.reader.list_pdbs(ns))
                if blocks:
                    msg = "; ".join(b.message() for b in blocks)
                    for i, _ in todo:
                        run = self._set_eviction(name, i, EVICTION_REJECTED, msg)
                    self._progress(run)
                    continue
            # 3. evict one by one; a rejection stops this PodGroup
            stop_msg = ""
            for i, live in todo:
                rec = run["status"]["relocations"][i]
                if stop_msg:
                    run = self._set_eviction(name, i, EVICTION_REJECTED, stop_msg)
                    continue
                halt = self.guard()
                if halt:
                    raise LeaseLost(f"repackrun {name}: {halt}; continue with `kubectl repack apply --resume {name}`")
                if rec["eviction"]["phase"] != EVICTION_IN_PROGRESS:
                    run = self._set_eviction(name, i, EVICTION_IN_PROGRESS)
                verdict, msg = self._evict_with_retry(ns, rec, grace, deadline)
                if verdict == ACCEPTED:
                    run = self._set_eviction(name, i, EVICTION_ACCEPTED, msg)
                elif verdict == GONE:
                    run = self._set_eviction(name, i, EVICTION_INDIRECTLY_REMOVED, msg)
                else:
                    run = self._set_eviction(name, i, EVICTION_REJECTED, msg)
                    stop_msg = (f"not evicted: the PodGroup {ns}/{group} stopped moving after "
                                f"{ns}/{rec.get('victimPodName')} was rejected ({msg})")
                self._progress(run)
        return run

    def _evict_with_retry(self, ns: str, rec: dict, grace, deadline: dt.datetime) -> tuple:
        retry_deadline = min(deadline, self.clock.now() + self.options.eviction_retry_timeout)
        backoff = Backoff()
        while True:
            resp = self.evictor.evict(ns, rec.get("victimPodName"), rec.get("victimPodUID") or "", grace)
            self.eviction_calls += 1
            if self.options.crash_after_evictions and self.eviction_calls >= self.options.crash_after_evictions:
                os._exit(137)  # test hook: die like SIGKILL, before the outcome is persisted
            verdict, msg = classify_eviction(resp)
            if verdict != RETRY:
                return verdict, msg
            delay = backoff.next_delay(self.clock.now(), retry_deadline)
            if delay is None:
                return REJECTED, f"{msg} (still blocked after retrying until {rfc3339(retry_deadline)})"
            self.clock.sleep(delay)

    def _track_placements(self, name: str, run: dict, deadline: dt.datetime) -> tuple:
        """Wait until every evicted victim's replacement is bound; record what we see where the
        coordinator has not (placement tracking without the webhook). Returns (run, timed_out)."""
        st = run.get("status") or {}
        not_before = parse_time(st.get("startTime"))
        while True:
            relocs = (run.get("status") or {}).get("relocations") or []
            waiting = [i for i, r in enumerate(relocs)
                       if (r.get("eviction") or {}).get("phase") in EVICTED_PHASES
                       and (r.get("placement") or {}).get("phase") != PLACEMENT_PLACED]
            self._progress(run)
            if not waiting:
                return run, False
            namespaces = sorted({relocs[i]["namespace"] for i in waiting})
            pods_by_ns = {ns: self.reader.list_pods(ns) for ns in namespaces}
            found = find_replacements(run, pods_by_ns, not_before)
            observed = {}
            for i in waiting:
                pl = relocs[i].get("placement") or {}
                pod = None
                if pl.get("replacementPodName"):      # the coordinator (or we) identified it
                    pod = next((p for p in pods_by_ns.get(relocs[i]["namespace"], ())
                                if p["metadata"]["name"] == pl["replacementPodName"]
                                and (not pl.get("replacementPodUID") or p["metadata"].get("uid") == pl["replacementPodUID"])),
                               None)
                    group = ""
                elif i in found:
                    pod, group = found[i]
                if pod is not None and (pod.get("spec") or {}).get("nodeName"):
                    observed[i] = (pod, group)
            if observed:
                def mutate(st, observed=observed):
                    for i, (pod, group) in observed.items():
                        pl = st["relocations"][i].setdefault("placement", {})
                        if pl.get("phase") == PLACEMENT_PLACED or pl.get("actualNodeName"):
                            continue  # the coordinator already recorded it
                        if pl.get("replacementPodName") and pl["replacementPodName"] != pod["metadata"]["name"]:
                            continue
                        pl["replacementPodName"] = pod["metadata"]["name"]
                        pl["replacementPodUID"] = pod["metadata"].get("uid", "")
                        pl["actualNodeName"] = pod["spec"]["nodeName"]
                        pl["phase"] = PLACEMENT_PLACED
                        if group and not st["relocations"][i].get("replacementPodGroupName"):
                            st["relocations"][i]["replacementPodGroupName"] = group
                run = self._update(name, mutate)
                continue
            if self.clock.now() >= deadline:
                def timeout(st, waiting=waiting):
                    for i in waiting:
                        pl = st["relocations"][i].setdefault("placement", {})
                        if pl.get("phase") != PLACEMENT_PLACED:
                            pl["phase"] = PLACEMENT_TIMED_OUT
                run = self._update(name, timeout)
                return run, True
            self.clock.sleep(self.options.poll_interval)
            run = self.runs.get(name)

