"""The round loop (PLAN-1, PLAN-3, BUDGET-1): evaluate the remaining candidates, drop those over
budget, score the rest over the complete plan (GANG-3), commit the best, repeat; then, when no
candidate is feasible any more, try to consolidate more of them than idle nodes onto idle nodes
(PLAN-2 rule 1, only onto idle nodes the freed ones cover: planner.cover), and go on. Every occupied provider node in scope ends with a verdict.

Two loops make the same decisions: `_rounds_reference` evaluates every remaining candidate from
scratch each round (`optimized=False`); `_rounds_fast` keeps cached evaluations, re-checks only
what a round could have changed and verifies candidates lazily (`pool.CandidatePool`). Tests hold the
two identical.
"""
import bisect

from .candidates import CandidateEvaluator, Evaluation
from .cost import PlanCost, scores
from .plan_types import NodeVerdict, PodMove
from .pool import CandidatePool
from .prepare import STATUS_BYTES_BUDGET, STATUS_MAX_FREED, STATUS_MAX_PODS
from .verdicts import VerdictReason

# Bound on the consolidation phase: candidate traces tried on idle nodes, per planning pass, as a
# multiple of the candidates (plus a floor for small clusters).
CONSOLIDATION_TRACES_PER_CANDIDATE = 2
CONSOLIDATION_TRACES_MIN = 400
MAX_IDLE_OPENED = 3          # idle nodes one consolidation may fill
SWAP_CANDIDATES = 200        # with a block goal, consolidations that only move free nodes run up to this many candidates


