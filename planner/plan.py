"""The incremental, gang-aware planner (PLAN-1..3, BUDGET-1..2, OUT-1..3): `plan(snapshot, spec)`.

One call prepares the snapshot once (`prepare`), runs the round loop (`rounds.Planner`), lets the
improvement phase try restricted passes (`improve`: the budget's alternatives, and on small
clusters idle nodes opened, proposals, a local search and the set search), and turns the chosen
pass into a `Plan` with the outcome and its reasons. Where the parts live:

- plan_types: RunSpec (the spec it acts on), Plan, PodMove, NodeVerdict;
- prepare: occupancy, the minimum, candidates and blocked verdicts, computed once;
- candidates: the receiver order and one candidate's evaluation on a fork;
- rounds: the round loop (reference and fast), consolidation onto idle nodes;
- improve: alternative passes within a binding budget, and the search on small clusters;
- setsearch: ruin and recreate over which nodes to vacate, realised as a pass with pinned pods;
- relief: a run aimed at pending gangs (spec.target), which stops as soon as they fit.
"""
import dataclasses

from . import blocks as block_view
from . import relief
from .cost import DEFAULT_WEIGHTS
from .frag import frag_percent, percent_int
from .improve import FOCUS_SMALL, SIZE_ORDER, focus_variants, improve
from .plan_types import (ABOVE_BUDGET, ABOVE_NO_GAIN, ABOVE_NO_RECEIVER, ABOVE_SCOPE, REASON_BLOCKS_NOT_MET,
                         REASON_INSUFFICIENT, REASON_NO_FRAGMENTATION, REASON_RECOMMENDED, NodeVerdict, Plan, PodMove,
                         RunSpec)
from .prepare import movable_namespaces, prepare
from .rounds import Planner
from .verdicts import VerdictReason

__all__ = ["plan", "Plan", "PodMove", "NodeVerdict", "RunSpec", "REASON_RECOMMENDED", "REASON_NO_FRAGMENTATION",
           "REASON_INSUFFICIENT", "REASON_BLOCKS_NOT_MET", "movable_namespaces"]


def plan(snapshot, spec, weights=DEFAULT_WEIGHTS, optimized=True, progress=None, not_evictable=None) -> Plan:
    """Plan a repack of `snapshot` for a RepackRun `spec` (a dict as in the CRD, or a RunSpec).

    Pure: reads the snapshot, returns a Plan. Callers that plan large clusters may pause cyclic GC
    around loading and planning (`planner.gcpause.paused_gc`). `progress`, if given, is told where
    a long pass is: progress("round", k, at most n) in the first pass, progress("alternative", i,
    None) for each further pass the improvement phase tries; it must not raise.
    `not_evictable` ({namespace: why}, e.g. where the run's creator may not evict) pins every pod of
    those namespaces: never moved, its node not vacated, the node's verdict EvictionNotAuthorized
    with "pod ns/name: why" (`movable_namespaces(snapshot, spec)` says which namespaces to ask about).
    """
    run = spec if isinstance(spec, RunSpec) else RunSpec.from_spec(spec)
    run = relief.resolve_resource(snapshot, run)
    prep = prepare(snapshot, run, not_evictable)
    if run.target is not None:
        return relief.plan_target(prep, weights, optimized, finish)
    if frag_percent(len(prep.occupied), prep.minimum.value, len(prep.alloc)) == 0:
        p = Planner(prep, weights, optimized)
        p.rounds = 0
        for c in prep.candidates:
            p.verdicts[c] = NodeVerdict(c, False, VerdictReason.MINIMUM_REACHED, "no fragmentation: nothing to vacate")
        return finish(p)
    first = Planner(prep, weights, optimized)
    if prep.blocks is not None and len(prep.candidates) > FOCUS_SMALL:
        # at scale one pass is all there is time for: with a block goal, the first focus pass
        variants = focus_variants(prep)
        if variants:
            (stage, *later), closed = variants[0]
            first = Planner(prep, weights, optimized, stage, closed, stages=tuple(later))
    first.progress = progress
    greedy = first.run_rounds()
    passes = 0

    def make_planner(allowed, closed, opened, by_size=False, pins=None, stages=()):
        nonlocal passes
        passes += 1
        if progress is not None:
            progress("alternative", passes, None)
        # A pinned pass evaluates every candidate afresh each round: the fast loop's shared
        # evaluations and their invalidation assume the PLAN-2 receiver order, which pins replace.
        return Planner(prep, SIZE_ORDER if by_size else weights, optimized and pins is None, allowed, closed, opened,
                       pins, stages)
    best = improve(greedy, make_planner)
    return finish(best)


