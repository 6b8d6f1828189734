"""The loader: every input shape, requests as the scheduler counts them, and errors that name object and field."""
import json

import pytest

from planner import SnapshotError, load_objects, load_text
from tests.builders import R, node, pod, podgroup, vcjob

# -- input shapes ---------------------------------------------------------------------------------


def names(snap):
    return sorted(n.name for n in snap.nodes), sorted(p.key for p in snap.pods)


def test_v1_list():
    snap = load_objects([{"apiVersion": "v1", "kind": "List", "items": [node("n1"), pod("p1", on="n1")]}])
    assert names(snap) == (["n1"], ["default/p1"])


def test_nested_list():
    inner = {"apiVersion": "v1", "kind": "List", "items": [pod("p2")]}
    snap = load_objects([{"apiVersion": "v1", "kind": "List", "items": [node("n1"), inner]}])
    assert names(snap) == (["n1"], ["default/p2"])


def test_raw_podlist_items_without_kind():
    items = [{k: v for k, v in pod(n).items() if k not in ("kind", "apiVersion")} for n in ("a", "b")]
    snap = load_objects([{"apiVersion": "v1", "kind": "PodList", "items": items}])
    assert names(snap)[1] == ["default/a", "default/b"]


def test_raw_podgrouplist_items_take_the_list_apiversion():
    item = {k: v for k, v in podgroup("pg").items() if k not in ("kind", "apiVersion")}
    snap = load_objects([{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroupList", "items": [item]}])
    assert [g.key for g in snap.podgroups] == ["default/pg"]


def test_plain_list_item_without_kind_is_an_error():
    item = {k: v for k, v in pod("p1").items() if k != "kind"}
    with pytest.raises(SnapshotError, match=r"^item #0 \(default/p1\): kind: required field is missing$"):
        load_objects([{"apiVersion": "v1", "kind": "List", "items": [item]}])


def test_yaml_stream():
    text = "---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: '4'}}\n---\n" \
           "apiVersion: v1\nkind: Pod\nmetadata: {name: p1, namespace: ml}\nspec: {containers: []}\n---\n"
    assert names(load_text(text)) == (["n1"], ["ml/p1"])


def test_json_array():
    assert names(load_text(json.dumps([node("n1"), pod("p1")]))) == (["n1"], ["default/p1"])


def test_json_single_list_object():
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": [node("n2")]})
    assert names(load_text(text)) == (["n2"], [])


@pytest.mark.parametrize("obj", [
    {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}},
    {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "spec": 5},
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"policies": "garbage"}},
    {"apiVersion": "example.com/v1", "kind": "Pod", "metadata": {"name": "not-a-core-pod"}},
], ids=["service", "event", "batch-v1-job", "foreign-group-pod"])
def test_unknown_kinds_ignored(obj):
    snap = load_objects([obj, node("n1")])
    assert names(snap) == (["n1"], []) and not snap.vcjobs


@pytest.mark.parametrize("objs,message", [
    ([pod("p1"), pod("p1")], "Pod default/p1: metadata.name: appears twice in the snapshot"),
    ([node("n1"), node("n1")], "Node n1: metadata.name: appears twice in the snapshot"),
    ([podgroup("g"), podgroup("g")], "PodGroup default/g: metadata.name: appears twice in the snapshot"),
], ids=["pod", "node", "podgroup"])
def test_duplicates_rejected(objs, message):
    with pytest.raises(SnapshotError) as e:
        load_objects(objs)
    assert str(e.value) == message


def test_same_name_in_two_namespaces_is_not_a_duplicate():
    assert len(load_objects([pod("p1", ns="a"), pod("p1", ns="b")]).pods) == 2


@pytest.mark.parametrize("text,message", [
    ("{\"kind\": ", "<input>:1:10: invalid JSON: Expecting value"),
    ("a: [1\nb: 2\n", "<input>:2:2: invalid YAML: "),
], ids=["json", "yaml"])
def test_unparsable_text(text, message):
    with pytest.raises(SnapshotError, match="^" + message.replace("[", r"\[")):
        load_text(text)


