"""Runs aimed at pending gangs (RELIEF-2): the least-disruptive plan after which every target gang
fits, all the pods it still needs at once, with every scheduler filter, on the plan's final state.

A target is a PodGroup in the snapshot with pending pods (no node). It needs
`minMember - (its pods bound)` of them placed; `place` tries that on a SimulatedState: the target's
pending pods, largest first, each on the node where it leaves the least of the resource free
(best fit) among the nodes its static filters allow, with every filter (capacity, ports, network
topology, inter-pod terms) on the state as the pods placed before it left it. A placement found
is a proof that the gang fits; one not found is no proof that it cannot (best fit may miss a
packing), so `TargetCannotFit` says what stopped the best attempt.

The plan vacates whole nodes with the round loop (`rounds.Planner`: GANG-3 order, every filter,
budget, scope), only nodes some target pod may use, never onto an idle node a target pod may use,
and stops as soon as the target fits (`Planner.stop`). Candidates tried, least disruption kept:

1. each usable candidate alone (the cheapest MAX_SINGLES by their own GANG-3 cost), then each pair
   of the cheapest PAIR_POOL that could cost less than the best plan so far;
2. if none suffices, the round loop over all usable candidates until the target fits, then each
   vacated node left out in turn while the target still fits (latest first).

FRAG-4's freed-node gate does not apply: the run succeeds when its target fits.
"""
from dataclasses import dataclass, replace

from . import blocks as block_view
from .cost import PlanCost
from .errors import SpecError
from .filters import STATIC_FILTERS, run_filters
from .frag import percent_int
from .plan_types import (REASON_RECOMMENDED, REASON_TARGET_CANNOT_FIT, REASON_TARGET_FITS, NodeVerdict, Target,
                         TargetFit)
from .quantity import format_amount
from .state import SimulatedState
from .verdicts import VerdictReason

MAX_SINGLES = 64          # usable candidates tried alone, cheapest first
PAIR_POOL = 8             # the cheapest usable candidates whose pairs are tried (28 pairs at most)
BASE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")


def extended(resource: str) -> bool:
    """An extended resource (vendor/name), not a quota-style count Volcano puts in minResources
    (count/pods) nor a requests./limits. key."""
    return "/" in resource and not resource.startswith(("hugepages-", "requests.", "limits.", "count/"))


def gang_members(snapshot, key) -> tuple:
    """(its pending pods in name order, how many of its pods are bound) of PodGroup `key`, counting
    the pods that have not finished."""
    ns, name = key.split("/", 1)
    members = [p for p in snapshot.pods if p.namespace == ns and p.group_name == name and not p.terminal]
    pending = sorted((p for p in members if not p.node_name), key=lambda p: p.name)
    return pending, len(members) - len(pending)


