"""The improvement phase's search on small clusters (issue 15): idle nodes opened from the start,
and proposals from a pass in ascending R. Each case is a seeded instance of the quality benchmark
(`bench.quality.instances`) where the greedy pass and the local search alone free one net node
less than the MILP optimum (docs/benchmarks.md)."""
from bench.generate import generate
from bench.quality import ALL_VARIANTS
from planner import load_objects, plan


def net(p):
    return len(p.freed_nodes) - len(p.reoccupied)


def test_idle_node_opened_from_the_start():
    # w015: teams of nodes split by taints and idle untainted spares. Packing each team first leaves
    # leftovers that do not pair up on a spare; a pass with a spare open from the start frees 7 net.
    p = plan(load_objects(generate(24, 8015, profile="split")), ALL_VARIANTS["none"])
    assert net(p) == 7
    assert p.reoccupied and len(p.freed_nodes) > len(p.reoccupied) + 1
    assert p.occupied_after == p.occupied_before - net(p)


def test_size_ordered_proposal_within_a_card_budget():
    # w008: with maxPerRun 32 cards, the nodes that can be vacated together with the fewest cards
    # free 8; GANG-3's order (cheapest disruption first) spends the cards on 7.
    p = plan(load_objects(generate(80, 8008, profile="base")), ALL_VARIANTS["cards32"])
    assert net(p) == 8
    assert p.moved_cards <= 32