# -- malformed objects: object and field path named ------------------------------------------------

def _with(obj, path, value):
    cur = obj
    parts = path.split(".")
    for p in parts[:-1]:
        cur = cur[int(p)] if p.isdigit() else cur.setdefault(p, {})
    cur[int(parts[-1]) if parts[-1].isdigit() else parts[-1]] = value
    return obj


MALFORMED = [
    ("request-quantity", _with(pod("p1"), "spec.containers.0.resources.requests.cpu", "abc"),
     "Pod default/p1: spec.containers[0].resources.requests.cpu: invalid quantity 'abc'"),
    ("limit-quantity", _with(pod("p1"), "spec.containers.0.resources.limits.memory", "1 Gi"),
     "Pod default/p1: spec.containers[0].resources.limits.memory: invalid quantity '1 Gi'"),
    ("init-quantity", pod("p1", init_containers=[{"name": "i", "resources": {"requests": {"cpu": "x"}}}]),
     "Pod default/p1: spec.initContainers[0].resources.requests.cpu: invalid quantity 'x'"),
    ("overhead-quantity", pod("p1", overhead={"memory": True}),
     "Pod default/p1: spec.overhead.memory: invalid quantity True"),
    ("requests-not-map", _with(pod("p1"), "spec.containers.0.resources.requests", ["1"]),
     "Pod default/p1: spec.containers[0].resources.requests: expected an object of quantities"),
    ("container-not-object", _with(pod("p1"), "spec.containers", ["main"]),
     "Pod default/p1: spec.containers[0]: expected a container object, got str"),
    ("containers-not-list", _with(pod("p1"), "spec.containers", {"name": "x"}),
     "Pod default/p1: spec.containers: expected list, got dict"),
    ("pod-without-name", {"apiVersion": "v1", "kind": "Pod", "metadata": {"namespace": "x"}, "spec": {}},
     "Pod x/#0: metadata.name: required field is missing"),
    ("pod-without-spec", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
     "Pod p: spec: required field is missing"),
    ("label-not-string", _with(pod("p1"), "metadata.labels", {"app": 3}),
     "Pod default/p1: metadata.labels.app: expected string, got int"),
    ("node-selector-term-not-list", pod("p1", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": {"matchExpressions": []}}}}),
     "Pod default/p1: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
     "expected a list of node selector terms"),
    ("requirement-without-operator", pod("p1", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone"}]}]}}}),
     "Pod default/p1: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
     "matchExpressions[0].operator: required field is missing"),
    ("toleration-not-object", pod("p1", tolerations=["gpu"]), "Pod default/p1: spec.tolerations[0]: expected an object, got str"),
    ("host-port-not-int", _with(pod("p1"), "spec.containers.0.ports", [{"containerPort": 80, "hostPort": "80"}]),
     "Pod default/p1: spec.containers[0].ports[0].hostPort: expected int, got str"),
    ("spread-max-skew-missing", pod("p1", spread=[{"topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
     "Pod default/p1: spec.topologySpreadConstraints[0].maxSkew: required field is missing"),
    ("spread-min-domains-not-int", pod("p1", spread=[{"maxSkew": 1, "topologyKey": "zone", "minDomains": "3"}]),
     "Pod default/p1: spec.topologySpreadConstraints[0].minDomains: expected int, got str"),
    ("selector-bad-operator", pod("p1", affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]}}]}}),
     "Pod default/p1: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector."
     "matchExpressions[0].operator: unknown operator 'Gt'"),
    ("owner-without-kind", _with(pod("p1"), "metadata.ownerReferences", [{"name": "x"}]),
     "Pod default/p1: metadata.ownerReferences[0]: kind and name are required"),
    ("node-allocatable-quantity", _with(node("n1"), "status.allocatable.cpu", "4 cores"),
     "Node n1: status.allocatable.cpu: invalid quantity '4 cores'"),
    ("node-capacity-quantity", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
                                "status": {"capacity": {"memory": "lots"}}},
     "Node n1: status.capacity.memory: invalid quantity 'lots'"),
    ("node-taint-without-effect", node("n1", taints=[{"key": "gpu"}]), "Node n1: spec.taints[0]: key and effect are required"),
    ("node-unschedulable-not-bool", _with(node("n1"), "spec.unschedulable", "yes"),
     "Node n1: spec.unschedulable: expected bool, got str"),
    ("podgroup-min-member-negative", _with(podgroup("g"), "spec.minMember", -1), "PodGroup default/g: spec.minMember: -1 is out of range: must be between 0 and 2147483647"),
    ("podgroup-min-member-string", _with(podgroup("g"), "spec.minMember", "2"),
     "PodGroup default/g: spec.minMember: expected int, got str"),
    ("vcjob-policies-not-list", vcjob("j", policies={"event": "PodEvicted"}), "Job default/j: spec.policies: expected a list"),
    ("vcjob-task-policy-not-object", vcjob("j", task_policies={"t": ["PodEvicted"]}),
     "Job default/j: spec.tasks[0].policies[0]: expected an object"),
    ("vcjob-events-not-list", vcjob("j", policies=[{"events": "PodEvicted", "action": "RestartJob"}]),
     "Job default/j: spec.policies[0].events: expected a list of strings"),
    ("vcjob-event-not-string", vcjob("j", task_policies={"t": [{"event": ["PodEvicted"], "action": "RestartJob"}]}),
     "Job default/j: spec.tasks[0].policies[0].event: expected a string"),
    ("missing-kind", {"apiVersion": "v1", "metadata": {"name": "x"}}, "item #0 (x): kind: required field is missing"),
    ("missing-apiversion", {"kind": "Pod", "metadata": {"name": "x"}}, "Pod x: apiVersion: required field is missing"),
]


