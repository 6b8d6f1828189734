"""Hostile snapshot objects, generated: every field the loader reads, replaced by values of the
wrong type or out of the range the API server allows, in a snapshot file given to
`kubectl repack plan --snapshot`. Each must be refused by the one oracle (exit 2, `error:` naming
the object and the field or its parent, no traceback, no cluster call).

The base objects carry only fields the planner reads, so no mutation can hit an ignored field
and pass for the wrong reason; the base snapshot itself must plan cleanly (checked first).
"""
from __future__ import annotations

import copy
import json
import re

import pytest

from .oracle import assert_refused, invoke, recorder  # noqa: F401 - fixture

R = "huawei.com/ascend-1980"
SELECTOR = {"matchLabels": {"app": "a"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]}
NODE_TERMS = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}]}
META = {"namespace": "team-a", "labels": {"app": "a"}}

BASE = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}},
    {"apiVersion": "v1", "kind": "Node",
     "metadata": {"name": "n1", "labels": {"pool": "a", "zone": "z1"}},
     "spec": {"unschedulable": False, "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
     "status": {"allocatable": {R: "8", "cpu": "32", "memory": "256Gi", "pods": "110"}}},
    {"apiVersion": "v1", "kind": "Pod",
     "metadata": {"name": "p1", "uid": "u-1", "namespace": "team-a", "labels": {"app": "a"},
                  "annotations": {"scheduling.k8s.io/group-name": "pg1"},
                  "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                       "name": "j1", "controller": True}]},
     "spec": {
         "nodeName": "n1", "schedulerName": "volcano", "priority": 10, "nodeSelector": {"pool": "a"},
         "containers": [{"resources": {"requests": {R: "2", "cpu": "1"}, "limits": {R: "2"}},
                         "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP",
                                    "hostIP": "0.0.0.0"}]}],
         "initContainers": [{"restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}}],
         "overhead": {"cpu": "10m"},
         "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule",
                          "tolerationSeconds": 30}],
         "affinity": {
             "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": NODE_TERMS},
             "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                 {"labelSelector": {"matchLabels": {"app": "b"}}, "topologyKey": "kubernetes.io/hostname",
                  "namespaces": ["team-a"], "namespaceSelector": {"matchLabels": {"env": "prod"}}}]}},
         "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                        "labelSelector": SELECTOR, "minDomains": 1,
                                        "nodeAffinityPolicy": "Honor", "nodeTaintsPolicy": "Ignore"}],
         "volumes": [{"persistentVolumeClaim": {"claimName": "c1"}}]},
     "status": {"phase": "Running"}},
    {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
     "metadata": {"name": "pg1", **META,
                  "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                       "name": "j1", "controller": True}]},
     "spec": {"minMember": 1}},
    {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
     "spec": {"nodeAffinity": {"required": NODE_TERMS}, "local": {}}},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c1", "namespace": "team-a"},
     "spec": {"volumeName": "pv1"}},
    {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "pdb1", "namespace": "team-a"},
     "spec": {"selector": SELECTOR}, "status": {"disruptionsAllowed": 1}},
    {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j1", **META},
     "spec": {"policies": [{"event": "PodEvicted", "action": "RestartJob"}],
              "tasks": [{"name": "worker", "policies": [{"events": ["PodEvicted"], "action": "RestartTask"}]}]}},
    {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing",
     "metadata": {"name": "ms1", **META}, "spec": {"recoveryPolicy": "ServingGroupRecreate"}},
]
BASE = json.loads(json.dumps(BASE))  # no object shared between two places: a mutation hits one field

# Values of the wrong type, by the type of the value they replace.
WRONG = {
    str: [5, True, ["x"], {"k": "v"}],
    bool: ["true", 1, [True]],
    int: ["5", 1.5, [1], {"n": 1}, True],
    dict: ["text", 5, ["x"]],
    list: ["text", 5, {"k": "v"}],
}
QUANTITY_PARENTS = {"requests", "limits", "allocatable", "overhead", "capacity"}
WRONG_QUANTITY = ["lots", "-1", -1, "8 cards", ["8"], {"n": 1}, True]
# Integers the API server refuses as out of range (int32 fields, port ranges, minimums).
OUT_OF_RANGE = {"priority": [2 ** 31, -(2 ** 31) - 1], "hostPort": [70000, -1],
                "containerPort": [65536], "minMember": [-1, 2 ** 31], "maxSkew": [0, 2 ** 31],
                "minDomains": [0], "disruptionsAllowed": [2 ** 31], "tolerationSeconds": [2 ** 63]}


def _leaves(value, path=()):
    """(path, value) of every value in the object, containers included."""
    yield path, value
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _leaves(item, path + (i,))


def _render(path):
    out = ""
    for element in path:
        out += f"[{element}]" if isinstance(element, int) else (f".{element}" if out else element)
    return out


def _set(obj, path, value):
    for element in path[:-1]:
        obj = obj[element]
    obj[path[-1]] = value


