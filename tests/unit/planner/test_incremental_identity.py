"""Issue 23: the incremental round loop (planner.pool: prices re-computed only for the PodGroups a
commit changed, vectors scored lazily from a lower bound, bounds kept across rounds) chooses
exactly what a full rescore chooses.

The reference is `plan(..., optimized=False)`: every round evaluates every remaining candidate
afresh and normalises the whole round with cost.scores (GANG-3). The clusters cover ties (many
candidates with one cost vector, broken by allocatable and name), gangs spread over many nodes
(one commit re-prices many candidates), workloads with several PodGroups, job restarts, hard
network topology, a block goal and a targeted run.
"""
import random

import pytest

from bench.generate import generate
from kubectl_repack.api.status import plan_status
from planner import load_objects, plan
from planner.cost import GangInfo, PlanCost, group_contribution
from tests.builders import gang, node, pod, podgroup, spec

SPECS = {
    "no-budget": spec(),
    "budget": spec(max_podgroups=9, max_cards=30),
}


def _same(snap, s):
    fast = plan(snap, s)
    slow = plan(snap, s, optimized=False)
    assert plan_status(fast, now="t") == plan_status(slow, now="t")
    assert fast.verdicts == slow.verdicts
    assert fast.rounds == slow.rounds
    return fast


def _ties(nodes, seed):
    """Every node holds the same: equal cost vectors everywhere, decided by allocatable and name."""
    rng = random.Random(seed)
    objs = []
    for i in range(nodes):
        cards = rng.choice((8, 8, 16))          # allocatable breaks some ties, names the rest
        objs.append(node(f"n{i:03d}", cards=cards))
        for j in range(rng.choice((1, 2))):
            objs += gang(f"j{i:03d}-{j}", workers=[f"n{i:03d}"], cards=1)
    return objs


def _wide_gangs(nodes, seed):
    """Gangs of 2-12 workers over many nodes and workloads of several PodGroups: each commit
    re-prices the candidates of every gang it touches, and whole-job restarts."""
    rng = random.Random(seed)
    objs = [node(f"n{i:03d}", cards=8) for i in range(nodes)]
    free = {f"n{i:03d}": 8 for i in range(nodes)}
    k = 0
    while sum(free.values()) > nodes * 3:
        size = rng.randint(2, 12)
        hosts = [n for n in sorted(free) if free[n] >= 1]
        if len(hosts) < size:
            break
        workers = rng.sample(hosts, size)
        for n in workers:
            free[n] -= 1
        name = f"g{k:03d}"
        objs += gang(name, workers=workers, min_member=rng.randint(1, size),
                     owner=("Job", f"wl{k % 7}"))     # several PodGroups per workload
        k += 1
    return objs


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_ties_are_broken_as_a_full_rescore_breaks_them(seed, name):
    snap = load_objects(_ties(40, seed))
    assert _same(snap, SPECS[name]).freed_nodes


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_gangs_over_many_nodes_and_shared_workloads(seed, name):
    snap = load_objects(_wide_gangs(40, seed))
    assert _same(snap, SPECS[name]).moves


@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize("profile", ["gangs", "split"])
def test_generated_profiles(seed, profile):
    snap = load_objects(generate(nodes=60, seed=seed, profile=profile))
    _same(snap, SPECS["no-budget"])


def test_hard_network_topology_and_a_block_goal():
    from bench.topology import _instance
    objs, s, *_ = _instance(40, 21003)
    _same(load_objects(objs), s)


def test_a_targeted_run():
    from bench.relief import build, instances
    objs, s, _, _ = build(instances(4)[3])
    _same(load_objects(objs), s)


def test_a_cluster_with_no_gang_larger_than_one_pod_still_matches():
    objs = [node(f"n{i}", cards=8) for i in range(12)]
    for i in range(12):
        objs += [podgroup(f"s{i}-pg"), pod(f"s{i}", cards=1 + i % 3, on=f"n{i}", group=f"s{i}-pg")]
    _same(load_objects(objs), SPECS["no-budget"])


def test_a_commits_price_change_equals_pricing_the_union_afresh():
    """PlanCost.delta (the pool's per-group price) against group_contribution of the union, for
    every restart policy, on random gangs and random committed moves."""
    rng = random.Random(23)
    for _ in range(5000):
        n = rng.randint(1, 12)
        amounts = {f"p{i}": rng.choice((0, 1, 2, 4, 8)) for i in range(n)}
        restart = rng.choice(("", "", "task", "job"))
        g = GangInfo("ns/g", "ns/Job/w", rng.randint(0, n), rng.randint(0, n), sum(amounts.values()), amounts,
                     restart, {k: rng.choice("ab") for k in amounts})
        cost = PlanCost({"ns/g": g})
        keys = list(amounts)
        rng.shuffle(keys)
        cut = rng.randint(0, n - 1)
        if cut:
            cost.add({"ns/g": set(keys[:cut])})
        candidate = set(keys[cut:cut + rng.randint(1, n - cut)])
        new = group_contribution(g, cost.moved.get("ns/g", set()) | candidate)
        old = cost.contrib.get("ns/g", (0, 0, 0, 0))
        assert cost.delta("ns/g", candidate) == tuple(a - b for a, b in zip(new, old))
        assert cost.with_candidate({"ns/g": candidate})[1:] == tuple(a - b for a, b in zip(new, old))


