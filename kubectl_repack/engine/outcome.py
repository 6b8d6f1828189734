"""From a plan to relocation records, and from the records plus a live check to the run's end (EXEC-6)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import planner
from planner import frag as fragmod

from kubectl_repack.api.run import (EVICTION_PENDING, EVICTION_REJECTED, PHASE_FAILED, PHASE_SUCCEEDED,
                                    PLACEMENT_WAITING_FOR_REPLACEMENT, Eviction, Placement, Reason, Relocation,
                                    relocations)


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


def initial_relocations(plan: "planner.Plan") -> list:
    """One record per planned pod move, in eviction order (PodGroup by PodGroup), as status dicts."""
    groups: dict = {}
    for m in plan.moves:
        groups.setdefault((m.pod.namespace, m.pod.group_name), []).append(m)
    return [Relocation(namespace=ns, victim_pod_name=m.pod.name, pod_group_name=group, victim_pod_uid=m.pod.uid,
                       planned_node_name=m.to_node, eviction=Eviction(EVICTION_PENDING),
                       placement=Placement(PLACEMENT_WAITING_FOR_REPLACEMENT)).to_dict()
            for (ns, group), moves in groups.items() for m in moves]


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
    """The terminal condition from the records and the live verification."""
    relocs = relocations(status)
    planned_freed = (status.get("plan") or {}).get("freedNodes") or []
    cards = cards_by_pod(status)
    evicted = [r for r in relocs if r.eviction.evicted]
    rejected = [r for r in relocs if r.eviction.phase == EVICTION_REJECTED]
    placed = [r for r in evicted if r.placement.placed]
    moved = sum(cards.get((r.namespace, r.victim_pod_name), 0) for r in evicted)
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
        pdb = [r for r in rejected if "PodDisruptionBudget" in r.eviction.message]
        first = (pdb or rejected)[0]
        msg = (f"{len(rejected)} of {len(relocs)} planned eviction(s) rejected; "
               f"{first.victim}: {first.eviction.message or None}")
        return Outcome(PHASE_FAILED, Reason.PDB if pdb else Reason.EVICTION_REJECTED, msg, result)
    if timed_out or len(placed) < len(evicted):
        waiting = [r.victim for r in evicted if not r.placement.placed]
        return Outcome(PHASE_FAILED, Reason.TIMED_OUT,
                       f"{len(waiting)} replacement(s) not bound before status.executionDeadline: "
                       + ", ".join(waiting[:5]), result)
    if ver is not None and ver.not_freed:
        back = [f"{r.namespace}/{r.placement.replacement_pod_name or None} on {r.placement.actual_node_name or None}"
                for r in placed if r.placement.actual_node_name in ver.not_freed]
        why = (f"; the scheduler bound replacement(s) back onto them: {', '.join(back[:5])} (without the "
               "placement webhook nothing hints the planned node)") if back else ""
        return Outcome(PHASE_FAILED, Reason.NOT_FREED,
                       f"planned node(s) {', '.join(ver.not_freed)} still hold the resource after all "
                       f"replacements were bound; live frag {ver.frag_after}%{why}", result)
    alternative = [r for r in placed if r.placement.actual_node_name != r.planned_node_name]
    summary = (f"freed {len(planned_freed)} node(s) ({', '.join(planned_freed)}), moved {moved} card(s), "
               f"live frag {ver.frag_after if ver else '?'}%")
    if alternative:
        return Outcome(PHASE_SUCCEEDED, Reason.COMPLETED_ALTERNATIVE,
                       f"{summary}; {len(alternative)} of {len(placed)} replacement(s) bound off their planned node",
                       result)
    return Outcome(PHASE_SUCCEEDED, Reason.COMPLETED, f"{summary}; every replacement on its planned node", result)
