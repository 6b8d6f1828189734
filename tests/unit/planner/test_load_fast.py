"""The loader's fast path builds exactly the model its checked readers build, and decides nothing.

`planner.load` reads the common shapes of objects with plain dict access (`_fast_*`) and hands
anything else to the checked reader of that kind, which alone refuses input and words the error.
These tests hold the two to the same result: on generated clusters (every kind the generators
write, HyperNodes too), and on every object below with each field removed, nulled, emptied or
replaced by a value of the wrong type or out of range — either both build the same objects
(compared by repr: field types and mapping order included) or both refuse with the same message.
"""
from __future__ import annotations

import copy
import json

import pytest

from bench import generate, hypernodes
from planner import SnapshotError, load
from tests.unit.hostile.test_snapshot_objects import BASE, OUT_OF_RANGE, WRONG, WRONG_QUANTITY, _leaves, _render

R = "huawei.com/ascend-1980"
BUCKETS = ("nodes", "pods", "podgroups", "pvs", "pvcs", "pdbs", "vcjobs", "modelservings", "namespaces",
           "hypernodes", "queues")


def outcome(objects, fast):
    """What loading gives: ('ok', repr of every object, in order) or ('error', message)."""
    try:
        snap = load._load(copy.deepcopy(objects), fast=fast)
    except SnapshotError as e:
        return "error", str(e)
    return "ok", tuple(repr(getattr(snap, b)) for b in BUCKETS)


def assert_same(objects):
    fast, checked = outcome(objects, True), outcome(objects, False)
    assert fast == checked
    return fast


# -- objects the fast path reads (each checked below to be read by it, not handed over) ------------------

POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "p1", "namespace": "team-a", "uid": "u-1", "labels": {"app": "a"},
                 "annotations": {"scheduling.k8s.io/group-name": "pg1", "kubernetes.io/config.mirror": "x"},
                 "deletionTimestamp": "2026-01-01T00:00:00Z",
                 "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "other"},
                                     {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j1",
                                      "controller": True, "blockOwnerDeletion": True}]},
    "spec": {"nodeName": "n1", "schedulerName": "volcano", "priority": 10, "nodeSelector": {"pool": "a"},
             "containers": [{"name": "main", "restartPolicy": "Always",
                             "resources": {"requests": {R: "2", "cpu": "500m"}, "limits": {R: "2", "memory": "1Gi"}},
                             "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP", "hostIP": "10.0.0.1"},
                                       {"containerPort": 81}]}],
             "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                             {"key": "k2", "value": "v"}],
             "affinity": {
                 "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}],
                      "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]}},
                 "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                     {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "zone"}]},
                 "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                     {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]},
                      "topologyKey": "kubernetes.io/hostname", "namespaces": ["team-a"],
                      "namespaceSelector": {"matchLabels": {"env": "prod"}}}]}},
             "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c1"}},
                         {"name": "tmp", "emptyDir": {}}]},
    "status": {"phase": "Running"}}

# A pod as the API server returns it: every defaulted and status field a real one carries.
API_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "worker-0", "namespace": "training", "uid": "3f1c", "resourceVersion": "1234",
                 "creationTimestamp": "2026-01-01T00:00:00Z", "generateName": "worker-",
                 "labels": {"volcano.sh/job-name": "j1"}, "annotations": {"scheduling.k8s.io/group-name": "pg1"},
                 "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "j1",
                                      "uid": "9a", "controller": True, "blockOwnerDeletion": True}]},
    "spec": {"volumes": [{"name": "kube-api-access-x", "projected": {"sources": [{"serviceAccountToken": {
                 "expirationSeconds": 3607, "path": "token"}}], "defaultMode": 420}}],
             "containers": [{"name": "main", "image": "ai:1", "command": ["python"], "env": [{"name": "A", "value": "1"}],
                             "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                             "resources": {"limits": {R: "8"}, "requests": {R: "8", "cpu": "16", "memory": "64Gi"}},
                             "volumeMounts": [{"name": "kube-api-access-x", "readOnly": True, "mountPath": "/var/run"}],
                             "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent"}],
             "restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
             "serviceAccountName": "default", "serviceAccount": "default", "nodeName": "n1",
             "securityContext": {}, "schedulerName": "volcano", "priority": 0, "enableServiceLinks": True,
             "preemptionPolicy": "PreemptLowerPriority",
             "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                              "tolerationSeconds": 300},
                             {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                              "tolerationSeconds": 300}]},
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], "hostIP": "10.0.0.1",
               "podIP": "10.1.0.5", "startTime": "2026-01-01T00:00:01Z", "qosClass": "Burstable",
               "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "state": {"running": {}}}]}}

