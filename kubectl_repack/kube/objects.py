"""Reading the cluster as raw JSON, patching pods, evicting: the objects side of the I/O layer.

Reads keep the objects exactly as the API server sends them (raw JSON, not the client's typed
models), so what the planner reads live is byte-for-byte what `kubectl get -o json` or `kubectl
repack snapshot` would write. A snapshot *source* (live cluster or file) is what the plan commands
take, so offline and live planning are the same code.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from kubectl_repack.api.view import ObjectView
from kubectl_repack.errors import ClusterAPIError, Conflict, Invalid, InvalidSnapshotFile, NotFound

from .client import REQUEST_TIMEOUT, api_error, call, call_json, request

PAGE_SIZE = 500
# One Eviction call must end within the execute Lease's margin (engine.mutex): the guard passes right
# before the call while the Lease was confirmed less than CONFIRMED_SECONDS ago, and a candidate may
# take it over LEASE_DURATION_SECONDS after that confirmation: 30 - 20 = 10 s. urllib3 retries a
# failed connect up to EVICTION_CONNECT_RETRIES times (its default Retry; none with
# --request-timeout), so the request is sent within (3 + 1) x 1 s and answered within 5 s more: 9 s
# at most. A call that times out has an unknown outcome, which the engine settles by reading the pod.
EVICTION_CONNECT_RETRIES = 3
EVICTION_REQUEST_TIMEOUT = (1, 5)   # (connect, read) seconds
EXPIRED_LIST_RETRIES = 3    # a continue token older than etcd's compaction window answers 410


@dataclass(frozen=True)
class Kind:
    """One kind of object the planner reads, and how to list it cluster-wide."""
    api_version: str
    kind: str
    plural: str
    optional: bool = False   # a CRD that may not be installed: 404 on list means "none"
    namespaced: bool = True
    # read when allowed: 403 on list means "none" (nothing a plan depends on: Queues, for `why`)
    forbidden_ok: bool = False

    def path(self, namespace: Optional[str] = None, name: Optional[str] = None) -> str:
        """REST path of the collection (in `namespace`, for a namespaced kind) or of object `name`."""
        base = f"/apis/{self.api_version}" if self.group else f"/api/{self.api_version}"
        if self.namespaced and namespace is not None:
            base += f"/namespaces/{namespace}"
        return f"{base}/{self.plural}" + (f"/{name}" if name is not None else "")

    @property
    def group(self) -> str:
        """API group ('' for the core group)."""
        return self.api_version.rpartition("/")[0]

    @property
    def version(self) -> str:
        """API version within the group."""
        return self.api_version.rpartition("/")[2]


# Everything planner.load reads, in the order snapshot files list them.
SNAPSHOT_KINDS = (
    Kind("v1", "Namespace", "namespaces", namespaced=False),
    Kind("v1", "Node", "nodes", namespaced=False),
    Kind("v1", "PersistentVolume", "persistentvolumes", namespaced=False),
    Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    Kind("v1", "Pod", "pods"),
    Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    Kind("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups", optional=True),
    Kind("batch.volcano.sh/v1alpha1", "Job", "jobs", optional=True),
    Kind("workload.serving.volcano.sh/v1alpha1", "ModelServing", "modelservings", optional=True),
    # Volcano >= 1.12's network topology (TOPO): where topology gangs may run and where free nodes count
    # as blocks. Optional: clusters without the CRD have no HyperNodes.
    Kind("topology.volcano.sh/v1alpha1", "HyperNode", "hypernodes", optional=True, namespaced=False),
    # Volcano's queues (RELIEF-1): `why` reads whether a waiting gang's queue admits it; a user who
    # may not list them still plans (the planner never reads them).
    Kind("scheduling.volcano.sh/v1beta1", "Queue", "queues", optional=True, namespaced=False, forbidden_ok=True),
)

# What the planner's scheduler filters read (the coordinator's live feasibility check).
FILTER_KINDS = tuple(k for k in SNAPSHOT_KINDS if k.kind in ("Namespace", "Node", "PersistentVolume",
                                                           "PersistentVolumeClaim", "Pod"))
POD_KIND = next(k for k in SNAPSHOT_KINDS if k.kind == "Pod")
PODGROUP_KIND = next(k for k in SNAPSHOT_KINDS if k.kind == "PodGroup")

# What `kubectl repack install` writes (kubectl_repack.deploy.installer), besides the Namespace.
INSTALL_KINDS = (
    SNAPSHOT_KINDS[0],
    Kind("apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", namespaced=False),
    Kind("v1", "ServiceAccount", "serviceaccounts"),
    Kind("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", namespaced=False),
    Kind("rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "clusterrolebindings", namespaced=False),
    Kind("rbac.authorization.k8s.io/v1", "Role", "roles"),
    Kind("rbac.authorization.k8s.io/v1", "RoleBinding", "rolebindings"),
    Kind("v1", "Secret", "secrets"),
    Kind("apps/v1", "Deployment", "deployments"),
    Kind("v1", "Service", "services"),
    Kind("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
         namespaced=False),
    Kind("networking.k8s.io/v1", "NetworkPolicy", "networkpolicies"),
    Kind("coordination.k8s.io/v1", "Lease", "leases"),
    Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies",
         namespaced=False),
    Kind("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding", "validatingadmissionpolicybindings",
         namespaced=False),
)
KINDS_BY_NAME = {k.kind: k for k in SNAPSHOT_KINDS + INSTALL_KINDS}


# ---------- reading ----------

def _list_page(api, kind: "Kind", limit: int, token: Optional[str]) -> dict:
    """One page of a cluster-wide list as raw JSON (the client's typed models are bypassed)."""
    from kubernetes import client

    kw = {"limit": limit, "_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
    if token:
        kw["_continue"] = token
    if kind.api_version == "v1":
        core = client.CoreV1Api(api)
        fn = {"namespaces": core.list_namespace, "nodes": core.list_node,
              "persistentvolumes": core.list_persistent_volume,
              "persistentvolumeclaims": core.list_persistent_volume_claim_for_all_namespaces,
              "pods": core.list_pod_for_all_namespaces}[kind.plural]
        resp = fn(**kw)
    elif kind.api_version == "policy/v1":
        resp = client.PolicyV1Api(api).list_pod_disruption_budget_for_all_namespaces(**kw)
    else:
        resp = client.CustomObjectsApi(api).list_cluster_custom_object(kind.group, kind.version, kind.plural,
                                                                       **kw)
    return json.loads(resp.data)


def list_objects(api, kind: Kind, page_size: int = PAGE_SIZE, progress=None) -> list:
    """Every object of `kind` cluster-wide, paginated (limit/continue), each with apiVersion and kind.

    An optional kind whose CRD is not installed yields []. A continue token that expired midway
    (410 Gone) restarts the list, so the result is always one consistent list. `progress`, if
    given, is called after each page: progress("listing", kind.plural, objects so far).
    """
    doing = f"listing {kind.plural}.{kind.group or 'core'}"
    for attempt in range(EXPIRED_LIST_RETRIES):
        items, token = [], None
        try:
            while True:
                page = call(doing, _list_page, api, kind, page_size, token)
                for item in page.get("items") or []:
                    items.append(_normalise(item, kind))
                if progress is not None:
                    progress("listing", kind.plural, len(items))
                token = ObjectView(page).meta.get("continue")
                if not token:
                    return items
        except NotFound:
            if kind.optional:
                return []
            raise
        except ClusterAPIError as e:
            if e.status == 410 and attempt + 1 < EXPIRED_LIST_RETRIES:
                continue
            if e.status == 403 and kind.forbidden_ok:
                return []
            raise
    raise ClusterAPIError(f"{doing}: the list kept expiring while paging")  # pragma: no cover


def _normalise(item: dict, kind: Kind) -> dict:
    """A list item as a standalone object: apiVersion and kind first, managedFields dropped."""
    out = {"apiVersion": item.get("apiVersion") or kind.api_version, "kind": item.get("kind") or kind.kind}
    for key, value in item.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata" and isinstance(value, dict) and "managedFields" in value:
            value = {k: v for k, v in value.items() if k != "managedFields"}
        out[key] = value
    return out


def read_snapshot(api, kinds=SNAPSHOT_KINDS, progress=None) -> list:
    """Every object the planner reads, listed live, in SNAPSHOT_KINDS order (`progress` as in
    list_objects)."""
    objects = []
    for kind in kinds:
        objects.extend(list_objects(api, kind) if progress is None else list_objects(api, kind, progress=progress))
    return objects


class LiveSource:
    """Snapshot source: the cluster behind an ApiClient (`progress` as in list_objects)."""

    def __init__(self, api, progress=None):
        self.api = api
        self.progress = progress
        self.description = "live cluster"

    def objects(self) -> list:
        """Every object the planner reads, listed now."""
        if self.progress is None:
            return read_snapshot(self.api)
        return read_snapshot(self.api, progress=self.progress)

    def snapshot(self):
        """The cluster as the planner's snapshot."""
        import planner

        return planner.load_objects(self.objects())


class FileSource:
    """Snapshot source: a file (v1 List, JSON array or YAML stream), or '-' for stdin text."""

    def __init__(self, path: str, text: Optional[str] = None):
        self.path = path
        self.text = text
        self.description = "stdin" if path == "-" else path

    def objects(self) -> list:
        """The objects of the file, parsed but not interpreted (planner.load does that)."""
        import planner

        from planner import documents

        text = self.text
        if text is None:
            try:
                text = documents.read_file(self.path)
            except planner.UnreadableInput as e:
                raise planner.UnreadableInput(f"snapshot {e}") from e
            except planner.DocumentError as e:
                raise InvalidSnapshotFile(str(e)) from e
        try:
            return planner.parse_text(text, self.description)
        except planner.SnapshotError as e:
            raise InvalidSnapshotFile(str(e)) from e

    def snapshot(self):
        """The file's objects as the planner's snapshot; anything wrong in them is the input's
        fault (InvalidSnapshotFile, a usage error, naming the file and the object), not the
        cluster's, and so is a file without a Node (empty, a RepackRun given as --snapshot, an
        error the API server answered instead of a List): nothing could be planned on it."""
        import planner

        objects = self.objects()
        try:
            snapshot = planner.load_objects(objects)
        except planner.SnapshotError as e:
            raise InvalidSnapshotFile(f"{self.description}: {e}") from e
        if not snapshot.nodes:
            raise InvalidSnapshotFile(self._no_node(objects))
        return snapshot

    def _no_node(self, objects) -> str:
        """What the file holds instead of a snapshot, and the likely mix-up."""
        from planner.load import flatten

        items = list(flatten(objects))
        if not items:
            held = "is empty" if not objects else "holds an empty List"
            return (f"{self.description} {held}: a snapshot holds the cluster's Nodes and pods "
                    "(`kubectl repack snapshot -o FILE` writes one)")
        hint = ("did you swap -f and --snapshot?" if any(o.get("kind") == "RepackRun" for o in items) else
                "a snapshot holds the cluster's Nodes and pods (`kubectl repack snapshot -o FILE` writes one)")
        return f"{self.description} holds {kind_summary(items)} and no Node: {hint}"


def kind_summary(objects) -> str:
    """`2 Pod, 1 RepackRun`: how many objects of each kind, kinds sorted."""
    counts: dict = {}
    for o in objects:
        counts[o["kind"]] = counts.get(o["kind"], 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))


# ---------- pods and PDBs ----------

class LiveCluster:
    """The cluster behind an ApiClient as the engine and the coordinator use it: the planner's
    snapshot, pods and PDBs as raw JSON, pod patches, evictions."""

    def __init__(self, api):
        from kubernetes import client

        self.api = api
        self.core = client.CoreV1Api(api)
        self.policy = client.PolicyV1Api(api)

    def snapshot_objects(self, kinds=SNAPSHOT_KINDS) -> list:
        """Every object of `kinds` (default: all the planner reads), listed now."""
        return read_snapshot(self.api, kinds)

    def get_pod(self, namespace: str, name: str) -> Optional[dict]:
        """The pod, or None when it does not exist."""
        try:
            return call_json(f"reading pod {namespace}/{name}", self.core.read_namespaced_pod, name, namespace)
        except NotFound:
            return None

    def get_podgroup(self, namespace: str, name: str) -> Optional[dict]:
        """The Volcano PodGroup, or None when it does not exist (a targeted run watches its target)."""
        return get_path(self.api, PODGROUP_KIND.path(namespace, name))

    def list_pods(self, namespace: Optional[str] = None) -> list:
        """Pods of one namespace, or of the whole cluster (paginated), each with apiVersion and kind."""
        if namespace is None:
            return list_objects(self.api, POD_KIND)
        items = call_json(f"listing pods in {namespace}", self.core.list_namespaced_pod, namespace)["items"]
        return [_normalise(p, POD_KIND) for p in items]

    def list_pdbs(self, namespace: str) -> list:
        """PodDisruptionBudgets of one namespace."""
        items = call_json(f"listing poddisruptionbudgets in {namespace}",
                          self.policy.list_namespaced_pod_disruption_budget, namespace)["items"]
        for pdb in items:
            pdb.setdefault("metadata", {}).setdefault("namespace", namespace)
        return items

    def patch_pod(self, namespace: str, name: str, json_patch: list) -> None:
        """Apply a JSON patch to the pod (a failed `test` op answers 422)."""
        call(f"patching pod {namespace}/{name}", self.core.patch_namespaced_pod, name, namespace, json_patch,
             _request_timeout=REQUEST_TIMEOUT)

    def nominate(self, namespace: str, name: str, node: str) -> None:
        """Set status.nominatedNodeName through pods/status (the API server wipes status on create)."""
        call(f"nominating node {node} for pod {namespace}/{name}", self.core.patch_namespaced_pod_status,
             name, namespace, {"status": {"nominatedNodeName": node}}, _request_timeout=REQUEST_TIMEOUT)

    def evict(self, namespace: str, name: str, uid: str, grace_seconds: Optional[int]) -> tuple:
        """policy/v1 Eviction with the victim's UID as precondition; the API server enforces PDBs.
        (HTTP code, message): 201 accepted, 0 unreachable or timed out (EVICTION_REQUEST_TIMEOUT).
        Never raises for an API answer: the engine classifies the code."""
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        delete_options = {}
        if uid:
            delete_options["preconditions"] = {"uid": uid}
        if grace_seconds is not None:
            delete_options["gracePeriodSeconds"] = int(grace_seconds)
        body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": namespace}}
        if delete_options:
            body["deleteOptions"] = delete_options
        try:
            self.core.create_namespaced_pod_eviction(name, namespace, body,
                                                     _request_timeout=EVICTION_REQUEST_TIMEOUT)
            return 201, ""
        except ApiException as e:
            return int(e.status or 0), str(api_error(e, f"evicting pod {namespace}/{name}"))
        except HTTPError as e:
            return 0, f"evicting pod {namespace}/{name}: cannot reach the API server: {e}"


# ---------- any object by its REST path ----------

def kind_of(obj: dict) -> Kind:
    """The Kind of `obj` (one of KINDS_BY_NAME), at the object's own apiVersion."""
    known = KINDS_BY_NAME[obj["kind"]]
    return known if known.api_version == obj["apiVersion"] else \
        Kind(obj["apiVersion"], known.kind, known.plural, known.optional, known.namespaced)


def object_path(obj: dict, with_name: bool = True) -> str:
    """REST path of an object from its apiVersion, kind, namespace and name."""
    kind = kind_of(obj)
    meta = obj["metadata"]
    return kind.path(meta["namespace"] if kind.namespaced else None, meta["name"] if with_name else None)


def get_path(api, path: str, query=None) -> Optional[dict]:
    """GET `path` (the object, or a list); None for 404."""
    try:
        return request(api, "GET", path, query=query)
    except NotFound:
        return None


def read_object(api, obj: dict) -> Optional[dict]:
    """The stored object `obj` names (apiVersion, kind, metadata name and namespace); None for 404."""
    return get_path(api, object_path(obj))


def apply_object(api, obj: dict, field_manager: str, dry_run: bool = False) -> dict:
    """Create or update `obj` with server-side apply, forced (the field manager owns these objects);
    with `dry_run`, the API server only says what it would do (dryRun=All: validated, admitted, not stored)."""
    query = [("fieldManager", field_manager), ("force", "true")] + ([("dryRun", "All")] if dry_run else [])
    return request(api, "PATCH", object_path(obj), obj, query=query, content_type="application/apply-patch+yaml")


def delete_object(api, obj: dict, dry_run: bool = False) -> bool:
    """Delete `obj` (its dependents in the background); False when it was not there."""
    try:
        request(api, "DELETE", object_path(obj), {"propagationPolicy": "Background"},
                query=[("dryRun", "All")] if dry_run else None, content_type="application/json")
        return True
    except NotFound:
        return False


def json_patch(api, path: str, ops: list) -> bool:
    """Apply JSON patch `ops` to the object at `path`; False when it is gone (404) or changed
    meanwhile (409, or 422: a failed `test` op), which the caller leaves to whoever changed it."""
    try:
        request(api, "PATCH", path, ops, content_type="application/json-patch+json")
        return True
    except (NotFound, Conflict, Invalid):
        return False