def above_minimum(p, occupied_after):
    """(reason code, one line): why the plan stops above theoreticalMin (("", "") when it does not).
    Codes: plan_types.ABOVE_MINIMUM_REASONS."""
    prep = p.prep
    gap = occupied_after - prep.minimum.value
    if gap <= 0:
        return "", ""
    head = f"stops {gap} node(s) above the theoretical minimum {prep.minimum.value}: "
    verdicts = [p.verdicts[n] for n in sorted(p.verdicts) if not p.verdicts[n].vacated]
    # A candidate a better restricted pass left out (NotSelected) counts as over budget when it is.
    budget = [p.over_budget(v.node) if v.reason == VerdictReason.NOT_SELECTED else v for v in verdicts
              if v.reason == VerdictReason.BUDGET_EXCEEDED
              or (v.reason == VerdictReason.NOT_SELECTED and p.over_budget(v.node) is not None)]
    if budget:
        return ABOVE_BUDGET, head + f"budget spent ({budget[0].message}" + (
            f"; {len(budget) - 1} more node(s) likewise)" if len(budget) > 1 else ")")
    stuck = [v for v in verdicts if v.reason == VerdictReason.NO_FEASIBLE_RECEIVER]
    if stuck:
        v = stuck[0]
        more = f"; {len(stuck) - 1} more node(s) have a pod without a receiver" if len(stuck) > 1 else ""
        return ABOVE_NO_RECEIVER, head + f"no feasible receiver for pod {v.pod} on {v.node} ({v.filter or 'no room'}){more}"
    outside = len(prep.occupied) - len(prep.candidates) - len(prep.blocked)
    blocked = {}
    for v in verdicts:
        if v.node in prep.blocked:
            blocked[v.reason] = blocked.get(v.reason, 0) + 1
    if outside or blocked:
        parts = []
        if outside:
            parts.append(f"{outside} occupied node(s) outside scope.nodes")
        parts += [f"{n} node(s) {r}" for r, n in sorted(blocked.items())]
        return ABOVE_SCOPE, head + "scope (" + ", ".join(parts) + ")"
    left = [v.node for v in verdicts if v.reason == VerdictReason.NOT_SELECTED]
    if left:
        return ABOVE_NO_GAIN, head + (f"no remaining candidate can be added ({len(left)} left out, e.g. {left[0]}: "
                                      f"plans that vacate them free no more nodes)")
    return ABOVE_NO_GAIN, head + "no remaining candidate can be vacated"


