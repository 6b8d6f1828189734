"""Ruin and recreate over which nodes a plan vacates (issue 15), on small clusters.

The round loop is greedy (PLAN-1): a node it vacates early decides where later pods can go, and a
pass restricted by the improvement phase (`improve`) only changes which choices it may make. Some
plans are out of reach of both: several teams' half-full nodes packed into one shared spare, or a
card budget spent on five small nodes instead of three large ones. This module searches those
directly, on a model of the snapshot with only what does not depend on the plan's order:

- a pod may go to a node that passes its static filters (`STATIC_FILTERS`, once per node class)
  and has room in every resource it requests (the `pods` count included), on the receiver's state
  with everything the search already placed there;
- a vacated node receives nothing; an idle node counts against net freed once it receives.

A state is a set S of candidates to vacate, every pod of S placed, and the idle nodes opened.
Each iteration (most of them) ruins a few nodes of S — at random, the donors of one receiver, or
those that filled one opened idle node — then recreates, with choices drawn per recreate:

- sometimes every pod of S is placed again, largest first (best-fit decreasing packs tighter than
  the order the nodes came in);
- the candidates not in S are added in one order — fewest cards first, most cards first (big pods
  take the big holes before small ones split them), or, when the walk lowers disruption, the
  least GANG-3 cost added to the plan of S — with noise; a candidate is added when all its pods
  (and those the search had placed on it) find room;
- a pod goes to the best fit within tiers of receivers (occupied nodes, opened idle nodes, new
  idle nodes) taken in one of three orders, new idle nodes only in some recreates and then either
  the tightest or the largest first, the one more pods may use on a tie, sometimes with noise;
- the pods of a hard-topology gang that leaves whole (none of its pods keeps a place) go together,
  into the HyperNode of the gang's tier with the least room that holds them all (`_place_gang`);
  one pod at a time, the first would anchor the gang wherever it alone fits best;
- in some recreates a node that cannot be vacated alone is vacated with its unit, the other
  candidates holding its hard-topology gangs (`add_unit`): only so can such a gang move to
  another HyperNode;
- last, opened idle nodes whose pods all fit elsewhere are closed again.

Budgets (maxPerRun) hold at every step. `run` makes three walks: two for net nodes freed (from the
plan of the passes, and from an empty plan), which keep a state that frees at least as many net
nodes and, of equal ones, leaves less room unused on opened idle nodes, and start again from an
empty plan when stuck; then one from the best state that keeps its net freed and lowers the GANG-3
weighted sum of the whole plan (half of its ruins keep one of the three nodes whose pods cost the
plan most). Each now and then keeps a worse state, to leave a plateau.

Nothing here is a plan: the best state is handed back as (S, opened idle nodes, pod -> node), and
`improve` runs the round loop restricted to S with each pod pinned to its node, so the plan's order
is still GANG-3's and every move is checked with every filter (inter-pod terms, ports) in order.
The search is bounded by iterations (`budget_for`) and seeded, so a plan is reproducible.
"""
import random

from .cost import PlanCost, plan_dimensions
from .filters import STATIC_FILTERS, run_filters

MAX_CANDIDATES = 200       # the search runs on clusters with at most this many candidates
WORK = 48_000              # iterations x candidates
MAX_ITERATIONS = 1200
MIN_ITERATIONS = 200
SEED = 15
OCCUPIED, OPENED, NEW = "occupied", "opened", "new"
# Receiver tiers a recreate uses, one order drawn per recreate: occupied nodes first (no idle node
# opens while another node has room), opened idle nodes first (they cost nothing more), or idle
# nodes first (several donors, of several pools, packed into the same spares).
TIERS = ((OCCUPIED, OPENED, NEW), (OPENED, OCCUPIED, NEW), (OPENED, NEW, OCCUPIED))
REPACK = 0.15              # chance that a recreate first places every pod of S again
JITTER = 2.5               # cards of noise on best fit in a third of the recreates
LARGE_FIRST = 0.3          # share of recreates that add the nodes with the most cards first
PATIENCE = 60              # iterations without a better state before a walk for net freed restarts
NO_RUIN = 0.2              # share of iterations that only add to the current state
ESCAPE = 0.04              # chance to keep a state that is worse than the current one
BLOCK_RESTART = 0.1        # with a block goal: share of ruins that start over aiming at one HyperNode
COSTLY_RUIN = 0.5          # share of the disruption walk's ruins that keep one of the dearest nodes
UNITS = 0.3                # share of recreates that, where a node cannot be vacated alone, try its unit
MAX_UNIT = 6               # nodes in one unit at most
BLOCK_WORK = 3             # with a block goal: the search's iterations, times this


