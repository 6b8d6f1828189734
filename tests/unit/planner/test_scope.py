"""Scope (SCOPE-1..2): names ∪ selector, exclude wins, absent include = everything; malformed -> SpecError."""
from types import SimpleNamespace

import pytest

from planner.errors import SpecError
from planner.scope import Scope


def pg(key, **labels):
    ns, name = key.split("/")
    return SimpleNamespace(key=key, namespace=ns, name=name, labels=labels)


def nd(name, **labels):
    return SimpleNamespace(name=name, labels=labels)


GROUPS = [pg("ml/a", team="x"), pg("ml/b", team="y"), pg("dev/c", team="x", tier="low"), pg("dev/d")]

PODGROUP_CASES = [
    ("absent-scope-everything", None, {"ml/a", "ml/b", "dev/c", "dev/d"}),
    ("absent-include-everything", {"podGroups": {"exclude": {"names": ["ml/b"]}}}, {"ml/a", "dev/c", "dev/d"}),
    ("names-only", {"podGroups": {"include": {"names": ["ml/a", "dev/d"]}}}, {"ml/a", "dev/d"}),
    ("names-are-namespace-qualified", {"podGroups": {"include": {"names": ["dev/a"]}}}, set()),
    ("selector-only", {"podGroups": {"include": {"selector": {"matchLabels": {"team": "x"}}}}}, {"ml/a", "dev/c"}),
    ("names-union-selector", {"podGroups": {"include": {"names": ["ml/b"], "selector": {"matchLabels": {"team": "x"}}}}},
     {"ml/a", "ml/b", "dev/c"}),
    ("exclude-wins-over-name", {"podGroups": {"include": {"names": ["ml/a", "ml/b"]}, "exclude": {"names": ["ml/a"]}}},
     {"ml/b"}),
    ("exclude-selector-wins", {"podGroups": {"include": {"selector": {"matchLabels": {"team": "x"}}},
                                             "exclude": {"selector": {"matchExpressions": [
                                                 {"key": "tier", "operator": "In", "values": ["low"]}]}}}},
     {"ml/a"}),
    ("exclude-union", {"podGroups": {"exclude": {"names": ["ml/a"], "selector": {"matchExpressions": [
        {"key": "team", "operator": "DoesNotExist"}]}}}}, {"ml/b", "dev/c"}),
    ("include-notin", {"podGroups": {"include": {"selector": {"matchExpressions": [
        {"key": "team", "operator": "NotIn", "values": ["x"]}]}}}}, {"ml/b", "dev/d"}),
    ("include-exists", {"podGroups": {"include": {"selector": {"matchExpressions": [
        {"key": "team", "operator": "Exists"}]}}}}, {"ml/a", "ml/b", "dev/c"}),
    ("empty-selector-matches-all", {"podGroups": {"include": {"selector": {}}}}, {"ml/a", "ml/b", "dev/c", "dev/d"}),
    ("empty-include-object-is-absent", {"podGroups": {"include": {}}}, {"ml/a", "ml/b", "dev/c", "dev/d"}),
    ("empty-exclude-excludes-nothing", {"podGroups": {"exclude": {}}}, {"ml/a", "ml/b", "dev/c", "dev/d"}),
    ("nodes-axis-does-not-limit-podgroups", {"nodes": {"include": {"names": ["n1"]}}},
     {"ml/a", "ml/b", "dev/c", "dev/d"}),
]


@pytest.mark.parametrize("scope,want", [c[1:] for c in PODGROUP_CASES], ids=[c[0] for c in PODGROUP_CASES])
def test_podgroups(scope, want):
    s = Scope.from_spec(scope)
    assert {g.key for g in GROUPS if s.podgroup_in_scope(g)} == want


NODES = [nd("n1", pool="a"), nd("n2", pool="b"), nd("n3", pool="a", hold="yes"), nd("n4")]

