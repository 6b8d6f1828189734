"""The optimised planner (indexes, equivalence classes, lazy re-evaluation) plans exactly like the
straightforward one, which re-evaluates every candidate against a freshly sorted receiver list."""
import pytest

from bench.generate import generate
from kubectl_repack.api.status import plan_status
from planner import load_objects, plan
from tests.builders import R

SPECS = {
    "no-budget": {"mode": "DryRun", "goals": [{"resource": R}]},
    "budget": {"mode": "DryRun", "goals": [{"resource": R}], "maxPerRun": {"podGroups": 12, "resources": {R: 40}}},
    "scoped": {"mode": "DryRun", "goals": [{"resource": R}],
               "scope": {"podGroups": {"exclude": {"selector": {"matchLabels": {"repack.volcano.sh/protected": "true"}}}},
                         "nodes": {"include": {"selector": {"matchExpressions": [
                             {"key": "accelerator-pool", "operator": "In", "values": ["train-a", "infer"]}]}}}}},
}


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(SPECS))
def test_optimized_plan_identical_to_bruteforce(seed, name):
    snap = load_objects(generate(nodes=120, seed=seed))
    fast = plan(snap, SPECS[name])
    slow = plan(snap, SPECS[name], optimized=False)
    assert plan_status(fast, now="t") == plan_status(slow, now="t")
    assert fast.verdicts == slow.verdicts
    assert fast.rounds == slow.rounds
    assert fast.freed_nodes, "the generated cluster should leave something to repack"
