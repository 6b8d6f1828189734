"""All Kubernetes API I/O of the plugin: kubeconfig, cluster reads, RepackRun objects.

Nothing else in the plugin imports `kubernetes`. Reads keep the objects exactly as the API server
sends them (raw JSON, not the client's typed models), so what the planner reads live is byte-for-byte
what `kubectl get -o json` or `kubectl repack snapshot` would write. Every API failure becomes a
`kubectl_repack.errors` exception, raised `from` the cause, naming what was being done.

Side effects sit behind two small interfaces (DESIGN convention 5): a snapshot *source* (live
cluster or file) and a RepackRun *store*; the commands take whichever they are given.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Callable, Optional

from kubectl_repack.errors import (ClusterAPIError, Conflict, InvalidSnapshotFile, NotFound,
                                   RepackError, TooManyRequests)

GROUP, VERSION, PLURAL = "repack.volcano.sh", "v1alpha1", "repackruns"
RUN_API_VERSION = f"{GROUP}/{VERSION}"
PAGE_SIZE = 500
REQUEST_TIMEOUT = 60        # seconds per request; a list page of 500 pods is well under this
CONFLICT_RETRIES = 5
EXPIRED_LIST_RETRIES = 3    # a continue token older than etcd's compaction window answers 410


@dataclass(frozen=True)
class Kind:
    """One kind of object the planner reads, and how to list it cluster-wide."""
    api_version: str
    kind: str
    plural: str
    optional: bool = False   # a CRD that may not be installed: 404 on list means "none"

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
    Kind("v1", "Namespace", "namespaces"),
    Kind("v1", "Node", "nodes"),
    Kind("v1", "PersistentVolume", "persistentvolumes"),
    Kind("v1", "PersistentVolumeClaim", "persistentvolumeclaims"),
    Kind("v1", "Pod", "pods"),
    Kind("policy/v1", "PodDisruptionBudget", "poddisruptionbudgets"),
    Kind("scheduling.volcano.sh/v1beta1", "PodGroup", "podgroups", optional=True),
    Kind("batch.volcano.sh/v1alpha1", "Job", "jobs", optional=True),
    Kind("workload.serving.volcano.sh/v1alpha1", "ModelServing", "modelservings", optional=True),
)

_ERRORS_BY_STATUS = {404: NotFound, 409: Conflict, 429: TooManyRequests}


# ---------- connecting ----------

def connect(kubeconfig: Optional[str] = None, context: Optional[str] = None):
    """An ApiClient for --kubeconfig/--context, $KUBECONFIG, ~/.kube/config, or in-cluster config."""
    import os

    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    try:
        if kubeconfig:
            if not os.path.exists(kubeconfig):
                raise RepackError(f"kubeconfig {kubeconfig}: no such file")
            return config.new_client_from_config(config_file=kubeconfig, context=context)
        default = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
        if not os.path.exists(default) and os.environ.get("KUBERNETES_SERVICE_HOST") and not context:
            config.load_incluster_config()
            return client.ApiClient()
        return config.new_client_from_config(context=context)
    except ConfigException as e:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise RepackError(f"cannot load kubeconfig {where}"
                          f"{' context ' + repr(context) if context else ''}: {e}") from e


def api_error(exc: Exception, doing: str) -> ClusterAPIError:
    """The errors-tree exception for a failed API call; the caller raises it `from exc`."""
    status = getattr(exc, "status", None)
    if status is None or status == 0:
        reason = getattr(exc, "reason", None) or exc
        return ClusterAPIError(f"{doing}: cannot reach the API server: {reason}")
    message = getattr(exc, "reason", "") or ""
    body = getattr(exc, "body", None)
    if body:
        try:
            message = json.loads(body).get("message") or message
        except (ValueError, AttributeError, TypeError):
            message = str(body)[:500]
    cls = _ERRORS_BY_STATUS.get(status, ClusterAPIError)
    return cls(f"{doing}: {message} (HTTP {status})", status)


def _call(doing: str, fn: Callable, *args, **kwargs):
    from kubernetes.client.rest import ApiException
    from urllib3.exceptions import HTTPError

    try:
        return fn(*args, **kwargs)
    except ApiException as e:
        raise api_error(e, doing) from e
    except HTTPError as e:
        reason = getattr(e, "reason", None) or e  # MaxRetryError wraps the real failure
        raise ClusterAPIError(f"{doing}: cannot reach the API server: {reason}") from e


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


def list_objects(api, kind: Kind, page_size: int = PAGE_SIZE) -> list:
    """Every object of `kind` cluster-wide, paginated (limit/continue), each with apiVersion and kind.

    An optional kind whose CRD is not installed yields []. A continue token that expired midway
    (410 Gone) restarts the list, so the result is always one consistent list.
    """
    doing = f"listing {kind.plural}.{kind.group or 'core'}"
    for attempt in range(EXPIRED_LIST_RETRIES):
        items, token = [], None
        try:
            while True:
                page = _call(doing, _list_page, api, kind, page_size, token)
                for item in page.get("items") or []:
                    items.append(_normalise(item, kind))
                token = (page.get("metadata") or {}).get("continue")
                if not token:
                    return items
        except NotFound:
            if kind.optional:
                return []
            raise
        except ClusterAPIError as e:
            if e.status == 410 and attempt + 1 < EXPIRED_LIST_RETRIES:
                continue
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


def read_snapshot(api, kinds=SNAPSHOT_KINDS) -> list:
    """Every object the planner reads, listed live, in SNAPSHOT_KINDS order."""
    objects = []
    for kind in kinds:
        objects.extend(list_objects(api, kind))
    return objects


class LiveSource:
    """Snapshot source: the cluster behind an ApiClient."""

    def __init__(self, api):
        self.api = api
        self.description = "live cluster"

    def objects(self) -> list:
        """Every object the planner reads, listed now."""
        return read_snapshot(self.api)

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
        fault (InvalidSnapshotFile, a usage error), not the cluster's."""
        import planner

        objects = self.objects()
        try:
            return planner.load_objects(objects)
        except planner.SnapshotError as e:
            raise InvalidSnapshotFile(str(e)) from e


