"""Evicting one PodGroup: the PDB pre-check, what an Eviction API answer means, the backoff while a
PDB refuses, what to do with a persisted record when apply (re)starts, and a workload's opt-out
since the plan was made. All pure."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Optional

from planner.load import selector_of
from planner.model import opt_out
from planner.selectors import selector_matches

from kubectl_repack.api.run import EVICTION_IN_PROGRESS, EVICTION_PENDING, Relocation
from kubectl_repack.api.view import ObjectView
from .ports import EvictionResponse


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

    A PDB selects pods with metav1.LabelSelector semantics (planner.selectors; a PDB without a
    selector selects nothing, an empty one every pod, an unknown operator is an error naming the
    PDB). A PDB whose status is missing or stale (observedGeneration behind) counts as allowing 0,
    as the API server's eviction check would refuse then too.
    """
    out = []
    for pdb in pdbs:
        view = ObjectView(pdb)
        meta, st = view.meta, view.status
        selector = selector_of(pdb)
        covered = [v for v in victims if selector_matches(selector, ObjectView(v).labels)]
        if not covered:
            continue
        allowed = int(st.get("disruptionsAllowed") or 0)
        if st.get("observedGeneration") is not None and meta.get("generation") is not None \
                and st["observedGeneration"] < meta["generation"]:
            allowed = 0
        if allowed < len(covered):
            out.append(PDBBlock(f"{meta.get('namespace')}/{meta.get('name')}", allowed, len(covered)))
    return out


RETRY, ACCEPTED, GONE, REJECTED, UNKNOWN = "retry", "accepted", "gone", "rejected", "unknown"

# Answers that do not say whether the eviction happened: no answer (0: a client-side timeout, a
# dropped connection), a server error other than the several-PDBs refusal, a gateway's 502/503/504.
# The API server may have deleted the pod before the answer was lost.
UNKNOWN_CODES = frozenset({0, 500, 502, 503, 504})


def classify_eviction(resp: EvictionResponse) -> tuple:
    """(verdict, message) for one Eviction API answer.

    201/200 accepted; 429 a PDB forbids it now (retried until the deadline); 404 the pod is gone;
    409 the UID precondition failed (the victim is gone, a same-name replacement exists); 500 with
    several PDBs is a rejection the run reports; no answer, another 500, 502, 503 and 504 leave the
    outcome unknown (settled by reading the victim: settle_unknown); anything else is a rejection.
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
    if resp.code in UNKNOWN_CODES:
        answer = f"no answer from the Eviction API: {resp.message}" if resp.code == 0 \
            else f"Eviction API answered {resp.code}: {resp.message}"
        return UNKNOWN, f"the outcome of the Eviction call is unknown ({answer})"
    return REJECTED, f"Eviction API answered {resp.code}: {resp.message}"


VICTIM_GONE, VICTIM_TERMINATING, VICTIM_RUNNING = "gone", "terminating", "running"


def victim_state(uid: str, live_pod: Optional[dict]) -> str:
    """What became of the victim `uid`, read by name: gone (no pod, or a same-name pod with another
    UID), terminating (same UID, deletionTimestamp set) or running."""
    pod = ObjectView(live_pod)
    if live_pod is None or (uid and pod.meta.get("uid") != uid):
        return VICTIM_GONE
    if pod.deleting:
        return VICTIM_TERMINATING
    return VICTIM_RUNNING


def settle_unknown(uid: str, live_pod: Optional[dict], why: str) -> tuple:
    """(verdict, message) for an Eviction call whose outcome was unknown (`why`), from the victim as
    read afterwards: gone or terminating -> ACCEPTED (the eviction went through); still running ->
    UNKNOWN (it did not take effect; the caller may retry, the UID precondition keeping a replayed
    call harmless to a replacement)."""
    state = victim_state(uid, live_pod)
    if state == VICTIM_RUNNING:
        return UNKNOWN, f"{why}; the victim uid {uid} is still running"
    return ACCEPTED, f"{why}; the victim uid {uid} was {state} when read afterwards: the eviction went through"


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


RESUME_EVICT, RESUME_DONE_ACCEPTED, RESUME_DONE_GONE, RESUME_SKIP = "evict", "accepted", "gone", "skip"


def resume_action(record: Relocation, live_pod: Optional[dict]) -> tuple:
    """What to do with one persisted record when apply (re)starts: (action, message).

    Pending -> evict (after the PDB check). InProgress: the call may have gone through before a
    crash, so look at the victim UID: gone or terminating -> record it as evicted; still running
    -> evict again (the UID precondition makes a replayed call harmless to a replacement).
    Accepted / IndirectlyRemoved / Rejected are final.
    """
    if record.eviction.phase == EVICTION_PENDING:
        return RESUME_EVICT, ""
    if record.eviction.phase != EVICTION_IN_PROGRESS:
        return RESUME_SKIP, ""
    uid = record.victim_pod_uid
    state = victim_state(uid, live_pod)
    if state == VICTIM_GONE:
        return RESUME_DONE_GONE, (f"victim uid {uid} was gone when apply resumed: the eviction issued "
                                  "before the restart went through")
    if state == VICTIM_TERMINATING:
        return RESUME_DONE_ACCEPTED, (f"victim uid {uid} was terminating when apply resumed: the eviction "
                                      "issued before the restart went through")
    return RESUME_EVICT, ""


def victim_opt_out(rec: Relocation, live: Optional[dict]) -> str:
    """`key=value` of the opt-out (planner.model.opt_out) the victim carries as read (`live`), or ''
    (no pod, or a pod with another UID: not the victim)."""
    pod = ObjectView(live)
    if live is None or (rec.victim_pod_uid and pod.meta.get("uid") != rec.victim_pod_uid):
        return ""
    annotations = pod.meta.get("annotations")
    if not isinstance(annotations, dict):
        return ""
    return opt_out({k: v for k, v in annotations.items() if isinstance(v, str)})


def dnd_message(what_is_annotated: str) -> str:
    """A record's eviction message when its workload opted out after the plan was made."""
    return f"do-not-disrupt: {what_is_annotated} since the plan was made; not evicted"