NODE = {"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "labels": {"pool": "a", "zone": "z1"}, "annotations": {"a": "b"}},
        "spec": {"unschedulable": True, "podCIDR": "10.1.0.0/24",
                 "taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}, {"key": "k2", "effect": "NoExecute"}]},
        "status": {"allocatable": {R: "8", "cpu": "31500m", "memory": "250Gi", "pods": "110", "hugepages-2Mi": "0"},
                   "capacity": {R: "8", "cpu": "32", "memory": "256Gi", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True"}]}}
NODE_CAPACITY_ONLY = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n2"},
                      "status": {"capacity": {R: "16", "cpu": "64"}}}
PODGROUP = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg1", "namespace": "team-a", "labels": {"app": "a"},
                         "annotations": {"repack.volcano.sh/do-not-disrupt": "false"},
                         "ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                                              "name": "j1", "controller": True}]},
            "spec": {"minMember": 2, "queue": "q1", "minResources": {R: "16", "cpu": "2"},
                     "networkTopology": {"mode": "hard", "highestTierAllowed": 1}},
            "status": {"phase": "Running", "conditions": [
                {"type": "Scheduled", "status": "True", "reason": "tasks", "message": "2/2",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
VCJOB = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
         "metadata": {"name": "j1", "namespace": "team-a", "labels": {"app": "a"}, "annotations": {"x": "y"}},
         "spec": {"policies": [{"events": ["PodFailed", "PodEvicted"], "action": "RestartJob"}],
                  "networkTopology": {"mode": "soft"},
                  "tasks": [{"name": "worker", "replicas": 2,
                             "policies": [{"event": "PodEvicted", "action": "RestartTask"}]},
                            {"name": "ps", "policies": []}]}}
MODELSERVING = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing",
                "metadata": {"name": "ms1", "namespace": "team-a", "labels": {"a": "b"}, "annotations": {"c": "d"}},
                "spec": {"recoveryPolicy": "ServingGroupRecreate", "replicas": 2}}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"env": "prod"}}}

FAST_OBJECTS = [POD, API_POD, NODE, NODE_CAPACITY_ONLY, PODGROUP, VCJOB, MODELSERVING, NAMESPACE]


@pytest.mark.parametrize("obj", FAST_OBJECTS, ids=lambda o: f"{o['kind']}-{o['metadata']['name']}")
def test_the_fast_path_reads_these_objects_itself(obj):
    """Not handed over to the checked reader: otherwise the comparisons below compare it with itself."""
    built = load._FAST[obj["kind"]](load.Ctx(obj, 0), obj)
    assert built is not None
    assert repr(built) == repr(load._LOADERS[obj["kind"]][1](load.Ctx(obj, 0), obj))


def test_a_real_pod_keeps_its_fields():
    """Spot-check of the fast pod against what the scheduler counts (the checked reader agrees, above)."""
    p = load._fast_pod(load.Ctx(POD, 0), POD)
    assert dict(p.requests) == {R: 2, "cpu": 500, "memory": 2 ** 30, "pods": 1}
    assert p.owner.kind == "Job" and p.owner.controller and p.terminating and p.mirror and p.priority == 10
    assert [h.port for h in p.host_ports] == [8080] and p.pvc_names == ("c1",)
    assert [t.operator for t in p.tolerations] == ["Exists", "Equal"]
    assert len(p.affinity_terms) == 1 and len(p.pod_affinity) == 1 and len(p.pod_anti_affinity) == 1


# -- generated clusters ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes, seed, profile", [(120, 1, "base"), (200, 7, "base"), (60, 8001, "gangs"),
                                                 (48, 8002, "split")])
def test_generated_clusters_load_identically(nodes, seed, profile):
    objects = generate.generate(nodes, seed, profile=profile)
    kind, reprs = assert_same(objects)
    assert kind == "ok" and "Pod(" in reprs[1]


@pytest.mark.parametrize("seed", [21000, 21001])
def test_generated_clusters_with_hypernodes_load_identically(seed):
    objects = hypernodes.generate(60, seed)
    kind, reprs = assert_same(objects)
    assert kind == "ok" and "HyperNode(" in reprs[BUCKETS.index("hypernodes")] and "NetworkTopology(" in reprs[2]


def test_the_hostile_base_loads_identically():
    assert assert_same(BASE)[0] == "ok"


# -- every field of every object, mutated -----------------------------------------------------------------------

