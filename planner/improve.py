"""The improvement phase after the greedy pass: a few more passes of the same planner (every
filter, GANG-3 order) with restricted choices, keeping the best complete plan (most net nodes
freed, then least GANG-3 disruption of the whole plan). Three sources of restrictions, all bounded:
the budget's structure when maxPerRun stopped the greedy pass (below); on small clusters a local
search around the best pass so far (`neighbours`, `restricted`); and then, on small clusters, the
ruin-and-recreate search of `setsearch` over which nodes to vacate, whose best state becomes a
pass restricted to those nodes with every pod pinned to its receiver (`searched`).

One-step greed spends a PodGroup budget on the cheapest node first, although a few nodes whose
pods share the same PodGroups would free more within it; likewise a card budget spent on large
nodes. The alternatives come from the budget's own structure:

- PodGroup budget: for a set U of PodGroups (at most maxPerRun.podGroups), every candidate whose
  PodGroups all lie in U can be vacated without leaving the budget. U starts as one candidate's
  PodGroups and grows by the candidate that adds the most such nodes per new PodGroup.
- card budget: the candidates with the fewest cards, as many as the budget holds.

Sets are built only from candidates that can be vacated on the snapshot as it is (checked lazily,
at most MAX_CHECKS evaluations). A set's size is still only an upper bound (receivers fill up as
nodes are vacated), so only sets that could free more than the greedy pass are tried, best bound
first, at most MAX_ALTERNATIVES passes; each pass is the normal planner (every filter, GANG-3
order) restricted to that set.
"""
import heapq
from itertools import chain

from . import setsearch
from .cost import plan_dimensions
from .verdicts import VerdictReason

MAX_ALTERNATIVES = 6
MAX_SEEDS = 16
MAX_NEAR = 24       # candidates considered per growth step of a PodGroup set
MAX_CHECKS = 400    # feasibility evaluations on the initial snapshot
MAX_PASSES = 40
SEARCH_WORK = 2000   # local-search passes x candidates: 40 passes up to 50 candidates, 10 at 200,
MIN_PASSES = 10      # and none above 200 candidates (a few passes rarely find anything there)
MAX_OPENINGS = 8     # passes that open idle nodes from the start
# The order of a proposal pass: by moved R alone, the fewest first (ties: more R freed, then name).
# Only ever chooses which nodes a GANG-3 pass may vacate, never a plan's order (GANG-3's weights
# decide that, unchanged).
SIZE_ORDER = (0.0, 0.0, 0.0, 1.0, 0.0)


def budget_bound(planner) -> bool:
    """Did maxPerRun stop this pass (a candidate it could not take for budget reasons)?"""
    return any(v.reason == VerdictReason.BUDGET_EXCEEDED for v in planner.verdicts.values())


def weighted_disruption(planner) -> float:
    moved = {}
    for m in planner.moves:
        moved.setdefault(f"{m.pod.namespace}/{m.pod.group_name}", set()).add(m.pod.key)
    dims = plan_dimensions(planner.gangs, moved)
    return round(sum(w * d for w, d in zip(planner.weights, dims)), 9)


def net_freed(planner) -> int:
    return len(planner.freed) - len(planner.reoccupied)


def uncovered(planner) -> int:
    """Idle nodes the pass re-occupies that its freed nodes do not cover (RELIEF-4: planner.cover)."""
    return planner.prep.cover.uncovered(planner.freed, planner.reoccupied)


def plan_key(planner):
    """How passes compare, lower first: a pass whose freed nodes cover the idle nodes it fills
    (RELIEF-4) before any other, then most net nodes freed, then fewest idle nodes re-occupied
    (PLAN-2 rule 1: fill an idle node only when that raises net freed), then least GANG-3
    disruption of the whole plan. With a block goal (TOPO-3) most blocks come next and the
    goal's mode decides between plans equal in everything else."""
    key = (-net_freed(planner), len(planner.reoccupied), weighted_disruption(planner))
    counter = planner.prep.blocks
    if counter is None:
        return (uncovered(planner), *key)
    blocks, mode = counter.key(planner.freed, planner.reoccupied)
    return (uncovered(planner), blocks, *key, mode)


