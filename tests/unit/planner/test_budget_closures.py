"""The budget alternatives' closures (planner.improve._Closures) give what a walk of every
candidate of the set's PodGroups gives, and ask the bounded feasibility check about the same
candidates: with a check budget that runs out part way (the order of asking then decides which
are checked), one that suffices, and one already spent."""
import random

import pytest

from planner.improve import _Closures, _Feasible


def _walk(u, groups, by_group, feasible, check):
    """The reference: u's by_group lists in order, a candidate kept at its first sighting."""
    seen = set()
    for g in u:
        for c in by_group[g]:
            if c not in seen and groups[c] <= u and (not check or feasible(c)):
                seen.add(c)
    return seen


def _instance(seed):
    rng = random.Random(seed)
    names = [f"g{i}" for i in range(rng.randint(3, 12))]
    cands = [f"n{i:02d}" for i in range(rng.randint(5, 40))]
    groups = {c: frozenset(rng.sample(names, rng.randint(1, min(3, len(names))))) for c in cands}
    verdict = {c: rng.random() < 0.7 for c in cands}
    sets = []
    for _ in range(40):
        k = rng.randint(1, len(names))
        sets.append((frozenset(rng.sample(names, k)), rng.random() < 0.7))
    return cands, groups, verdict, sets


@pytest.mark.parametrize("seed", range(60))
@pytest.mark.parametrize("limit", [0, 1, 3, 7, 1000])
def test_closures_match_the_walk_and_spend_the_same_checks(seed, limit):
    cands, groups, verdict, sets = _instance(seed)
    by_group = {}
    for c in cands:
        for g in groups[c]:
            by_group.setdefault(g, []).append(c)
    asked_fast, asked_ref = [], []
    fast = _Feasible(lambda c: asked_fast.append(c) or verdict[c], limit)
    ref = _Feasible(lambda c: asked_ref.append(c) or verdict[c], limit)
    closures = _Closures(cands, groups, fast)
    for u, check in sets:
        if not all(g in by_group for g in u):
            continue
        assert closures(u, check) == _walk(u, groups, by_group, ref, check)
        # the same candidates checked (each once; checks are pure, so their order is free)
        assert sorted(asked_fast) == sorted(asked_ref) and len(set(asked_fast)) == len(asked_fast)
        assert fast.memo == ref.memo and fast.left == ref.left
