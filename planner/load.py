"""The one entry of cluster data: Kubernetes objects as the API returns them -> ClusterSnapshot.

Accepts a `v1 List` (as `kubectl get -o json` prints), nested Lists, a single object, a JSON array,
or a YAML stream. Kinds the planner does not read (Events, Services...) are ignored; malformed
objects raise SnapshotError naming the object and the field.
"""
import json
from types import MappingProxyType

import yaml

from .errors import SnapshotError
from .model import (EMPTY, ClusterSnapshot, HostPort, LabelSelector, ModelServing, Namespace, Node,
                    NodeSelectorTerm, PersistentVolume, PersistentVolumeClaim, Pod,
                    PodAffinityTerm, PodDisruptionBudget, PodGroup, Requirement, SpreadConstraint,
                    Taint, Toleration, VCJob, controller_of)
import gc

from .quantity import parse_quantity_cached, scaled

_READ_KINDS = {
    ("v1", "Node"), ("v1", "Pod"), ("v1", "PersistentVolume"), ("v1", "PersistentVolumeClaim"),
    ("v1", "Namespace"), ("policy/v1", "PodDisruptionBudget"), ("policy/v1beta1", "PodDisruptionBudget"),
    ("scheduling.volcano.sh/v1beta1", "PodGroup"), ("batch.volcano.sh/v1alpha1", "Job"),
    ("workload.serving.volcano.sh/v1alpha1", "ModelServing"),
}


class _Ctx:
    """Names the object being read, so every error says where it is."""

    def __init__(self, obj, index):
        self.kind = obj.get("kind", "?") if isinstance(obj, dict) else "?"
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        ns, name = meta.get("namespace"), meta.get("name")
        self.label = f"{self.kind} {ns + '/' if ns else ''}{name or f'#{index}'}"

    def fail(self, path, msg):
        raise SnapshotError(f"{self.label}: {path}: {msg}")


def _get(ctx, obj, path, typ, default=None, required=False, at=""):
    """obj[path] checked for type; `at` is where obj sits in the object, so errors give the full path."""
    cur = obj
    full = at + path
    for part in path.split("."):
        if not isinstance(cur, dict):
            ctx.fail(full, f"expected an object at '{part}'")
        if part not in cur or cur[part] is None:
            if required:
                ctx.fail(full, "required field is missing")
            return default
        cur = cur[part]
    if typ is not None and not isinstance(cur, typ) or (typ is int and isinstance(cur, bool)):
        ctx.fail(full, f"expected {typ.__name__ if isinstance(typ, type) else typ[0].__name__}, got {type(cur).__name__}")
    return cur


def _strmap(ctx, obj, path):
    m = _get(ctx, obj, path, dict, {})
    for k, v in m.items():
        if not isinstance(v, str):
            ctx.fail(f"{path}.{k}", f"expected string, got {type(v).__name__}")
    return MappingProxyType(dict(m)) if m else EMPTY


def _resources(ctx, m, path):
    out = {}
    if not isinstance(m, dict):
        ctx.fail(path, "expected an object of quantities")
    for res, q in m.items():
        try:
            out[res] = scaled(res, q)
        except ValueError as e:
            ctx.fail(f"{path}.{res}", str(e))
    return out


def _requirements(ctx, items, path):
    if not isinstance(items, list):
        ctx.fail(path, "expected a list")
    out = []
    for i, r in enumerate(items):
        p = f"{path}[{i}]"
        if not isinstance(r, dict):
            ctx.fail(p, "expected an object")
        key = _get(ctx, r, "key", str, required=True, at=f"{p}.")
        op = _get(ctx, r, "operator", str, required=True, at=f"{p}.")
        vals = _get(ctx, r, "values", list, [], at=f"{p}.")
        if any(not isinstance(v, str) for v in vals):
            ctx.fail(f"{p}.values", "expected a list of strings")
        out.append(Requirement(key, op, tuple(vals)))
    return tuple(out)