class Gangs:
    """The target gangs of a snapshot: their pending pods and how many each still needs."""

    def __init__(self, snapshot, target):
        self.snapshot = snapshot
        self.keys = target.podgroups
        self.pending, self.need, self.bound = {}, {}, {}
        for i, key in enumerate(self.keys):
            pg = snapshot.podgroup_by_key.get(key)
            where = f"spec.target.podGroups[{i}]"
            if pg is None:
                raise SpecError(f"{where}: PodGroup {key} is not in the snapshot")
            pending, bound = gang_members(snapshot, key)
            need = pg.min_member - bound
            if need <= 0:
                raise SpecError(f"{where}: PodGroup {key} is not waiting: {bound} of its pods are bound "
                                f"(minMember {pg.min_member}) and {len(pending)} pending; nothing to make room for")
            self.pending[key], self.need[key], self.bound[key] = pending, need, bound

    def resource(self) -> str:
        """The one extended resource the targets' pending pods request (when the run names none)."""
        found = sorted({r for pods in self.pending.values() for p in pods for r, v in p.requests.items()
                        if v and extended(r)}
                       # a PodGroup whose pods are not created yet: its minResources
                       | {r for k in self.keys if not self.pending[k]
                          for r, v in self.snapshot.podgroup_by_key[k].min_resources.items() if v and extended(r)})
        if len(found) != 1:
            what = "none" if not found else ", ".join(found)
            raise SpecError(f"spec.goals: the target's pods request {'no extended resource' if not found else what}: "
                            "name the resource to make room for in spec.goals[0].resource")
        return found[0]

    def unborn(self) -> str:
        """Targets with no pod yet (Volcano creates a job's pods once vc-scheduler enqueues its
        PodGroup), one line; "" when every target has its pods."""
        return "; ".join(f"PodGroup {k} has no pod yet (phase {self.snapshot.podgroup_by_key[k].phase or 'unknown'}: "
                         "vc-scheduler has not enqueued it, and Volcano creates a job's pods only then)"
                         for k in self.keys if not self.pending[k])

    def queue_problem(self, key) -> str:
        """Why the PodGroup's queue keeps it out ("" when it does not, or the snapshot has no Queues)."""
        snap = self.snapshot
        if not snap.queues:
            return ""
        pg = snap.podgroup_by_key[key]
        want = {}
        for p in self.pending[key][:self.need[key]]:
            for r, v in p.requests.items():
                want[r] = want.get(r, 0) + v
        return _queue_problem(pg, snap.queue_by_name.get(pg.queue), dict(pg.min_resources) or want)

    def describe(self) -> str:
        return ", ".join(f"PodGroup {k} ({self.need[k]} pod(s) of minMember {self.need[k] + self.bound[k]})"
                         for k in self.keys)


def resolve_resource(snapshot, run):
    """`run` with its resource: a targeted run that names no goal takes the one extended resource
    its targets request (SpecError naming them when they request none or several)."""
    if run.target is None or run.resource:
        return run
    return replace(run, resource=Gangs(snapshot, run.target).resource())


class Placer:
    """Places the targets' pending pods on a state (see the module doc)."""

    def __init__(self, gangs, resource):
        snap = gangs.snapshot
        self.gangs, self.R = gangs, resource
        base = SimulatedState(snap)
        self.static = {}                  # pod key -> nodes its static filters allow, name order
        self.static_fail = {}             # pod key -> {(filter, reason): nodes}
        for pods in gangs.pending.values():
            for p in pods:
                ok, fail = [], {}
                for n in snap.nodes:
                    f = run_filters(p, n, base, {}, STATIC_FILTERS)
                    if f is None:
                        ok.append(n.name)
                    else:
                        fail[f] = fail.get(f, 0) + 1
                self.static[p.key], self.static_fail[p.key] = ok, fail
        self.usable = frozenset(n for ns in self.static.values() for n in ns)

    def place(self, state):
        """(placements [(pod key, node)], failures {(filter, reason): nodes} of the first pod that
        found no node, or None). The state is left as it was."""
        snap, R = self.gangs.snapshot, self.R
        mark = state.fork()
        placed, failed = [], None
        try:
            for key in self.gangs.keys:
                pods = sorted(self.gangs.pending[key], key=lambda p: (-p.requests.get(R, 0), p.name))
                got = 0
                for p in pods:
                    if got >= self.gangs.need[key]:
                        break
                    best, best_left, fails = None, None, dict(self.static_fail[p.key])
                    cache = {}
                    for n in self.static[p.key]:
                        f = run_filters(p, snap.node_by_name[n], state, cache)
                        if f is not None:
                            fails[f] = fails.get(f, 0) + 1
                            continue
                        left = state.free(n, R) - p.requests.get(R, 0)
                        if best is None or left < best_left:
                            best, best_left = n, left
                    if best is None:
                        failed = failed or (p.key, fails)
                        continue
                    state.bind(p, best)
                    placed.append((p.key, best))
                    got += 1
                if got < self.gangs.need[key]:
                    return placed, failed or (key, {})
            return placed, None
        finally:
            state.revert(mark)