@pytest.mark.parametrize("obj,message", [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED])
def test_malformed_objects(obj, message):
    with pytest.raises(SnapshotError) as e:
        load_objects([obj])
    assert str(e.value) == message


def test_non_object_item():
    with pytest.raises(SnapshotError, match=r"^item #1: expected a Kubernetes object, got str$"):
        load_objects([node("n1"), "n2"])


# -- pod requests ---------------------------------------------------------------------------------

def requests_of(**kw):
    return dict(load_objects([pod("p", **kw)]).pods[0].requests)


def c(name, restart=None, **req):
    d = {"name": name, "resources": {"requests": dict(req)}}
    if restart:
        d["restartPolicy"] = restart
    return d


REQUESTS = [
    ("single-container", dict(cpu="500m", memory="1Gi", cards=2), {"cpu": 500, "memory": 2 ** 30, R: 2, "pods": 1}),
    ("zero-requests-dropped-pods-counts-one", dict(cpu="0", memory="0", cards=0), {"pods": 1}),
    ("init-larger-than-containers", dict(cpu="1", memory="1Gi", cards=0, init_containers=[c("i", cpu="3")]),
     {"cpu": 3000, "memory": 2 ** 30, "pods": 1}),
    ("init-smaller-than-containers", dict(cpu="2", memory="0", cards=0, init_containers=[c("i", cpu="1")]),
     {"cpu": 2000, "pods": 1}),
    ("sidecar-added-to-containers", dict(cpu="1", memory="0", cards=0, init_containers=[c("s", "Always", cpu="500m")]),
     {"cpu": 1500, "pods": 1}),
    ("init-after-sidecar-includes-it", dict(cpu="1", memory="0", cards=0,
                                            init_containers=[c("s", "Always", cpu="1"), c("i", cpu="2")]),
     {"cpu": 3000, "pods": 1}),
    ("init-before-sidecar-excludes-it", dict(cpu="1", memory="0", cards=0,
                                             init_containers=[c("i", cpu="2500m"), c("s", "Always", cpu="1")]),
     {"cpu": 2500, "pods": 1}),
    ("sidecars-accumulate", dict(cpu="0", memory="0", cards=0,
                                 init_containers=[c("s1", "Always", memory="1Gi"), c("s2", "Always", memory="1Gi"),
                                                  c("i", memory="1Gi")]),
     {"memory": 3 * 2 ** 30, "pods": 1}),
    ("extended-in-init-only", dict(cpu="0", memory="0", cards=0, init_containers=[c("i", **{R: "4"})]),
     {R: 4, "pods": 1}),
    ("overhead-added", dict(cpu="1", memory="1Gi", cards=0, overhead={"cpu": "250m", "memory": "120Mi"}),
     {"cpu": 1250, "memory": 2 ** 30 + 120 * 2 ** 20, "pods": 1}),
    ("overhead-after-init-max", dict(cpu="1", memory="0", cards=0, init_containers=[c("i", cpu="2")],
                                     overhead={"cpu": "100m"}),
     {"cpu": 2100, "pods": 1}),
    ("sum-before-rounding", dict(cpu="0", memory="0.5", cards=0,
                                 init_containers=[c("s", "Always", memory="0.5")]),
     {"memory": 1, "pods": 1}),
    ("sub-milli-cpu-summed-exactly", dict(cpu="500u", memory="0", cards=0,
                                          init_containers=[c("s", "Always", cpu="500u")]),
     {"cpu": 1, "pods": 1}),
]