def _selector(ctx, sel, path):
    if sel is None:
        return None
    if not isinstance(sel, dict):
        ctx.fail(path, "expected a label selector object")
    ml = sel.get("matchLabels") or {}
    if not isinstance(ml, dict) or any(not isinstance(v, str) for v in ml.values()):
        ctx.fail(f"{path}.matchLabels", "expected a map of strings")
    me = _requirements(ctx, sel.get("matchExpressions") or [], f"{path}.matchExpressions")
    for i, r in enumerate(me):
        if r.operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            ctx.fail(f"{path}.matchExpressions[{i}].operator", f"unknown operator {r.operator!r}")
    return LabelSelector(tuple(sorted(ml.items())), me)


def selector_of(obj: dict, path: str = "spec.selector"):
    """The metav1.LabelSelector at `path` of `obj` (None when absent), for matching with
    planner.selectors. Like apimachinery's LabelSelectorAsSelector, an unknown operator is an
    error: SnapshotError naming the object and the field."""
    ctx = _Ctx(obj, 0)
    return _selector(ctx, _get(ctx, obj, path, dict, None), path)


def _node_terms(ctx, terms, path):
    if not isinstance(terms, list):
        ctx.fail(path, "expected a list of node selector terms")
    out = []
    for i, t in enumerate(terms):
        p = f"{path}[{i}]"
        if not isinstance(t, dict):
            ctx.fail(p, "expected an object")
        out.append(NodeSelectorTerm(_requirements(ctx, t.get("matchExpressions") or [], f"{p}.matchExpressions"),
                                    _requirements(ctx, t.get("matchFields") or [], f"{p}.matchFields")))
    return tuple(out)


def _owner(ctx, meta):
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list):
        ctx.fail("metadata.ownerReferences", "expected a list")
    for i, r in enumerate(refs):
        if not isinstance(r, dict) or not r.get("kind") or not r.get("name"):
            ctx.fail(f"metadata.ownerReferences[{i}]", "kind and name are required")
    return controller_of(refs)


def _exact(ctx, m, path):
    """A ResourceList as exact amounts (summed before scaling, as PodRequests sums Quantities)."""
    out = {}
    if not isinstance(m, dict):
        ctx.fail(path, "expected an object of quantities")
    for res, q in m.items():
        try:
            out[res] = parse_quantity_cached(q)
        except ValueError as e:
            ctx.fail(f"{path}.{res}", str(e))
    return out


def _pod_level(resource) -> bool:
    return resource in ("cpu", "memory") or resource.startswith("hugepages-")


def pod_requests(ctx, spec):
    """Requests as the scheduler counts them (component-helpers PodRequests): max(sum of containers +
    sidecars, each init step), pod-level cpu/memory/hugepages requests when set, plus overhead;
    summed exactly, then scaled once."""
    def container_req(c, p):
        if not isinstance(c, dict):
            ctx.fail(p, "expected a container object")
        res = c.get("resources") or {}
        if not isinstance(res, dict):
            ctx.fail(f"{p}.resources", "expected an object")
        req = _exact(ctx, res.get("requests") or {}, f"{p}.resources.requests")
        # The API server defaults a missing request to its limit; files written by hand may lack it.
        for r, v in _exact(ctx, res.get("limits") or {}, f"{p}.resources.limits").items():
            req.setdefault(r, v)
        return req

    containers = _get(ctx, spec, "containers", list, [], at="spec.")
    total = {}
    for i, c in enumerate(containers):
        for r, v in container_req(c, f"spec.containers[{i}]").items():
            total[r] = total.get(r, 0) + v
    sidecars, init_max = {}, {}
    for i, c in enumerate(_get(ctx, spec, "initContainers", list, [], at="spec.")):
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
    level = {r: v for r, v in _exact(ctx, pod_res.get("requests") or {}, "spec.resources.requests").items()
             if _pod_level(r)}
    # The API server defaults a pod-level request to its limit when no container requests that resource.
    for r, v in _exact(ctx, pod_res.get("limits") or {}, "spec.resources.limits").items():
        if _pod_level(r) and r not in level and r not in total:
            level[r] = v
    total.update(level)
    for r, v in _exact(ctx, spec.get("overhead") or {}, "spec.overhead").items():
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
            _selector(ctx, t.get("labelSelector"), f"{p}.labelSelector"),
            _get(ctx, t, "topologyKey", str, required=True, at=f"{p}."),
            tuple(_get(ctx, t, "namespaces", list, [], at=f"{p}.")),
            _selector(ctx, t.get("namespaceSelector"), f"{p}.namespaceSelector")))
    return tuple(out)