def closest_failure(failed) -> str:
    """One line from `place`'s failures: the pod and its nodes grouped by reason, most first."""
    if not failed:
        return ""
    pod, fails = failed
    parts = [f"{n} node(s): {reason} ({name})" for (name, reason), n in sorted(fails.items(), key=lambda kv: (-kv[1], kv[0]))]
    return f"pod {pod} fits no node: " + ("; ".join(parts[:4]) or "no node")


def plan_target(prep, weights, optimized, finish):
    """The targeted Plan (RELIEF-2) of a prepared snapshot whose run has a target; `finish` turns a
    finished pass into its untargeted Plan (planner.plan.finish)."""
    from .improve import weighted_disruption
    from .rounds import Planner
    gangs = Gangs(prep.snapshot, prep.run.target)
    placer = Placer(gangs, prep.resource)

    def fit_of(fits, placements, message):
        return TargetFit(gangs.keys, fits, placements, message, prep.resource)

    def make(allowed, closed=frozenset()):
        return Planner(prep, weights, optimized, allowed, closed)

    placed, failed = placer.place(prep.fresh_state())
    queues = "; ".join(q for q in (gangs.queue_problem(k) for k in gangs.keys) if q)
    if queues:
        # Volcano admits nothing of it until its queue does: moving pods cannot make it run
        fit = fit_of(failed is None, tuple(placed) if failed is None else (),
                        f"{gangs.describe()} waits for its queue, not for room: {queues}; nothing is moved")
        return _not_recommended(prep, finish(make(frozenset()).run_rounds()), REASON_TARGET_FITS, fit)
    unborn = gangs.unborn()
    if unborn:
        fit = fit_of(False, (), f"{unborn}: there is nothing to make room for until it has; nothing is moved")
        return _not_recommended(prep, finish(make(frozenset()).run_rounds()), REASON_TARGET_CANNOT_FIT, fit)
    if failed is None:
        where = ", ".join(f"{k.split('/', 1)[1]} -> {n}" for k, n in placed)
        fit = fit_of(True, tuple(placed),
                        f"{gangs.describe()} fits now without any move ({where}): it waits for something else "
                        "(its PodGroup's phase or the scheduler's next session; `kubectl repack why` says more)")
        return _not_recommended(prep, finish(make(frozenset()).run_rounds()), REASON_TARGET_FITS, fit)
    usable = [c for c in prep.candidates if c in placer.usable]
    # idle nodes a target pod may use receive nothing: the room made must not be spent on the way
    closed = frozenset(n for n in prep.idle if n in placer.usable)
    memo = {}

    def fits(planner):
        k = (id(planner), len(planner.moves))
        if k not in memo:
            memo[k] = placer.place(planner.state)[1] is None
        return memo[k]

    def run(allowed):
        p = make(frozenset(allowed), closed)
        p.stop = fits
        return p.run_rounds()

    best, best_key = None, None

    def consider(p):
        nonlocal best, best_key
        if p.moves and fits(p):
            key = (weighted_disruption(p), len(p.moves), sorted(p.freed))
            if best_key is None or key < best_key:
                best, best_key = p, key

    cost = PlanCost(prep.gangs)

    alone = {c: sum(w * d for w, d in zip(weights, cost.with_candidate(prep.groups_of[c]))) for c in usable}
    ranked = sorted(usable, key=lambda c: (alone[c], prep.cards_of[c], c))
    for c in ranked[:MAX_SINGLES]:
        consider(run([c]))
    # pairs of the cheapest: two cheap nodes can disrupt less than the cheapest one that suffices
    # alone, and when none suffices alone, the greedy pass below need not end on the cheapest pair.
    # A pair costs at least the dearer of its two alone (GANG-3 grows with what moves).
    pool = ranked[:PAIR_POOL]
    for i, a in enumerate(pool):
        for b in pool[i + 1:]:
            if best_key is None or max(alone[a], alone[b]) < best_key[0]:
                consider(run([a, b]))
    greedy = None
    if best is None and usable:
        greedy = run(usable)
        consider(greedy)
        if best is not None:
            kept = list(best.freed)
            for x in reversed(list(best.freed)):
                if len(kept) < 2 or x not in kept:
                    continue
                p = run(c for c in kept if c != x)
                if p.moves and fits(p):
                    kept = list(p.freed)
                    consider(p)
    if best is None:
        p = greedy if greedy is not None else make(frozenset(), closed).run_rounds()
        got, failed = placer.place(p.state)
        reach = ("after vacating every node it may use that scope and budget allow" if usable else
                 "no node it may use can be vacated (none in scope with only movable pods)")
        stopped = sorted({v.reason.value for v in p.verdicts.values() if not v.vacated and v.node in placer.usable})
        fit = fit_of(False, (),
                        f"{gangs.describe()} cannot fit: {reach}, {len(got)} of {sum(gangs.need.values())} pod(s) "
                        f"would be placed; {closest_failure(failed)}"
                        + (f"; nodes it may use stay occupied: {', '.join(stopped)}" if stopped else ""))
        return _not_recommended(prep, finish(p), REASON_TARGET_CANNOT_FIT, fit)
    got, _ = placer.place(best.state)
    where = ", ".join(f"{k.split('/', 1)[1]} -> {n}" for k, n in got)
    fit = fit_of(True, tuple(got),
                    f"{gangs.describe()} fits after vacating {', '.join(best.freed)} "
                    f"({len(best.moves)} pod(s) moved): {where}")
    plan = finish(best)
    msg = f"{fit.message}; fragmentation {percent_int(plan.frag_before)}% -> {percent_int(plan.frag_after)}%"
    if plan.notes:
        msg += "; " + "; ".join(plan.notes)
    return replace(plan, outcome=REASON_RECOMMENDED, message=msg, above_minimum="", above_minimum_reason="",
                   target=fit)


