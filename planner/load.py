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
from .quantity import scaled
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


def flatten(objs):
    """The objects in order, with Lists, nested Lists and JSON arrays opened (without recursion,
    so nesting depth costs memory, not the interpreter's stack)."""
    stack = [iter(objs)]
    while stack:
        for o in stack[-1]:
            if o is None:
                continue
            if isinstance(o, list):
                stack.append(iter(o))
                break
            kind = o.get("kind") if isinstance(o, dict) else None
            if isinstance(kind, str) and kind.endswith("List") and isinstance(o.get("items"), list):
                stack.append(_list_items(o, kind))
                break
            yield o
        else:
            stack.pop()


def _list_items(lst, kind):
    # `kubectl get pods -o json` items carry kind; the raw API's PodList items do not.
    item_kind = kind[:-4] if kind != "List" else None
    api = lst.get("apiVersion") if isinstance(lst.get("apiVersion"), str) else "v1"
    for it in lst["items"]:
        if isinstance(it, dict) and "kind" not in it and item_kind:
            it = dict(it, kind=item_kind, apiVersion=api)
        yield it


def load_objects(objects) -> ClusterSnapshot:
    """Build a snapshot from Kubernetes objects (dicts, Lists, or nested lists of them). Pure: a
    caller loading a large cluster may pause cyclic GC around it (planner.gcpause.paused_gc)."""
    buckets = {k: [] for k, _ in _LOADERS.values()}
    seen = set()
    pod_uids = {}
    for i, obj in enumerate(flatten(objects)):
        if not isinstance(obj, dict):
            raise SnapshotError(f"item #{i}: expected a Kubernetes object, got {type(obj).__name__}")
        kind, api = obj.get("kind"), obj.get("apiVersion")
        ctx = Ctx(obj, i)
        for field_name, value in (("kind", kind), ("apiVersion", api)):
            if value is None or value == "":
                ctx.fail(field_name, "required field is missing")
            if not isinstance(value, str):
                ctx.fail(field_name, f"expected string, got {type(value).__name__}")
        if (api, kind) not in _READ_KINDS:
            continue
        bucket, loader = _LOADERS[kind]
        item = loader(ctx, obj)
        ident = (kind, getattr(item, "namespace", ""), item.name)
        if ident in seen:
            ctx.fail("metadata.name", "appears twice in the snapshot")
        seen.add(ident)
        uid = getattr(item, "uid", "")
        if kind == "Pod" and uid:
            if uid in pod_uids:
                ctx.fail("metadata.uid", f"{uid!r} is also the uid of pod {pod_uids[uid]}: "
                                         "a uid identifies one pod")
            pod_uids[uid] = f"{item.namespace}/{item.name}"
        buckets[bucket].append(item)
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
    return load_text(text, str(path))