NODE_CASES = [
    ("absent", {}, {"n1", "n2", "n3", "n4"}),
    ("plain-names", {"nodes": {"include": {"names": ["n2", "n4"]}}}, {"n2", "n4"}),
    ("selector", {"nodes": {"include": {"selector": {"matchLabels": {"pool": "a"}}}}}, {"n1", "n3"}),
    ("names-union-selector", {"nodes": {"include": {"names": ["n4"], "selector": {"matchLabels": {"pool": "a"}}}}},
     {"n1", "n3", "n4"}),
    ("exclude-wins", {"nodes": {"include": {"selector": {"matchLabels": {"pool": "a"}}},
                                "exclude": {"selector": {"matchExpressions": [{"key": "hold", "operator": "Exists"}]}}}},
     {"n1"}),
    ("exclude-only", {"nodes": {"exclude": {"names": ["n1"]}}}, {"n2", "n3", "n4"}),
    ("podgroups-axis-does-not-limit-nodes", {"podGroups": {"include": {"names": ["ml/a"]}}}, {"n1", "n2", "n3", "n4"}),
]


@pytest.mark.parametrize("scope,want", [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_nodes(scope, want):
    s = Scope.from_spec(scope)
    assert {n.name for n in NODES if s.node_in_scope(n)} == want


INVALID = [
    ("scope-not-object", ["x"], "spec.scope: expected an object"),
    ("axis-not-object", {"nodes": "n1"}, "spec.scope.nodes: expected an object with include/exclude"),
    ("include-not-object", {"nodes": {"include": ["n1"]}}, "spec.scope.nodes.include: expected an object"),
    ("names-not-list", {"nodes": {"include": {"names": "n1"}}}, "spec.scope.nodes.include.names: expected a list"),
    ("name-not-string", {"nodes": {"exclude": {"names": ["n1", {"n": 2}]}}},
     "spec.scope.nodes.exclude.names[1]: expected a non-empty string"),
    ("podgroup-name-unqualified", {"podGroups": {"include": {"names": ["pg1"]}}},
     "spec.scope.podGroups.include.names[0]: expected namespace/name, got 'pg1'"),
    ("podgroup-name-two-slashes", {"podGroups": {"exclude": {"names": ["a/b/c"]}}},
     "spec.scope.podGroups.exclude.names[0]: expected namespace/name"),
    ("selector-not-object", {"nodes": {"include": {"selector": "pool=a"}}},
     "spec.scope.nodes.include.selector: expected a label selector object"),
    ("match-labels-not-map", {"nodes": {"include": {"selector": {"matchLabels": ["a"]}}}},
     "spec.scope.nodes.include.selector.matchLabels: expected a map of strings"),
    ("match-label-value-not-string", {"nodes": {"include": {"selector": {"matchLabels": {"pool": 1}}}}},
     "spec.scope.nodes.include.selector.matchLabels.pool: expected a string, got int"),
    ("expressions-not-list", {"nodes": {"include": {"selector": {"matchExpressions": {"key": "a"}}}}},
     "spec.scope.nodes.include.selector.matchExpressions: expected a list"),
    ("expression-missing-operator", {"nodes": {"include": {"selector": {"matchExpressions": [{"key": "a"}]}}}},
     "spec.scope.nodes.include.selector.matchExpressions[0]: key and operator are required"),
    ("expression-unknown-operator", {"podGroups": {"include": {"selector": {"matchExpressions": [
        {"key": "a", "operator": "Gt", "values": ["1"]}]}}}},
     "spec.scope.podGroups.include.selector.matchExpressions[0].operator: unknown operator 'Gt'"),
    ("in-without-values", {"nodes": {"include": {"selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}}},
     "spec.scope.nodes.include.selector.matchExpressions[0].values: must be specified when operator is In"),
    ("exists-with-values", {"nodes": {"include": {"selector": {"matchExpressions": [
        {"key": "a", "operator": "Exists", "values": ["x"]}]}}}},
     "spec.scope.nodes.include.selector.matchExpressions[0].values: may not be specified when operator is Exists"),
    ("values-not-strings", {"nodes": {"include": {"selector": {"matchExpressions": [
        {"key": "a", "operator": "In", "values": [1]}]}}}},
     "spec.scope.nodes.include.selector.matchExpressions[0].values: expected a list of strings"),
]


@pytest.mark.parametrize("scope,message", [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_scope(scope, message):
    with pytest.raises(SpecError) as e:
        Scope.from_spec(scope)
    assert str(e.value).startswith(message)
