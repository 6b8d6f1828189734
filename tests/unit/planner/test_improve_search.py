"""The improvement phase's search on small clusters (issue 15): idle nodes opened from the start,
and proposals from a pass in ascending R. Each case is a seeded instance of the quality benchmark
(`bench.quality.instances`) where the greedy pass and the local search alone free one net node
less than the MILP optimum (docs/benchmarks.md)."""
from bench.generate import generate
from bench.quality import ALL_VARIANTS
from planner import load_objects, plan


def net(p):
    return len(p.freed_nodes) - len(p.reoccupied)


def test_a_covered_idle_node_is_filled_when_that_frees_more():
    # w132: the MILP optimum (9 net) fills one idle node that the freed nodes cover (RELIEF-4), and
    # so does the planner. (w015, where a pass with an untainted spare open from the start freed 7 net,
    # filled the spare with tainted teams' pods: under the rule its optimum is 5, which every pass reaches.)
    p = plan(load_objects(generate(64, 8132, profile="split")), ALL_VARIANTS["scoped-nodes"])
    assert net(p) == 9
    assert len(p.reoccupied) == 1 and len(p.freed_nodes) == 10
    assert p.occupied_after == p.occupied_before - net(p)
    assert p.freed_capacity


def test_size_ordered_proposal_within_a_card_budget():
    # w008: with maxPerRun 32 cards, the nodes that can be vacated together with the fewest cards
    # free 8; GANG-3's order (cheapest disruption first) spends the cards on 7.
    p = plan(load_objects(generate(80, 8008, profile="base")), ALL_VARIANTS["cards32"])
    assert net(p) == 8
    assert p.moved_cards <= 32


def test_at_the_same_net_freed_a_pass_that_reoccupies_no_idle_node_wins():
    # PLAN-2 rule 1: filling an idle node must raise net freed; a pass that frees one node more by
    # filling one idle node, with less disruption, does not beat the pass that fills none.
    from types import SimpleNamespace

    from planner.cost import DEFAULT_WEIGHTS, GangInfo
    from planner.improve import plan_key
    gangs = {"default/g": GangInfo("default/g", "default/Job/g", 2, 0, 2, {"default/p": 1, "default/q": 1})}
    pod = SimpleNamespace(namespace="default", group_name="g", key="default/p")
    # no block goal; the freed nodes cover the idle node ("spare") unless "e" is among them
    prep = SimpleNamespace(blocks=None, cover=SimpleNamespace(
        uncovered=lambda freed, reoccupied: int(bool(reoccupied) and "e" in freed)))
    plain = SimpleNamespace(freed=["a", "b"], reoccupied=[], moves=[SimpleNamespace(pod=pod)], gangs=gangs,
                            weights=DEFAULT_WEIGHTS, prep=prep)
    filling = SimpleNamespace(freed=["a", "b", "c"], reoccupied=["spare"], moves=[], gangs=gangs,
                              weights=DEFAULT_WEIGHTS, prep=prep)
    assert plan_key(plain) < plan_key(filling)
    more = SimpleNamespace(freed=["a", "b", "c", "d"], reoccupied=["spare"], moves=[], gangs=gangs,
                           weights=DEFAULT_WEIGHTS, prep=prep)
    assert plan_key(more) < plan_key(plain)       # it does when it raises net freed
    # RELIEF-4: not when the freed nodes do not cover the idle one, however many they are
    uncovered = SimpleNamespace(freed=["a", "b", "c", "d", "e"], reoccupied=["spare"], moves=[], gangs=gangs,
                                weights=DEFAULT_WEIGHTS, prep=prep)
    assert plan_key(plain) < plan_key(uncovered)
