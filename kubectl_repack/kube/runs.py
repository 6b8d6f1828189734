"""RepackRun objects on the cluster (cluster-scoped, status subresource), and the one status write.

Two writers share a run's status (DESIGN "Two writers"): every status write is a function applied
to the freshest object, replaced on its resourceVersion and re-applied on 409
(client.retry_on_conflict), so neither writer overwrites the other's fields.
"""
from __future__ import annotations

import copy
from typing import Callable, Mapping, Optional

from kubectl_repack.api.view import ObjectView
from kubectl_repack.api.control import CREATOR_USERNAME_ANNOTATION, Creator
from kubectl_repack.api.run import API_VERSION, GROUP, KIND, PLURAL, VERSION
from kubectl_repack.errors import ClusterAPIError, Conflict, NotFound

from .client import REQUEST_TIMEOUT, call, request, retry_on_conflict
from .objects import Kind, json_patch, list_objects

RUN_KIND = Kind(API_VERSION, KIND, PLURAL, namespaced=False)


def whoami(api) -> Optional[Creator]:
    """The caller as the API server authenticates them (SelfSubjectReview, authentication.k8s.io/v1,
    GA in Kubernetes 1.28); None where the API is not served (then nothing fills the record in, and
    the admission policy, if installed, refuses the run saying what to add)."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        answer = request(api, "POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews", body)
    except NotFound:
        return None
    return Creator.from_user_info(ObjectView(answer).status.get("userInfo"))


class RunStore:
    """RepackRun objects behind an ApiClient."""

    def __init__(self, api):
        from kubernetes import client

        self.api = api
        self.custom = client.CustomObjectsApi(api)

    def get(self, name: str) -> dict:
        """The stored RepackRun `name` (NotFound if there is none)."""
        return call(f"reading repackrun {name}", self.custom.get_cluster_custom_object,
                    GROUP, VERSION, PLURAL, name, _request_timeout=REQUEST_TIMEOUT)

    def list(self) -> list:
        """Every RepackRun (paginated)."""
        return list_objects(self.api, RUN_KIND)

    def create(self, obj: dict, dry_run: bool = False) -> dict:
        """Create the run from apiVersion/kind/metadata/spec (the API server ignores status here),
        with the creator annotations filled in from a SelfSubjectReview when the run has none (the
        admission policy compares them with the caller: kubectl_repack.api.control). `dry_run`:
        a server-side dry run (dryRun=All): the object as it would be stored, nothing stored."""
        name = obj["metadata"]["name"]
        body = {k: obj[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in obj}
        annotations = dict(body["metadata"].get("annotations") or {})
        if CREATOR_USERNAME_ANNOTATION not in annotations:
            me = self.whoami()
            if me is not None:
                body["metadata"] = dict(body["metadata"], annotations={**annotations, **me.annotations()})
        try:
            extra = {"dry_run": "All"} if dry_run else {}
            return call(f"creating repackrun {name}", self.custom.create_cluster_custom_object,
                        GROUP, VERSION, PLURAL, body, _request_timeout=REQUEST_TIMEOUT, **extra)
        except Conflict as e:
            raise Conflict(f"repackrun {name} already exists; choose another name (--name) or delete it "
                           f"with `kubectl delete repackrun {name}`", e.status) from e

    def whoami(self) -> Optional[Creator]:
        return whoami(self.api)

    def annotate(self, name: str, key: str, value: Optional[str], uid: Optional[str] = None) -> dict:
        """Set (or with None remove) one annotation with a JSON merge patch on metadata only: the
        spec is immutable and the status belongs to its writers, so neither is sent. Returns the
        stored object (NotFound if there is no run `name`). With `uid`, the API server refuses (409)
        a run of that name but another uid (deleted and re-created)."""
        return self.annotate_all(name, {key: value}, uid)

    def annotate_all(self, name: str, annotations: Mapping[str, Optional[str]], uid: Optional[str] = None) -> dict:
        """`annotate` for several annotations in one patch (all land or none: the records seal and
        digest, which must always describe the same records)."""
        from urllib.parse import quote

        path = f"/apis/{GROUP}/{VERSION}/{PLURAL}/{quote(name, safe='')}"
        meta = {"annotations": dict(annotations), **({"uid": uid} if uid else {})}
        try:  # by path: the typed client's patch content type differs between client generations
            return request(self.api, "PATCH", path, {"metadata": meta},
                           content_type="application/merge-patch+json")
        except ClusterAPIError as e:
            raise type(e)(str(e).replace(f"PATCH {path}", f"annotating repackrun {name}", 1), e.status) from e

    def patch(self, name: str, ops: list) -> bool:
        """Apply JSON patch `ops` to the run's metadata (its finalizers: api.control.finalizer_removal,
        whose `test` op makes the API server refuse a run changed since it was read). False when the
        run changed meanwhile (409, 422) or is gone (404): the caller decides again on a fresh read."""
        return json_patch(self.api, RUN_KIND.path(name=name), ops)

    def delete(self, name: str, uid: Optional[str] = None, resource_version: Optional[str] = None) -> bool:
        """Delete the run: only that incarnation (`uid`) and, with `resource_version`, only as it was
        read (the TTL decision was made on that version). False when already gone or changed (409)."""
        preconditions = {k: v for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        body = {"preconditions": preconditions} if preconditions else None
        try:
            call(f"deleting repackrun {name}", self.custom.delete_cluster_custom_object,
                 GROUP, VERSION, PLURAL, name, body=body, _request_timeout=REQUEST_TIMEOUT)
            return True
        except (NotFound, Conflict):
            return False

    def update_status(self, name: str, mutate: Callable[[dict], None], uid: Optional[str] = None) -> dict:
        """Read the run, let `mutate` edit a copy of its status, replace it on the read's
        resourceVersion; on 409 read again and re-apply `mutate`. Returns the stored object.
        With `uid`, a run of that name but another uid (deleted and re-created) is NotFound."""
        def attempt() -> dict:
            obj = self.get(name)
            if uid and ObjectView(obj).uid != uid:
                raise NotFound(f"repackrun {name}: uid {(obj.get('metadata') or {}).get('uid')} is not {uid} "
                               "(deleted and re-created)", 404)
            status = copy.deepcopy(ObjectView(obj).status)
            mutate(status)
            return call(f"writing the status of repackrun {name}", self.custom.replace_cluster_custom_object_status,
                        GROUP, VERSION, PLURAL, name, dict(obj, status=status), _request_timeout=REQUEST_TIMEOUT)
        return retry_on_conflict(attempt)

    def write_status(self, name: str, fields: Mapping) -> dict:
        """Set these top-level status fields, keeping the others (update_status)."""
        return self.update_status(name, lambda status: status.update(copy.deepcopy(dict(fields))))