def _not_recommended(prep, plan, outcome, fit):
    """`plan` turned into a pass that moves nothing, with the targeted outcome and message."""
    cards = {n: (a, used, used) for n, (a, used, _) in plan.cards.items()}
    verdicts = tuple(NodeVerdict(v.node, False, VerdictReason.NOT_SELECTED,
                                 f"{outcome}: nothing is moved", round=v.round) if v.vacated else v
                     for v in plan.verdicts)
    return replace(plan, outcome=outcome, message=fit.message, moves=(), freed_nodes=(), reoccupied=(), freed_capacity=(),
                   occupied_after=plan.occupied_before, frag_after=plan.frag_before, cards=cards,
                   above_minimum="", above_minimum_reason="", target=fit, verdicts=verdicts, owners={},
                   hypernodes=block_view.rows(prep, prep.blocks, (), ()))


# -- why a gang waits (RELIEF-1) -----------------------------------------------------------------
CAUSE_RUNNING = "NotWaiting"           # nothing pending: the gang has what it needs bound
CAUSE_QUEUE = "Queue"                  # its queue is closed or at its capability
CAUSE_FILTERS = "NoNodeMatches"        # a pod's selectors, affinity or tolerations rule out every node
CAUSE_CAPACITY = "NotEnoughResources"  # not enough of the resource free anywhere it may go, even packed
CAUSE_FRAGMENTATION = "Fragmentation"  # enough free in all, but not where whole pods fit
CAUSE_NOT_ENQUEUED = "NotEnqueued"     # no pod yet: vc-scheduler has not enqueued the PodGroup
CAUSE_FITS = "FitsNow"                 # it fits now: the scheduler has not placed it yet, or waits for the queue


@dataclass(frozen=True)
class PodVerdicts:
    """The pending pods of one shape (same requests, same verdict per node) and, over every node,
    how many nodes gave each verdict (("", "fits") for the nodes it fits now)."""
    pods: tuple
    requests: dict
    verdicts: tuple                    # ((filter, reason, nodes, detail), ...) most nodes first


