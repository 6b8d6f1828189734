"""Hostile RepackRun files, generated from the CRD's own schema: every field of a run that sets
all of them, replaced by a value of the wrong type, outside its bounds, not in its enum or not
matching its pattern, and an unknown field beside each object's fields. Each file goes to
`kubectl repack plan -f` and must be refused by the one oracle (exit 2, the field named kubectl
style, no traceback, no cluster call). The schema walk is the CRD's, so a field added to the CRD
is mutated here without a change to this file.
"""
from __future__ import annotations

import copy
import json
import re

import pytest

from kubectl_repack import schema

from .oracle import assert_refused, invoke, recorder  # noqa: F401 - fixture

R = "huawei.com/ascend-1980"
SELECTOR = {"matchLabels": {"team": "a"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]}
PODGROUPS = {"include": {"selector": SELECTOR, "names": ["team-a/a"]},
             "exclude": {"selector": SELECTOR, "names": ["team-a/b"]}}
NODES = {"include": {"selector": SELECTOR, "names": ["node-a"]}, "exclude": {"selector": SELECTOR, "names": ["node-b"]}}
BASE = json.loads(json.dumps({
    "apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": "hostile"},
    "spec": {"mode": "DryRun", "goals": [{"resource": R, "minFragImprovementPercent": 10}],
             "scope": {"podGroups": PODGROUPS, "nodes": NODES},
             "networkTopology": {"hyperNodeTierName": "rack", "nodeBlockSize": 2, "requiredNodeBlocks": 1,
                                 "mode": "binpack"},
             "maxPerRun": {"podGroups": 2, "resources": {R: 8}},
             "eviction": {"gracePeriodSeconds": 30}, "ttlSecondsAfterFinished": 600}}))
WRONG = {"string": [5, True, ["x"], {"k": "v"}], "integer": ["5", 1.5, True, [1], {"n": 1}],
         "object": ["text", 5, ["x"]], "array": ["text", 5, {"k": "v"}],
         None: [True, ["8"], {"n": 1}, "eight", "8 cards", "2GB"]}  # quantities (int-or-string)


def _walk(value, node, path=()):
    """(path, value, schema node) of every value under spec, with the schema node describing it."""
    yield path, value, node
    if isinstance(value, dict):
        props, extra = node.get("properties", {}), node.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else {})
            yield from _walk(item, sub, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _walk(item, node.get("items", {}), path + (i,))


def _render(path, spec_schema):
    out, node = "spec", spec_schema
    for element in path:
        if isinstance(element, int):
            out, node = out + f"[{element}]", node.get("items", {})
        elif element in node.get("properties", {}):
            out, node = out + f".{element}", node["properties"][element]
        else:
            out, node = out + f"[{element}]", node.get("additionalProperties", {})
    return out


def _bad_values(node):
    kind = node.get("type")
    values = list(WRONG.get(kind, WRONG[None] if node.get("x-kubernetes-int-or-string") else []))
    if "enum" in node:
        values.append("Bogus")
    if "minimum" in node:
        values.append(node["minimum"] - 1)
    if "maximum" in node:
        values.append(node["maximum"] + 1)
    if node.get("pattern") == "/":
        values.append("gpu")
    if "maxItems" in node:
        values.append(["x"] * (node["maxItems"] + 1))
    return values


def _cases():
    spec_schema = schema.spec_schema()
    for path, value, node in _walk(BASE["spec"], spec_schema):
        if path:
            for n, bad in enumerate(_bad_values(node)):
                yield pytest.param(path, bad, _render(path, spec_schema),
                                   id=f"{_render(path, spec_schema)}={json.dumps(bad)[:16]}#{n}")
        if isinstance(value, dict) and node.get("properties"):
            yield pytest.param(path + ("bogusField",), 1, _render(path, spec_schema) + ".bogusField",
                               id=f"{_render(path, spec_schema)}.bogusField")


CASES = list(_cases())


def _write(tmp_path, run):
    path = tmp_path / "run.yaml"
    path.write_text(json.dumps(run))
    return path


def _set(obj, path, value):
    for element in path[:-1]:
        obj = obj[element]
    obj[path[-1]] = value


def test_the_base_run_plans_cleanly(tmp_path, recorder):
    # its block goal needs HyperNodes: the topology example has tier-1 HyperNodes named "rack"
    r = invoke(["plan", "-f", _write(tmp_path, BASE), "--snapshot", "examples/topology-8-nodes.yaml"])
    assert r.exit_code == 0, r.output
    assert recorder.calls == []


def test_there_are_hundreds_of_cases():
    assert len(CASES) >= 200


@pytest.mark.parametrize("path, bad, rendered", CASES)
def test_mutated_field_is_refused_naming_it(tmp_path, recorder, path, bad, rendered):
    run = copy.deepcopy(BASE)
    _set(run["spec"], path, bad)
    r = invoke(["plan", "-f", _write(tmp_path, run), "--snapshot", "examples/seed-3-nodes.yaml"])
    assert_refused(r, recorder, re.compile(r"^error: " + re.escape(rendered) + r"(:|\[| )"))
