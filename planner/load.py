"""The one entry of cluster data: Kubernetes objects as the API returns them -> ClusterSnapshot.

Accepts a `v1 List` (as `kubectl get -o json` prints), nested Lists, a single object, a JSON array,
or a YAML stream. Kinds the planner does not read (Events, Services...) are ignored; malformed
objects raise SnapshotError naming the object and the field (the typed field readers are
`planner.fields`).
"""
from types import MappingProxyType

from . import documents
from .errors import DocumentError, SnapshotError
from .fields import (Ctx, read_exact, read_field, read_int, read_list, read_node_terms, read_objects, read_owner,
                     read_resources, read_selector, read_str, read_strings, read_strmap)
from .model import (EMPTY, ClusterSnapshot, Condition, HostPort, ModelServing, Namespace, Node, PersistentVolume,
                    PersistentVolumeClaim, Pod, PodAffinityTerm, PodDisruptionBudget, PodGroup, Queue,
                    SpreadConstraint, Taint, Toleration, VCJob)
from .model import OwnerRef
from .quantity import SCALED_TEXTS, scaled, scaled_fresh
from .topology import HyperNode, Member, NetworkTopology, SubGroupPolicy

_READ_KINDS = {
    ("v1", "Node"), ("v1", "Pod"), ("v1", "PersistentVolume"), ("v1", "PersistentVolumeClaim"),
    ("v1", "Namespace"), ("policy/v1", "PodDisruptionBudget"), ("policy/v1beta1", "PodDisruptionBudget"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"), ("batch.volcano.sh/v1alpha1", "Job"),
    ("workload.serving.volcano.sh/v1alpha1", "ModelServing"), ("topology.volcano.sh/v1alpha1", "HyperNode"),
    ("scheduling.volcano.sh/v1beta1", "Queue"),
}


def selector_of(obj: dict, path: str = "spec.selector"):
    """The metav1.LabelSelector at `path` of `obj` (None when absent), for matching with
    planner.selectors. Like apimachinery's LabelSelectorAsSelector, an unknown operator is an
    error: SnapshotError naming the object and the field."""
    ctx = Ctx(obj, 0)
    return read_selector(ctx, read_field(ctx, obj, path, dict, None), path)


def _pod_level(resource) -> bool:
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


def pod_requests(ctx, spec):
    """Requests as the scheduler counts them (component-helpers PodRequests): max(sum of containers +
    sidecars, each init step), pod-level cpu/memory/hugepages requests when set, plus overhead;
    summed exactly, then scaled once."""
    def container_req(c, p):
        if not isinstance(c, dict):
            ctx.fail(p, f"expected a container object, got {type(c).__name__}")
        res = c.get("resources") or {}
        if not isinstance(res, dict):
            ctx.fail(f"{p}.resources", "expected an object")
        read_str(ctx, c, "restartPolicy", at=f"{p}.")
        req = read_exact(ctx, res.get("requests") or {}, f"{p}.resources.requests")
        # The API server defaults a missing request to its limit; files written by hand may lack it.
        for r, v in read_exact(ctx, res.get("limits") or {}, f"{p}.resources.limits").items():
            req.setdefault(r, v)
        return req

    containers = read_field(ctx, spec, "containers", list, [], at="spec.")
    total = {}
    for i, c in enumerate(containers):
        for r, v in container_req(c, f"spec.containers[{i}]").items():
            total[r] = total.get(r, 0) + v
    sidecars, init_max = {}, {}
    for i, c in enumerate(read_field(ctx, spec, "initContainers", list, [], at="spec.")):
        req = container_req(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":
            for r, v in req.items():
                total[r] = total.get(r, 0) + v
                sidecars[r] = sidecars.get(r, 0) + v
            step = dict(sidecars)
        else:
            step = {r: v + sidecars.get(r, 0) for r, v in req.items()}
            for r, v in sidecars.items():
                step.setdefault(r, v)
        for r, v in step.items():
            init_max[r] = max(init_max.get(r, 0), v)
    for r, v in init_max.items():
        total[r] = max(total.get(r, 0), v)
    pod_res = spec.get("resources") or {}
    if not isinstance(pod_res, dict):
        ctx.fail("spec.resources", "expected an object")
    level = {r: v for r, v in read_exact(ctx, pod_res.get("requests") or {}, "spec.resources.requests").items()
             if _pod_level(r)}
    # The API server defaults a pod-level request to its limit when no container requests that resource.
    for r, v in read_exact(ctx, pod_res.get("limits") or {}, "spec.resources.limits").items():
        if _pod_level(r) and r not in level and r not in total:
            level[r] = v
    total.update(level)
    for r, v in read_exact(ctx, spec.get("overhead") or {}, "spec.overhead").items():
        total[r] = total.get(r, 0) + v
    out = {r: scaled(r, v) for r, v in total.items()}
    out = {r: v for r, v in out.items() if v}
    out["pods"] = 1
    return out


def _pod_affinity_terms(ctx, terms, path):
    if not isinstance(terms, list):
        ctx.fail(path, "expected a list")
    out = []
    for i, t in enumerate(terms):
        p = f"{path}[{i}]"
        if not isinstance(t, dict):
            ctx.fail(p, "expected an object")
        out.append(PodAffinityTerm(
            read_selector(ctx, t.get("labelSelector"), f"{p}.labelSelector"),
            read_field(ctx, t, "topologyKey", str, required=True, at=f"{p}."),
            read_strings(ctx, t, "namespaces", at=f"{p}."),
            read_selector(ctx, t.get("namespaceSelector"), f"{p}.namespaceSelector")))
    return tuple(out)


_PROTOCOLS = ("TCP", "UDP", "SCTP")
_REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def _load_pod(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    spec = read_field(ctx, obj, "spec", dict, required=True)
    status = read_field(ctx, obj, "status", dict, {})
    name = read_field(ctx, meta, "name", str, required=True, at="metadata.")
    annotations = read_strmap(ctx, obj, "metadata.annotations")
    aff = read_field(ctx, spec, "affinity", dict, {}, at="spec.")
    node_aff = read_field(ctx, aff, "nodeAffinity", dict, {}, at="spec.affinity.")
    node_req = read_field(ctx, node_aff, _REQ, dict, {}, at="spec.affinity.nodeAffinity.")
    terms = None
    if node_req:
        terms = read_node_terms(ctx, node_req.get("nodeSelectorTerms") or [],
                            f"spec.affinity.nodeAffinity.{_REQ}.nodeSelectorTerms")
    tols = []
    for p, t in read_objects(ctx, read_list(ctx, spec, "tolerations", at="spec."), "spec.tolerations"):
        tols.append(Toleration(read_str(ctx, t, "key", at=f"{p}."),
                               read_str(ctx, t, "operator", "Equal", at=f"{p}."),
                               read_str(ctx, t, "value", at=f"{p}."), read_str(ctx, t, "effect", at=f"{p}.")))
        read_int(ctx, t, "tolerationSeconds", at=f"{p}.", low=-2 ** 63, high=2 ** 63 - 1)
    ports = []
    init_containers = list(read_objects(ctx, read_list(ctx, spec, "initContainers", at="spec."), "spec.initContainers",
                                    "a container object"))
    containers = list(read_objects(ctx, read_list(ctx, spec, "containers", at="spec."), "spec.containers",
                               "a container object"))
    # Host ports held while the pod runs: containers and sidecars (restartable init containers).
    holders = [(p, c) for p, c in init_containers if c.get("restartPolicy") == "Always"] + containers
    for cp, c in holders:
        for p, port in read_objects(ctx, read_list(ctx, c, "ports", at=f"{cp}."), f"{cp}.ports"):
            hp = read_int(ctx, port, "hostPort", 0, at=f"{p}.", low=0, high=65535)
            protocol = read_str(ctx, port, "protocol", "TCP", at=f"{p}.", choices=_PROTOCOLS)
            host_ip = read_str(ctx, port, "hostIP", "0.0.0.0", at=f"{p}.")
            read_int(ctx, port, "containerPort", at=f"{p}.", low=0, high=65535)
            if hp:
                ports.append(HostPort(protocol, host_ip, hp))
    spread = []
    for p, c in read_objects(ctx, read_list(ctx, spec, "topologySpreadConstraints", at="spec."),
                         "spec.topologySpreadConstraints"):
        when = read_str(ctx, c, "whenUnsatisfiable", "DoNotSchedule", at=f"{p}.",
                    choices=("DoNotSchedule", "ScheduleAnyway"))
        max_skew = read_int(ctx, c, "maxSkew", at=f"{p}.", low=1)
        if max_skew is None:
            ctx.fail(f"{p}.maxSkew", "required field is missing")
        topology_key = read_field(ctx, c, "topologyKey", str, required=True, at=f"{p}.")
        selector = read_selector(ctx, c.get("labelSelector"), f"{p}.labelSelector")
        min_domains = read_int(ctx, c, "minDomains", 1, at=f"{p}.", low=1)
        affinity_policy = read_str(ctx, c, "nodeAffinityPolicy", "Honor", at=f"{p}.", choices=("Honor", "Ignore"))
        taints_policy = read_str(ctx, c, "nodeTaintsPolicy", "Ignore", at=f"{p}.", choices=("Honor", "Ignore"))
        if when == "DoNotSchedule":
            spread.append(SpreadConstraint(max_skew, topology_key, selector, min_domains,
                                           affinity_policy, taints_policy))
    pvcs = []
    for p, v in read_objects(ctx, read_list(ctx, spec, "volumes", at="spec."), "spec.volumes"):
        claim = read_field(ctx, v, "persistentVolumeClaim", dict, {}, at=f"{p}.")
        claim_name = read_str(ctx, claim, "claimName", at=f"{p}.persistentVolumeClaim.")
        if claim_name:
            pvcs.append(claim_name)
    pa = read_field(ctx, aff, "podAffinity", dict, {}, at="spec.affinity.")
    paa = read_field(ctx, aff, "podAntiAffinity", dict, {}, at="spec.affinity.")
    return Pod(
        namespace=read_str(ctx, meta, "namespace", "default", at="metadata."), name=name,
        uid=read_str(ctx, meta, "uid", at="metadata."),
        node_name=read_str(ctx, spec, "nodeName", at="spec."), phase=read_str(ctx, status, "phase", "Pending", at="status."),
        labels=read_strmap(ctx, obj, "metadata.labels"), annotations=annotations,
        scheduler_name=read_str(ctx, spec, "schedulerName", "default-scheduler", at="spec."),
        requests=MappingProxyType(pod_requests(ctx, spec)), owner=read_owner(ctx, meta),
        node_selector=read_strmap(ctx, obj, "spec.nodeSelector"), affinity_terms=terms,
        tolerations=tuple(tols), host_ports=tuple(ports),
        pod_affinity=_pod_affinity_terms(ctx, pa.get(_REQ) or [], f"spec.affinity.podAffinity.{_REQ}"),
        pod_anti_affinity=_pod_affinity_terms(ctx, paa.get(_REQ) or [],
                                              f"spec.affinity.podAntiAffinity.{_REQ}"),
        spread=tuple(spread), pvc_names=tuple(pvcs),
        terminating=bool(read_str(ctx, meta, "deletionTimestamp", at="metadata.")),
        mirror="kubernetes.io/config.mirror" in annotations, priority=read_int(ctx, spec, "priority", 0, at="spec."))


def _load_node(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    name = read_field(ctx, meta, "name", str, required=True, at="metadata.")
    status = read_field(ctx, obj, "status", dict, {})
    alloc = status.get("allocatable")
    if alloc is None:
        alloc = status.get("capacity") or {}
        path = "status.capacity"
    else:
        path = "status.allocatable"
    taints = []
    for p, t in read_objects(ctx, read_field(ctx, obj, "spec.taints", list, []), "spec.taints"):
        if not t.get("key") or not t.get("effect"):
            ctx.fail(p, "key and effect are required")
        taints.append(Taint(read_str(ctx, t, "key", at=f"{p}."), read_str(ctx, t, "value", at=f"{p}."),
                            read_str(ctx, t, "effect", at=f"{p}.")))
    resources = read_resources(ctx, alloc, path)
    resources.setdefault("pods", 110)  # kubelet default maxPods; real Node objects always carry it
    return Node(name, read_strmap(ctx, obj, "metadata.labels"), MappingProxyType(resources),
                bool(read_field(ctx, obj, "spec.unschedulable", bool, False)), tuple(taints))


def _network_topology(ctx, obj, path, at=""):
    """A `networkTopology` (PodGroup, SubGroup policy, VCJob) at `path` of `obj`, None when absent."""
    nt = read_field(ctx, obj, path, dict, None, at=at)
    if nt is None:
        return None
    path = at + path
    at = f"{path}."
    tier = read_int(ctx, nt, "highestTierAllowed", None, at=at, low=0)
    name = read_str(ctx, nt, "highestTierName", at=at)
    if tier is not None and name:
        ctx.fail(path, "highestTierAllowed and highestTierName are mutually exclusive")
    return NetworkTopology(read_str(ctx, nt, "mode", "hard", at=at, choices=("hard", "soft")), tier, name)


def _load_podgroup(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    mm = read_int(ctx, obj, "spec.minMember", 0, low=0)
    subgroups = []
    for p, s in read_objects(ctx, read_field(ctx, obj, "spec.subGroupPolicy", list, []), "spec.subGroupPolicy"):
        subgroups.append(SubGroupPolicy(read_str(ctx, s, "name", at=f"{p}."),
                                        _network_topology(ctx, s, "networkTopology", at=f"{p}."),
                                        read_selector(ctx, s.get("labelSelector"), f"{p}.labelSelector"),
                                        read_strings(ctx, s, "matchLabelKeys", at=f"{p}.")))
    conditions = tuple(
        Condition(read_str(ctx, c, "type", at=f"{p}."), read_str(ctx, c, "status", at=f"{p}."),
                  read_str(ctx, c, "reason", at=f"{p}."), read_str(ctx, c, "message", at=f"{p}."),
                  read_str(ctx, c, "lastTransitionTime", at=f"{p}."))
        for p, c in read_objects(ctx, read_field(ctx, obj, "status.conditions", list, []) or [], "status.conditions"))
    return PodGroup(read_str(ctx, meta, "namespace", "default", at="metadata."),
                    read_field(ctx, meta, "name", str, required=True, at="metadata."),
                    read_strmap(ctx, obj, "metadata.labels"), mm, read_owner(ctx, meta),
                    read_strmap(ctx, obj, "metadata.annotations"),
                    _network_topology(ctx, obj, "spec.networkTopology"), tuple(subgroups),
                    read_str(ctx, obj, "spec.queue", "default"), read_str(ctx, obj, "status.phase"), conditions,
                    MappingProxyType(read_resources(ctx, read_field(ctx, obj, "spec.minResources", dict, {}) or {},
                                                    "spec.minResources")))


def _load_queue(ctx, obj):
    """A Volcano Queue: its state, capability, guarantee and what is allocated in it."""
    meta = read_field(ctx, obj, "metadata", dict, required=True)

    def resources(path):
        return MappingProxyType(read_resources(ctx, read_field(ctx, obj, path, dict, {}) or {}, path))
    return Queue(read_field(ctx, meta, "name", str, required=True, at="metadata."),
                 read_str(ctx, obj, "status.state"), resources("spec.capability"),
                 resources("spec.guarantee.resource"), resources("status.allocated"))


_MEMBER_TYPES = ("Node", "HyperNode")


def _load_hypernode(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    name = read_field(ctx, meta, "name", str, required=True, at="metadata.")
    tier = read_int(ctx, obj, "spec.tier", None, low=0)
    if tier is None:
        ctx.fail("spec.tier", "required field is missing")
    members = []
    for p, m in read_objects(ctx, read_field(ctx, obj, "spec.members", list, []), "spec.members"):
        mtype = read_str(ctx, m, "type", at=f"{p}.", choices=_MEMBER_TYPES)
        sel = read_field(ctx, m, "selector", dict, {}, at=f"{p}.")
        at = f"{p}.selector."
        exact = read_field(ctx, sel, "exactMatch", dict, None, at=at)
        regex = read_field(ctx, sel, "regexMatch", dict, None, at=at)
        label = read_field(ctx, sel, "labelMatch", dict, None, at=at)
        if sum(x is not None for x in (exact, regex, label)) != 1:
            ctx.fail(f"{p}.selector", "exactly one of exactMatch, regexMatch and labelMatch is required")
        if exact is not None:
            members.append(Member(mtype, exact=read_str(ctx, exact, "name", at=f"{at}exactMatch.")))
        elif regex is not None:
            members.append(Member(mtype, regex=read_str(ctx, regex, "pattern", at=f"{at}regexMatch.")))
        else:
            # Volcano logs a selector it cannot parse and matches nothing with it
            try:
                members.append(Member(mtype, labels=read_selector(ctx, label, f"{at}labelMatch")))
            except SnapshotError:
                members.append(Member(mtype, invalid_labels=True))
    return HyperNode(name, tier, read_str(ctx, obj, "spec.tierName"), tuple(members))


def _load_pv(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    req = read_field(ctx, obj, "spec.nodeAffinity.required", dict, None)
    terms = None
    if req is not None:
        terms = read_node_terms(ctx, req.get("nodeSelectorTerms") or [], "spec.nodeAffinity.required.nodeSelectorTerms")
    spec = read_field(ctx, obj, "spec", dict, {})
    local = bool(read_field(ctx, spec, "local", dict, None, at="spec.")) or bool(read_field(ctx, spec, "hostPath", dict, None, at="spec."))
    return PersistentVolume(read_field(ctx, meta, "name", str, required=True, at="metadata."), terms, local)


def _load_pvc(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    return PersistentVolumeClaim(read_str(ctx, meta, "namespace", "default", at="metadata."),
                                 read_field(ctx, meta, "name", str, required=True, at="metadata."),
                                 read_field(ctx, obj, "spec.volumeName", str, ""))


def _load_pdb(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    spec = read_field(ctx, obj, "spec", dict, {})
    return PodDisruptionBudget(read_str(ctx, meta, "namespace", "default", at="metadata."),
                               read_field(ctx, meta, "name", str, required=True, at="metadata."),
                               read_selector(ctx, spec.get("selector"), "spec.selector"),
                               read_int(ctx, obj, "status.disruptionsAllowed", None))


def _evicted_action(ctx, policies, path):
    if not isinstance(policies, list):
        ctx.fail(path, "expected a list")
    for i, p in enumerate(policies):
        if not isinstance(p, dict):
            ctx.fail(f"{path}[{i}]", "expected an object")
        listed = p.get("events") or []
        if not isinstance(listed, list) or any(not isinstance(e, str) for e in listed):
            ctx.fail(f"{path}[{i}].events", "expected a list of strings")
        single = p.get("event") or ""
        if not isinstance(single, str):
            ctx.fail(f"{path}[{i}].event", "expected a string")
        action = read_str(ctx, p, "action", at=f"{path}[{i}].")
        events = listed + ([single] if single else [])
        if "PodEvicted" in events or "*" in events:
            return action
    return ""


def _load_vcjob(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    spec = read_field(ctx, obj, "spec", dict, {})
    tasks = {}
    for p, t in read_objects(ctx, read_field(ctx, spec, "tasks", list, [], at="spec."), "spec.tasks"):
        act = _evicted_action(ctx, t.get("policies") or [], f"{p}.policies")
        task_name = read_str(ctx, t, "name", at=f"{p}.")
        if act:
            tasks[task_name] = act
    return VCJob(read_str(ctx, meta, "namespace", "default", at="metadata."),
                 read_field(ctx, meta, "name", str, required=True, at="metadata."),
                 read_strmap(ctx, obj, "metadata.labels"), _evicted_action(ctx, spec.get("policies") or [], "spec.policies"),
                 MappingProxyType(tasks) if tasks else EMPTY, read_strmap(ctx, obj, "metadata.annotations"),
                 _network_topology(ctx, obj, "spec.networkTopology"))


def _load_modelserving(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    return ModelServing(read_str(ctx, meta, "namespace", "default", at="metadata."),
                        read_field(ctx, meta, "name", str, required=True, at="metadata."),
                        read_strmap(ctx, obj, "metadata.labels"), read_field(ctx, obj, "spec.recoveryPolicy", str, ""),
                        read_strmap(ctx, obj, "metadata.annotations"))


def _load_namespace(ctx, obj):
    meta = read_field(ctx, obj, "metadata", dict, required=True)
    name = read_field(ctx, meta, "name", str, required=True, at="metadata.")
    labels = dict(read_strmap(ctx, obj, "metadata.labels"))
    labels.setdefault("kubernetes.io/metadata.name", name)
    return Namespace(name, MappingProxyType(labels))


_LOADERS = {"Node": ("nodes", _load_node), "Pod": ("pods", _load_pod), "PodGroup": ("podgroups", _load_podgroup),
            "PersistentVolume": ("pvs", _load_pv), "PersistentVolumeClaim": ("pvcs", _load_pvc),
            "PodDisruptionBudget": ("pdbs", _load_pdb), "Job": ("vcjobs", _load_vcjob),
            "ModelServing": ("modelservings", _load_modelserving), "Namespace": ("namespaces", _load_namespace),
            "HyperNode": ("hypernodes", _load_hypernode), "Queue": ("queues", _load_queue)}


# -- the fast path ------------------------------------------------------------------------------
# A snapshot of 10,000 nodes holds ~70,000 objects and ~1.6 million fields the checked readers above
# would read one generic call each. The builders below read the shapes real objects have with plain
# dict access and exact type tests, and give up (raise anything) at the first value they are not
# sure of: the checked reader then reads that object from the start, so it alone decides what is
# refused and what every error says. A builder that completes must give exactly what the checked
# reader gives (tests/unit/planner/test_load_fast.py compares them on generated clusters and on
# every hostile mutation).


class _Unusual(Exception):
    """Not a shape the fast path reads: the checked reader reads the object."""


def _text(d, key, default=""):
    """read_str without choices: None or missing gives `default`, so does ""."""
    v = d.get(key)
    if v is None:
        return default
    if type(v) is not str:
        raise _Unusual
    return v or default


def _dict(d, key):
    """read_field(d, key, dict, {}) for an optional object."""
    v = d.get(key)
    if v is None:
        return {}
    if type(v) is not dict:
        raise _Unusual
    return v


def _list(d, key):
    v = d.get(key)
    if v is None:
        return ()
    if type(v) is not list:
        raise _Unusual
    return v


def _strings(m):
    """read_strmap of the map `m` (None when absent)."""
    if not m:
        if m is None or type(m) is dict:
            return EMPTY
        raise _Unusual
    if type(m) is not dict:
        raise _Unusual
    for k, v in m.items():
        if type(v) is not str or type(k) is not str:
            raise _Unusual
    return MappingProxyType(dict(m))


def _amounts(m):
    """read_resources of an object of quantities, each >= 0: {resource: scaled amount}."""
    if type(m) is not dict:
        raise _Unusual
    out = {}
    for r, q in m.items():
        table = SCALED_TEXTS.get(r)
        a = table.get(q) if table is not None and type(q) is str else None
        if a is None:
            if type(r) is not str:
                raise _Unusual
            a = scaled_fresh(r, q)
            if a is None:
                raise _Unusual
        out[r] = a
    return out


def _owner(meta):
    """read_owner: the controller reference (model.controller_of), every reference checked."""
    refs = meta.get("ownerReferences")
    if not refs:
        return None
    if type(refs) is not list:
        raise _Unusual
    owner = None
    for r in refs:
        if type(r) is not dict:
            raise _Unusual
        kind, name, api, controller = r.get("kind"), r.get("name"), r.get("apiVersion"), r.get("controller")
        if (type(kind) is not str or type(name) is not str or not kind or not name
                or (api is not None and type(api) is not str)
                or (controller is not None and type(controller) is not bool)):
            raise _Unusual
        if controller is True and owner is None:
            owner = OwnerRef(api or "", kind, name, True)
    return owner


def _int(d, key, default, low, high):
    v = d.get(key)
    if v is None:
        return default
    if type(v) is not int or not low <= v <= high:
        raise _Unusual
    return v


_INT32 = (-2 ** 31, 2 ** 31 - 1)
_INT64 = (-2 ** 63, 2 ** 63 - 1)


def _simple_requests(spec, containers):
    """pod_requests of a pod with one container and nothing else that counts (no init containers,
    pod-level resources or overhead): its requests, a missing request taken from its limit."""
    c = containers[0]
    res = c.get("resources") or {}
    if type(res) is not dict:
        raise _Unusual
    rp = c.get("restartPolicy")
    if rp is not None and type(rp) is not str:
        raise _Unusual
    amounts = _amounts(res.get("requests") or {})
    for r, a in _amounts(res.get("limits") or {}).items():
        if r not in amounts:
            amounts[r] = a
    out = {r: a for r, a in amounts.items() if a}
    out["pods"] = 1
    return out


def _fast_pod(ctx, obj):
    meta, spec = obj.get("metadata"), obj.get("spec")
    if type(meta) is not dict or type(spec) is not dict:
        raise _Unusual
    status = _dict(obj, "status")
    name = meta.get("name")
    if type(name) is not str:
        raise _Unusual
    annotations = _strings(meta.get("annotations"))
    inits, containers = _list(spec, "initContainers"), _list(spec, "containers")
    for c in inits:
        if type(c) is not dict:
            raise _Unusual
    for c in containers:
        if type(c) is not dict:
            raise _Unusual
    if not inits and len(containers) == 1 and not spec.get("resources") and not spec.get("overhead"):
        requests = _simple_requests(spec, containers)
    else:
        requests = pod_requests(ctx, spec)
    terms, affinity, anti_affinity = None, (), ()
    aff = _dict(spec, "affinity")
    if aff:
        node_req = _dict(_dict(aff, "nodeAffinity"), _REQ)
        if node_req:
            terms = read_node_terms(ctx, node_req.get("nodeSelectorTerms") or [], "")
        pa, paa = _dict(aff, "podAffinity"), _dict(aff, "podAntiAffinity")
        affinity = _pod_affinity_terms(ctx, pa.get(_REQ) or [], "")
        anti_affinity = _pod_affinity_terms(ctx, paa.get(_REQ) or [], "")
    tolerations = []
    for t in _list(spec, "tolerations"):
        if type(t) is not dict:
            raise _Unusual
        tolerations.append(Toleration(_text(t, "key"), _text(t, "operator", "Equal"), _text(t, "value"),
                                      _text(t, "effect")))
        _int(t, "tolerationSeconds", None, *_INT64)
    ports = []
    holders = [c for c in inits if c.get("restartPolicy") == "Always"] + list(containers) if inits else containers
    for c in holders:
        for port in _list(c, "ports"):
            if type(port) is not dict:
                raise _Unusual
            hp = _int(port, "hostPort", 0, 0, 65535)
            protocol = _text(port, "protocol", "TCP")
            if protocol not in _PROTOCOLS:
                raise _Unusual
            host_ip = _text(port, "hostIP", "0.0.0.0")
            _int(port, "containerPort", None, 0, 65535)
            if hp:
                ports.append(HostPort(protocol, host_ip, hp))
    spread = spec.get("topologySpreadConstraints")
    if spread is not None and (type(spread) is not list or spread):
        raise _Unusual
    pvcs = []
    for v in _list(spec, "volumes"):
        if type(v) is not dict:
            raise _Unusual
        claim = v.get("persistentVolumeClaim")
        if claim is not None:
            if type(claim) is not dict:
                raise _Unusual
            claim_name = _text(claim, "claimName")
            if claim_name:
                pvcs.append(claim_name)
    return Pod(
        namespace=_text(meta, "namespace", "default"), name=name, uid=_text(meta, "uid"),
        node_name=_text(spec, "nodeName"), phase=_text(status, "phase", "Pending"),
        labels=_strings(meta.get("labels")), annotations=annotations,
        scheduler_name=_text(spec, "schedulerName", "default-scheduler"),
        requests=MappingProxyType(requests), owner=_owner(meta),
        node_selector=_strings(spec.get("nodeSelector")), affinity_terms=terms,
        tolerations=tuple(tolerations), host_ports=tuple(ports), pod_affinity=affinity,
        pod_anti_affinity=anti_affinity, spread=(), pvc_names=tuple(pvcs),
        terminating=bool(_text(meta, "deletionTimestamp")),
        mirror="kubernetes.io/config.mirror" in annotations, priority=_int(spec, "priority", 0, *_INT32))


def _meta_name(obj):
    """(metadata, name) of an object the fast path reads; _Unusual unless both are plain."""
    meta = obj.get("metadata")
    if type(meta) is not dict:
        raise _Unusual
    name = meta.get("name")
    if type(name) is not str:
        raise _Unusual
    return meta, name


def _fast_node(ctx, obj):
    meta, name = _meta_name(obj)
    status = _dict(obj, "status")
    alloc = status.get("allocatable")
    if alloc is None:
        alloc = status.get("capacity") or {}
    resources = _amounts(alloc)
    resources.setdefault("pods", 110)
    spec = _dict(obj, "spec")
    taints = []
    for t in _list(spec, "taints"):
        if type(t) is not dict or not t.get("key") or not t.get("effect"):
            raise _Unusual
        taints.append(Taint(_text(t, "key"), _text(t, "value"), _text(t, "effect")))
    unschedulable = spec.get("unschedulable")
    if unschedulable is not None and type(unschedulable) is not bool:
        raise _Unusual
    return Node(name, _strings(meta.get("labels")), MappingProxyType(resources), bool(unschedulable),
                tuple(taints))


def _fast_podgroup(ctx, obj):
    meta, name = _meta_name(obj)
    spec, status = _dict(obj, "spec"), _dict(obj, "status")
    subgroups = spec.get("subGroupPolicy")
    if subgroups is not None and (type(subgroups) is not list or subgroups):
        raise _Unusual
    conditions = []
    for c in _list(status, "conditions"):
        if type(c) is not dict:
            raise _Unusual
        conditions.append(Condition(_text(c, "type"), _text(c, "status"), _text(c, "reason"), _text(c, "message"),
                                    _text(c, "lastTransitionTime")))
    topology = None
    if spec.get("networkTopology") is not None:
        topology = _network_topology(ctx, obj, "spec.networkTopology")
    return PodGroup(_text(meta, "namespace", "default"), name, _strings(meta.get("labels")),
                    _int(spec, "minMember", 0, 0, _INT32[1]), _owner(meta), _strings(meta.get("annotations")),
                    topology, (), _text(spec, "queue", "default"), _text(status, "phase"), tuple(conditions),
                    MappingProxyType(_amounts(_dict(spec, "minResources"))))


def _fast_vcjob(ctx, obj):
    meta, name = _meta_name(obj)
    spec = _dict(obj, "spec")
    tasks = {}
    for t in _list(spec, "tasks"):
        if type(t) is not dict:
            raise _Unusual
        action = _evicted_action(ctx, t.get("policies") or [], "")
        task_name = _text(t, "name")
        if action:
            tasks[task_name] = action
    topology = None
    if spec.get("networkTopology") is not None:
        topology = _network_topology(ctx, obj, "spec.networkTopology")
    return VCJob(_text(meta, "namespace", "default"), name, _strings(meta.get("labels")),
                 _evicted_action(ctx, spec.get("policies") or [], ""), MappingProxyType(tasks) if tasks else EMPTY,
                 _strings(meta.get("annotations")), topology)


def _fast_modelserving(ctx, obj):
    meta, name = _meta_name(obj)
    policy = _dict(obj, "spec").get("recoveryPolicy")
    if policy is None:
        policy = ""
    elif type(policy) is not str:
        raise _Unusual
    return ModelServing(_text(meta, "namespace", "default"), name, _strings(meta.get("labels")), policy,
                        _strings(meta.get("annotations")))


def _fast_namespace(ctx, obj):
    meta, name = _meta_name(obj)
    labels = dict(_strings(meta.get("labels")))
    labels.setdefault("kubernetes.io/metadata.name", name)
    return Namespace(name, MappingProxyType(labels))


_FAST = {"Pod": _fast_pod, "Node": _fast_node, "PodGroup": _fast_podgroup, "Job": _fast_vcjob,
         "ModelServing": _fast_modelserving, "Namespace": _fast_namespace}


def _entries(objs):
    """(object, kind, apiVersion) for each object in order, Lists, nested Lists and JSON arrays
    opened without recursion (nesting depth costs memory, not the interpreter's stack). kind and
    apiVersion are None, except for an item of a typed List (`PodList`) without a kind of its own:
    the raw API's list items carry none, and take the List's (no copy of the item is made)."""
    stack = [(iter(objs), None, None)]
    while stack:
        items, item_kind, list_api = stack[-1]
        for o in items:
            kind = api = None
            if item_kind and isinstance(o, dict) and "kind" not in o:
                kind, api = item_kind, list_api
            if o is None:
                continue
            if isinstance(o, list):
                stack.append((iter(o), None, None))
                break
            k = kind if kind is not None else (o.get("kind") if isinstance(o, dict) else None)
            if isinstance(k, str) and k.endswith("List") and isinstance(o.get("items"), list):
                a = api if api is not None else o.get("apiVersion")
                stack.append((iter(o["items"]), k[:-4] if k != "List" else None, a if isinstance(a, str) else "v1"))
                break
            yield o, kind, api
        else:
            stack.pop()


def flatten(objs):
    """The objects in order, with Lists, nested Lists and JSON arrays opened; an item of a typed
    List without a kind is given the List's kind and apiVersion (in a copy)."""
    for o, kind, api in _entries(objs):
        yield o if kind is None else dict(o, kind=kind, apiVersion=api)


def load_objects(objects) -> ClusterSnapshot:
    """Build a snapshot from Kubernetes objects (dicts, Lists, or nested lists of them). Pure: a
    caller loading a large cluster may pause cyclic GC around it (planner.gcpause.paused_gc)."""
    return _load(objects, fast=True)


_NAMESPACED = {"Pod", "PodGroup", "PersistentVolumeClaim", "PodDisruptionBudget", "Job", "ModelServing"}


def _load(objects, fast):
    """load_objects; with `fast` false, every object through its checked reader (the reference)."""
    buckets = {k: [] for k, _ in _LOADERS.values()}
    # (apiVersion, kind) -> (its bucket, fast builder, checked reader, namespaced)
    readers = {(api, kind): (buckets[_LOADERS[kind][0]], _FAST.get(kind) if fast else None, _LOADERS[kind][1],
                             kind in _NAMESPACED) for api, kind in _READ_KINDS}
    seen = set()
    pod_uids = {}
    for i, (obj, kind, api) in enumerate(_entries(objects)):
        if type(obj) is not dict and not isinstance(obj, dict):
            raise SnapshotError(f"item #{i}: expected a Kubernetes object, got {type(obj).__name__}")
        ctx = Ctx(obj, i, kind)
        if kind is None:
            kind, api = obj.get("kind"), obj.get("apiVersion")
        if type(kind) is not str or type(api) is not str or not kind or not api:
            for field_name, value in (("kind", kind), ("apiVersion", api)):
                if value is None or value == "":
                    ctx.fail(field_name, "required field is missing")
                if not isinstance(value, str):
                    ctx.fail(field_name, f"expected string, got {type(value).__name__}")
        reader = readers.get((api, kind))
        if reader is None:
            continue
        bucket, build, loader, namespaced = reader
        item = None
        if build is not None:
            try:
                item = build(ctx, obj)
            except Exception:   # whatever stopped it, the checked reader reads the object
                item = None
        if item is None:
            item = loader(ctx, obj)
        ident = (kind, item.namespace if namespaced else "", item.name)
        if ident in seen:
            ctx.fail("metadata.name", "appears twice in the snapshot")
        seen.add(ident)
        if kind == "Pod" and item.uid:
            uid = item.uid
            if uid in pod_uids:
                ctx.fail("metadata.uid", f"{uid!r} is also the uid of pod {pod_uids[uid].key}: "
                                         "a uid identifies one pod")
            pod_uids[uid] = item
        bucket.append(item)
    return ClusterSnapshot.build(**buckets)


def parse_text(text: str, source: str = "<input>"):
    """Parse JSON or a YAML stream into a list of objects (no interpretation), strictly and within
    bounds (planner.documents)."""
    try:
        return documents.parse(text, source)
    except DocumentError as e:
        raise SnapshotError(str(e)) from e


def load_text(text: str, source: str = "<input>") -> ClusterSnapshot:
    """Snapshot from the text of a List file or YAML stream."""
    return load_objects(parse_text(text, source))


def load_file(path) -> ClusterSnapshot:
    """Snapshot from a file written by `kubectl repack snapshot` or `kubectl get ... -o json`."""
    try:
        text = documents.read_file(path)
    except DocumentError as e:
        raise SnapshotError(str(e)) from e
    objects = parse_text(text, str(path))
    del text    # a 25,000-node snapshot is 100 MB of text: not kept while the model is built
    return load_objects(objects)