@dataclass(frozen=True)
class Diagnosis:
    podgroup: str
    phase: str
    min_member: int
    bound: int
    pending: int
    conditions: tuple                  # model.Condition
    min_resources: dict                # resource -> quantity string
    queue: str
    queue_found: bool
    queue_state: str
    queue_problem: str                 # "" when the queue lets the gang in
    queue_rows: tuple                  # (resource, allocated, capability, guarantee) as quantity strings
    pods: tuple                        # PodVerdicts
    resource: str
    need: int                          # pods still to bind for minMember
    fit_now: int                       # of them, placeable together now
    cause: str
    summary: str
    free_total: int                    # free resource on the nodes the pods may use
    free_max: int                      # the most free on one of them
    fix: str = ""                      # the smallest repack, one line ("" without)
    plan: object = None                # the targeted Plan behind `fix`

    def as_dict(self) -> dict:
        return {
            "podGroup": {"name": self.podgroup, "phase": self.phase, "minMember": self.min_member,
                         "bound": self.bound, "pending": self.pending, "minResources": dict(self.min_resources),
                         "conditions": [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                                        for c in self.conditions]},
            "queue": {"name": self.queue, "found": self.queue_found, "state": self.queue_state,
                      "problem": self.queue_problem,
                      "resources": [{"resource": r, "allocated": a, "capability": c, "guarantee": g}
                                    for r, a, c, g in self.queue_rows]},
            "pods": [{"pods": list(v.pods), "requests": dict(v.requests),
                      "nodes": [{"filter": f, "reason": r, "count": n, **({"detail": d} if d else {})}
                                for f, r, n, d in v.verdicts]} for v in self.pods],
            "resource": self.resource, "need": self.need, "fitNow": self.fit_now,
            "freeTotal": format_amount(self.resource, self.free_total) if self.resource else "0",
            "freeMaxOnOneNode": format_amount(self.resource, self.free_max) if self.resource else "0",
            "cause": self.cause, "summary": self.summary, **({"fix": self.fix} if self.fix else {}),
        }


def _queue_problem(pg, queue, need_resources):
    """Why Volcano's enqueue would keep the gang out of `queue`: "" when it would not."""
    if queue is None:
        return f"queue {pg.queue} does not exist: vc-scheduler never enqueues the PodGroup"
    if queue.state and queue.state != "Open":
        return f"queue {queue.name} is {queue.state}: it admits no new PodGroup"
    for r, cap in sorted(queue.capability.items()):
        want = need_resources.get(r, 0)
        if want and queue.allocated.get(r, 0) + want > cap:
            return (f"queue {queue.name} is at its capability for {r}: {format_amount(r, queue.allocated.get(r, 0))} "
                    f"allocated + {format_amount(r, want)} needed > {format_amount(r, cap)}")
    return ""