def _load_pod(ctx, obj):
    meta = _get(ctx, obj, "metadata", dict, required=True)
    spec = _get(ctx, obj, "spec", dict, required=True)
    status = _get(ctx, obj, "status", dict, {})
    name = _get(ctx, meta, "name", str, required=True, at="metadata.")
    annotations = _strmap(ctx, obj, "metadata.annotations")
    aff = spec.get("affinity") or {}
    node_aff = ((aff.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or {})
    terms = None
    if node_aff:
        terms = _node_terms(ctx, node_aff.get("nodeSelectorTerms") or [],
                            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms")
    tols = []
    for i, t in enumerate(_get(ctx, spec, "tolerations", list, [], at="spec.")):
        if not isinstance(t, dict):
            ctx.fail(f"spec.tolerations[{i}]", "expected an object")
        tols.append(Toleration(t.get("key") or "", t.get("operator") or "Equal", t.get("value") or "",
                               t.get("effect") or ""))
    ports = []
    # Host ports held while the pod runs: containers and sidecars (restartable init containers).
    holders = [("initContainers", ci, c) for ci, c in enumerate(_get(ctx, spec, "initContainers", list, [], at="spec."))
               if isinstance(c, dict) and c.get("restartPolicy") == "Always"]
    holders += [("containers", ci, c) for ci, c in enumerate(_get(ctx, spec, "containers", list, [], at="spec."))]
    for field_name, ci, c in holders:
        if not isinstance(c, dict):
            ctx.fail(f"spec.{field_name}[{ci}]", "expected a container object")
        for pi, port in enumerate(c.get("ports") or []):
            hp = port.get("hostPort") if isinstance(port, dict) else None
            if hp:
                if not isinstance(hp, int) or isinstance(hp, bool):
                    ctx.fail(f"spec.{field_name}[{ci}].ports[{pi}].hostPort", "expected an integer")
                ports.append(HostPort(port.get("protocol") or "TCP", port.get("hostIP") or "0.0.0.0", hp))
    spread = []
    for i, c in enumerate(_get(ctx, spec, "topologySpreadConstraints", list, [], at="spec.")):
        p = f"spec.topologySpreadConstraints[{i}]"
        if not isinstance(c, dict):
            ctx.fail(p, "expected an object")
        if (c.get("whenUnsatisfiable") or "DoNotSchedule") != "DoNotSchedule":
            continue
        spread.append(SpreadConstraint(
            _get(ctx, c, "maxSkew", int, required=True, at=f"{p}."), _get(ctx, c, "topologyKey", str, required=True, at=f"{p}."),
            _selector(ctx, c.get("labelSelector"), f"{p}.labelSelector"),
            _get(ctx, c, "minDomains", int, 1, at=f"{p}."),
            _get(ctx, c, "nodeAffinityPolicy", str, "Honor", at=f"{p}.") or "Honor",
            _get(ctx, c, "nodeTaintsPolicy", str, "Ignore", at=f"{p}.") or "Ignore"))
    pvcs = []
    for v in spec.get("volumes") or []:
        claim = (v or {}).get("persistentVolumeClaim")
        if claim and claim.get("claimName"):
            pvcs.append(claim["claimName"])
    pa = aff.get("podAffinity") or {}
    paa = aff.get("podAntiAffinity") or {}
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    return Pod(
        namespace=meta.get("namespace") or "default", name=name, uid=meta.get("uid") or "",
        node_name=spec.get("nodeName") or "", phase=status.get("phase") or "Pending",
        labels=_strmap(ctx, obj, "metadata.labels"), annotations=annotations,
        scheduler_name=spec.get("schedulerName") or "default-scheduler",
        requests=MappingProxyType(pod_requests(ctx, spec)), owner=_owner(ctx, meta),
        node_selector=_strmap(ctx, obj, "spec.nodeSelector"), affinity_terms=terms,
        tolerations=tuple(tols), host_ports=tuple(ports),
        pod_affinity=_pod_affinity_terms(ctx, pa.get(req_key) or [], f"spec.affinity.podAffinity.{req_key}"),
        pod_anti_affinity=_pod_affinity_terms(ctx, paa.get(req_key) or [],
                                              f"spec.affinity.podAntiAffinity.{req_key}"),
        spread=tuple(spread), pvc_names=tuple(pvcs), terminating=bool(meta.get("deletionTimestamp")),
        mirror="kubernetes.io/config.mirror" in annotations, priority=spec.get("priority") or 0)


def _load_node(ctx, obj):
    meta = _get(ctx, obj, "metadata", dict, required=True)
    name = _get(ctx, meta, "name", str, required=True, at="metadata.")
    status = _get(ctx, obj, "status", dict, {})
    alloc = status.get("allocatable")
    if alloc is None:
        alloc = status.get("capacity") or {}
        path = "status.capacity"
    else:
        path = "status.allocatable"
    taints = []
    for i, t in enumerate(_get(ctx, obj, "spec.taints", list, [])):
        if not isinstance(t, dict) or not t.get("key") or not t.get("effect"):
            ctx.fail(f"spec.taints[{i}]", "key and effect are required")
        taints.append(Taint(t["key"], t.get("value") or "", t["effect"]))
    resources = _resources(ctx, alloc, path)
    resources.setdefault("pods", 110)  # kubelet default maxPods; real Node objects always carry it
    return Node(name, _strmap(ctx, obj, "metadata.labels"), MappingProxyType(resources),
                bool(_get(ctx, obj, "spec.unschedulable", bool, False)), tuple(taints))


def _load_podgroup(ctx, obj):
    meta = _get(ctx, obj, "metadata", dict, required=True)
    mm = _get(ctx, obj, "spec.minMember", int, 0)
    if mm < 0:
        ctx.fail("spec.minMember", "must be >= 0")
    return PodGroup(meta.get("namespace") or "default", _get(ctx, meta, "name", str, required=True, at="metadata."),
                    _strmap(ctx, obj, "metadata.labels"), mm, _owner(ctx, meta))


def _load_pv(ctx, obj):
    meta = _get(ctx, obj, "metadata", dict, required=True)
    req = _get(ctx, obj, "spec.nodeAffinity.required", dict, None)
    terms = None
    if req is not None:
        terms = _node_terms(ctx, req.get("nodeSelectorTerms") or [], "spec.nodeAffinity.required.nodeSelectorTerms")
    local = bool((obj.get("spec") or {}).get("local")) or bool((obj.get("spec") or {}).get("hostPath"))
    return PersistentVolume(_get(ctx, meta, "name", str, required=True, at="metadata."), terms, local)


def _load_pvc(ctx, obj):
    meta = _get(ctx, obj, "metadata", dict, required=True)
    return PersistentVolumeClaim(meta.get("namespace") or "default", _get(ctx, meta, "name", str, required=True, at="metadata."),
                                 _get(ctx, obj, "spec.volumeName", str, ""))


def _load_pdb(ctx, obj):
    meta = _get(ctx, obj, "metadata", dict, required=True)
    return PodDisruptionBudget(meta.get("namespace") or "default", _get(ctx, meta, "name", str, required=True, at="metadata."),
                               _selector(ctx, (obj.get("spec") or {}).get("selector"), "spec.selector"),
                               _get(ctx, obj, "status.disruptionsAllowed", int, None))


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
        events = listed + ([single] if single else [])
        if "PodEvicted" in events or "*" in events:
            return p.get("action") or ""
    return ""


def _load_vcjob(ctx, obj):
    meta = _get(ctx, obj, "metadata", dict, required=True)
    spec = _get(ctx, obj, "spec", dict, {})
    tasks = {}
    for i, t in enumerate(_get(ctx, spec, "tasks", list, [], at="spec.")):
        if not isinstance(t, dict):
            ctx.fail(f"spec.tasks[{i}]", "expected an object")
        act = _evicted_action(ctx, t.get("policies") or [], f"spec.tasks[{i}].policies")
        if act:
            tasks[t.get("name") or ""] = act
    return VCJob(meta.get("namespace") or "default", _get(ctx, meta, "name", str, required=True, at="metadata."),
                 _strmap(ctx, obj, "metadata.labels"), _evicted_action(ctx, spec.get("policies") or [], "spec.policies"),
                 MappingProxyType(tasks) if tasks else EMPTY)


def _load_modelserving(ctx, obj):
    meta = _get(ctx, obj, "metadata", dict, required=True)
    return ModelServing(meta.get("namespace") or "default", _get(ctx, meta, "name", str, required=True, at="metadata."),
                        _strmap(ctx, obj, "metadata.labels"), _get(ctx, obj, "spec.recoveryPolicy", str, ""))


def _load_namespace(ctx, obj):
    meta = _get(ctx, obj, "metadata", dict, required=True)
    name = _get(ctx, meta, "name", str, required=True, at="metadata.")
    labels = dict(_strmap(ctx, obj, "metadata.labels"))
    labels.setdefault("kubernetes.io/metadata.name", name)
    return Namespace(name, MappingProxyType(labels))


_LOADERS = {"Node": ("nodes", _load_node), "Pod": ("pods", _load_pod), "PodGroup": ("podgroups", _load_podgroup),
            "PersistentVolume": ("pvs", _load_pv), "PersistentVolumeClaim": ("pvcs", _load_pvc),
            "PodDisruptionBudget": ("pdbs", _load_pdb), "Job": ("vcjobs", _load_vcjob),
            "ModelServing": ("modelservings", _load_modelserving), "Namespace": ("namespaces", _load_namespace)}


def _flatten(objs, kind_hint=None):
    for o in objs:
        if o is None:
            continue
        if isinstance(o, list):
            yield from _flatten(o)
        elif isinstance(o, dict) and (o.get("kind", "").endswith("List") and isinstance(o.get("items"), list)):
            item_kind = o["kind"][:-4] if o["kind"] != "List" else None
            for it in o["items"]:
                # `kubectl get pods -o json` items carry kind; the raw API's PodList items do not.
                if isinstance(it, dict) and "kind" not in it and item_kind:
                    it = dict(it, kind=item_kind, apiVersion=o.get("apiVersion", "v1"))
                yield from _flatten([it])
        else:
            yield o


def load_objects(objects) -> ClusterSnapshot:
    """Build a snapshot from Kubernetes objects (dicts, Lists, or nested lists of them)."""
    # Hundreds of thousands of small immutable objects: cyclic GC passes would only slow this.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load_objects(objects)
    finally:
        if enabled:
            gc.enable()


def _load_objects(objects) -> ClusterSnapshot:
    buckets = {k: [] for k, _ in _LOADERS.values()}
    seen = set()
    for i, obj in enumerate(_flatten(objects)):
        if not isinstance(obj, dict):
            raise SnapshotError(f"object #{i}: expected a Kubernetes object, got {type(obj).__name__}")
        kind, api = obj.get("kind"), obj.get("apiVersion")
        ctx = _Ctx(obj, i)
        if not kind or not api:
            ctx.fail("kind" if not kind else "apiVersion", "required field is missing")
        if (api, kind) not in _READ_KINDS:
            continue
        bucket, loader = _LOADERS[kind]
        item = loader(ctx, obj)
        ident = (kind, getattr(item, "namespace", ""), item.name)
        if ident in seen:
            ctx.fail("metadata.name", "appears twice in the snapshot")
        seen.add(ident)
        buckets[bucket].append(item)
    return ClusterSnapshot.build(**buckets)


def parse_text(text: str, source: str = "<input>"):
    """Parse JSON or a YAML stream into a list of objects (no interpretation)."""
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            data = json.loads(text)
            return data if isinstance(data, list) else [data]
        except json.JSONDecodeError as e:
            raise SnapshotError(f"{source}: invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from e
    try:
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise SnapshotError(f"{source}: invalid YAML{where}: {getattr(e, 'problem', None) or e}") from e


def load_text(text: str, source: str = "<input>") -> ClusterSnapshot:
    """Snapshot from the text of a List file or YAML stream."""
    return load_objects(parse_text(text, source))


def load_file(path) -> ClusterSnapshot:
    """Snapshot from a file written by `kubectl repack snapshot` or `kubectl get ... -o json`."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SnapshotError(f"{path}: {e.strerror}") from e
    return load_text(text, str(path))