# ---------- RepackRun objects ----------

class RunStore:
    """RepackRun objects on the cluster (cluster-scoped, status subresource)."""

    def __init__(self, api):
        from kubernetes import client

        self.api = api
        self.custom = client.CustomObjectsApi(api)

    def get(self, name: str) -> dict:
        """The stored RepackRun `name` (NotFound if there is none)."""
        return _call(f"reading repackrun {name}", self.custom.get_cluster_custom_object,
                     GROUP, VERSION, PLURAL, name, _request_timeout=REQUEST_TIMEOUT)

    def create(self, obj: dict) -> dict:
        """Create the run from apiVersion/kind/metadata/spec (the API server ignores status here)."""
        name = obj["metadata"]["name"]
        body = {k: obj[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in obj}
        try:
            return _call(f"creating repackrun {name}", self.custom.create_cluster_custom_object,
                         GROUP, VERSION, PLURAL, body, _request_timeout=REQUEST_TIMEOUT)
        except Conflict as e:
            raise Conflict(f"repackrun {name} already exists; choose another name (--name) or delete it "
                           f"with `kubectl delete repackrun {name}`", e.status) from e

    def write_status(self, name: str, status: dict, current: Optional[dict] = None) -> dict:
        """Set the fields of `status` through the status subresource (read-modify-write on
        resourceVersion, retried on 409); fields of status not in `status` are kept."""
        obj = current
        for attempt in range(CONFLICT_RETRIES):
            if obj is None:
                obj = self.get(name)
            body = dict(obj)
            body["status"] = {**(obj.get("status") or {}), **status}
            try:
                return _call(f"writing the status of repackrun {name}",
                             self.custom.replace_cluster_custom_object_status,
                             GROUP, VERSION, PLURAL, name, body, _request_timeout=REQUEST_TIMEOUT)
            except Conflict:
                if attempt + 1 == CONFLICT_RETRIES:
                    raise
                obj = None
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["SNAPSHOT_KINDS", "Kind", "connect", "api_error", "list_objects", "read_snapshot",
           "LiveSource", "FileSource", "RunStore", "RUN_API_VERSION"]