def budget_for(candidates: int, blocks: bool = False) -> int:
    """Iterations for a cluster with this many candidates (0: the search does not run); with a
    block goal BLOCK_WORK times as many: which nodes are free matters, not only how many, and the
    topology bench's misses fall from 4 to 2 of 120 with three times the work."""
    if candidates == 0 or candidates > MAX_CANDIDATES:
        return 0
    return max(MIN_ITERATIONS, min(MAX_ITERATIONS, WORK // candidates)) * (BLOCK_WORK if blocks else 1)


class SetSearch:
    """The model of one Prepared snapshot, and the state of the search over it."""

    def __init__(self, prep, weights):
        self.prep, self.weights = prep, weights
        snap, R = prep.snapshot, prep.resource
        base = prep.fresh_state()
        self.cands = list(prep.candidates)
        self.home = {}                    # pod key -> its node now
        self.pod = {}
        resources = {"pods"}
        for c in self.cands:
            for p in prep.r_pods[c]:
                self.home[p.key], self.pod[p.key] = c, p
                resources.update(r for r, v in p.requests.items() if v)
        self.resources = sorted(resources)
        self.need = {k: {**{r: v for r, v in p.requests.items() if v and r != "pods"}, "pods": 1}
                     for k, p in self.pod.items()}
        self.r_need = {k: p.requests.get(R, 0) for k, p in self.pod.items()}
        self.free = {}
        for n in prep.alloc:
            node = snap.node_by_name[n]
            used = base.used[n]
            f = {r: node.allocatable.get(r, 0) - used.get(r, 0) for r in resources if r != "pods"}
            f["pods"] = node.allocatable.get("pods", 0) - len(base.pods_on[n])
            self.free[n] = f
        self.idle = set(prep.idle)
        static = {}
        self.elig = {}                    # pod key -> receivers it may ever use, by name
        for k, p in self.pod.items():
            need, out = self.need[k], []
            for m in sorted(prep.alloc):
                if m == self.home[k] or any(v > self.free[m].get(r, 0) for r, v in need.items()):
                    continue
                ck = (k, prep.class_of[m])        # every provider has a class (prepare._classes)
                ok = static.get(ck)
                if ok is None:
                    rep = snap.node_by_name[prep.class_rep[ck[1]]]
                    ok = static[ck] = run_filters(p, rep, base, {}, STATIC_FILTERS) is None
                if ok:
                    out.append(m)
            self.elig[k] = out
        # how many pods may use a node: of two equally good new idle nodes, open the one more
        # donors can share
        self.reach = dict.fromkeys(prep.alloc, 0)
        for out in self.elig.values():
            for m in out:
                self.reach[m] += 1
        # hardest pods first: fewest receivers, then most R
        self.order = {c: sorted((p.key for p in prep.r_pods[c]), key=lambda k: (len(self.elig[k]), -self.r_need[k], k))
                      for c in self.cands}
        self._topology(snap, base)
        self.blocks = prep.blocks
        self.target = None                # a HyperNode the next recreate fills with free nodes first
        # HyperNodes whose idle nodes and candidates could make a block
        self.block_targets = []
        if self.blocks is not None:
            cands = {}
            for c in self.cands:
                h = self.blocks.where.get(c)
                if h is not None:
                    cands[h] = cands.get(h, 0) + 1
            self.block_targets = [h for h in self.blocks.hypernodes
                                  if cands.get(h, 0) >= self.blocks.deficit(h)]
        run = prep.run
        self.max_groups, self.max_cards = run.max_podgroups, run.max_resource
        self.room = max(len(prep.occupied) - prep.minimum.value, 0)
        self.uncover_penalty = len(prep.alloc) + 1    # more than any net or block count
        # the state
        self.S = set()
        self.where = {}                   # pod key -> receiver
        self.on = {}                      # receiver -> set of pod keys placed there
        self.opened = {}                  # idle node -> pods placed there
        self.groups = {}                  # PodGroup -> vacated nodes holding it
        self.cards = 0
        self.log = []
        self.open_large = False           # a recreate that opens the largest idle node first
        self.jitter, self.rng = 0, None   # a recreate whose best fit is only roughly best

    def _topology(self, snap, base):
        """Hard network topology (TOPO-2) in the search: the gangs of each moving pod, and where the
        pods of those gangs that never move sit."""
        self.topo = snap.topology
        self.cons = {k: snap.constraints[k] for k in self.pod if k in snap.constraints}
        self.fixed = {}                   # pod key -> node, for members on no candidate
        for cons in self.cons.values():
            for c in cons:
                for j in c.members:
                    if j not in self.pod and j in base.node_of:
                        self.fixed[j] = base.node_of[j]

    def _topology_ok(self, k, m):
        """Would `k` on `m` keep each of its gangs inside one HyperNode of the gang's tier, with the
        gang's other pods where the state has them (placed, at home on a node not vacated, or on
        no candidate)? Pods of a vacated node waiting for a receiver do not count: as the executor
        evicts a PodGroup's pods together, only where they land matters."""
        for c in self.cons.get(k, ()):
            nodes = {m}
            for j in c.members:
                at = self._located(j) if j != k else None
                if at is not None:
                    nodes.add(at)
            if not self.topo.anchor_domain(nodes, c.tier)[0]:
                return False
        return True

    # -- state changes, logged so that a ruin-and-recreate can be undone --------------------------
    def _place(self, k, m):
        self.where[k] = m
        self.on.setdefault(m, set()).add(k)
        f = self.free[m]
        for r, v in self.need[k].items():
            f[r] -= v
        if m in self.idle:
            self.opened[m] = self.opened.get(m, 0) + 1
        self.log.append(("place", k, m))

    def _unplace(self, k):
        m = self.where.pop(k)
        self.on[m].discard(k)
        f = self.free[m]
        for r, v in self.need[k].items():
            f[r] += v
        if m in self.idle:
            self.opened[m] -= 1
            if not self.opened[m]:
                del self.opened[m]
        self.log.append(("unplace", k, m))

    def _mark(self, c, vacated):
        groups = self.prep.groups_of[c]
        if vacated:
            self.S.add(c)
            self.cards += self.prep.cards_of[c]
            for g in groups:
                self.groups[g] = self.groups.get(g, 0) + 1
        else:
            self.S.discard(c)
            self.cards -= self.prep.cards_of[c]
            for g in groups:
                self.groups[g] -= 1
                if not self.groups[g]:
                    del self.groups[g]
        self.log.append(("mark", c, vacated))

    def undo(self, mark):
        while len(self.log) > mark:
            op, a, b = self.log.pop()
            if op == "place":
                self._unplace(a)
            elif op == "unplace":
                self._place(a, b)
            else:
                self._mark(a, not b)
            self.log.pop()                # the inverse just logged itself

    # -- the moves of the search ------------------------------------------------------------------
    def _fits(self, k, m):
        f = self.free[m]
        return all(v <= f.get(r, 0) for r, v in self.need[k].items())

    def _receiver(self, k, allow_open, tiers=TIERS[0], within=None):
        """Best fit within tiers of receivers: occupied nodes, opened idle nodes and new idle
        nodes (only if `allow_open`), in the order `tiers` gives them; within a tier the least R
        left after the pod (among new idle nodes, the most when `open_large`: room for the pods
        that follow), then the node more pods may use."""
        best, best_key = None, None
        R, need, S, free = self.prep.resource, self.r_need[k], self.S, self.free
        hard = k in self.cons
        for m in self.elig[k]:
            if m in S or free[m].get(R, 0) < need or (within is not None and m not in within) \
                    or not self._fits(k, m) or (hard and not self._topology_ok(k, m)):
                continue
            kind = OCCUPIED if m not in self.idle else (OPENED if m in self.opened else NEW)
            if kind == NEW and not allow_open:
                continue
            tier = tiers.index(kind)
            left = free[m].get(R, 0) - need
            if kind == NEW and self.open_large:
                left = -left
            if self.jitter:
                left += self.jitter * self.rng.random()
            key = (tier, left, -self.reach[m], m)
            if best_key is None or key < best_key:
                best, best_key = m, key
        return best

    def budget_ok(self, c):
        if self.max_cards is not None and self.cards + self.prep.cards_of[c] > self.max_cards:
            return False
        if self.max_groups is not None:
            new = sum(1 for g in self.prep.groups_of[c] if g not in self.groups)
            if len(self.groups) + new > self.max_groups:
                return False
        return True

    def add(self, c, allow_open, tiers=TIERS[0]):
        """Vacate `c`: its pods, and those placed on it, each to a receiver; False (and nothing
        changed) when one finds none, the budget does not allow it, or the plan is at the minimum.
        With a block goal, at the minimum a node may still be vacated onto idle nodes it opens (net
        freed stays, and which nodes are free is what makes blocks)."""
        swap = self.blocks is not None
        if c in self.S or not self.budget_ok(c) or (not swap and self.net() >= self.room):
            return False
        mark = len(self.log)
        self._mark(c, True)
        moving = list(self.order[c])
        for k in sorted(self.on.get(c, ())):
            self._unplace(k)
            moving.append(k)
        if not self._place_all(moving, allow_open, tiers, mark):
            return False
        if swap and self.net() > self.room:
            self.undo(mark)
            return False
        return True

    def unit(self, c):
        """`c` and the candidates not yet vacated that hold a pod of a hard-topology gang of a pod
        on them, transitively: vacated together, such gangs leave whole and may land in another
        HyperNode as one unit (TOPO-2), which vacating the nodes one at a time never allows. None
        when a gang has a pod that stays (on a node that is no candidate) or the unit grows above
        MAX_UNIT nodes."""
        unit, todo = {c}, [c]
        while todo:
            x = todo.pop()
            for p in self.prep.r_pods[x]:
                for con in self.cons.get(p.key, ()):
                    for j in con.members:
                        if j in self.fixed:
                            return None
                        h = self.home.get(j)
                        if h is not None and h not in self.S and h not in unit:
                            if len(unit) >= MAX_UNIT:
                                return None
                            unit.add(h)
                            todo.append(h)
        return sorted(unit)

    def add_unit(self, c, allow_open, tiers=TIERS[0]):
        """Vacate `c`'s unit (`unit`) at once: every node marked first, then every pod placed,
        the largest first. False (and nothing changed) as `add`."""
        unit = self.unit(c)
        if unit is None or len(unit) < 2:
            return False
        mark = len(self.log)
        moving = []
        for x in unit:
            if not self.budget_ok(x):
                self.undo(mark)
                return False
            self._mark(x, True)
            moving += self.order[x]
        for x in unit:
            for k in sorted(self.on.get(x, ())):
                self._unplace(k)
                moving.append(k)
        moving.sort(key=lambda k: (-self.r_need[k], len(self.elig[k]), k))
        if not self._place_all(moving, allow_open, tiers, mark):
            return False
        if self.net() > self.room:
            self.undo(mark)
            return False
        return True

    def _place_all(self, pods, allow_open, tiers, mark):
        """Each of `pods` (unplaced) to its receiver in turn; when one finds none, everything since
        `mark` is undone and False returned. The first pod of a hard-topology gang none of whose
        pods has a place yet brings its gang's other pods among `pods` with it (`_place_gang`)."""
        pending = set(pods)
        for k in pods:
            if k in self.where:
                continue
            pending.discard(k)
            if k in self.cons and self._place_gang(k, pending, allow_open, tiers):
                continue
            m = self._receiver(k, allow_open, tiers)
            if m is None:
                self.undo(mark)
                return False
            self._place(k, m)
        return True

    def _located(self, j):
        """Where pod `j` is in the state: placed, at home on a node not vacated, or on no
        candidate; None while it waits for a receiver."""
        at = self.where.get(j)
        if at is None:
            home = self.home.get(j)
            at = self.fixed.get(j) if home is None else (home if home not in self.S else None)
        return at

    def _place_gang(self, k, pending, allow_open, tiers) -> bool:
        """Place `k` and the pods of its tightest hard-topology gang still in `pending`, all in one
        HyperNode, when no pod of that gang has a place yet (the gang leaves whole, TOPO-2): the
        HyperNodes of the gang's tier tried from the one with the least room for them that is
        enough. One pod after another (best fit), the first pod's choice would anchor the gang
        wherever that pod fits best, often where the rest do not. False (nothing changed) when the
        gang has a placed pod or no HyperNode takes it all: then each pod is placed on its own."""
        con = min(self.cons[k], key=lambda c: (c.tier, c.what))
        if any(self._located(j) is not None for j in con.members if j != k):
            return False
        group = [k] + sorted((j for j in con.members if j in pending),
                             key=lambda j: (-self.r_need[j], len(self.elig[j]), j))
        if len(group) < 2:
            return False
        R = self.prep.resource
        need = sum(self.r_need[j] for j in group)
        room = {}
        for h in self.topo.domains(con.tier):
            nodes = self.topo.nodes[h]
            have = sum(self.free[m].get(R, 0) for m in nodes
                       if m in self.free and m not in self.S and (allow_open or m not in self.idle or m in self.opened))
            if have >= need:
                room[h] = have
        for h in sorted(room, key=lambda h: (room[h], h)):
            within, mark = self.topo.nodes[h], len(self.log)
            for j in group:
                m = self._receiver(j, allow_open, tiers, within)
                if m is None:
                    self.undo(mark)
                    break
                self._place(j, m)
            else:
                pending.difference_update(group)
                return True
        return False

    def remove(self, c):
        """Keep `c`: its pods stay home. A pod of a gang with hard network topology back home anchors
        its gang there, so every other vacated node holding a pod of that gang is kept too (the
        gang's pods placed elsewhere could otherwise lie outside its HyperNode)."""
        todo = [c]
        while todo:
            x = todo.pop()
            if x not in self.S:
                continue
            for p in self.prep.r_pods[x]:
                self._unplace(p.key)
            self._mark(x, False)
            for p in self.prep.r_pods[x]:
                for con in self.cons.get(p.key, ()):
                    todo.extend(h for h in (self.home.get(j) for j in con.members) if h in self.S)

    def net(self):
        return len(self.S) - len(self.opened)

    def score(self) -> tuple:
        """What the walks maximise: (net,), or with a block goal (blocks, net) (TOPO-3); a state
        whose vacated nodes do not cover the idle nodes it opens (RELIEF-4) ranks below every state
        that does (its first figure lowered by more than any state can reach)."""
        penalty = self.uncover_penalty * self.prep.cover.uncovered(self.S, self.opened) if self.opened else 0
        if self.blocks is None:
            return (self.net() - penalty,)
        return (self.blocks.blocks(self.S, self.opened) - penalty, self.net())

    def disruption(self):
        moved = {}
        for c in self.S:
            for g, keys in self.prep.groups_of[c].items():
                moved.setdefault(g, set()).update(keys)
        dims = plan_dimensions(self.prep.gangs, moved)
        return round(sum(w * d for w, d in zip(self.weights, dims)), 9)

    def waste(self):
        """R left unused on the opened idle nodes."""
        R = self.prep.resource
        return sum(self.free[m].get(R, 0) for m in self.opened)

    def snapshot(self):
        return frozenset(self.S), frozenset(self.opened), dict(self.where)

    # -- the search -------------------------------------------------------------------------------
    def start(self, vacated, pins):
        """Load a plan: `vacated` nodes, each pod to its pinned node when that still fits (else
        wherever it fits). Every node is marked vacated before any pod is placed, so a gang that
        leaves whole may land in another HyperNode whatever the order. Returns False (and changes
        nothing) when the model cannot hold it."""
        mark = len(self.log)
        for c in vacated:
            if not self.budget_ok(c):
                self.undo(mark)
                return False
            self._mark(c, True)
        rest = []
        for c in vacated:
            for k in self.order[c]:
                m = pins.get(k)
                if m is None or m in self.S or m not in self.elig[k] or not self._fits(k, m) \
                        or not self._topology_ok(k, m):
                    rest.append(k)
                else:
                    self._place(k, m)
        rest.sort(key=lambda k: (-self.r_need[k], len(self.elig[k]), k))
        if not self._place_all(rest, True, TIERS[0], mark):
            return False
        self.log.clear()
        return True

    def _ruin(self, rng):
        S = sorted(self.S)
        if self.blocks is not None and rng.random() < BLOCK_RESTART:
            # a block goal: start over aiming at one HyperNode that could hold a block (its
            # candidates are added first, idle nodes may open): a block several nodes away is
            # otherwise reached only through states no better than the current one
            for c in S:
                self.remove(c)
            self.target = rng.choice(self.block_targets) if self.block_targets else None
            return
        if not S:
            return
        how = rng.random()
        if how < 0.4 or not self.on:
            for c in rng.sample(S, min(len(S), rng.randint(1, max(3, len(S) // 6)))):
                self.remove(c)
        elif how < 0.7 or not self.opened:
            # the donors of one receiver, so it can take others
            m = rng.choice(sorted(r for r, ks in self.on.items() if ks))
            for c in sorted({self.home[k] for k in self.on[m]}):
                self.remove(c)
        else:
            # close one opened idle node
            m = rng.choice(sorted(self.opened))
            for c in sorted({self.home[k] for k in self.on[m]}):
                self.remove(c)
            if rng.random() < 0.5 and S:
                c = rng.choice(sorted(self.S)) if self.S else None
                if c is not None:
                    self.remove(c)

    def _ruin_costly(self, rng):
        """For the walk that lowers disruption: keep one of the vacated nodes whose pods cost the
        plan most (the GANG-3 weighted sum falls most without them), one of the three dearest at
        random, and sometimes one more at random; the recreate then looks for cheaper nodes."""
        S = sorted(self.S)
        whole = self._weighted_of(S)
        saving = sorted(((whole - self._weighted_of([x for x in S if x != c]), c) for c in S), reverse=True)
        self.remove(rng.choice(saving[:3])[1])
        if rng.random() < 0.5 and self.S:
            self.remove(rng.choice(sorted(self.S)))

    def _weighted_of(self, nodes):
        moved = {}
        for c in nodes:
            for g, keys in self.prep.groups_of[c].items():
                moved.setdefault(g, set()).update(keys)
        return sum(w * d for w, d in zip(self.weights, plan_dimensions(self.prep.gangs, moved)))

    def repack(self, tiers):
        """Place every pod of S again, largest first (then fewest receivers): best-fit decreasing
        packs tighter than the order the nodes were added in. False (and nothing changed) when a
        pod finds no receiver."""
        mark = len(self.log)
        pods = sorted(self.where, key=lambda k: (-self.r_need[k], len(self.elig[k]), k))
        for k in pods:
            self._unplace(k)
        return self._place_all(pods, True, tiers, mark)

    def _recreate(self, rng, cheap=False):
        """Add candidates while they fit: fewest cards first, most cards first, or (`cheap`) the
        least marginal disruption first, with noise; then close the opened idle nodes it can."""
        target, self.target = self.target, None
        allow_open = target is not None or rng.random() < 0.6
        self.open_large = rng.random() < 0.5
        self.jitter = rng.choice((0, 0, JITTER))
        tiers = TIERS[0] if target is not None else rng.choice(TIERS)
        noise = 0.0 if target is not None else rng.choice((0.0, 0.3, 1.0))
        if rng.random() < REPACK:
            self.repack(tiers)
        if cheap and rng.random() < 0.7:
            cost = self._marginals().__getitem__
        elif self.blocks is not None and (target is not None or rng.random() < 0.5):
            # a block goal: one HyperNode's candidates after another, nearest to a block first
            rank = self._block_order(rng, target)
            cost = lambda c: rank.get(c, len(rank)) * 10_000 + self.prep.cards_of[c]  # noqa: E731
        elif rng.random() < LARGE_FIRST:
            # the largest first: big pods take the big holes before small ones split them
            cost = lambda c: -self.prep.cards_of[c]  # noqa: E731
        else:
            cost = self.prep.cards_of.__getitem__
        order = sorted((c for c in self.cands if c not in self.S),
                       key=lambda c: (cost(c) * (1 + noise * rng.random()), c))
        units = bool(self.cons) and rng.random() < UNITS
        for c in order:
            if not self.add(c, allow_open, tiers) and units and c not in self.S:
                self.add_unit(c, allow_open, tiers)
        if self.opened:
            self.drain(tiers)

    def _block_order(self, rng, target=None) -> dict:
        """{candidate: rank of its HyperNode}: `target` first, then HyperNodes fewest nodes short of
        their next block on the current state, ties at random."""
        counter = self.blocks
        free = counter.free(self.S, self.opened)
        order = sorted(counter.hypernodes, key=lambda h: (h != target, counter.size - free[h] % counter.size,
                                                          rng.random()))
        pos = {h: i for i, h in enumerate(order)}
        return {c: pos[counter.where[c]] for c in self.cands if c in counter.where}

    def drain(self, tiers):
        """Close opened idle nodes whose pods all fit elsewhere without opening another (the
        least loaded first): each one closed is one more net node."""
        R = self.prep.resource
        for m in sorted(self.opened, key=lambda m: (-self.free[m].get(R, 0), m)):
            if m not in self.opened:
                continue
            mark = len(self.log)
            pods = sorted(self.on[m], key=lambda k: (-self.r_need[k], k))
            for k in pods:
                self._unplace(k)
            self._place_all(pods, False, tiers, mark)

    def clear(self):
        for c in sorted(self.S):
            self.remove(c)
        self.log.clear()

    def run(self, iterations, seed=SEED):
        """Ruin and recreate in three walks: for net nodes freed from the loaded state, for net
        nodes freed from an empty plan (a greedy start narrows where the first walk looks), then
        for the least disruption at the best net found, from the best state. Returns the best
        (net, -disruption) state seen: ((net, -weighted), (vacated, opened idle, pod -> node))."""
        third = iterations // 3
        # with a block goal the plateau at the best blocks is wide: half the work lowers disruption
        last = iterations // 2 if self.blocks is not None else third
        loaded = self.walk(iterations - third - last, seed, "net")
        self.clear()
        empty = self.walk(third, seed + 1, "net")
        (net, _), (vacated, _, pins) = best = max(loaded, empty, key=lambda r: r[0])
        self.clear()
        self.start(sorted(vacated), pins)
        return max(best, self.walk(last, seed + 2, "disruption"), key=lambda r: r[0])

    def gathered(self) -> int:
        """With a block goal: how close the free nodes short of a block are to completing one,
        Σ over HyperNodes of (free mod size)², so the walk for net freed keeps states that gather
        free nodes into fewer HyperNodes on the way to a further block (the plateau between two
        block counts is otherwise crossed only by chance)."""
        counter = self.blocks
        return sum((v % counter.size) ** 2 for v in counter.free(self.S, self.opened).values())

    def _walk_key(self, neg_waste):
        """What the walk for net freed compares states by (see `walk`)."""
        sc = self.score()
        return (sc[0], self.gathered(), *sc[1:], neg_waste) if self.blocks is not None else (sc, neg_waste)

    def _marginals(self):
        """What vacating each remaining candidate adds to the GANG-3 weighted cost of the plan
        of S (exact: the round loop's own PlanCost increments)."""
        cost = PlanCost(self.prep.gangs)
        for c in self.S:
            cost.add(self.prep.groups_of[c])
        return {c: sum(w * d for w, d in zip(self.weights, cost.with_candidate(self.prep.groups_of[c])))
                for c in self.cands if c not in self.S}

    def walk(self, iterations, seed, goal):
        """Ruin and recreate from the current state, `iterations` times; the best (net,
        -disruption) state seen. goal "net": a state is kept when it frees at least as many net
        nodes as the current one; "disruption": when it frees as many and disrupts no more."""
        rng = self.rng = random.Random(seed)
        cur = (self.score(), -self.disruption())
        floor = cur[0]
        cur_w = self._walk_key(-self.waste())
        best, best_state = cur, self.snapshot()
        stale, patience = 0, max(PATIENCE, iterations // 4)
        for _ in range(iterations):
            if goal == "net" and stale >= patience:
                # stuck: start again from an empty plan (the best state is kept)
                self.clear()
                cur, cur_w, stale = (self.score(), 0.0), self._walk_key(0), 0
            stale += 1
            mark = len(self.log)
            if goal == "disruption" and self.S and rng.random() < COSTLY_RUIN:
                self._ruin_costly(rng)
            elif rng.random() >= NO_RUIN:
                self._ruin(rng)
            self._recreate(rng, goal == "disruption")
            net = self.score()
            if goal == "net":
                w = self.waste()
                here = self._walk_key(-w)
                keep = here >= cur_w or rng.random() < ESCAPE
                if keep:
                    cur_w = here
                new = (net, -self.disruption()) if keep else None
            else:
                new = (net, -self.disruption()) if net >= floor else None
                keep = new is not None and (new >= cur or rng.random() < ESCAPE)
            if not keep:
                self.undo(mark)
                continue
            self.log.clear()
            cur = new
            if new > best:
                best, best_state, stale = new, self.snapshot(), 0
        return best, best_state