def at_best(planner) -> bool:
    """Can no pass do better? At the theoretical minimum of occupied nodes and, with a block goal,
    at the most blocks the candidates could make (each HyperNode's idle and candidate nodes)."""
    prep = planner.prep
    if len(prep.occupied) - net_freed(planner) > prep.minimum.value or uncovered(planner):
        return False
    counter = prep.blocks
    return counter is None or -counter.key(planner.freed, planner.reoccupied)[0] >= counter.bound(prep.candidates)


def _card_fit(prep, cands, limit):
    """The candidates with the fewest cards that fit `limit` together (all of them when None)."""
    ordered = sorted(cands, key=lambda c: (prep.cards_of[c], c))
    if limit is None:
        return ordered
    out, total = [], 0
    for c in ordered:
        if total + prep.cards_of[c] > limit:
            break
        out.append(c)
        total += prep.cards_of[c]
    return out


class _Feasible:
    """Whether a candidate can be vacated on the initial snapshot, memoised and bounded."""

    def __init__(self, check, limit=MAX_CHECKS):
        self.check, self.memo, self.left = check, {}, limit

    def runs_out_within(self, cands) -> bool:
        """Would asking about `cands` exhaust the check budget part way, so that the order of asking
        decides which are checked? (Otherwise the answers are the same in any order: every check is
        made on the same snapshot.)"""
        return 0 < self.left < sum(1 for c in cands if c not in self.memo)

    def __call__(self, c):
        ok = self.memo.get(c)
        if ok is None:
            if self.left <= 0:
                return False
            self.left -= 1
            ok = self.memo[c] = self.check(c)
        return ok


class _Closures:
    """closure(u, check): for a set u of PodGroups, the candidates all of whose PodGroups lie in u
    (with check, only those `feasible` accepts), memoised.

    Each candidate is listed once, under its PodGroup with the fewest candidates (a set holds all of
    c's PodGroups only if it holds that one): this runs for every candidate and every growth step,
    and a walk of u's whole by_group lists cost 30 % of a budget plan at 1,000 nodes. `feasible` is
    asked in the first-seen order of u's by_group lists (`first_seen`) whenever its check budget
    would run out part way through them: the order then decides which are checked."""

    def __init__(self, cands, groups, feasible):
        self.groups, self.feasible, self.memo = groups, feasible, {}
        self.by_group = {}
        for c in cands:
            for g in groups[c]:
                self.by_group.setdefault(g, []).append(c)
        self.anchored = {}
        for c in cands:
            anchor = min(groups[c], key=lambda g: (len(self.by_group[g]), g))
            self.anchored.setdefault(anchor, []).append(c)

    def first_seen(self, u):
        """The candidates with all their PodGroups in u, in the order u's by_group lists name them."""
        groups = self.groups
        return [c for c in dict.fromkeys(chain.from_iterable(map(self.by_group.__getitem__, u))) if groups[c] <= u]

    def __call__(self, u, check=True):
        got = self.memo.get((u, check))
        if got is None:
            groups, feasible = self.groups, self.feasible
            inside = [c for g in u for c in self.anchored.get(g, ()) if groups[c] <= u]
            if check:
                if feasible.runs_out_within(inside):
                    inside = self.first_seen(u)
                known = feasible.memo       # answers already given, without a call each
                inside = [c for c in inside if (known[c] if c in known else feasible(c))]
            got = self.memo[(u, check)] = set(inside)
        return got