@pytest.mark.parametrize("kw,want", [c_[1:] for c_ in REQUESTS], ids=[c_[0] for c_ in REQUESTS])
def test_pod_requests(kw, want):
    assert requests_of(**kw) == want


def test_limits_default_missing_requests():
    p = pod("p", cards=0)
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}, "limits": {"cpu": "4", "memory": "2Gi",
                                                                                    R: "2"}}
    assert dict(load_objects([p]).pods[0].requests) == {"cpu": 1000, "memory": 2 * 2 ** 30, R: 2, "pods": 1}


def test_pod_level_requests_override_cpu_memory_only():
    p = pod("p", cpu="1", memory="1Gi", cards=2, overhead={"cpu": "100m"})
    p["spec"]["resources"] = {"requests": {"cpu": "3", "memory": "4Gi", R: "8"}}
    assert dict(load_objects([p]).pods[0].requests) == {"cpu": 3100, "memory": 4 * 2 ** 30, R: 2, "pods": 1}


def test_pod_level_limit_defaults_request_only_when_no_container_asks():
    p = pod("p", cpu="1", memory="0", cards=0)
    p["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    p["spec"]["resources"] = {"limits": {"cpu": "2", "memory": "1Gi"}}
    assert dict(load_objects([p]).pods[0].requests) == {"cpu": 1000, "memory": 2 ** 30, "pods": 1}


def test_container_without_resources():
    p = pod("p")
    del p["spec"]["containers"][0]["resources"]
    assert dict(load_objects([p]).pods[0].requests) == {"pods": 1}


# -- pods: other fields -----------------------------------------------------------------------------

def test_pod_fields():
    p = load_objects([pod("p", on="n1", group="job-pg", ns="ml", scheduler="volcano", phase="Running",
                          node_selector={"zone": "a"}, tolerations=[{"key": "gpu", "operator": "Exists"}],
                          host_ports=[8080], volumes=[{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}],
                          deleting=True)]).pods[0]
    assert (p.node_name, p.phase, p.scheduler_name, p.group_name, p.terminating, p.mirror) == \
        ("n1", "Running", "volcano", "job-pg", True, False)
    assert dict(p.node_selector) == {"zone": "a"} and p.pvc_names == ("data",)
    assert [(t.key, t.operator, t.effect) for t in p.tolerations] == [("gpu", "Exists", "")]
    assert [(h.protocol, h.host_ip, h.port) for h in p.host_ports] == [("TCP", "0.0.0.0", 8080)]
    assert (p.owner.kind, p.owner.name, p.owner.controller) == ("Job", "job", True)


def test_pod_defaults():
    raw = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare"}, "spec": {"containers": []}}
    p = load_objects([raw]).pods[0]
    assert (p.namespace, p.phase, p.scheduler_name, p.owner, p.affinity_terms, p.node_name) == \
        ("default", "Pending", "default-scheduler", None, None, "")


def test_mirror_annotation():
    p = load_objects([pod("etcd", annotations={"kubernetes.io/config.mirror": "abc"})]).pods[0]
    assert p.mirror is True


def test_group_from_volcano_annotation_and_label():
    a = load_objects([pod("a", annotations={"scheduling.volcano.sh/group-name": "g1"})]).pods[0]
    b = load_objects([pod("b", labels={"volcano.sh/podgroup": "g2"})]).pods[0]
    assert (a.group_name, b.group_name) == ("g1", "g2")


def test_controller_owner_preferred():
    p = pod("p")
    p["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cm"},
                                        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "controller": True}]
    assert load_objects([p]).pods[0].owner.kind == "ReplicaSet"