def _mutations(value, key):
    """Values to put in place of `value` (at a field named `key`): absent, null, empty, wrong, out of range."""
    yield "<removed>"
    yield None
    for empty in ("", 0, {}, [], False):
        if empty != value or type(empty) is not type(value):
            yield empty
    if isinstance(value, str) and key not in ("name",):
        yield value + "x"   # another value: an unknown operator, protocol, effect...
    wrong = WRONG.get(type(value), [])
    yield from wrong
    if isinstance(value, int) and not isinstance(value, bool):
        yield from OUT_OF_RANGE.get(key, [])
        yield from BOUNDS.get(key, [])
        yield from (-1, 2 ** 31, 2 ** 63)


# Each side of the bounds the API server enforces.
BOUNDS = {"hostPort": [65535, 65536], "containerPort": [65535, 65536], "priority": [2 ** 31 - 1, -2 ** 31],
          "tolerationSeconds": [2 ** 63 - 1, -2 ** 63, -2 ** 63 - 1], "minMember": [2 ** 31 - 1],
          "highestTierAllowed": [-1, 0]}
QUANTITY_KEYS = {"requests", "limits", "allocatable", "capacity", "overhead", "minResources"}


def _cases():
    for index, obj in enumerate(FAST_OBJECTS):
        for path, value in _leaves(obj):
            if not path or path in (("kind",), ("apiVersion",)):
                continue
            key = path[-1]
            values = list(_mutations(value, key))
            if len(path) >= 2 and path[-2] in QUANTITY_KEYS:
                values += WRONG_QUANTITY + ["-100m", "1.5", "0.0000000001", "1e3", 8, 1.5]
            for n, bad in enumerate(values):
                yield pytest.param(index, path, bad, id=f"{obj['kind']}:{_render(path)}={json.dumps(bad)[:16]}#{n}")


CASES = list(_cases())


def test_there_are_many_mutations():
    assert len(CASES) >= 1500


def _mutate(obj, path, bad):
    target = obj
    for element in path[:-1]:
        target = target[element]
    if bad == "<removed>":
        del target[path[-1]]
    else:
        target[path[-1]] = bad


@pytest.mark.parametrize("index, path, bad", CASES)
def test_a_mutated_field_gives_what_the_checked_reader_gives(index, path, bad):
    obj = copy.deepcopy(FAST_OBJECTS[index])
    _mutate(obj, path, bad)
    assert_same([NAMESPACE, obj] if obj["kind"] != "Namespace" else [obj])


# -- the input shapes: no copies, same names in errors ---------------------------------------------------------

def test_raw_list_items_are_read_without_a_copy():
    items = [{k: v for k, v in API_POD.items() if k not in ("kind", "apiVersion")}]
    entries = list(load._entries([{"apiVersion": "v1", "kind": "PodList", "items": items}]))
    assert entries == [(items[0], "Pod", "v1")] and entries[0][0] is items[0]
    snap = load.load_objects([{"apiVersion": "v1", "kind": "PodList", "items": items}])
    assert [p.key for p in snap.pods] == ["training/worker-0"] and "kind" not in items[0]
    assert list(load.flatten([{"apiVersion": "v1", "kind": "PodList", "items": items}])) == [
        dict(items[0], kind="Pod", apiVersion="v1")]


def test_an_error_in_a_raw_list_item_names_the_lists_kind():
    item = {k: v for k, v in API_POD.items() if k not in ("kind", "apiVersion")}
    item = copy.deepcopy(item)
    item["spec"]["priority"] = "high"
    with pytest.raises(SnapshotError, match=r"^Pod training/worker-0: spec.priority: expected int, got str$"):
        load.load_objects([{"apiVersion": "v1", "kind": "PodList", "items": [item]}])


@pytest.mark.parametrize("lists", [
    [{"apiVersion": "v1", "kind": "List", "items": [NODE, [POD, None], {"kind": "PodList", "items": [
        {k: v for k, v in API_POD.items() if k != "kind"}]}]}],
    [{"apiVersion": "v1", "kind": "PodListList", "items": [{"items": []}]}],
    [[[NODE]], {"apiVersion": "v1", "kind": "PodList", "items": [[POD], "x"]}],
], ids=["nested", "typed-list-of-lists", "arrays-in-lists"])
def test_entries_open_lists_as_flatten_did(lists):
    """`flatten` (kept for callers) and the loader's entries give the same objects."""
    assert list(load.flatten(lists)) == [o if k is None else dict(o, kind=k, apiVersion=a)
                                        for o, k, a in load._entries(lists)]
    assert outcome(lists, True) == outcome(lists, False)