def explain(snapshot, key, resource="", weights=None, spec=None, with_fix=True) -> Diagnosis:
    """Why PodGroup `key` is not running (RELIEF-1), in the order Volcano decides: its queue, the
    PodGroup, then for its pending pods the planner's filters against every node; how many of the
    pods it still needs fit now, whether fragmentation is the cause, and if so the smallest
    targeted plan (`spec`: the run's other fields, scope and budget, for that plan); `with_fix=False`
    gives the cause without that plan (the controller's gauge counts gangs by cause, planner.gauge)."""
    from .cost import DEFAULT_WEIGHTS
    from .plan import plan as make_plan
    pg = snapshot.podgroup_by_key.get(key)
    if pg is None:
        raise SpecError(f"PodGroup {key} is not in the snapshot")
    ns, name = key.split("/", 1)
    pending, bound = gang_members(snapshot, key)
    need = max(pg.min_member - bound, 0)
    queue = snapshot.queue_by_name.get(pg.queue)
    base = dict(podgroup=key, phase=pg.phase, min_member=pg.min_member, bound=bound, pending=len(pending),
                conditions=pg.conditions, min_resources={r: format_amount(r, v) for r, v in pg.min_resources.items()},
                queue=pg.queue, queue_found=queue is not None, queue_state=queue.state if queue else "")
    rows = ()
    if queue is not None:
        names = sorted(set(queue.capability) | set(queue.allocated) | set(queue.guarantee))
        rows = tuple((r, format_amount(r, queue.allocated.get(r, 0)),
                      format_amount(r, queue.capability[r]) if r in queue.capability else "",
                      format_amount(r, queue.guarantee[r]) if r in queue.guarantee else "") for r in names)
    if need == 0:
        return Diagnosis(**base, queue_problem="", queue_rows=rows, pods=(), resource=resource, need=0, fit_now=0,
                         cause=CAUSE_RUNNING, free_total=0, free_max=0,
                         summary=f"PodGroup {key} is not waiting: {bound} pod(s) bound of minMember {pg.min_member}, "
                                 f"{len(pending)} pending")
    target = Target((key,))
    gangs = Gangs(snapshot, target)
    if not pending:
        problem = gangs.queue_problem(key)
        cause = CAUSE_QUEUE if problem else CAUSE_NOT_ENQUEUED
        summary = (problem + ": a repack cannot help until the queue admits it" if problem else
                   gangs.unborn() + "; its minResources must fit what its queue and the cluster have free")
        return Diagnosis(**base, queue_problem=problem, queue_rows=rows, pods=(), resource=resource, need=need,
                         fit_now=0, cause=cause, free_total=0, free_max=0, summary=summary)
    resource = resource or gangs.resource()
    placer = Placer(gangs, resource)
    state = SimulatedState(snapshot)
    shapes = {}
    for p in pending:
        tally = dict(placer.static_fail[p.key])
        cache = {}
        free_of = {}
        for n in placer.static[p.key]:
            f = run_filters(p, snapshot.node_by_name[n], state, cache)
            f = f or ("", "fits")
            tally[f] = tally.get(f, 0) + 1
            free_of.setdefault(f, []).append(state.free(n, resource))
        verdicts = []
        for (f, reason), count in sorted(tally.items(), key=lambda kv: (-kv[1], kv[0])):
            detail = ""
            frees = free_of.get((f, reason))
            if f == "NodeResourcesFit" and reason == f"Insufficient {resource}" and frees:
                lo, hi = min(frees), max(frees)
                span = format_amount(resource, lo) if lo == hi else \
                    f"{format_amount(resource, lo)}-{format_amount(resource, hi)}"
                detail = f"{resource} free {span} < {format_amount(resource, p.requests.get(resource, 0))} requested"
            verdicts.append((f, reason, count, detail))
        shape = (tuple(sorted(p.requests.items())), tuple(verdicts))
        shapes.setdefault(shape, []).append(p.key)
    pods = tuple(PodVerdicts(tuple(keys), {r: format_amount(r, v) for r, v in req if r != "pods"}, verdicts)
                 for (req, verdicts), keys in shapes.items())
    placed, failed = placer.place(state)
    fit_now = len(placed)
    problem = gangs.queue_problem(key)
    usable = placer.usable
    free = [state.free(n, resource) for n in sorted(usable)]
    free_total, free_max = sum(max(f, 0) for f in free), max(free, default=0)
    per_pod = max((p.requests.get(resource, 0) for p in pending), default=0)
    total_need = sum(sorted((p.requests.get(resource, 0) for p in pending), reverse=True)[:need])
    fix, targeted = "", None
    unit = resource
    if problem:
        cause, summary = CAUSE_QUEUE, problem + ("; the pods would fit now" if failed is None else "") + \
            ": a repack cannot help until the queue admits it"
    elif any(not placer.static[p.key] for p in pending):
        p = next(p for p in pending if not placer.static[p.key])
        top = max(placer.static_fail[p.key].items(), key=lambda kv: kv[1])[0]
        cause, summary = CAUSE_FILTERS, (f"no node can ever take pod {p.key}: {top[1]} ({top[0]}) on "
                                         f"{placer.static_fail[p.key][top]} node(s); a repack cannot help")
    elif failed is None:
        cause, summary = CAUSE_FITS, (f"all {need} pod(s) it needs fit now: it waits for the scheduler "
                                      f"(PodGroup phase {pg.phase or 'unknown'}) or its queue, not for room")
    elif free_total < total_need:
        cause, summary = CAUSE_CAPACITY, (f"{format_amount(unit, free_total)} {unit} free on the nodes its pods may use, "
                                          f"{format_amount(unit, total_need)} needed: not enough even if packed; "
                                          "a repack cannot help (free capacity or wait)")
    else:
        cause = CAUSE_FRAGMENTATION
        summary = (f"{format_amount(unit, free_total)} {unit} free on the nodes its pods may use, "
                   f"{format_amount(unit, total_need)} needed, but the most free on one node is "
                   f"{format_amount(unit, free_max)} (a pod needs {format_amount(unit, per_pod)}); "
                   f"{fit_now} of {need} pod(s) fit now")
        run = dict(spec or {"mode": "DryRun"})
        run.pop("goals", None)
        run.pop("networkTopology", None)
        run["target"] = {"podGroups": [key]}
        run["goals"] = [{"resource": resource}]
        targeted = make_plan(snapshot, run, weights or DEFAULT_WEIGHTS) if with_fix else None
        if targeted is None:
            pass
        elif targeted.outcome == REASON_RECOMMENDED:
            groups = {f"{m.pod.namespace}/{m.pod.group_name}" for m in targeted.moves}
            fix = (f"vacate {', '.join(targeted.freed_nodes)} ({len(targeted.moves)} pod(s) of {len(groups)} "
                   f"PodGroup(s) moved): kubectl repack plan --for podgroup/{name} -n {ns}")
        else:
            summary += f"; no repack makes room: {targeted.message}"
    return Diagnosis(**base, queue_problem=problem, queue_rows=rows, pods=pods, resource=resource, need=need,
                     fit_now=fit_now, cause=cause, summary=summary, free_total=free_total, free_max=free_max,
                     fix=fix, plan=targeted)