def alternatives(prep, greedy_net, feasible):
    """Candidate sets worth a restricted pass, best upper bound first."""
    run = prep.run
    cands = list(prep.candidates)
    room = max(len(prep.occupied) - prep.minimum.value, 0)
    found = {}

    def consider(members):
        members = frozenset(members)
        bound = min(len(_card_fit(prep, members, run.max_resource)), room)
        if bound > greedy_net and members not in found:
            found[members] = bound

    if run.max_podgroups is not None:
        limit = run.max_podgroups
        groups = {c: frozenset(prep.groups_of[c]) for c in cands}
        closure = _Closures(cands, groups, feasible)
        by_group = closure.by_group

        ranked = sorted((c for c in cands if len(groups[c]) <= limit),
                        key=lambda c: (-len(closure(groups[c], False)), len(groups[c]), c))
        seeds = []
        for c in ranked:
            if len(seeds) >= MAX_SEEDS or feasible.left <= 0:
                break
            if feasible(c):
                seeds.append(c)
        for s in seeds:
            u = groups[s]
            members = closure(u)
            consider(members)
            while len(u) < limit:
                best = None
                near = {d for g in u for d in by_group[g]} - members
                for d in heapq.nsmallest(MAX_NEAR, near):    # sorted(near)[:MAX_NEAR]
                    if not feasible(d):
                        continue
                    add = groups[d] - u
                    if not add or len(u) + len(add) > limit:
                        continue
                    grown = closure(u | add)
                    gain = (len(grown) - len(members)) / len(add)
                    if best is None or gain > best[0]:
                        best = (gain, d, grown)
                if best is None or best[0] <= 0:
                    break
                u, members = u | groups[best[1]], best[2]
                consider(members)
    if run.max_resource is not None:
        small = []
        for c in sorted(cands, key=lambda c: (prep.cards_of[c], c)):
            if feasible.left <= 0 or len(small) > room:
                break
            if feasible(c):
                small.append(c)
        consider(_card_fit(prep, small, run.max_resource))
    ranked = sorted(found.items(), key=lambda kv: (-kv[1], len(kv[0]), sorted(kv[0])))
    out = []
    for members, _ in ranked[:MAX_ALTERNATIVES]:
        out.append(members)
        if run.max_resource is not None:
            fit = frozenset(_card_fit(prep, members, run.max_resource))
            if fit != members and len(out) < MAX_ALTERNATIVES:
                out.append(fit)
        if len(out) >= MAX_ALTERNATIVES:
            break
    return out[:MAX_ALTERNATIVES]


def idle_classes(prep):
    """Idle nodes grouped by what a pod can tell apart (static-filter class and allocatable), each
    group in name order; groups in the order of their first node."""
    groups = {}
    for n in sorted(prep.idle):
        node = prep.snapshot.node_by_name[n]
        where = prep.blocks.where.get(n) if prep.blocks is not None else None   # see Planner._block_of
        groups.setdefault((prep.class_of.get(n), tuple(sorted(node.allocatable.items())), where), []).append(n)
    return list(groups.values())


def openings(best):
    """Open idle nodes from the start (PLAN-2 rule 1: a pass that fills them must free more net
    nodes to win): for each class of interchangeable idle nodes, the first k of them, k = 1, 2, ...,
    the classes taken in turn. Consolidation alone opens idle nodes only once no occupied receiver
    takes anything more, after the occupied nodes have been packed for the pods at hand."""
    prep = best.prep
    allowed = frozenset(prep.candidates) if best.allowed is None else best.allowed
    classes = [[n for n in names if n not in best.closed] for names in idle_classes(prep)]
    out = []
    for k in range(1, max((len(c) for c in classes), default=0) + 1):
        for names in classes:
            if len(names) >= k and len(out) < MAX_OPENINGS:
                out.append((allowed, best.closed, frozenset(names[:k])))
    return out


def neighbours(best, initial):
    """Small changes to the pass that produced `best`, each a new (allowed, closed, opened) triple:

    - leave out a node `best` vacated whose pods took a receiver that a pod left without one
      (NoFeasibleReceiver at the end) could have used on the snapshot as it was;
    - close a candidate that received pods (ReceivingMoves), so it stays free to be vacated;
    - close an idle node a consolidation filled, so that consolidation looks elsewhere;
    - open one more idle node of a class from the start, or stop opening one.
    Most often-blocking first.
    """
    prep = best.prep
    allowed = frozenset(prep.candidates) if best.allowed is None else best.allowed
    closed, opened = best.closed, best.opened
    pods = {p.key: p for c in prep.candidates for p in prep.r_pods[c]}
    verdicts = sorted(best.verdicts.values(), key=lambda v: v.node)
    stuck = [v for v in verdicts if v.reason == VerdictReason.NO_FEASIBLE_RECEIVER][:MAX_SEEDS]
    counts = {}
    for v in stuck:
        pod = pods.get(v.pod)
        if pod is None:
            continue
        hosts = {}
        for m in best.moves:
            n = m.to_node
            if n not in hosts:
                hosts[n] = n != v.node and n in initial.receivers and initial.hosts(n, pod)
            if hosts[n]:
                counts[m.from_node] = counts.get(m.from_node, 0) + 1
    out = [(allowed - {x}, closed, opened) for x in sorted(counts, key=lambda x: (-counts[x], x))]
    received = {}
    for m in best.moves:
        if m.to_node in prep.groups_of and m.to_node not in best.freed:
            received[m.to_node] = received.get(m.to_node, 0) + 1
    out += [(allowed, closed | {t}, opened) for t in sorted(received, key=lambda t: (received[t], t))]
    # idle nodes a consolidation filled, to let it take others
    out += [(allowed, closed | {t}, opened) for t in best.reoccupied if t not in opened]
    # one more idle node of each class opened from the start; one fewer
    for names in idle_classes(prep):
        more = [n for n in names if n not in opened and n not in closed]
        if more:
            out.append((allowed, closed, opened | {more[0]}))
    out += [(allowed, closed, opened - {t}) for t in sorted(opened)]
    # then every other vacated node, latest round first
    out += [(allowed - {x}, closed, opened) for x in reversed(best.freed) if x not in counts]
    return out


