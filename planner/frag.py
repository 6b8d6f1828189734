"""Fragmentation of one resource R (FRAG-1..3): providers, occupied nodes and the exact minimum.

theoreticalMin is one-dimensional bin packing with heterogeneous bins. k bins suffice iff the k
largest bins suffice (map any packing's j-th largest bin onto the j-th largest overall), so we look
for the smallest feasible k: a lower bound, a best-fit packing, and a bounded exact search between.
"""
from dataclasses import dataclass
from fractions import Fraction

SEARCH_BUDGET = 200_000
EXACT_ITEMS_LIMIT = 400  # the search recurses once per item


@dataclass(frozen=True)
class MinimumResult:
    """The fewest bins found, and whether it is proven (lower bound met by a packing or by search)."""
    value: int
    exact: bool
    lower_bound: int
    upper_bound: int


def _best_fit(items, caps) -> bool:
    """Best-fit decreasing; bins are interchangeable once only their free space matters."""
    free = {}
    for c in caps:
        free[c] = free.get(c, 0) + 1
    for s in items:
        best = None
        for f in free:
            if f >= s and (best is None or f < best):
                best = f
        if best is None:
            return False
        free[best] -= 1
        if not free[best]:
            del free[best]
        free[best - s] = free.get(best - s, 0) + 1
    return True


def _exact_fits(items, caps, budget):
    """Depth-first search with symmetry pruning. Returns True/False, or None when the budget runs out."""
    free = list(caps)
    steps = [0]
    suffix = [0] * (len(items) + 1)
    for i in range(len(items) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + items[i]

    def place(i):
        if i == len(items):
            return True
        steps[0] += 1
        if steps[0] > budget:
            raise TimeoutError
        if sum(free) < suffix[i]:
            return False
        tried = set()
        s = items[i]
        for b in range(len(free)):
            f = free[b]
            if f < s or f in tried:
                continue
            tried.add(f)
            free[b] -= s
            if place(i + 1):
                return True
            free[b] += s
        return False

    try:
        return place(0)
    except TimeoutError:
        return None


def theoretical_min(items, capacities, budget=SEARCH_BUDGET) -> MinimumResult:
    """Fewest bins (from `capacities`) that hold every item; never above the true optimum."""
    items = sorted((s for s in items if s > 0), reverse=True)
    caps = sorted((c for c in capacities if c > 0), reverse=True)
    if not items:
        return MinimumResult(0, True, 0, 0)
    total = sum(items)
    if not caps or items[0] > caps[0] or total > sum(caps):
        # Infeasible even with every node: report the honest bound, flagged inexact.
        return MinimumResult(len(caps), False, len(caps), len(caps))
    k, acc = 0, 0
    while acc < total:
        acc += caps[k]
        k += 1
    big = sum(1 for s in items if 2 * s > caps[0])
    lower = max(k, big, 1)
    if lower > len(caps):
        return MinimumResult(len(caps), False, len(caps), len(caps))
    upper = next((j for j in range(lower, len(caps) + 1) if _best_fit(items, caps[:j])), len(caps))
    if upper == lower:
        return MinimumResult(lower, True, lower, upper)
    proven = lower
    if len(items) > EXACT_ITEMS_LIMIT:
        return MinimumResult(proven, False, proven, upper)
    for j in range(lower, upper):
        found = _exact_fits(items, caps[:j], budget)
        if found is None:
            return MinimumResult(proven, False, proven, upper)
        if found:
            return MinimumResult(j, True, j, j)
        proven = j + 1
    return MinimumResult(upper, True, upper, upper)


def frag_percent(occupied: int, minimum: int, providers: int) -> Fraction:
    """frag(R) = (occupied - theoreticalMin) / providers * 100, exact."""
    if providers == 0:
        return Fraction(0)
    return Fraction(max(occupied - minimum, 0) * 100, providers)


def percent_int(value: Fraction) -> int:
    """Round half up to the int32 percent the RepackRun API carries."""
    return int((value * 2 + 1) // 2)


def usage(snapshot, resource):
    """Per provider node: (allocatable R, R requested by bound non-terminal pods); and R pod sizes."""
    alloc = {n.name: n.allocatable.get(resource, 0) for n in snapshot.nodes if n.allocatable.get(resource, 0) > 0}
    used, items = {}, []
    for p in snapshot.pods:
        r = p.requests.get(resource, 0)
        if r > 0 and p.node_name and not p.terminal:
            used[p.node_name] = used.get(p.node_name, 0) + r
            items.append(r)
    return alloc, used, items