def test_host_ports_of_sidecars_count_plain_init_containers_do_not():
    p = pod("p", init_containers=[
        {"name": "s", "restartPolicy": "Always", "ports": [{"containerPort": 9, "hostPort": 9000, "protocol": "UDP",
                                                            "hostIP": "10.0.0.1"}]},
        {"name": "i", "ports": [{"containerPort": 7, "hostPort": 7000}]}])
    hp = load_objects([p]).pods[0].host_ports
    assert [(h.protocol, h.host_ip, h.port) for h in hp] == [("UDP", "10.0.0.1", 9000)]


def test_spread_keeps_do_not_schedule_only():
    p = load_objects([pod("p", spread=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {}},
        {"maxSkew": 2, "topologyKey": "rack", "whenUnsatisfiable": "DoNotSchedule", "minDomains": 3,
         "labelSelector": {"matchLabels": {"app": "x"}}, "nodeTaintsPolicy": "Honor"}])]).pods[0]
    assert [(c.topology_key, c.max_skew, c.min_domains, c.node_affinity_policy, c.node_taints_policy)
            for c in p.spread] == [("rack", 2, 3, "Honor", "Honor")]


def test_pod_affinity_terms():
    p = load_objects([pod("p", affinity={
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "db"}}, "namespaces": ["x"]}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "kubernetes.io/hostname", "namespaceSelector": {}}],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": {"topologyKey": "z"}}]}})
    ]).pods[0]
    (a,), (b,) = p.pod_affinity, p.pod_anti_affinity
    assert (a.topology_key, a.namespaces, a.label_selector.match_labels) == ("zone", ("x",), (("app", "db"),))
    assert (b.topology_key, b.label_selector, b.namespace_selector is not None) == ("kubernetes.io/hostname", None, True)


# -- nodes ----------------------------------------------------------------------------------------

def test_node_allocatable_preferred_over_capacity():
    n = node("n1", cards=8)
    n["status"]["capacity"][R] = "16"
    got = load_objects([n]).nodes[0]
    assert got.allocatable[R] == 8 and got.allocatable["cpu"] == 64000 and got.allocatable["pods"] == 110


def test_node_capacity_fallback_when_allocatable_absent():
    n = node("n1", cards=4)
    del n["status"]["allocatable"]
    assert load_objects([n]).nodes[0].allocatable[R] == 4


def test_node_without_pods_entry_defaults_to_110():
    raw = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "1"}}}
    assert dict(load_objects([raw]).nodes[0].allocatable) == {"cpu": 1000, "pods": 110}


def test_node_taints_and_unschedulable():
    got = load_objects([node("n1", unschedulable=True, taints=[{"key": "gpu", "value": "broken", "effect": "NoSchedule"},
                                                                {"key": "x", "effect": "NoExecute"}])]).nodes[0]
    assert got.unschedulable is True
    assert [(t.key, t.value, t.effect) for t in got.taints] == [("gpu", "broken", "NoSchedule"), ("x", "", "NoExecute")]


# -- Volcano Jobs, ModelServings, PVs, PVCs, PDBs, Namespaces --------------------------------------