FOCUS_SMALL = 200   # candidates up to which every focus order is tried; above it, the first only


def focus_variants(prep) -> list:
    """With a block goal (TOPO-3): the (stages, closed) of the focus passes, best first. A focus pass
    vacates the candidates of one HyperNode of the goal's tier after another, the most promising
    first, then the rest (`Planner` stages), so that freed nodes complete blocks instead of
    scattering one per HyperNode. Orders: fewest nodes short of a block; fewest cards to move to
    complete one; and the first again with the candidates of the first HyperNode closed as
    receivers (they stay free to be vacated). On clusters above FOCUS_SMALL candidates, the first
    only. Empty without a goal or a HyperNode that could complete a block."""
    counter = prep.blocks
    if counter is None:
        return []
    within = {}
    for c in prep.candidates:
        h = counter.where.get(c)
        if h is not None:
            within.setdefault(h, []).append(c)
    reachable = [h for h in counter.hypernodes if len(within.get(h, ())) >= counter.deficit(h)]
    if not reachable:
        return []

    def cards_to_complete(h):
        return sum(sorted(prep.cards_of[c] for c in within[h])[:counter.deficit(h)])

    orders = [sorted(reachable, key=lambda h: (counter.deficit(h), cards_to_complete(h), h)),
              sorted(reachable, key=lambda h: (cards_to_complete(h), counter.deficit(h), h))]
    small = len(prep.candidates) <= FOCUS_SMALL
    variants, seen = [], set()
    for i, order in enumerate(orders if small else orders[:1]):
        if tuple(order) in seen:
            continue
        seen.add(tuple(order))
        stages = [frozenset(within[h]) for h in order]
        rest = frozenset(prep.candidates) - frozenset().union(*stages)
        if rest:
            stages.append(rest)
        variants.append((stages, frozenset()))
        if small and i == 0:
            variants.append((stages, frozenset(within[order[0]])))
    return variants


def focused(best, make_planner):
    """The best of `best` and the focus passes (`focus_variants`) by `plan_key` (blocks first). On
    large clusters the first pass already was the first focus pass (planner.plan), so none runs."""
    prep = best.prep
    if len(prep.candidates) > FOCUS_SMALL:
        return best
    best_key = plan_key(best)
    for stages, closed in focus_variants(prep):
        alt = make_planner(stages[0], closed, frozenset(), stages=tuple(stages[1:])).run_rounds()
        if plan_key(alt) < best_key:
            best, best_key = alt, plan_key(alt)
    return best


def improve(greedy, make_planner):
    """The best of the restricted passes (`restricted`), then of the set search's plan (`searched`);
    with a block goal, the focus passes (`focused`) first."""
    best = restricted(focused(greedy, make_planner), make_planner)
    found = searched(best, make_planner)
    if found is not None and plan_key(found) < plan_key(best):
        best = found
    return best


