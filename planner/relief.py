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

1. each usable candidate alone (the cheapest MAX_SINGLES by their own GANG-3 cost);
2. if none suffices, the round loop over all usable candidates until the target fits, then each
   vacated node left out in turn while the target still fits (latest first).

FRAG-4's freed-node gate does not apply: the run succeeds when its target fits.
"""
from dataclasses import replace

from . import blocks as block_view
from .cost import PlanCost
from .errors import SpecError
from .filters import STATIC_FILTERS, run_filters
from .frag import percent_int
from .plan_types import REASON_RECOMMENDED, REASON_TARGET_CANNOT_FIT, REASON_TARGET_FITS, NodeVerdict, TargetFit
from .state import SimulatedState
from .verdicts import VerdictReason

MAX_SINGLES = 64          # usable candidates tried alone, cheapest first
BASE_RESOURCES = ("cpu", "memory", "pods", "ephemeral-storage")


def extended(resource: str) -> bool:
    return "/" in resource and not resource.startswith(("hugepages-", "requests."))


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
            ns, name = key.split("/", 1)
            members = [p for p in snapshot.pods if p.namespace == ns and p.group_name == name and not p.terminal]
            pending = sorted((p for p in members if not p.node_name), key=lambda p: p.name)
            bound = len(members) - len(pending)
            need = pg.min_member - bound
            if need <= 0 or not pending:
                raise SpecError(f"{where}: PodGroup {key} is not waiting: {bound} of its pods are bound "
                                f"(minMember {pg.min_member}) and {len(pending)} pending; nothing to make room for")
            self.pending[key], self.need[key], self.bound[key] = pending, need, bound

    def resource(self) -> str:
        """The one extended resource the targets' pending pods request (when the run names none)."""
        found = sorted({r for pods in self.pending.values() for p in pods for r, v in p.requests.items()
                        if v and extended(r)})
        if len(found) != 1:
            what = "none" if not found else ", ".join(found)
            raise SpecError(f"spec.goals: the target's pods request {'no extended resource' if not found else what}: "
                            "name the resource to make room for in spec.goals[0].resource")
        return found[0]

    def describe(self) -> str:
        return ", ".join(f"PodGroup {k} ({self.need[k]} pod(s) of minMember {self.need[k] + self.bound[k]})"
                         for k in self.keys)


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

    def make(allowed, closed=frozenset()):
        return Planner(prep, weights, optimized, allowed, closed)

    placed, failed = placer.place(SimulatedState(prep.snapshot))
    if failed is None:
        where = ", ".join(f"{k.split('/', 1)[1]} -> {n}" for k, n in placed)
        fit = TargetFit(gangs.keys, True, tuple(placed),
                        f"{gangs.describe()} fits now without any move ({where}): it waits for something else "
                        "(its queue, its PodGroup's phase, or the scheduler's next session; `kubectl repack why` says which)")
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

    def alone(c):
        return sum(w * d for w, d in zip(weights, cost.with_candidate(prep.groups_of[c])))

    for c in sorted(usable, key=lambda c: (alone(c), prep.cards_of[c], c))[:MAX_SINGLES]:
        consider(run([c]))
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
        fit = TargetFit(gangs.keys, False, (),
                        f"{gangs.describe()} cannot fit: {reach}, {len(got)} of {sum(gangs.need.values())} pod(s) "
                        f"would be placed; {closest_failure(failed)}"
                        + (f"; nodes it may use stay occupied: {', '.join(stopped)}" if stopped else ""))
        return _not_recommended(prep, finish(p), REASON_TARGET_CANNOT_FIT, fit)
    got, _ = placer.place(best.state)
    where = ", ".join(f"{k.split('/', 1)[1]} -> {n}" for k, n in got)
    fit = TargetFit(gangs.keys, True, tuple(got),
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
    return replace(plan, outcome=outcome, message=fit.message, moves=(), freed_nodes=(), reoccupied=(),
                   occupied_after=plan.occupied_before, frag_after=plan.frag_before, cards=cards,
                   above_minimum="", above_minimum_reason="", target=fit, verdicts=verdicts, owners={},
                   hypernodes=block_view.rows(prep, prep.blocks, (), ()))
