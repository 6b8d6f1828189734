"""Small builders of Kubernetes objects (as the API returns them) for table-driven tests.

`node("n1", cards=8)`, `pod("p1", cards=2, on="n1", group="ns/pg")`: each returns a plain dict,
so tests exercise the real loader too.
"""
R = "huawei.com/ascend-1980"


def node(name, cards=8, cpu="64", memory="512Gi", pods=110, labels=None, taints=None, unschedulable=False,
         resource=R):
    alloc = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if cards:
        alloc[resource] = str(cards)
    spec = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
            "spec": spec, "status": {"capacity": dict(alloc), "allocatable": alloc,
                                     "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name, cards=1, on=None, group=None, ns="default", cpu="1", memory="1Gi", labels=None, owner=None,
        scheduler="volcano", phase="Running", node_selector=None, tolerations=None, affinity=None,
        host_ports=None, spread=None, volumes=None, annotations=None, task=None, resource=R, extra=None,
        init_containers=None, overhead=None, deleting=False, uid=None):
    """A pod; `group` is a PodGroup name in the same namespace; `owner` (kind, name[, apiVersion])."""
    requests = {"cpu": cpu, "memory": memory}
    if cards:
        requests[resource] = str(cards)
    if extra:
        requests.update(extra)
    container = {"name": "main", "image": "alpine:3.20", "resources": {"requests": requests, "limits": dict(requests)}}
    if host_ports:
        container["ports"] = [{"containerPort": p, "hostPort": p, "protocol": "TCP"} for p in host_ports]
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    if task:
        ann["volcano.sh/task-spec"] = task
    meta = {"name": name, "namespace": ns, "uid": uid or f"uid-{ns}-{name}", "labels": dict(labels or {}),
            "annotations": ann}
    if owner is None and group:
        owner = ("Job", group.split("-pg")[0], "batch.volcano.sh/v1alpha1")
    if owner:
        kind, oname = owner[0], owner[1]
        api = owner[2] if len(owner) > 2 else {"ReplicaSet": "apps/v1", "StatefulSet": "apps/v1",
                                              "DaemonSet": "apps/v1"}.get(kind, "batch.volcano.sh/v1alpha1")
        meta["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": oname, "uid": f"uid-{oname}",
                                    "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    spec = {"schedulerName": scheduler, "containers": [container]}
    if on:
        spec["nodeName"] = on
    for key, val in (("nodeSelector", node_selector), ("tolerations", tolerations), ("affinity", affinity),
                     ("topologySpreadConstraints", spread), ("volumes", volumes),
                     ("initContainers", init_containers), ("overhead", overhead)):
        if val is not None:
            spec[key] = val
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": {"phase": phase}}


def podgroup(name, ns="default", min_member=1, labels=None, owner=None, topology=None, subgroups=None):
    """`topology`: the PodGroup's spec.networkTopology, e.g. {"mode": "hard", "highestTierAllowed": 1};
    `subgroups`: its spec.subGroupPolicy list."""
    meta = {"name": name, "namespace": ns, "labels": dict(labels or {})}
    if owner:
        kind, oname = owner[0], owner[1]
        api = owner[2] if len(owner) > 2 else "batch.volcano.sh/v1alpha1"
        meta["ownerReferences"] = [{"apiVersion": api, "kind": kind, "name": oname, "uid": f"uid-{oname}",
                                    "controller": True}]
    spec = {"minMember": min_member, "queue": "default"}
    if topology is not None:
        spec["networkTopology"] = dict(topology)
    if subgroups is not None:
        spec["subGroupPolicy"] = [dict(s) for s in subgroups]
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": meta, "spec": spec}


def hypernode(name, tier, nodes=(), children=(), regex=None, labels=None, tier_name=None):
    """A HyperNode: `nodes` and `children` are exactMatch members of type Node and HyperNode;
    `regex` (a pattern) and `labels` (matchLabels) add one Node member each."""
    members = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    members += [{"type": "HyperNode", "selector": {"exactMatch": {"name": c}}} for c in children]
    if regex is not None:
        members.append({"type": "Node", "selector": {"regexMatch": {"pattern": regex}}})
    if labels is not None:
        members.append({"type": "Node", "selector": {"labelMatch": {"matchLabels": dict(labels)}}})
    spec = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": spec}


def vcjob(name, ns="default", labels=None, policies=None, task_policies=None):
    tasks = [{"name": t, "replicas": 1, "policies": p} for t, p in (task_policies or {}).items()]
    spec = {"schedulerName": "volcano", "queue": "default", "tasks": tasks}
    if policies:
        spec["policies"] = policies
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": ns, "labels": dict(labels or {})}, "spec": spec}


def gang(name, ns="default", workers=(), min_member=None, labels=None, cards=1, owner=None, topology=None, **kw):
    """A Volcano job's PodGroup and its worker pods: `workers` lists the node of each worker;
    `topology` the PodGroup's networkTopology (see podgroup)."""
    owner = owner or ("Job", name)
    objs = [podgroup(f"{name}-pg", ns, min_member if min_member is not None else len(workers), labels, owner,
                     topology)]
    for i, n in enumerate(workers):
        objs.append(pod(f"{name}-worker-{i}", cards=cards, on=n, group=f"{name}-pg", ns=ns, owner=owner,
                        labels=labels, **kw))
    return objs


def spec(resource=R, min_improvement=None, scope=None, max_podgroups=None, max_cards=None, topology=None):
    """A DryRun spec; `topology` its spec.networkTopology (a block goal)."""
    goal = {"resource": resource}
    if min_improvement is not None:
        goal["minFragImprovementPercent"] = min_improvement
    s = {"mode": "DryRun", "goals": [goal]}
    if scope:
        s["scope"] = scope
    mpr = {}
    if max_podgroups is not None:
        mpr["podGroups"] = max_podgroups
    if max_cards is not None:
        mpr["resources"] = {resource: max_cards}
    if mpr:
        s["maxPerRun"] = mpr
    if topology is not None:
        s["networkTopology"] = dict(topology)
    return s
