"""The fast path for valid objects (kubectl_repack.schema.conforms) says exactly what jsonschema says.

`conforms(value, schema)` must be True exactly when the jsonschema Draft 7 validator finds no error
(it may never accept what jsonschema refuses, and it should not send valid objects to the slow
path). Held on the whole corpus, and on objects made from the valid corpus by putting generated
values at generated places (wrong types, bool-for-int, 10.0 for 10, NaN, boundaries, unknown
fields, nulls), under the RepackRun, its spec and the RepackPolicy schemas.
"""
import copy
import subprocess
import sys
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubectl_repack import policy_schema, schema

HERE = Path(__file__).parent
REPO = HERE.parents[2]
SAMPLES = sorted((REPO / "config" / "samples").glob("*.yaml")) + sorted((HERE / "valid").iterdir()) + \
    sorted(p for p in (HERE / "invalid").iterdir() if p.suffix in (".yaml", ".json"))


def _documents(path):
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    except yaml.YAMLError:
        return []


DOCS = [d for p in SAMPLES for d in _documents(p)]
RUNS = [d for d in DOCS if d.get("kind") != "RepackPolicy"]
POLICIES = [d for d in DOCS if d.get("kind") == "RepackPolicy"]


def _schemas():
    run = schema._run_schema_cached()
    return {"run": run, "spec": run["properties"]["spec"], "policy": policy_schema._converted()}


def _jsonschema_valid(value, node):
    return not any(True for _ in schema._validator_for(node).iter_errors(value))


def _agree(value, node):
    fast = schema.conforms(value, node)
    assert fast == _jsonschema_valid(value, node), (fast, value)
    return fast


def test_the_fast_path_knows_every_keyword_of_the_shipped_schemas():
    for name, node in _schemas().items():
        assert schema._supported(node), name


def test_corpus_agrees_and_the_valid_samples_take_the_fast_path():
    nodes = _schemas()
    assert len(RUNS) > 60 and POLICIES
    accepted = 0
    for doc in RUNS:
        stored = schema._as_stored(doc, nodes["run"])
        accepted += _agree(stored, nodes["run"])
        if isinstance(stored.get("spec"), dict):
            _agree(stored["spec"], nodes["spec"])
    for doc in POLICIES:
        _agree(schema._as_stored(doc, nodes["policy"]), nodes["policy"])
    assert accepted >= 20      # the valid samples conform without jsonschema


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 300), st.sampled_from([0, 1, 0.0, 1.0, 10.0, 2.5, -1, 2**70]),
    st.floats(allow_infinity=True, allow_nan=True),
    st.sampled_from(["", "x", "DryRun", "Execute", "nvidia.com/gpu", "huawei.com/ascend-1980", "8", "500m",
                     "2Gi", "-1", "binpack", "spread", "a" * 300, "ns/pg", "Ns/Pg", "k=v", "In", "Exists"]),
    st.text(max_size=6))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3),
    st.dictionaries(st.sampled_from(["resource", "podGroups", "resources", "mode", "name", "values",
                                     "key", "operator", "unknown", "hyperNodeTier", "matchLabels"]),
                    inner, max_size=3)), max_leaves=6)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _put(doc, path, key, new, delete):
    out = copy.deepcopy(doc)
    node = out
    for step in path:
        node = node[step]
    if isinstance(node, dict):
        if delete and node:
            node.pop(sorted(node, key=str)[key % len(node)])
        else:
            names = sorted(node, key=str) + ["extra"]
            node[names[key % len(names)]] = new
    elif isinstance(node, list):
        if delete and node:
            node.pop(key % len(node))
        elif node:
            node[key % len(node)] = new
        else:
            node.append(new)
    return out


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_objects_agree(data):
    nodes = _schemas()
    which = data.draw(st.sampled_from(["run", "spec", "policy"]))
    docs = POLICIES if which == "policy" else RUNS
    doc = data.draw(st.sampled_from(docs))
    if which == "spec":
        doc = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
    for _ in range(data.draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc)]
        path = data.draw(st.sampled_from(paths))
        parent = path[:-1] if path and data.draw(st.booleans()) else path
        doc = _put(doc, parent, data.draw(st.integers(0, 50)), data.draw(VALUES), data.draw(st.booleans()))
    _agree(doc, nodes[which])


