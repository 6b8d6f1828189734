"""RepackPolicy objects on the cluster (POLICY-1, POLICY-2): listed and status-written by the controller,
created, read and patched by `kubectl repack policy`. The status is one writer's (the controller),
still written read-modify-write on resourceVersion, so a spec change made meanwhile is kept."""
from __future__ import annotations

import copy
from typing import Callable, Optional
from urllib.parse import quote

from kubectl_repack.api.control import CREATOR_USERNAME_ANNOTATION
from kubectl_repack.api.policy import KIND, PLURAL
from kubectl_repack.api.run import API_VERSION, GROUP, VERSION
from kubectl_repack.api.view import ObjectView
from kubectl_repack.errors import ClusterAPIError, Conflict

from .client import request, retry_on_conflict
from .objects import Kind, list_objects
from .runs import whoami

POLICY_KIND = Kind(API_VERSION, KIND, PLURAL, namespaced=False)


class PolicyStore:
    """RepackPolicy objects behind an ApiClient."""

    def __init__(self, api):
        self.api = api

    @staticmethod
    def _path(name: str = "", status: bool = False) -> str:
        path = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
        if name:
            path += f"/{quote(name, safe='')}"
        return path + ("/status" if status else "")

    def _call(self, doing: str, method: str, path: str, body=None, content_type=None) -> dict:
        try:
            return request(self.api, method, path, body, content_type=content_type)
        except ClusterAPIError as e:
            raise type(e)(str(e).replace(f"{method} {path}", doing, 1), e.status) from e

    def list(self) -> list:
        return list_objects(self.api, POLICY_KIND)

    def get(self, name: str) -> dict:
        return self._call(f"reading repackpolicy {name}", "GET", self._path(name))

    def create(self, obj: dict) -> dict:
        """Create the policy, with the creator record filled in from a SelfSubjectReview when it has
        none (the admission policy compares it with the caller, as for runs)."""
        body = {k: obj[k] for k in ("apiVersion", "kind", "metadata", "spec") if k in obj}
        annotations = dict(body["metadata"].get("annotations") or {})
        if CREATOR_USERNAME_ANNOTATION not in annotations:
            me = whoami(self.api)
            if me is not None:
                body["metadata"] = dict(body["metadata"], annotations={**annotations, **me.annotations()})
        name = body["metadata"].get("name")
        try:
            return self._call(f"creating repackpolicy {name}", "POST", self._path(), body)
        except Conflict as e:
            raise Conflict(f"repackpolicy {name} already exists; change it with kubectl apply or delete it with "
                           f"`kubectl delete repackpolicy {name}`", e.status) from e

    def merge_patch(self, name: str, patch: dict) -> dict:
        """JSON merge patch of the policy (spec.suspend, an annotation): the stored object."""
        return self._call(f"patching repackpolicy {name}", "PATCH", self._path(name), patch,
                          content_type="application/merge-patch+json")

    def update_status(self, name: str, uid: str, mutate: Callable[[dict], None]) -> Optional[dict]:
        """Read the policy, let `mutate` edit a copy of its status, replace it on that resourceVersion
        (again on 409). None when the policy is gone or is another incarnation (uid)."""
        from kubectl_repack.errors import NotFound

        def attempt() -> Optional[dict]:
            try:
                obj = self.get(name)
            except NotFound:
                return None
            if uid and ObjectView(obj).uid != uid:
                return None
            status = copy.deepcopy(dict(ObjectView(obj).status))
            mutate(status)
            if status == ObjectView(obj).status:
                return obj
            try:
                return self._call(f"writing the status of repackpolicy {name}", "PUT", self._path(name, status=True),
                                  dict(obj, status=status))
            except NotFound:
                return None
        return retry_on_conflict(attempt)