def finish(p) -> Plan:
    """The Plan of a finished pass: outcome, message, verdicts and per-node cards."""
    prep = p.prep
    R, minimum = prep.resource, prep.minimum
    providers = len(prep.alloc)
    fb = frag_percent(len(prep.occupied), minimum.value, providers)
    occupied_after = len(prep.occupied) - len(p.freed) + len(p.reoccupied)
    fa = frag_percent(occupied_after, minimum.value, providers)
    improvement = fb - fa
    freed = f"{len(p.freed)} node(s)" + (f" (re-occupying {len(p.reoccupied)} idle)" if p.reoccupied else "")
    why_code, why = above_minimum(p, occupied_after) if fb > 0 else ("", "")
    if fb == 0:
        outcome = REASON_NO_FRAGMENTATION
        msg = (f"{R}: {len(prep.occupied)} of {providers} provider nodes occupied, equal to the theoretical minimum"
               f" {minimum.value}; nothing to repack")
    elif not p.freed:
        reasons = {}
        for v in p.verdicts.values():
            reasons[v.reason] = reasons.get(v.reason, 0) + 1
        why_not = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) or "no candidate node in scope"
        outcome = REASON_INSUFFICIENT
        msg = f"fragmentation {percent_int(fb)}% but no node can be vacated ({why_not})"
    elif improvement < p.run.min_improvement:
        outcome = REASON_INSUFFICIENT
        msg = (f"best plan frees {freed}: {percent_int(fb)}% -> {percent_int(fa)}%, "
               f"{float(improvement):.1f} points, below the required {p.run.min_improvement}")
    else:
        outcome = REASON_RECOMMENDED
        msg = (f"frees {freed} by moving {sum(m.cards for m in p.moves)} {R}: "
               f"fragmentation {percent_int(fb)}% -> {percent_int(fa)}%")
    notes = list(p.notes)
    if not minimum.exact:
        notes.append(f"theoretical minimum not proven; the lower bound {minimum.value} was used")
    for key in sorted(p.cost.moved):
        g = p.gangs.get(key)
        if g is not None and g.restart_note:
            notes.append(g.restart_note)
    if why and p.freed:
        msg += "; " + why
    if notes and outcome != REASON_NO_FRAGMENTATION:
        msg += "; " + "; ".join(notes)
    owners = {}
    for m in p.moves:
        k = f"{m.pod.namespace}/{m.pod.group_name}"
        pg = prep.snapshot.podgroup_by_key.get(k)
        owners[k] = pg.owner if pg else None
    counter = prep.blocks
    node_blocks = None
    if counter is not None:
        node_blocks = counter.node_blocks(p.freed, p.reoccupied)
        if node_blocks.after < counter.goal.required and node_blocks.before < counter.goal.required:
            return _blocks_not_met(p, node_blocks, fb, notes)
    cards = {}
    for n, a in prep.alloc.items():
        cards[n] = (a, prep.used_before.get(n, 0), p.state.amount(n, R))
    verdicts = tuple(p.verdicts[n] for n in sorted(p.verdicts))
    return Plan(R, outcome, msg, providers, len(prep.occupied), occupied_after, minimum.value,
                minimum.exact, fb, fa, tuple(p.moves), tuple(p.freed), verdicts, p.rounds,
                prep.resolved_podgroups, prep.resolved_nodes, tuple(notes), owners, cards,
                tuple(p.reoccupied), why, why_code, node_blocks,
                block_view.rows(prep, counter, p.freed, p.reoccupied),
                freed_capacity=prep.cover.capacity(p.freed))


def _blocks_not_met(p, best, fb, notes) -> Plan:
    """The gate of requiredNodeBlocks (TOPO-3): no plan reaches it, so nothing moves; the message
    says what the best plan reached and which HyperNodes came closest, and what stopped them."""
    prep = p.prep
    counter = prep.blocks
    goal = counter.goal
    free = counter.free(p.freed, p.reoccupied)
    size = counter.size
    # closest: fewest nodes short of their next block, then most free
    closest = sorted(counter.hypernodes, key=lambda h: (size - free[h] % size, -free[h], h))[:3]
    stopped = {}
    for v in sorted(p.verdicts.values(), key=lambda v: v.node):
        h = counter.where.get(v.node)
        if h in closest and not v.vacated and h not in stopped:
            stopped[h] = f"{v.node}: {v.reason}" + (f" ({v.message})" if v.message else "")
    parts = []
    for h in closest:
        short = size - free[h] % size
        part = f"{h}: {free[h]} of {counter.members[h]} node(s) free ({free[h] // size} block(s)), " + (
            f"{short} more needed for another" if counter.members[h] - free[h] >= short else "too few nodes for another")
        if h in stopped:
            part += f", {stopped[h]}"
        parts.append(part)
    msg = (f"{prep.resource}: requiredNodeBlocks {goal.required} not reached: the best plan makes "
           f"{best.after} HyperNode node-block(s) of size {size} in tier {counter.tier} "
           f"({best.before} before; fragmentation {percent_int(fb)}%); closest: " + "; ".join(parts)
           + "; nothing is moved")
    verdicts = tuple(NodeVerdict(v.node, False, VerdictReason.NOT_SELECTED,
                                 f"the best plan vacates it but makes only {best.after} of {goal.required} required "
                                 "node block(s): nothing is moved", round=v.round) if v.vacated else v
                     for v in (p.verdicts[n] for n in sorted(p.verdicts)))
    cards = {n: (a, prep.used_before.get(n, 0), prep.used_before.get(n, 0)) for n, a in prep.alloc.items()}
    nothing = block_view.rows(prep, counter, (), ())
    return Plan(prep.resource, REASON_BLOCKS_NOT_MET, msg, len(prep.alloc), len(prep.occupied), len(prep.occupied),
                prep.minimum.value, prep.minimum.exact, fb, fb, (), (), verdicts, p.rounds, prep.resolved_podgroups,
                prep.resolved_nodes, tuple(notes), {}, cards, (), "", "",
                dataclasses.replace(best, after=best.before), nothing)