def test_bool_and_number_corners():
    node = {"type": "object", "properties": {
        "n": {"type": "integer", "minimum": 0, "maximum": 10},
        "e": {"enum": [1, "a", False]}, "q": {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^[0-9]+$"},
        "o": {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "s": {"type": "string", "minLength": 1, "maxLength": 3},
        "l": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "m": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer"}},
        "a": {"allOf": [{"minimum": 1}, {"maximum": 2}]}}, "additionalProperties": False}
    for value in ({"s": ""}, {"s": "abc"}, {"s": "abcd"}, {"s": 3}, {"l": []}, {"l": ["a"]}, {"l": ["a", "b", "c"]},
                  {"l": [1]}, {"l": "a"}, {"m": {}}, {"m": {"x": 1}}, {"m": {"x": 1, "y": 2}}, {"m": {"x": "1"}},
                  {"a": 0}, {"a": 1.5}, {"a": 3}, {"a": "3"},
{"n": True}, {"n": 10.0}, {"n": 10.5}, {"n": float("nan")}, {"n": -0.0}, {"n": 11},
                  {"e": True}, {"e": 1.0}, {"e": 0}, {"e": False}, {"e": "a"}, {"e": None},
                  {"q": "12"}, {"q": "1x"}, {"q": 3.0}, {"q": True},
                  {"o": {"a": 1}}, {"o": {"a": 1, "b": 2}}, {"o": {}}, {"o": 5}, {"x": 1}, [], None):
        _agree(value, node)


def test_the_cross_field_rules_agree():
    nodes = _schemas()
    base = {"mode": "DryRun", "goals": [{"resource": "nvidia.com/gpu"}]}
    for extra in ({"maxPerRun": {"resources": {"nvidia.com/gpu": "8"}}},
                  {"maxPerRun": {"resources": {"huawei.com/ascend-1980": "8"}}},
                  {"target": {"podGroups": ["ns/pg"]}},
                  {"target": {"podGroups": ["ns/pg"]}, "networkTopology": {"hyperNodeTier": 1}},
                  {"networkTopology": {"hyperNodeTier": 1}},
                  {"networkTopology": {"hyperNodeTier": 1, "hyperNodeTierName": "rack"}},
                  {"networkTopology": {}}):
        _agree({**base, **extra}, nodes["spec"])
    assert not schema.conforms({**base, "maxPerRun": {"resources": {"x.io/y": "8"}}}, nodes["spec"])


def test_a_keyword_the_fast_path_does_not_know_sends_every_object_to_jsonschema():
    node = {"type": "object", "properties": {"a": {"type": "integer", "multipleOf": 2}}}
    assert not schema._supported(node)
    assert not schema.conforms({"a": 3}, node) and not schema.conforms({"a": 2}, node)
    assert not _jsonschema_valid({"a": 3}, node)


def test_a_valid_run_is_validated_without_importing_jsonschema():
    code = ("import sys; from kubectl_repack import schema; "
            "schema.validate_spec({'mode': 'DryRun', 'goals': [{'resource': 'nvidia.com/gpu'}]}); "
            "assert 'jsonschema' not in sys.modules, 'imported'; "
            "import kubectl_repack.errors as e\n"
            "try:\n schema.validate_spec({'mode': 'DryRun', 'goals': [{'resource': 'gpu'}]})\n"
            "except e.ValidationError as x: print(x)\n"
            "assert 'jsonschema' in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert "spec.goals[0].resource" in out.stdout