def searched(best, make_planner):
    """The ruin-and-recreate search (`setsearch`) started from `best`, on clusters small enough
    (`setsearch.budget_for`); its best state realised as a pass restricted to its nodes with every
    pod pinned to its receiver, or None when it found nothing better than `best`."""
    prep = best.prep
    iterations = setsearch.budget_for(len(prep.candidates), prep.blocks is not None)
    if not iterations:
        return None
    search = setsearch.SetSearch(prep, best.weights)
    if not search.start(best.freed, {m.pod.key: m.to_node for m in best.moves}):
        search = setsearch.SetSearch(prep, best.weights)
    (score, neg_weighted), (vacated, opened, pins) = search.run(iterations)
    key = (-(len(vacated) - len(opened)), len(opened), -neg_weighted)
    if prep.blocks is not None:
        blocks, mode = prep.blocks.key(vacated, opened)
        key = (blocks, *key, mode)
    key = (prep.cover.uncovered(vacated, opened), *key)
    if key >= plan_key(best):
        return None
    return make_planner(vacated, frozenset(), opened, pins=pins).run_rounds()


def restricted(greedy, make_planner):
    """The best of the greedy pass and the alternatives (ties keep the earlier pass).

    Plans compare by `plan_key`: net nodes freed, then idle nodes re-occupied, then GANG-3.
    With a binding budget, the budget's alternatives are tried first. Then, on clusters small
    enough for a search (SEARCH_WORK / candidates passes of local search, never more than
    MAX_PASSES; nothing of what follows when that allows fewer than MIN_PASSES):

    - passes that open idle nodes from the start (`openings`);
    - proposals: a pass that takes the candidates with the fewest R first (cluster-autoscaler's
      scale-down order; `make_planner(..., by_size=True)`), without and with each opening, tells
      which nodes can be vacated together; the GANG-3 pass restricted to those nodes (and those
      idle nodes) is the proposal. The size order only chooses the restriction, never the plan;
    - a local search: neighbours of a pass, moving to the first that is better, from the best
      pass before the proposals and from the best proposal, the better start first, sharing the
      passes (greedy moves cannot be undone, so a second start reaches plans the first does not).
    """
    prep = greedy.prep
    key = plan_key

    def above(p):
        return not at_best(p)

    best, best_key = greedy, key(greedy)
    if not above(best):
        return best
    limit = min(MAX_PASSES, SEARCH_WORK // max(len(prep.candidates), 1))
    if not budget_bound(greedy) and limit < MIN_PASSES:
        return best            # neither alternatives nor a search: no pass to make (large clusters)
    unrestricted = make_planner(None, frozenset(), frozenset())
    initial = unrestricted.ev
    if budget_bound(greedy):
        for members in alternatives(prep, net_freed(greedy), _Feasible(unrestricted.vacatable())):
            alt = make_planner(members, frozenset(), frozenset()).run_rounds()
            if key(alt) < best_key:
                best, best_key = alt, key(alt)
    if limit < MIN_PASSES:
        return best
    seen = set()
    start = best
    variants = openings(start)
    for variant in variants:
        if not above(best):
            return best
        seen.add(variant)
        alt = make_planner(*variant).run_rounds()
        if key(alt) < best_key:
            best, best_key = alt, key(alt)
    first = best
    proposal = None
    for opened in [frozenset()] + [v[2] for v in variants]:
        sized = make_planner(None, frozenset(), opened, by_size=True).run_rounds()
        variant = (frozenset(sized.freed), frozenset(), frozenset(sized.reoccupied))
        if variant in seen:
            continue
        seen.add(variant)
        alt = make_planner(*variant).run_rounds()
        if proposal is None or key(alt) < key(proposal):
            proposal = alt
        if key(alt) < best_key:
            best, best_key = alt, key(alt)
    passes = 0
    for origin in (first, proposal) if key(first) <= key(proposal or first) else (proposal, first):
        if origin is None or not above(best) or passes >= limit:
            break
        found, used = search(origin, key, limit - passes, seen, initial, make_planner)
        passes += used
        if key(found) < best_key:
            best, best_key = found, key(found)
    return best


def search(origin, key, limit, seen, initial, make_planner):
    """First-improvement local search from `origin` over `neighbours`, at most `limit` passes:
    (the best pass found, passes made)."""
    prep = origin.prep
    best, best_key = origin, key(origin)
    passes = 0
    while passes < limit and not at_best(best):
        moved = False
        for variant in neighbours(best, initial):
            if variant in seen:
                continue
            seen.add(variant)
            passes += 1
            alt = make_planner(*variant).run_rounds()
            if key(alt) < best_key:
                best, best_key, moved = alt, key(alt), True
                break
            if passes >= limit:
                break
        if not moved:
            break
    return best, passes