VCJOBS = [
    ("job-level-events-list", vcjob("j", policies=[{"events": ["PodEvicted"], "action": "RestartJob"}]), "RestartJob", {}),
    ("job-level-event-string", vcjob("j", policies=[{"event": "PodEvicted", "action": "RestartJob"}]), "RestartJob", {}),
    ("job-level-any-event", vcjob("j", policies=[{"event": "*", "action": "RestartTask"}]), "RestartTask", {}),
    ("other-event-ignored", vcjob("j", policies=[{"event": "PodFailed", "action": "RestartJob"}]), "", {}),
    ("first-matching-policy-wins", vcjob("j", policies=[{"event": "PodFailed", "action": "AbortJob"},
                                                        {"events": ["PodEvicted"], "action": "RestartTask"},
                                                        {"event": "*", "action": "RestartJob"}]), "RestartTask", {}),
    ("task-level", vcjob("j", task_policies={"worker": [{"event": "PodEvicted", "action": "RestartTask"}],
                                             "ps": [{"event": "PodFailed", "action": "RestartJob"}]}),
     "", {"worker": "RestartTask"}),
    ("no-policies", vcjob("j"), "", {}),
]


@pytest.mark.parametrize("obj,job_action,task_actions", [c_[1:] for c_ in VCJOBS], ids=[c_[0] for c_ in VCJOBS])
def test_vcjob_pod_evicted_policies(obj, job_action, task_actions):
    (j,) = load_objects([obj]).vcjobs
    assert (j.job_action, dict(j.task_actions)) == (job_action, task_actions)
    assert load_objects([obj]).vcjob_by_key["default/j"] is not None


def test_modelserving_recovery_policy():
    ms = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing",
          "metadata": {"name": "llm", "namespace": "ai", "labels": {"team": "x"}},
          "spec": {"recoveryPolicy": "ServingGroupRecreate", "replicas": 2}}
    (m,) = load_objects([ms]).modelservings
    assert (m.namespace, m.name, m.recovery_policy, dict(m.labels)) == ("ai", "llm", "ServingGroupRecreate", {"team": "x"})


def test_modelserving_without_policy():
    ms = {"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing", "metadata": {"name": "m"},
          "spec": {}}
    assert load_objects([ms]).modelservings[0].recovery_policy == ""


def pv(name, **spec):
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def test_pv_local_with_node_affinity():
    snap = load_objects([pv("v1", local={"path": "/mnt"}, nodeAffinity={"required": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}})])
    v = snap.pv_by_name["v1"]
    assert v.local is True and v.node_terms[0].match_expressions[0].values == ("n1",)


@pytest.mark.parametrize("spec,local,restricted", [
    ({"hostPath": {"path": "/x"}}, True, False),
    ({"nfs": {"server": "s", "path": "/"}}, False, False),
    ({"csi": {"driver": "d"}, "nodeAffinity": {"required": {"nodeSelectorTerms": []}}}, False, True),
], ids=["hostpath-is-local", "nfs-unrestricted", "csi-with-affinity"])
def test_pv_kinds(spec, local, restricted):
    v = load_objects([pv("v", **spec)]).pvs[0]
    assert (v.local, v.node_terms is not None) == (local, restricted)


def test_pvc():
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "ml"},
           "spec": {"volumeName": "v1"}}
    assert load_objects([pvc]).pvc_by_key["ml/data"].volume_name == "v1"


def test_pdb():
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "ml"},
           "spec": {"selector": {"matchLabels": {"app": "x"}}}, "status": {"disruptionsAllowed": 0}}
    (b,) = load_objects([pdb]).pdbs
    assert (b.namespace, b.selector.match_labels, b.disruptions_allowed) == ("ml", (("app", "x"),), 0)


def test_namespace_labels():
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "x"}}}
    snap = load_objects([ns, pod("p", ns="other")])
    assert dict(snap.namespace_labels["ml"]) == {"team": "x", "kubernetes.io/metadata.name": "ml"}
    # A namespace known only from its pods still carries the automatic name label.
    assert dict(snap.namespace_labels["other"]) == {"kubernetes.io/metadata.name": "other"}
