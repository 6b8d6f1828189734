"""The fast round loop's view of the remaining candidates (`rounds.Planner._rounds_fast`): what is
known about each, the cost vector of each over the complete plan, and the searches a round needs
(the min-max bounds of each cost dimension, the lowest score), which verify candidates lazily.
"""
import bisect
import heapq
from enum import Enum


# Members of a bound's value looked at for one already verified (CandidatePool._extreme).
EXTREME_SCAN = 64


class Status(Enum):
    """What the fast loop knows about a remaining candidate."""
    FEASIBLE = "feasible"          # verified since its evaluation last changed
    UNKNOWN = "unknown"            # its evaluation may have changed; verified when a search reaches it
    INFEASIBLE = "infeasible"
    OVER_BUDGET = "over budget"    # for good: the plan only grows


class CandidatePool:
    """The fast loop's view of the remaining candidates: what is known about each (`Status`), the
    cost vector of each over the complete plan, one sorted list per cost dimension (for the
    min-max bounds) and a heap of cost vectors by score (candidates with the same vector score the
    same)."""

    def __init__(self, planner):
        self.pl = planner
        self.members = set()             # candidates that may be feasible: FEASIBLE or UNKNOWN
        self.status = {}
        self.dims = {}
        self.parts = {}                  # candidate -> {PodGroup: its increase of dimensions 1-4}
        # per dimension: sorted (value, candidate) over the members, and entries of candidates that
        # left or changed value since (`leave` costs no list surgery; `_live` tells them apart;
        # `_extreme` drops them at the ends, `enter` compacts a list grown to twice the members)
        self.asc = [[] for _ in range(5)]
        self.by_vector = {}              # cost vector -> sorted [(-allocatable R, candidate)] among members
        # Each vector's best member is in one of two heaps (`best`): `unscored` by the value of the
        # first scored dimension (its score's lower bound grows with it), `exact` by its score under
        # the current bounds; entries whose vector's best member changed since are skipped.
        self.unscored = []               # (value of dimension `first`, -alloc, candidate, vector)
        self.exact = []                  # (score, -alloc, candidate, vector)
        self.first = -1                  # the bound's dimension (None: no term; -1: no bounds yet)
        self.slope, self.low = 0.0, 0    # the bound's term: weight / span, and its dimension's low
        self.scored = {}                 # vector -> score under the current bounds
        self.terms = None                # the current bounds as (dimension, weight, low, span)
        self.epoch = None
        self.verified = {}               # evaluation unit -> candidates verified since it last changed
        prep = planner.prep
        if min(planner.weights) < 0:
            raise AssertionError("planner bug: the pool's score bounds need weights >= 0")
        # PodGroup or workload -> candidates whose cost it enters; each candidate's groups priced
        # on an empty plan (the pool starts before the first commit): the same for every pass
        self.by_group = prep.once("pool.by_group", lambda: _by_group(prep))
        # each candidate's workloads (dimension 0 counts those the plan does not disrupt yet)
        self.workloads_of = prep.once("pool.workloads_of", lambda: {
            c: frozenset(prep.gangs[key].workload for key in prep.groups_of[c]) for c in prep.candidates})
        first = prep.once("pool.first_parts", lambda: {c: {key: planner.cost.delta(key, keys)
                                                           for key, keys in prep.groups_of[c].items()}
                                                       for c in prep.candidates})
        if planner.cost.moved:
            raise AssertionError("planner bug: a candidate pool starts on an empty plan")
        # what `enter` does for each live candidate, built in bulk
        live = sorted(planner.live)
        alloc = prep.alloc
        for c in live:
            self.parts[c] = dict(first[c])
            d = self.dims[c] = self._dims(c)
            self.by_vector.setdefault(d, []).append((-alloc[c], c))
            self.status[c] = Status.UNKNOWN
        self.members = set(live)
        for i in range(5):
            self.asc[i] = sorted((self.dims[c][i], c) for c in live)
        for lst in self.by_vector.values():
            lst.sort()

    def score(self, d):
        # The arithmetic of cost.scores, term by term in the same order, so the same floats.
        sc = self.scored.get(d)
        if sc is None:
            total = 0.0
            for i, w, low, span in self.terms:
                total += w * (d[i] - low) / span
            sc = self.scored[d] = round(total, 9)
        return sc

    def _push_head(self, d):
        if self.terms is not None and d in self.by_vector:
            na, c = self.by_vector[d][0]
            heapq.heappush(self.unscored, (d[self.first] if self.first is not None else 0, na, c, d))

    def _dims(self, c, stale=()):
        """`c`'s cost vector over the complete plan (cost.PlanCost.with_candidate), from its groups'
        cached increases: only the groups in `stale` (those a commit changed) are priced again."""
        cost = self.pl.cost
        groups = self.pl.prep.groups_of[c]
        parts = self.parts.get(c)
        if parts is None:
            parts = self.parts[c] = {key: cost.delta(key, keys) for key, keys in groups.items()}
        else:
            for key in stale:
                parts[key] = cost.delta(key, groups[key])
        a = b = e = f = 0
        for x0, x1, x2, x3 in parts.values():
            a += x0
            b += x1
            e += x2
            f += x3
        return (cost.undisrupted(self.workloads_of[c]), a, b, e, f)   # dimension 0: cost.new_workloads

    def enter(self, c, d=None):
        pl = self.pl
        d = self.dims[c] = self._dims(c) if d is None else d
        self.members.add(c)
        limit = 2 * len(self.members) + 64
        for i in range(5):
            lst = self.asc[i]
            entry = (d[i], c)
            j = bisect.bisect_left(lst, entry)
            if j == len(lst) or lst[j] != entry:     # else its entry from before it left is live again
                lst.insert(j, entry)
                if len(lst) > limit:
                    self.asc[i] = [e for e in lst if self._live(i, e)]
        lst = self.by_vector.setdefault(d, [])
        entry = (-pl.prep.alloc[c], c)
        bisect.insort(lst, entry)
        if lst[0] == entry:
            self._push_head(d)

    def leave(self, c):
        if c in self.members:
            self.members.discard(c)     # its entries in `asc` are no longer live
            d = self.dims[c]
            lst = self.by_vector[d]
            j = bisect.bisect_left(lst, (-self.pl.prep.alloc[c], c))
            lst.pop(j)
            if not lst:
                del self.by_vector[d]
            elif j == 0:
                self._push_head(d)

    def unknown(self, c):
        if c not in self.pl.live or self.status.get(c) == Status.OVER_BUDGET:
            return
        if c not in self.members:
            self.enter(c)
        self.status[c] = Status.UNKNOWN

    def reopen(self, unit):
        """`unit`'s evaluation changed: candidates verified through it are unknown again."""
        for c in self.verified.pop(unit, ()):
            if self.status.get(c) != Status.UNKNOWN:
                self.unknown(c)

    def recost(self, chosen, first_workloads):
        """Candidates sharing a PodGroup with `chosen` cost differently now, and those sharing one
        of `first_workloads` (the workloads the plan disrupts since `chosen`) in dimension 0;
        those that are not members are priced afresh when they enter again."""
        pl = self.pl
        groups = pl.prep.groups_of[chosen]
        refresh = set()
        for g in groups:
            refresh |= self.by_group.get(g, set())
        for w in first_workloads:
            refresh |= self.by_group.get(w, set())
        for c in refresh:
            if c in self.members:
                d = self._dims(c, [g for g in pl.prep.groups_of[c] if g in groups])
                if d != self.dims[c]:
                    self.leave(c)
                    self.enter(c, d=d)
            else:
                self.parts.pop(c, None)

    def resolve(self, c):
        """Verify `c` now: FEASIBLE stays a member, anything else leaves."""
        pl = self.pl
        if pl.over_budget(c) is not None:
            self.status[c] = Status.OVER_BUDGET
        elif self.status[c] == Status.UNKNOWN:
            self.status[c] = Status.FEASIBLE if pl.feasible_now(c) else Status.INFEASIBLE
            self.verified.setdefault(("node", c), set()).add(c)
            if c in pl.ev.sig_of:
                self.verified.setdefault(("sig", pl.ev.sig_of[c]), set()).add(c)
        if self.status[c] != Status.FEASIBLE:
            self.leave(c)
        return self.status[c]

    def _live(self, i, entry):
        """Is `entry` of dimension `i`'s list that of a member at its current value?"""
        v, c = entry
        return c in self.members and self.dims[c][i] == v

    def _end(self, i, lowest):
        """Dimension `i`'s list with the entries that are not live dropped from the end asked for."""
        lst = self.asc[i]
        if lowest:
            k = 0
            while k < len(lst) and not self._live(i, lst[k]):
                k += 1
            if k:
                del lst[:k]
        else:
            while lst and not self._live(i, lst[-1]):
                lst.pop()
        return lst

    def _extreme(self, i, lowest):
        """The lowest (highest) value of dimension `i` over the feasible members. A member already
        verified at the extreme value settles it, so unknown members of the same value are not
        verified for it (the bound is a value, not a candidate; a member that is in fact
        infeasible is dropped when a search next reaches it). Up to EXTREME_SCAN of them are looked at."""
        status, members, dims = self.status, self.members, self.dims
        while lst := self._end(i, lowest):
            v, c = lst[0] if lowest else lst[-1]
            if status[c] != Status.FEASIBLE:
                n, seen, k, left = len(lst), 1, 1, False
                while seen < EXTREME_SCAN and k < n:        # the members after it, in order
                    v2, c2 = lst[k] if lowest else lst[n - 1 - k]
                    k += 1
                    if c2 not in members or dims[c2][i] != v2:
                        continue
                    seen += 1
                    if v2 != v:
                        break
                    if status[c2] == Status.FEASIBLE:
                        left = self.resolve(c2) != Status.FEASIBLE
                        if not left:
                            return v
                        break          # it left (over budget): look again
                if k > seen:           # dead entries among those passed over: out in one splice
                    if lowest:
                        lst[:k] = [e for e in lst[:k] if e[1] in members and dims[e[1]][i] == e[0]]
                    else:
                        lst[n - k:] = [e for e in lst[n - k:] if e[1] in members and dims[e[1]][i] == e[0]]
                if left:
                    continue
            if self.resolve(c) == Status.FEASIBLE:
                return v
        return None

    def _bounds(self):
        lo, hi = [], []
        for i in range(5):
            low = self._extreme(i, True)
            if low is None:
                return None
            lo.append(low)
            hi.append(self._extreme(i, False))
        return tuple(lo), tuple(hi)

    def rescore(self) -> bool:
        """Settle this round's min-max bounds (verifying extremes can drop candidates; the bounds
        hold once a pass changes nothing); False when no feasible candidate is left."""
        b = self._bounds()
        while b is not None and b != (b2 := self._bounds()):
            b = b2
        if b is None:
            return False
        if b != self.epoch:
            self.epoch, (lo, hi) = b, b
            self.terms = [(i, self.pl.weights[i], lo[i], hi[i] - lo[i]) for i in range(5) if hi[i] > lo[i]]
            self.scored = {}
            # the bound's term: the heaviest (the first of equal weight)
            term = max(self.terms, key=lambda t: t[1], default=None)
            first = term[0] if term else None
            self.slope = term[1] / term[3] if term else 0.0
            self.low = term[2] if term else 0
            if first != self.first or len(self.unscored) + len(self.exact) > 4 * len(self.by_vector) + 64:
                self.first = first
                self.unscored = [(d[first] if first is not None else 0, *lst[0], d)
                                 for d, lst in self.by_vector.items()]
                heapq.heapify(self.unscored)
            else:
                # the scores of the last bounds are void; their vectors wait at their bounds again
                for _, na, c, d in self.exact:
                    lst = self.by_vector.get(d)
                    if lst and lst[0] == (na, c):
                        heapq.heappush(self.unscored, (d[first] if first is not None else 0, na, c, d))
            self.exact = []
        return True

    def best(self):
        """The feasible candidate with the lowest score (ties: more R freed, then name).

        A vector is scored only when the lower bound of its score reaches the top: one term alone
        (the heaviest; the score's sum adds terms >= 0, weights being >= 0 and every member lying
        within the bounds, and float addition is monotone), less 1e-9, far more than the score's rounding to 9
        decimals and this arithmetic's float error. A bound equal to the best score is expanded
        first, so vectors of equal score come out in the tie order (-alloc, name) and candidates
        are verified in exactly the order of a full rescore.
        """
        unscored, exact = self.unscored, self.exact
        slope, low = self.slope, self.low
        while unscored or exact:
            if unscored and (not exact or (unscored[0][0] - low) * slope - 1e-9 <= exact[0][0]):
                _, na, c, d = heapq.heappop(unscored)
                lst = self.by_vector.get(d)
                if lst and lst[0] == (na, c):
                    heapq.heappush(exact, (self.score(d), na, c, d))
                continue
            _, na, c, d = heapq.heappop(exact)
            lst = self.by_vector.get(d)
            if not lst or lst[0] != (na, c):
                continue                  # stale: that vector's best member changed since
            if self.resolve(c) == Status.FEASIBLE:
                return c
        return None

def _by_group(prep):
    """PodGroup or workload key -> the candidates holding pods of it."""
    out = {}
    for c in prep.candidates:
        for g in prep.groups_of[c]:
            out.setdefault(g, set()).add(c)
            out.setdefault(prep.gangs[g].workload, set()).add(c)
    return out