# -- what `--for KIND/NAME` and `why KIND/NAME` name -------------------------------------------
KIND_ALIASES = {"podgroup": "podgroup", "podgroups": "podgroup", "pg": "podgroup",
                "podgroup.scheduling.volcano.sh": "podgroup",
                "vcjob": "vcjob", "vcjobs": "vcjob", "vj": "vcjob", "job.batch.volcano.sh": "vcjob",
                "jobs.batch.volcano.sh": "vcjob", "pod": "pod", "pods": "pod", "po": "pod"}


def resolve_gang(snapshot, ref: str, namespace: str) -> str:
    """The PodGroup ("namespace/name") that `ref` (KIND/NAME: vcjob, podgroup or pod, kubectl's
    short names too) in `namespace` stands for. SpecError naming the object when it is not in the
    snapshot or is no Volcano gang."""
    kind, _, name = ref.partition("/")
    kind = KIND_ALIASES.get(kind.lower())
    if kind is None or not name or "/" in name:
        raise SpecError(f"{ref}: expected KIND/NAME with KIND vcjob, podgroup or pod")
    key = f"{namespace}/{name}"
    if kind == "podgroup":
        if key not in snapshot.podgroup_by_key:
            raise SpecError(f"podgroup {key}: not found")
        return key
    if kind == "vcjob":
        if key not in snapshot.vcjob_by_key:
            raise SpecError(f"vcjob {key}: not found")
        owned = sorted(g.key for g in snapshot.podgroups if g.namespace == namespace and g.owner is not None
                       and g.owner.kind == "Job" and g.owner.group == "batch.volcano.sh" and g.owner.name == name)
        if not owned:
            raise SpecError(f"vcjob {key}: has no PodGroup yet (vc-controller-manager creates it when it syncs the job)")
        return owned[0]
    pod = next((p for p in snapshot.pods if p.namespace == namespace and p.name == name), None)
    if pod is None:
        raise SpecError(f"pod {key}: not found")
    if not pod.group_name:
        raise SpecError(f"pod {key}: is not in a Volcano gang (no scheduling.k8s.io/group-name annotation)")
    group = f"{namespace}/{pod.group_name}"
    if group not in snapshot.podgroup_by_key:
        raise SpecError(f"pod {key}: its PodGroup {group} is not found")
    return group