def _cases():
    for index, base in enumerate(BASE):
        label = f"{base['kind']} {base['metadata'].get('namespace', '')}/{base['metadata']['name']}".replace(" /", " ")
        for path, value in _leaves(base):
            if not path:
                continue
            key = path[-1]
            if len(path) >= 2 and path[-2] in QUANTITY_PARENTS:
                wrong = WRONG_QUANTITY
            else:
                wrong = WRONG[type(value)] + OUT_OF_RANGE.get(key, []) if isinstance(value, int) \
                    and not isinstance(value, bool) else WRONG[type(value)]
            for n, bad in enumerate(wrong):
                yield pytest.param(index, path, bad, id=f"{label}:{_render(path)}={json.dumps(bad)[:20]}#{n}")


def _snapshot(tmp_path, objects):
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    return path


def test_the_base_snapshot_plans_cleanly(tmp_path, recorder):
    r = invoke(["plan", "--snapshot", _snapshot(tmp_path, BASE), "--resource", R])
    assert r.exit_code == 0, r.output
    assert recorder.calls == []


CASES = list(_cases())


def test_there_are_hundreds_of_cases():
    assert len(CASES) >= 300


@pytest.mark.parametrize("index, path, bad", CASES)
def test_mutated_field_is_refused_naming_it(tmp_path, recorder, index, path, bad):
    objects = copy.deepcopy(BASE)
    _set(objects[index], path, bad)
    r = invoke(["plan", "--snapshot", _snapshot(tmp_path, objects), "--resource", R])
    # The field itself, or an object that contains it (a selector's map, a list of strings).
    prefixes = [_render(path[:n]) for n in range(len(path), 0, -1)]
    names = re.compile(r"^error: [^:]+: [^:]+: (" + "|".join(re.escape(p) for p in prefixes) + r")(:| )")
    assert_refused(r, recorder, names)


SEMANTIC = {
    "negative-capacity": (1, ("status", "allocatable", R), "-8", "Node n1: status.allocatable.huawei.com/ascend-1980"),
    "negative-request": (2, ("spec", "containers", 0, "resources", "requests", "cpu"), "-1",
                         "Pod team-a/p1: spec.containers[0].resources.requests.cpu"),
    "empty-kind": (2, ("kind",), "", "kind: required field is missing"),
}


@pytest.mark.parametrize("case", sorted(SEMANTIC))
def test_values_the_api_server_refuses(tmp_path, recorder, case):
    index, path, bad, names = SEMANTIC[case]
    objects = copy.deepcopy(BASE)
    _set(objects[index], path, bad)
    assert_refused(invoke(["plan", "--snapshot", _snapshot(tmp_path, objects), "--resource", R]), recorder, names)


def test_two_pods_with_one_uid_are_refused(tmp_path, recorder):
    twin = copy.deepcopy(BASE[2])
    twin["metadata"]["name"] = "p2"
    r = invoke(["plan", "--snapshot", _snapshot(tmp_path, BASE + [twin]), "--resource", R])
    assert_refused(r, recorder, "Pod team-a/p2: metadata.uid: 'u-1' is also the uid of pod team-a/p1")


@pytest.mark.parametrize("objects, says", [
    ([], "holds an empty List: a snapshot holds the cluster's Nodes and pods"),
    ([BASE[0]], "holds 1 Namespace and no Node: a snapshot holds the cluster's Nodes and pods"),
], ids=["empty", "no-nodes"])
def test_a_snapshot_without_nodes_is_refused(tmp_path, recorder, objects, says):
    """Nothing could be planned on it: the wrong file, not an empty cluster."""
    path = _snapshot(tmp_path, objects)
    assert_refused(invoke(["plan", "--snapshot", path, "--resource", R]), recorder, f"error: {path} {says}")


def test_a_goal_no_node_advertises_is_refused_listing_what_the_nodes_advertise(tmp_path, recorder):
    """A typo, or the wrong cluster: planning it would only say NoFragmentation."""
    r = invoke(["plan", "--snapshot", _snapshot(tmp_path, [BASE[1]]), "--resource", "huawei.com/ascend1980"])
    assert_refused(r, recorder, "error: spec.goals[0].resource: no node advertises huawei.com/ascend1980 "
                                "(nodes advertise: huawei.com/ascend-1980 (1 node))")
    assert r.stderr.count("\n") == 1


def test_a_goal_nodes_list_with_nothing_allocatable_is_no_fragmentation_with_a_warning(tmp_path, recorder):
    """Nodes that list the resource with 0 allocatable do provide it (none is free or usable now):
    not an error, but never silent: exit 0, outcome NoFragmentation, and a warning."""
    node = copy.deepcopy(BASE[1])
    node["status"]["allocatable"][R] = "0"
    r = invoke(["plan", "--snapshot", _snapshot(tmp_path, [node]), "--resource", R])
    assert r.exit_code == 0, r.output
    assert r.stderr == f"warning: no node advertises {R}, and no node advertises any extended resource\n"
    assert "NoFragmentation" in r.stdout
    assert recorder.calls == []
