"""The records checked against the plan before acting on them, and from the records plus a live
check to the run's end (EXEC-6). (A plan becomes records in api.status.)"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional, Sequence

import planner
from planner import frag as fragmod
from planner.errors import RepackError
from planner.model import pod_group_name

from kubectl_repack.api.gates import TARGET_NODE_ANNOTATION, TARGET_RUN_ANNOTATION
from kubectl_repack.api.status import HIDDEN
from kubectl_repack.api.run import EVICTION_REJECTED, PHASE_FAILED, PHASE_SUCCEEDED, Reason, Relocation, relocations
from kubectl_repack.api.times import micro_time, parse_time, rfc3339
from kubectl_repack.api.matching import POD_TEMPLATE_HASH_LABEL
from kubectl_repack.api.view import ObjectView, as_map


@dataclass(frozen=True)
class Verification:
    frag_after: int
    freed_nodes: tuple        # plan.freedNodes no pod holds R on any more (status.result.freedNodes)
    not_freed: tuple          # plan.freedNodes where the run's own pods (victims, replacements) or pods
                              # there before the run hold R, or that can no longer host R (NodesNotFreed)
    occupied: int
    minimum: int
    exact: bool
    # spec.networkTopology (TOPO-3): the blocks on live state (planner.blocks_on), or why they could
    # not be counted (the HyperNodes of the goal's tier are gone, the tree became invalid...)
    node_blocks: Optional[dict] = None
    blocks_problem: str = ""
    # nodes a waiting workload took since the run started (see verify): node -> its pods holding R
    taken: dict = field(default_factory=dict)
    # plan.freedNodes the run vacated (freed, or taken since by a waiting workload): node -> the
    # workloads ("namespace/name") that hold R there now, () for a node still free
    vacated: dict = field(default_factory=dict)
    # plan.freedNodes not vacated: node -> the pods ("namespace/name") that still hold R there
    held: dict = field(default_factory=dict)


def scoped_verification(ver: Optional[Verification], visible) -> Optional[Verification]:
    """`ver` as a run's creator may read it (SEC-1): the pods and workloads ("namespace/name") of a
    namespace outside `visible` that took or hold a planned node are shown as api.status.HIDDEN."""
    if ver is None:
        return None

    def shown(keys: tuple) -> tuple:
        return tuple(k if k.partition("/")[0] in visible else HIDDEN for k in keys)
    return replace(ver, taken={n: shown(k) for n, k in ver.taken.items()},
                   vacated={n: shown(k) for n, k in ver.vacated.items()},
                   held={n: shown(k) for n, k in ver.held.items()})


def _scheduled_at(objects: list) -> dict:
    """{"namespace/name": when its PodScheduled condition turned True} of the pods that say so."""
    out = {}
    for obj in objects:
        if as_map(obj).get("kind") != "Pod":
            continue
        view = ObjectView(obj)
        for c in view.status.get("conditions") or ():
            c = as_map(c)
            if c.get("type") == "PodScheduled" and c.get("status") == "True":
                at = parse_time(c.get("lastTransitionTime"))
                if at is not None:
                    out[f"{view.namespace or 'default'}/{view.name}"] = at
    return out


def workload_of(snapshot, pod) -> str:
    """"namespace/name" of the workload a pod belongs to, as a user knows it: its PodGroup's owner
    (a VCJob, a ModelServing...), else the pod's controller (a ReplicaSet named after its Deployment
    by it), else its PodGroup, else the pod itself."""
    group = snapshot.podgroup_by_key.get(f"{pod.namespace}/{pod.group_name}") if pod.group_name else None
    name = ""
    if group is not None and group.owner is not None:
        name = group.owner.name
    elif pod.owner is not None:
        name = pod.owner.name
        suffix = f"-{pod.labels.get(POD_TEMPLATE_HASH_LABEL) or ''}"
        if pod.owner.kind == "ReplicaSet" and len(suffix) > 1 and name.endswith(suffix):
            name = name[:-len(suffix)]
    return f"{pod.namespace}/{name or pod.group_name or pod.name}"


def verify(objects: list, resource: str, planned_freed: list, spec: Optional[dict] = None,
           run_groups=None, since=None) -> Verification:
    """Live fragmentation and freed nodes from a fresh snapshot, with planner.frag's metric; with a
    `spec` that has networkTopology, the blocks its goal counts on the same snapshot.

    A planned node is freed when no pod holds R there. It is vacated when none of the pods that held
    it before the run, nor their replacements, do: freed, or taken since by a waiting workload (the
    scheduler binds the job a node was freed for as soon as the evictions land, before this check).
    `run_groups` ("namespace/PodGroup" of the run's moves and replacements) tells the run's own pods
    from the others; of these, a pod scheduled before `since` (the run's start) was there before the
    run, one scheduled at or after it (or that does not say when) arrived after the node emptied.
    Only the vacated planned nodes count as done (`vacated`, with the workloads that took them); the
    others are `not_freed` (`held`: by which pods). An idle node taken by pods all scheduled since
    `since` (of the block, by the same job) counts as free for the blocks; `taken` names every taken
    node. Without `run_groups` any R on a planned node counts as in use."""
    snapshot = planner.load_objects(objects)
    alloc, used, items = fragmod.usage(snapshot, resource)
    caps = sorted(alloc.values(), reverse=True)
    minimum = fragmod.theoretical_min(items, caps)
    occupied = sum(1 for n in alloc if used.get(n, 0) > 0)
    frag = fragmod.percent_int(fragmod.frag_percent(occupied, minimum.value, len(alloc)))
    planned = set(planned_freed)
    scheduled = _scheduled_at(objects) if run_groups is not None else {}
    taken, vacated, held = {}, {}, {}
    for n in sorted(alloc):
        holders = [p for p in snapshot.pods_by_node.get(n, ()) if not p.terminal and p.requests.get(resource, 0) > 0]
        if used.get(n, 0) == 0 or not holders:
            if n in planned:
                vacated[n] = ()
            continue
        own = run_groups is None or any(f"{p.namespace}/{p.group_name}" in run_groups for p in holders)
        arrived = [p for p in holders if since is not None and p.key in scheduled and scheduled[p.key] >= since]
        before = [p for p in holders if since is not None and p.key in scheduled and scheduled[p.key] < since]
        if n in planned:
            if own or before:
                held[n] = tuple(p.key for p in holders)
                continue
            taken[n] = tuple(p.key for p in holders)
            vacated[n] = tuple(sorted({workload_of(snapshot, p) for p in holders}))
        elif not own and len(arrived) == len(holders):
            taken[n] = tuple(p.key for p in holders)
    # A node outside the providers (allocatable dropped to 0) counts as not freed: it can't host R.
    freed = tuple(sorted(n for n in planned_freed if n in vacated and not vacated[n]))
    not_freed = tuple(sorted(n for n in planned_freed if n not in vacated))
    blocks, problem = None, ""
    if as_map(spec).get("networkTopology") is not None:
        try:
            blocks = planner.blocks_on(snapshot, dict(spec), taken=tuple(taken))
        except RepackError as e:   # what was planned on can no longer be counted: no block is verified
            problem = str(e)
    return Verification(frag, freed, not_freed, occupied, minimum.value, minimum.exact, blocks, problem, taken,
                        {n: vacated[n] for n in sorted(set(planned_freed)) if n in vacated}, held)


# What status.result.vacatedNodes[].takenBy holds (the CRD's maxItems), and in all: a node taken by
# many small workloads, on thousands of nodes, must not outgrow the run's one etcd object.
TAKEN_BY_PER_NODE = 8
TAKEN_BY_TOTAL = 512


def vacated_nodes(ver: Optional[Verification]) -> list:
    """status.result.vacatedNodes: every planned node the run vacated, with the workloads that took
    it since (`takenBy`, only when some did; at most TAKEN_BY_PER_NODE per node and TAKEN_BY_TOTAL in
    all, the rest left out)."""
    out, room = [], TAKEN_BY_TOTAL
    for n, by in (ver.vacated if ver is not None else {}).items():
        entry = {"node": n}
        names = list(by[:min(TAKEN_BY_PER_NODE, room)])
        if names:
            entry["takenBy"] = names
            room -= len(names)
        out.append(entry)
    return out


def taken_messages(ver: Optional[Verification], limit: int = 10) -> list:
    """One Event message per vacated node that a waiting workload took since the run started (the
    first `limit`, then one that counts the rest)."""
    taken = [(n, by) for n, by in (ver.vacated if ver is not None else {}).items() if by]
    out = [f"{n} vacated; now used by {', '.join(by)}" for n, by in taken[:limit]]
    if len(taken) > limit:
        out.append(f"{len(taken) - limit} more vacated node(s) now used by waiting workloads "
                   "(status.result.vacatedNodes)")
    return out


def result_blocks(status: dict, ver: Optional[Verification]) -> Optional[dict]:
    """status.result.nodeBlocks: the plan's tier, size and blocks before, and the blocks counted on
    live state after (0 when they could not be counted); None without a block goal."""
    if ver is None or (ver.node_blocks is None and not ver.blocks_problem):
        return None
    planned = as_map(as_map(as_map(status.get("plan")).get("summary")).get("nodeBlocks"))
    live = as_map(ver.node_blocks)
    base = planned or live
    if not base:
        return None
    return {"tier": base.get("tier"), "nodeBlockSize": base.get("nodeBlockSize"),
            "before": planned.get("before", live.get("before")), "after": live.get("after", 0)}


def _blocks_short(status: dict, blocks: Optional[dict], ver: Verification) -> str:
    """Why the live blocks fall short of what the plan promised ("" when they do not)."""
    promised = as_map(as_map(as_map(status.get("plan")).get("summary")).get("nodeBlocks")).get("after")
    if blocks is None or not isinstance(promised, int) or blocks["after"] >= promised:
        return ""
    why = f" ({ver.blocks_problem})" if ver.blocks_problem else ""
    return (f"{blocks['after']} block(s) of {blocks['nodeBlockSize']} free node(s) in tier-{blocks['tier']} "
            f"HyperNodes on live state, the plan promised {promised}{why}")


def validate_records(status: dict) -> list:
    """Problems of status.relocations against status.plan.moves, one message per record (empty when
    they agree). Each record must be a move of the plan (namespace, PodGroup, pod, planned node),
    once, with a victim UID (the eviction's precondition); and the plan's moves must all have a
    record. `kubectl repack apply --resume` evicts nothing on records that fail this."""
    problems = []
    records = status.get("relocations")
    if records is None:
        return problems
    if not isinstance(records, list):
        return [f"status.relocations is a {type(records).__name__}, not a list"]
    planned = {}
    moves = (status.get("plan") or {}).get("moves")
    for move in moves if isinstance(moves, list) else ():
        move = move if isinstance(move, dict) else {}
        for p in move.get("pods") or ():
            if isinstance(p, dict):
                planned[(move.get("namespace"), p.get("name"))] = (move.get("podGroupName"), p.get("toNode"))
    seen = set()
    for i, raw in enumerate(records):
        where = f"status.relocations[{i}]"
        if not isinstance(raw, dict):
            problems.append(f"{where} is not an object")
            continue
        r = Relocation.from_dict(raw)
        key = (r.namespace, r.victim_pod_name)
        who = f"{where} ({r.victim})"
        if not r.namespace or not r.victim_pod_name:
            problems.append(f"{where}: namespace and victimPodName are required")
        elif key not in planned:
            problems.append(f"{who}: the pod is not in status.plan.moves")
        elif key in seen:
            problems.append(f"{who}: a second record for the same pod")
        else:
            group, node = planned[key]
            if r.planned_node_name != node:
                problems.append(f"{who}: plannedNodeName {r.planned_node_name or None} is not the plan's "
                                f"toNode {node}")
            if r.pod_group_name != group:
                problems.append(f"{who}: podGroupName {r.pod_group_name or None} is not the plan's {group}")
        if not r.victim_pod_uid:
            problems.append(f"{who}: victimPodUID is empty (the eviction would have no UID precondition)")
        seen.add(key)
    missing = sorted(f"{ns}/{pod}" for ns, pod in set(planned) - seen)
    if missing:
        problems.append(f"status.relocations has {len(records)} record(s) for the {len(planned)} pod(s) of "
                        f"status.plan.moves; no record for {', '.join(missing[:5])}")
    return problems


def partial_groups(relocs: list) -> list:
    """'ns/group: k of n pod(s) evicted' for every PodGroup left partly evicted."""
    groups: dict = {}
    for r in relocs:
        groups.setdefault((r.namespace, r.pod_group_name), []).append(r)
    out = []
    for (ns, group), rs in groups.items():
        gone = sum(1 for r in rs if r.eviction.evicted)
        if 0 < gone < len(rs):
            out.append(f"{ns}/{group}: {gone} of {len(rs)} pod(s) evicted")
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


def decide_outcome(status: dict, ver: Optional[Verification], timed_out: bool,
                   not_started: Sequence[int] = (), cancelled: str = "") -> Outcome:
    """The terminal condition from the records and the live verification.

    `not_started`: indices of records whose eviction did not start because status.executionDeadline
    had passed (ExecutionDeadlineExceeded). A Failed run names every PodGroup it left partly
    evicted."""
    relocs = relocations(status)
    outcome = (_cancelled(status, relocs, ver, timed_out, cancelled) if cancelled
               else _decide(status, relocs, ver, timed_out, not_started))
    partial = partial_groups(relocs)
    if outcome.phase == PHASE_FAILED and partial:
        outcome = Outcome(outcome.phase, outcome.reason,
                          f"{outcome.message}; PodGroup(s) left partly evicted: {'; '.join(partial)}",
                          outcome.result)
    return outcome


def _cancelled(status: dict, relocs: list, ver: Optional[Verification], timed_out: bool, why: str) -> Outcome:
    """A run stopped by cancel or delete: what was moved and what was not (the result as usual)."""
    result = _decide(status, relocs, ver, timed_out, ()).result
    moved = [r.victim for r in relocs if r.eviction.evicted]
    kept = [r.victim for r in relocs if not r.eviction.evicted]
    placed = sum(1 for r in relocs if r.eviction.evicted and r.placement.placed)

    def names(xs):
        return ", ".join(xs[:5]) + (f" (and {len(xs) - 5} more)" if len(xs) > 5 else "")
    msg = (f"{why}: {len(moved)} of {len(relocs)} planned eviction(s) done"
           + (f" ({names(moved)}; {placed} replacement(s) bound)" if moved else "")
           + (f"; not evicted: {names(kept)}" if kept else ""))
    return Outcome(PHASE_FAILED, Reason.CANCELLED, msg, result)


def _decide(status: dict, relocs: list, ver: Optional[Verification], timed_out: bool,
            not_started: Sequence[int]) -> Outcome:
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
        if ver and ver.vacated:
            result["vacatedNodes"] = vacated_nodes(ver)
    blocks = result_blocks(status, ver)
    if result is not None and blocks is not None:
        result["nodeBlocks"] = blocks
    if not_started:
        names = [relocs[i].victim for i in not_started if i < len(relocs)]
        deadline = status.get("executionDeadline") or "?"
        extra = ""
        if rejected:
            extra = f"; {len(rejected)} eviction(s) rejected ({rejected[0].victim}: {rejected[0].eviction.message})"
        return Outcome(PHASE_FAILED, Reason.DEADLINE_EXCEEDED,
                       f"status.executionDeadline {deadline} passed: {len(names)} of {len(relocs)} planned "
                       f"eviction(s) were not started ({', '.join(names[:5])}); {len(evicted)} evicted before "
                       f"it{extra}", result)
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
    short = _blocks_short(status, blocks, ver) if ver is not None else ""
    if ver is not None and ver.not_freed:
        back = [f"{r.namespace}/{r.placement.replacement_pod_name or None} on {r.placement.actual_node_name or None}"
                for r in placed if r.placement.actual_node_name in ver.not_freed]
        why = (f"; the scheduler bound replacement(s) back onto them: {', '.join(back[:5])} (without the "
               "placement webhook nothing hints the planned node)") if back else ""
        if not back and ver.held:
            pods = [k for n in ver.not_freed for k in ver.held.get(n, ())]
            why = f"; held by {', '.join(pods[:5])}" + (f" (and {len(pods) - 5} more)" if len(pods) > 5 else "")
        return Outcome(PHASE_FAILED, Reason.NOT_FREED,
                       f"planned node(s) {', '.join(ver.not_freed)} still hold the resource after all "
                       f"replacements were bound; live frag {ver.frag_after}%{why}" + (f"; {short}" if short else ""),
                       result)
    if short:   # as with a planned node still in use: the run did not leave what it promised
        return Outcome(PHASE_FAILED, Reason.NOT_FREED,
                       f"{short} after all replacements were bound; live frag {ver.frag_after}%", result)
    alternative = [r for r in placed if r.placement.actual_node_name != r.planned_node_name]
    taken = {n: by for n, by in (ver.vacated if ver is not None else {}).items() if by}
    idle = {n: pods for n, pods in sorted((ver.taken if ver is not None else {}).items()) if n not in taken}
    freed = list(ver.freed_nodes) if ver is not None else list(planned_freed)
    summary = (f"freed {len(freed)} node(s)" + (f" ({', '.join(freed)})" if freed else "")
               + (f", vacated {len(taken)} node(s) now used by waiting workloads (" + "; ".join(
                   f"{n}: {', '.join(by[:3])}" for n, by in list(taken.items())[:5])
                   + (f"; and {len(taken) - 5} more" if len(taken) > 5 else "") + ")" if taken else "")
               + f", moved {moved} card(s), live frag {ver.frag_after if ver else '?'}%"
               + (f", {blocks['after']} block(s) of {blocks['nodeBlockSize']} in tier-{blocks['tier']} HyperNodes"
                  if blocks else "")
               + (f" (counting idle node(s) taken since by waiting workloads: " + ", ".join(
                   f"{n} ({', '.join(pods[:3])})" for n, pods in list(idle.items())[:5])
                   + (f" and {len(idle) - 5} more" if len(idle) > 5 else "") + ")" if blocks and idle else ""))
    if alternative:
        return Outcome(PHASE_SUCCEEDED, Reason.COMPLETED_ALTERNATIVE,
                       f"{summary}; {len(alternative)} of {len(placed)} replacement(s) bound off their planned node",
                       result)
    return Outcome(PHASE_SUCCEEDED, Reason.COMPLETED, f"{summary}; every replacement on its planned node", result)


# --- the target of a targeted run (RELIEF-3) ------------------------------------------------------
def gang_bound_at(pg: Optional[dict], pods: list, name: str) -> tuple:
    """(bound, when) of one target PodGroup as read now: bound as vc-scheduler has it (phase
    Running, or minMember of its pods bound), and when its minMember-th pod was scheduled (its
    PodScheduled condition; None when the pods do not say)."""
    if pg is None:
        return False, None
    min_member = as_map(pg.get("spec")).get("minMember")
    min_member = min_member if isinstance(min_member, int) and not isinstance(min_member, bool) else 0
    times, bound = [], 0
    scheduled = _scheduled_at(pods)
    for p in pods:
        view = ObjectView(p)
        if (pod_group_name(view.annotations, view.labels) == name and view.spec.get("nodeName")
                and view.status.get("phase") not in ("Succeeded", "Failed")):
            bound += 1
            at = scheduled.get(f"{view.namespace or 'default'}/{view.name}")
            if at is not None:
                times.append(at)
    is_bound = as_map(pg.get("status")).get("phase") == "Running" or bound >= max(min_member, 1)
    times.sort()
    need = max(min_member, 1)
    return is_bound, (times[need - 1] if is_bound and len(times) >= need else (times[-1] if is_bound and times else None))


def nominated_by(pods: list, run_ref: str) -> list:
    """[{pod, node}] of the pods the coordinator nominated for the run `run_ref` (`<name>/<uid>`):
    its marks (TARGET_*_ANNOTATION), which stay on the pod after it is bound."""
    out = []
    for p in pods:
        view = ObjectView(p)
        if view.annotations.get(TARGET_RUN_ANNOTATION) == run_ref and view.annotations.get(TARGET_NODE_ANNOTATION):
            out.append({"pod": f"{view.namespace}/{view.name}", "node": str(view.annotations[TARGET_NODE_ANNOTATION])})
    return sorted(out, key=lambda e: (e["pod"], e["node"]))


def _nominated_phrase(nominated: list) -> str:
    if not nominated:
        return "nothing nominated"
    by_node: dict = {}
    for e in nominated:
        by_node[e["node"]] = by_node.get(e["node"], 0) + 1
    parts = [f"{k} pod{'s' if k != 1 else ''} nominated to {n}" if i == 0 else f"{k} to {n}"
             for i, (n, k) in enumerate(sorted(by_node.items()))]
    return ", ".join(parts)


def target_result(keys: Sequence[str], pods: list, groups: dict, run_ref: str, vacated_at, vacated: bool,
                  waited) -> dict:
    """status.result.target of a targeted Execute (RELIEF-3), from what is read after the wait:
    `pods` of the targets' namespaces, `groups` ("namespace/name" -> PodGroup, None when deleted),
    `vacated_at` (when the planned nodes were vacated: the last eviction accepted; a datetime),
    `vacated` (whether any planned node was), `waited` (how long the executor waited, a timedelta).
    `bound` is whether every target is bound; `boundAt` when the last of them was (its minMember-th
    pod scheduled), `boundAfterSeconds` that after vacatedAt; `nominated` the coordinator's hints;
    `message` one line, the one `kubectl repack status` shows."""
    bound_all, at_all, deleted = True, None, []
    for key in keys:
        ns, _, name = key.partition("/")
        pg = groups.get(key)
        if pg is None:
            deleted.append(key)
            bound_all = False
            continue
        is_bound, at = gang_bound_at(pg, [p for p in pods if ObjectView(p).namespace == ns], name)
        bound_all = bound_all and is_bound
        if is_bound and at is not None:
            at_all = at if at_all is None or at > at_all else at_all
    nominated = nominated_by(pods, run_ref)
    block: dict = {"podGroups": list(keys), "bound": bound_all}
    if vacated_at is not None and vacated:
        block["vacatedAt"] = micro_time(vacated_at)
    after = None
    if bound_all and at_all is not None:
        block["boundAt"] = rfc3339(at_all)
        if vacated_at is not None and vacated:
            after = round(max(0.0, (at_all - vacated_at).total_seconds()), 1)
            block["boundAfterSeconds"] = after
    if nominated:
        block["nominated"] = nominated[:TARGET_NOMINATED_MAX]
    hints = _nominated_phrase(nominated)
    if not vacated:
        msg = ("bound" if bound_all else "not bound") + "; no planned node was vacated, nothing nominated"
    elif bound_all:
        when = f"{after:g} s after the nodes were vacated" if after is not None else "after the nodes were vacated"
        msg = f"bound {when} ({hints})" if nominated else f"bound {when}, on its own before any nomination (nothing nominated)"
    elif deleted:
        msg = f"{', '.join(deleted)} deleted before it was bound ({hints})"
    else:
        msg = (f"not bound within {waited.total_seconds():g} s after the nodes were vacated ({hints}); the room was made, "
               "the run is judged on the vacated nodes")
    block["message"] = msg
    return block


TARGET_NOMINATED_MAX = 256   # status.result.target.nominated (the CRD's maxItems)