class Planner:
    """One planning pass over a Prepared snapshot. `allowed` restricts which candidates may be
    vacated; `closed` nodes take no pods (the improvement phase keeps them free to be vacated)."""

    def __init__(self, prep, weights, optimized, allowed=None, closed=frozenset(), opened=frozenset(), pins=None,
                 stages=()):
        self.prep = prep
        self.run = prep.run
        self.R = prep.resource
        self.weights = weights
        self.optimized = optimized
        self.allowed, self.closed, self.opened = allowed, closed, opened
        self.state = prep.fresh_state()
        self.pins = pins
        if pins:
            self.state.leaving = frozenset(pins)
        self.ev = CandidateEvaluator(prep, self.state, optimized, closed, opened, pins)
        self.gangs = prep.gangs
        self.verdicts = dict(prep.blocked)
        self.notes = []
        self.cost = PlanCost(self.gangs)
        self.moved_cards = 0
        self.status_pods, self.status_bytes = 0, 0
        self.moves, self.freed, self.reoccupied = [], [], []
        self.live = set(prep.candidates if allowed is None else (c for c in prep.candidates if c in allowed))
        # candidate sets vacated after `allowed`, one after the other, each once the previous one can
        # give no more (a block goal's HyperNodes, most promising first: planner.improve.focused)
        self.stages = list(stages)
        self.occupied_now = len(prep.occupied)
        self.rnd = 0
        self.progress = None          # progress("round", k, at most n): see planner.plan
        self.stop = None              # stop(planner) -> True ends the pass after a round (planner.relief)
        self.cover_noted = False      # a consolidation refused because the freed nodes would not cover (said once)
        self.consolidation_left = max(CONSOLIDATION_TRACES_MIN,
                                      CONSOLIDATION_TRACES_PER_CANDIDATE * len(prep.candidates))

    # -- the pass -----------------------------------------------------------------------------------
    def run_rounds(self):
        if self.optimized:
            self.ev.build_signatures(self.prep.candidates)
        if self.optimized:
            self._init_cache()
            self.pool = CandidatePool(self)
        while True:
            if self.optimized:
                self._rounds_fast()
            else:
                self._rounds_reference()
            # the stages first; consolidation onto idle nodes once every stage has had its turn
            if self.stop is not None and self.stop(self):
                break
            if self.stages and self.occupied_now > self.prep.minimum.value and self._next_stage():
                continue
            if not self.live or self._minimum_reached() or not self._consolidate():
                break
        for c in self.prep.candidates:
            if c in self.verdicts:
                continue
            if c not in self.live:
                self.verdicts[c] = NodeVerdict(c, False, VerdictReason.NOT_SELECTED,
                                               "a plan that frees more nodes, or disrupts less, leaves it out",
                                               round=self.rnd)
                continue
            over = self.over_budget(c)
            if over is not None:
                self.verdicts[c] = over
                continue
            ev = self.ev.evaluate(c, diagnose=True)
            if not ev.feasible:
                pod, f, msg = ev.fail
                self.verdicts[c] = NodeVerdict(c, False, VerdictReason.NO_FEASIBLE_RECEIVER, msg, pod, f, self.rnd)
            else:
                self.verdicts[c] = NodeVerdict(c, False, VerdictReason.NOT_SELECTED, "feasible but planning stopped",
                                               round=self.rnd)
        self.rounds = self.rnd
        return self

    def _next_stage(self) -> bool:
        """Open the next non-empty stage of candidates (those without a verdict yet)."""
        while self.stages:
            # a node that took pods in an earlier stage stays occupied: never vacated by a later one
            new = sorted(c for c in self.stages.pop(0)
                         if c not in self.verdicts and c not in self.live and c not in self.ev.receiving)
            if new:
                self.live.update(new)
                if self.optimized:
                    for c in new:
                        self.pool.unknown(c)
                return True
        return False

    # Both round loops share these steps, so they cannot drift apart.
    def _minimum_reached(self) -> bool:
        if self.occupied_now > self.prep.minimum.value:
            return False
        for c in sorted(self.live):
            self.verdicts[c] = NodeVerdict(c, False, VerdictReason.MINIMUM_REACHED,
                                           f"occupied nodes already equal the theoretical minimum ({self.prep.minimum.value})")
        self.live.clear()
        return True

    def over_budget(self, c, groups=None, cards=None, size=None):
        """A BudgetExceeded verdict if vacating `c` would break maxPerRun, or take the run's status
        past what one RepackRun can hold, now; else None. Once over, always over (the plan only
        grows); the verdict is given when planning ends. `size` is (pods, bytes, freed nodes) of a
        plan being tried, like `groups` and `cards`."""
        R, run = self.R, self.run
        pods, nbytes, freed = size if size is not None else (self.status_pods, self.status_bytes, len(self.freed))
        c_pods, c_bytes = self.prep.status_cost[c]
        if (pods + c_pods > STATUS_MAX_PODS or nbytes + c_bytes > STATUS_BYTES_BUDGET
                or freed + 1 > STATUS_MAX_FREED):
            return NodeVerdict(c, False, VerdictReason.BUDGET_EXCEEDED,
                               f"vacating {c} would take this run's status past what one RepackRun holds "
                               f"({pods + c_pods} pods, about {(nbytes + c_bytes) // 1000} kB of "
                               f"{STATUS_BYTES_BUDGET // 1000} kB for moves and relocation records, "
                               f"{freed + 1} freed nodes; at most {STATUS_MAX_PODS} pods and {STATUS_MAX_FREED} "
                               "nodes): a later run continues from here", round=self.rnd)
        if run.max_podgroups is not None:
            taken = self.cost.moved if groups is None else groups
            n = len(taken) + sum(1 for g in self.prep.groups_of[c] if g not in taken)
            if n > run.max_podgroups:
                return NodeVerdict(c, False, VerdictReason.BUDGET_EXCEEDED,
                                   f"vacating {c} would affect {n} PodGroups in this run; maxPerRun.podGroups is {run.max_podgroups}",
                                   round=self.rnd)
        moved = self.moved_cards if cards is None else cards
        if run.max_resource is not None and moved + self.prep.cards_of[c] > run.max_resource:
            return NodeVerdict(c, False, VerdictReason.BUDGET_EXCEEDED,
                               f"vacating {c} would move {moved + self.prep.cards_of[c]} {R} in this run; maxPerRun.resources[{R}] is {run.max_resource}",
                               round=self.rnd)
        return None

    def _commit(self, chosen, ev=None):
        """Apply the chosen candidate's moves; returns the receivers it touched (with old keys) and
        the nodes re-priced because the plan now disrupts their PodGroups (with old keys)."""
        R = self.R
        ev = ev or self.ev.evaluate(chosen)
        if not ev.feasible:
            raise AssertionError(f"planner bug: {chosen} judged feasible but its own evaluation fails")
        index = self.ev.index if self.optimized else None
        touched = {}
        for p, to, _ in ev.moves:
            if to not in touched:
                touched[to] = index.key_of.get(to) if index is not None else None
        for p, to, _ in ev.moves:
            self.state.move(p, to)
            self.moves.append(PodMove(p, chosen, to, p.requests[R], self.rnd))
            self.ev.receiving.add(to)
            if to in self.ev.idle or to in self.ev.opened:
                self.ev.idle.discard(to)
                self.ev.opened.discard(to)
                self.reoccupied.append(to)
                self.occupied_now += 1
        self.state.commit()
        groups = self.prep.groups_of[chosen]
        self.first_workloads = self.cost.add(groups)   # those the plan disrupts from now on
        self.moved_cards += self.prep.cards_of[chosen]
        c_pods, c_bytes = self.prep.status_cost[chosen]
        self.status_pods += c_pods
        self.status_bytes += c_bytes
        self.freed.append(chosen)
        self.occupied_now -= 1
        self.ev.receivers.discard(chosen)
        self.verdicts[chosen] = NodeVerdict(chosen, True, VerdictReason.VACATED,
                                            f"{len(ev.moves)} pod(s), {self.prep.cards_of[chosen]} {R} moved in round {self.rnd}",
                                            round=self.rnd)
        self.live.discard(chosen)
        for t in touched:
            if t in self.live:
                self.live.discard(t)
                self.verdicts[t] = NodeVerdict(t, False, VerdictReason.RECEIVING_MOVES,
                                               f"{t} receives pods of {chosen} in round {self.rnd} and stays occupied",
                                               round=self.rnd)
        if index is not None:
            index.remove(chosen)
            for t in touched:
                index.remove(t)
                index.add(self.ev.key(t))
        repriced = {n: k for n, k in self.ev.disrupt(groups).items() if n not in touched and n != chosen}
        return touched, repriced

    def _pick(self, entries):
        """entries: (dimensions, candidate). Lowest weighted min-max score; ties: more R freed, then name."""
        sc = scores([d for d, _ in entries], self.weights)
        best = min(range(len(entries)), key=lambda i: (sc[i], -self.prep.alloc[entries[i][1]], entries[i][1]))
        return entries[best][1]

    def _rounds_reference(self):
        """Brute force: every round evaluates every remaining candidate from scratch."""
        over_budget = set()
        while self.live and not self._minimum_reached():
            self.rnd += 1
            if self.progress is not None:
                self.progress("round", self.rnd, len(self.prep.candidates))
            entries = []
            for c in sorted(self.live):
                if c in over_budget or not self.ev.evaluate(c).feasible:
                    continue
                if self.over_budget(c) is not None:
                    over_budget.add(c)     # for good: the plan only grows; the verdict comes at the end
                    continue
                entries.append((self.cost.with_candidate(self.prep.groups_of[c]), c))
            if not entries:
                break
            self._commit(self._pick(entries))
            if self.stop is not None and self.stop(self):
                break

    # -- consolidation onto an idle node (PLAN-2 rule 1) --------------------------------------------
    # _fill answers a donor whose first pod was refused everywhere before without tracing it (the
    # identity tests turn this off to compare)
    answer_refusals = True

    def _consolidate(self) -> bool:
        """When no candidate is feasible on occupied receivers: find idle nodes that take the R
        pods of more remaining candidates than there are idle nodes (each candidate vacated in
        full, cumulatively, with every filter), so that net nodes freed rises; commit those
        candidates, one round each.

        Donors are gathered on a first idle node, in order of cost, then (if that fails) of size;
        a donor that fits nowhere else may open a further idle node, at most MAX_IDLE_OPENED, and
        the result counts only if donors outnumber opened nodes (with a block goal: if it raises
        blocks, or net freed without costing a block). Idle nodes that no static filter or capacity
        can tell apart (nor, with a block goal, their HyperNode) are interchangeable, so one per
        class is tried as the first and as each further node. Bounded by `consolidation_left` candidate traces per pass.
        """
        ev, prep = self.ev, self.prep
        if not ev.idle or self.consolidation_left <= 0:
            return False
        within = [c for c in sorted(self.live) if self.over_budget(c) is None]
        if len(within) < 2:
            return False
        entries = [(self.cost.with_candidate(prep.groups_of[c]), c) for c in within]
        sc = scores([d for d, _ in entries], self.weights)
        by_cost = [c for _, _, c in sorted((sc[i], -prep.alloc[c], c) for i, (_, c) in enumerate(entries))]
        # Two orders of donors: least disruption first, and fewest R first (more donors fit).
        by_size = sorted(within, key=lambda c: (prep.cards_of[c], by_cost.index(c)))
        orders = [by_cost] if by_size == by_cost else [by_cost, by_size]
        for idle in self._idle_classes(ev.idle):
            donors, opened = [], []
            for order in orders:
                donors, opened = self._fill(idle, order)
                if donors:
                    break
            if donors:
                for n in opened:
                    if self.optimized:
                        ev.index.add(ev.key(n))
                    ev.receivers.add(n)
                for i, (c, trace) in enumerate(donors):
                    self.rnd += i > 0      # the first donor's round is the one that found nothing else
                    touched, repriced = self._commit(c, trace)
                    if self.optimized:
                        self._after_commit(c, touched, repriced)
                if self.optimized:
                    # A new receiver is a new option: an infeasible evaluation may now succeed (cached
                    # choices it could take are found by _invalidate, its key having moved ahead).
                    for u, cached in self.cache.items():
                        if not cached.feasible or any(u in self.scoped_by.get(n, ()) for n in opened):
                            self.stale.add(u)
                            self.pool.reopen(u)
                self.notes.append(f"idle node(s) {', '.join(opened)} re-occupied: they take the pods of "
                                  f"{len(donors)} nodes ({', '.join(c for c, _ in donors)})")
                return True
            if self.consolidation_left <= 0:
                break
        return False

    def _idle_classes(self, idle):
        """One idle node per class (static-filter class and allocatable), in name order."""
        seen, out = set(), []
        for n in sorted(idle):
            node = self.prep.snapshot.node_by_name[n]
            cls = (self.prep.class_of.get(n), tuple(sorted(node.allocatable.items())), self._block_of(n))
            if cls not in seen:
                seen.add(cls)
                out.append(n)
        return out

    def _block_of(self, node):
        """With a block goal, the HyperNode of `node` in the goal's tier (idle nodes in different
        HyperNodes are not interchangeable then); else None."""
        counter = self.prep.blocks
        return counter.where.get(node) if counter is not None else None

    def _fill(self, idle, order):
        """Donors that vacate onto the occupied receivers plus `idle` (and further idle nodes a
        donor opens), in `order`, cumulatively on a fork: (donors, opened idle nodes), or ([], [])
        unless the result counts (see `_consolidate`). The fork is reverted either way. Nodes the fork
        touches (and opened idle nodes) are overlaid on the receiver index at their current keys."""
        ev, st = self.ev, self.state
        mark = st.fork()
        saved = (set(ev.receivers), set(ev.receiving), set(ev.overlay))
        ev.receivers.add(idle)
        ev.overlay.add(idle)
        opened = [idle]
        groups, cards = set(self.cost.moved), self.moved_cards
        size = (self.status_pods, self.status_bytes, len(self.freed))
        donors = []
        prep = self.prep
        # Most donors fail at their first pod: no receiver takes it. Within this fork the receivers
        # only fill up or leave until one is added, so a pod of the same shape (without inter-pod or
        # topology constraints, which other pods' moves can loosen) is refused by them all again,
        # except perhaps by the node that trace vacated: `refused` maps that shape to it. Such an
        # attempt is answered by asking that node alone; it counts against the budget all the same.
        refused = {} if self.answer_refusals and not ev.pins else None

        def attempt(c, added=False):
            self.consolidation_left -= 1
            pods = prep.r_pods[c]
            shape = None
            if refused is not None and not added and c not in prep.interpod and c not in prep.topo:
                shape = ev.shape(pods[0])
                x = refused.get(shape)
                if x is not None and (x == c or x not in ev.receivers or not ev.hosts(x, pods[0])):
                    refused[shape] = c
                    return Evaluation(False, fail=(pods[0].key, "", ""))
            trace = ev.trace(pods, c, True, extra=prep.groups_of[c])
            if shape is not None and not trace.feasible and not trace.moves:
                refused[shape] = c
            return trace

        try:
            for c in order:
                if self.consolidation_left <= 0:
                    break
                if c in ev.receiving or self.over_budget(c, groups, cards, size) is not None:
                    continue                   # a node that received in this fork stays occupied
                trace = attempt(c)
                if not trace.feasible and donors and len(opened) < MAX_IDLE_OPENED:
                    for extra in self._idle_classes(ev.idle - set(opened)):
                        if self.consolidation_left <= 0:
                            break
                        ev.receivers.add(extra)
                        ev.overlay.add(extra)
                        trace = attempt(c, added=True)
                        if trace.feasible:
                            opened.append(extra)
                            if refused is not None:
                                refused.clear()       # a receiver more: refusals no longer hold
                            break
                        ev.receivers.discard(extra)
                        ev.overlay.discard(extra)
                if not trace.feasible:
                    continue
                if refused is not None and (c in prep.interpod or c in prep.topo):
                    refused.clear()    # its pods' moves can loosen other pods' inter-pod and topology filters
                for p, to, _ in trace.moves:
                    st.move(p, to)
                    ev.receiving.add(to)
                    ev.overlay.add(to)
                ev.receivers.discard(c)
                donors.append((c, trace))
                groups |= set(self.prep.groups_of[c])
                cards += self.prep.cards_of[c]
                c_pods, c_bytes = self.prep.status_cost[c]
                size = (size[0] + c_pods, size[1] + c_bytes, size[2] + 1)
        finally:
            st.revert(mark)
            ev.receivers, ev.receiving, ev.overlay = saved
        used = {to for _, t in donors for _, to, _ in t.moves}
        opened = [n for n in opened if n in used]
        if not opened:
            return [], []
        # RELIEF-4: the idle nodes filled must be covered, one for one, by the nodes freed
        cover = self.prep.cover
        if cover.uncovered(self.freed + [c for c, _ in donors], self.reoccupied + opened):
            if not self.cover_noted:
                self.cover_noted = True
                R = self.R
                self.notes.append(f"idle node(s) {', '.join(opened)} kept free ({'; '.join(cover.describe(opened, R))}): "
                                  f"the nodes that would vacate onto them ({'; '.join(cover.describe([c for c, _ in donors], R))}) "
                                  "could not host every pod they can")
            return [], []
        counter = self.prep.blocks
        if counter is None:
            return (donors, opened) if len(donors) > len(opened) else ([], [])
        # With a block goal the exception counts blocks (TOPO-3): fill idle nodes when that raises
        # blocks, or net freed without costing a block.
        before = counter.blocks(self.freed, self.reoccupied)
        after = counter.blocks(self.freed + [c for c, _ in donors], self.reoccupied + opened)
        if after == before and len(donors) > len(opened):
            return donors, opened
        # a swap (as many donors as idle nodes filled) only for a block, and only on clusters small
        # enough: each one re-opens every failed evaluation
        if after > before and (len(donors) > len(opened) or len(self.prep.candidates) <= SWAP_CANDIDATES):
            return donors, opened
        return [], []

    def vacatable(self):
        """A check `c -> bool`: can candidate c be vacated on this pass's state as it stands, before
        any round? Optimized, through the fast loop's evaluations (one trace per signature serves
        every candidate of it); else a trace of c's own."""
        if not self.optimized:
            return lambda c: self.ev.evaluate(c).feasible
        self.ev.build_signatures(self.prep.candidates)
        self._init_cache()
        return self.feasible_now

    # -- the optimized loop -------------------------------------------------------------------------
    def _init_cache(self):
        self.cache = {}              # evaluation unit -> Evaluation
        self.by_receiver = {}        # node -> units whose cached moves use it
        self.choice_keys = []        # sorted (receiver key at choice, unit, pod index, pod R request)
        self.stale = set()           # units whose cached evaluation a round may have changed
        # hard network topology (TOPO-2): unit -> the nodes its cached evaluation depends on through
        # its gangs' HyperNodes (CandidateEvaluator.topo_scope), node -> those units, and each gang's
        # candidates (a move of one of its pods changes where the others may go)
        self.scope, self.scoped_by, self.gang_nodes = {}, {}, {}
        for c in self.prep.topo:
            for p in self.prep.r_pods[c]:
                for con in self.prep.snapshot.constraints.get(p.key, ()):
                    self.gang_nodes.setdefault(con, set()).add(c)

    def _forget(self, u):
        for n in self.scope.pop(u, ()):
            self.scoped_by[n].discard(u)
        ev = self.cache.pop(u, None)
        if ev is not None:
            for i, (p, to, key) in enumerate(ev.moves):
                self.by_receiver.get(to, set()).discard(u)
                entry = (key, u, i, p.requests[self.R])
                j = bisect.bisect_left(self.choice_keys, entry)
                if j < len(self.choice_keys) and self.choice_keys[j] == entry:
                    self.choice_keys.pop(j)

    def _remember(self, u, ev):
        self.cache[u] = ev
        if u[0] == "node" and u[1] in self.prep.topo:
            scope = self.scope[u] = self.ev.topo_scope(u[1])
            for n in scope:
                self.scoped_by.setdefault(n, set()).add(u)
        # A failed evaluation keeps the choices made before its failing pod: the failure can
        # only change if those choices change (the failing pod's options never grow).
        for i, (p, to, key) in enumerate(ev.moves):
            self.by_receiver.setdefault(to, set()).add(u)
            bisect.insort(self.choice_keys, (key, u, i, p.requests[self.R]))

    def _evaluation(self, u):
        ev = self.cache.get(u)
        if ev is None or ev.interpod or u in self.stale:
            # Evaluated afresh, not repaired from the cached trace: resuming each pod at its cached
            # receiver after re-checking the changed nodes before it cost as much as a new trace at
            # 1,000 nodes and 10 % more at 10,000 (most pods land elsewhere by then).
            self._forget(u)
            self.stale.discard(u)
            ev = self.ev.evaluate_unit(u)
            self._remember(u, ev)
        return ev

    def feasible_now(self, c) -> bool:
        if c in self.prep.interpod or c in self.prep.topo:
            return self._evaluation(("node", c)).feasible
        ev = self._evaluation(("sig", self.ev.sig_of[c]))
        # a move to c itself or to a node sharing one of c's PodGroups (every node repriced_by can
        # give is such a node), tested per receiver before repriced_by walks c's PodGroups
        groups, group_r = self.prep.groups_of[c].keys(), self.prep.group_r
        if any(to == c or (to in group_r and not groups.isdisjoint(group_r[to])) for _, to, _ in ev.moves):
            own = self.ev.repriced_by(self.prep.groups_of[c], c)
            if any(to == c or to in own for _, to, _ in ev.moves):
                return self._evaluation(("node", c)).feasible
        return ev.feasible

    def _rounds_fast(self):
        """Same decisions as `_rounds_reference`, looking only at what can decide a round.

        A round needs, over the feasible candidates within budget: the lowest and highest value of
        each cost dimension (min-max normalisation) and the lowest score (`CandidatePool`). A
        candidate whose evaluation may have changed is only marked unknown, and verified when one
        of those searches reaches it; searches stop at the first verified candidate, so most
        unknowns are never evaluated.
        """
        pool = self.pool
        while self.live and not self._minimum_reached():
            self.rnd += 1
            if self.progress is not None:
                self.progress("round", self.rnd, len(self.prep.candidates))
            for c in self.prep.interpod & self.live:
                pool.unknown(c)
            if not pool.rescore():
                break
            chosen = pool.best()
            if chosen is None:
                break
            touched, repriced = self._commit(chosen)
            self._after_commit(chosen, touched, repriced)
            if self.stop is not None and self.stop(self):
                break

    def _after_commit(self, chosen, touched, repriced):
        """The fast loop's bookkeeping after a commit: the pool and the cached evaluations."""
        pool = self.pool
        for c in [chosen, *touched]:
            pool.leave(c)
            self._forget(("node", c))
        pool.recost(chosen, self.first_workloads)
        for u in self._invalidate(chosen, touched, repriced):
            pool.reopen(u)

    def _invalidate(self, chosen, touched, repriced):
        """Mark cached evaluations this round may have changed; returns those units.

        Without inter-pod constraints a round only removes capacity (receivers fill up, the
        vacated node leaves) and re-pricing only moves nodes later in the order, so a pod's options
        never grow; a cached evaluation changes only if one of its chosen receivers was touched or
        re-priced, or a touched node now comes before a choice in the receiver order and would take
        that pod. A candidate sees a node that shares one of its PodGroups at a key of its own, so
        its evaluation is redone whenever such a node is touched. They are evaluated again lazily, when a
        candidate next asks.
        """
        ev = self.ev
        replay = set(self.by_receiver.get(chosen, ()))
        for n in repriced:
            replay |= self.by_receiver.get(n, set())
        if self.scope:
            # hard network topology: a node a topology unit may use changed, or its gang moved
            for n in [chosen, *touched, *repriced]:
                replay |= self.scoped_by.get(n, set())
            for p in self.prep.r_pods[chosen]:
                for con in self.prep.snapshot.constraints.get(p.key, ()):
                    replay |= {("node", c) for c in self.gang_nodes.get(con, ()) if ("node", c) in self.cache}
        for t, old in touched.items():
            new = ev.key(t)
            replay |= self.by_receiver.get(t, set())
            for g in self.prep.group_r.get(t, ()):
                for c in self.prep.nodes_of_group.get(g, ()):
                    if ("node", c) in self.cache:
                        replay.add(("node", c))
            if old is not None and new < old:
                lo = bisect.bisect_right(self.choice_keys, (new, ("\uffff",)))
                hi = bisect.bisect_left(self.choice_keys, (old, ("",)))
                room = self.state.free(t, self.R)
                for _, u, i, need in self.choice_keys[lo:hi]:
                    if need <= room and u not in replay and ev.hosts(t, self.cache[u].moves[i][0]):
                        replay.add(u)
        self.stale |= replay
        return replay