class _Prep:
    """What CandidatePool reads of a Prepared snapshot, for vectors given directly."""

    def __init__(self, names, alloc):
        self.candidates, self.alloc = names, alloc
        self.groups_of = {c: {} for c in names}
        self.gangs, self.shared = {}, {}

    def once(self, name, build):
        return self.shared.setdefault(name, build())


def _pool(vectors, alloc, infeasible, weights):
    from types import SimpleNamespace

    from planner.pool import CandidatePool

    class Pool(CandidatePool):
        def _dims(self, c, stale=()):
            return vectors[c]

    names = sorted(vectors)
    pl = SimpleNamespace(prep=_Prep(names, alloc), live=set(names), weights=weights, cost=PlanCost({}),
                         gangs={}, over_budget=lambda c: None, feasible_now=lambda c: c not in infeasible,
                         ev=SimpleNamespace(sig_of={}))
    return Pool(pl)


@pytest.mark.parametrize("seed", range(40))
def test_the_pools_choice_is_a_full_rescores_choice_round_after_round(seed):
    """Random small vectors and weights that make many different vectors score exactly the same:
    each round the pool's choice is the argmin over the feasible candidates of (cost.scores of the
    round, -allocatable, name), as the reference loop picks it."""
    from planner.cost import scores

    rng = random.Random(seed)
    weights = rng.choice([(1.0, 0.5, 0.5, 0.25, 0.25), (1.0, 1.0, 1.0, 1.0, 1.0), (1.0, 0.8, 0.6, 0.3, 0.1),
                          (0.0, 0.0, 0.0, 1.0, 0.0)])
    names = [f"n{i:02d}" for i in range(rng.randint(5, 40))]
    vectors = {c: tuple(rng.randint(0, 3) for _ in range(5)) for c in names}
    alloc = {c: rng.choice((8, 16)) for c in names}
    infeasible = {c for c in names if rng.random() < 0.2}
    pool = _pool(vectors, alloc, infeasible, weights)
    left = [c for c in names if c not in infeasible]
    while left:
        assert pool.rescore()
        rows = [vectors[c] for c in left]
        sc = scores(rows, weights)
        want = min(range(len(left)), key=lambda i: (sc[i], -alloc[left[i]], left[i]))
        chosen = pool.best()
        assert chosen == left[want]
        pool.leave(chosen)
        pool.pl.live.discard(chosen)
        left.remove(chosen)
    assert not pool.rescore()


def _idle_consolidation():
    """Full receivers, one idle node, and donors holding one 2-card pod each on nodes that take no
    second pod: the idle node takes four donors, the fifth is refused everywhere, and the donors
    after it have the same shape."""
    objs = []
    for i in range(3):
        objs += [node(f"r{i}", cards=8), *gang(f"full{i}", workers=[f"r{i}"], cards=8)]
    objs.append(node("idle0", cards=8))
    for i in range(7):
        objs += [node(f"d{i}", cards=8, pods=1), *gang(f"small{i}", workers=[f"d{i}"], cards=2)]
    return load_objects(objs)


# the reference loop shares _fill with the fast one; on the generated cluster it is only slower
@pytest.mark.parametrize("cluster,optimized", [("idle-consolidation", True), ("idle-consolidation", False),
                                               ("generated-60", True)])
def test_consolidation_answers_refused_donors_as_their_traces_would(monkeypatch, cluster, optimized):
    """Consolidation onto idle nodes (rounds.Planner._fill) answers a donor whose first pod's shape
    no receiver took before without tracing it: the plans are those of tracing every donor, and
    fewer traces run."""
    from planner.candidates import CandidateEvaluator
    from planner.rounds import Planner

    snap = _idle_consolidation() if cluster == "idle-consolidation" else \
        load_objects(generate(nodes=60, seed=1, profile="gangs"))
    traces = {"n": 0}
    real = CandidateEvaluator.trace

    def counted(self, *a, **k):
        traces["n"] += 1
        return real(self, *a, **k)

    monkeypatch.setattr(CandidateEvaluator, "trace", counted)
    with_shortcut = plan(snap, SPECS["no-budget"], optimized=optimized)
    with_n, traces["n"] = traces["n"], 0
    monkeypatch.setattr(Planner, "answer_refusals", False)
    without = plan(snap, SPECS["no-budget"], optimized=optimized)
    assert plan_status(with_shortcut, now="t") == plan_status(without, now="t")
    assert with_shortcut.verdicts == without.verdicts
    assert with_shortcut.notes == without.notes
    if cluster == "idle-consolidation":
        assert with_shortcut.notes == ("idle node(s) idle0 re-occupied: they take the pods of 4 nodes "
                                       "(d0, d1, d2, d3)",)
    assert with_n < traces["n"]
