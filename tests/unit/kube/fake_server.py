"""An in-memory API server behind the kube layer's transport seam (`kube.client.use_transport`):
Leases and RepackRuns with resourceVersions (replace on a stale one answers 409, as the real one
does), and injected faults (a status code or an exception per request, matched by method and path)."""
from __future__ import annotations

import copy
import json
import re
from urllib.parse import urlparse

from kubernetes import client
from urllib3.exceptions import NewConnectionError, ReadTimeoutError

from tests.transport import HTTPResponse, use_transport


def status_body(code, message, causes=()):
    body = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "code": code}
    if causes:
        body["details"] = {"causes": [{"message": c} for c in causes]}
    return json.dumps(body).encode()


def timeout():
    return ReadTimeoutError(None, "/", "Read timed out. (read timeout=5)")


def refused():
    return NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")


class FakeServer:
    """`faults`: list of (method, path regex, HTTPResponse | Exception | callable), each used once."""

    def __init__(self):
        self.objects = {}       # path -> object
        self.rv = 0
        self.faults = []
        self.requests = []      # (method, path, body, timeout)
        self.api = use_transport(client.ApiClient(client.Configuration(host="https://fake:6443")), self.send)

    def inject(self, method, path, answer, times=1):
        for _ in range(times):
            self.faults.append((method, re.compile(path), answer))

    def _answer(self, code, obj=None, message=""):
        data = json.dumps(obj).encode() if obj is not None else status_body(code, message)
        return HTTPResponse(code, data, {200: "OK", 201: "Created"}.get(code, "Error"))

    def send(self, method, url, headers, body, timeout):
        path = urlparse(url).path
        self.requests.append((method, path, copy.deepcopy(body), timeout))
        for i, (m, rx, answer) in enumerate(self.faults):
            if m == method and rx.search(path):
                del self.faults[i]
                if isinstance(answer, BaseException):
                    raise answer
                if callable(answer):
                    answer = answer()
                    if answer is None:
                        break
                return answer
        return self.handle(method, path, body)

    def _store(self, path, obj):
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        self.objects[path] = obj
        return obj

    def handle(self, method, path, body):
        base = re.sub(r"/status$", "", path)
        if method == "GET":
            obj = self.objects.get(base)
            return self._answer(200, obj) if obj else self._answer(404, message=f"{base} not found")
        if method == "POST":
            if path.endswith("/eviction"):
                return self._answer(201, {"kind": "Status", "status": "Success"})
            name = (body.get("metadata") or {}).get("name")
            target = f"{path}/{name}"
            if target in self.objects:
                return self._answer(409, message=f"{name} already exists")
            return self._answer(201, self._store(target, body))
        if method == "PUT":
            cur = self.objects.get(base)
            if cur is None:
                return self._answer(404, message=f"{base} not found")
            if (body.get("metadata") or {}).get("resourceVersion") != cur["metadata"]["resourceVersion"]:
                return self._answer(409, message="the object has been modified; please apply your changes "
                                                 "to the latest version and try again")
            return self._answer(200, self._store(base, body))
        if method == "PATCH":  # JSON merge patch of metadata.annotations (RunStore.annotate)
            cur = self.objects.get(base)
            if cur is None:
                return self._answer(404, message=f"{base} not found")
            obj = copy.deepcopy(cur)
            annotations = obj["metadata"].setdefault("annotations", {})
            for key, value in ((body.get("metadata") or {}).get("annotations") or {}).items():
                if value is None:
                    annotations.pop(key, None)
                else:
                    annotations[key] = value
            return self._answer(200, self._store(base, obj))
        if method == "DELETE":
            cur = self.objects.get(base)
            if cur is None:
                return self._answer(404, message=f"{base} not found")
            pre = (body or {}).get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != cur["metadata"].get("uid"):
                return self._answer(409, message="Precondition failed: UID in precondition")
            if pre.get("resourceVersion") and pre["resourceVersion"] != cur["metadata"]["resourceVersion"]:
                return self._answer(409, message="Precondition failed: ResourceVersion in precondition")
            del self.objects[base]
            return self._answer(200, {"kind": "Status", "status": "Success"})
        return self._answer(405, message=method)


RUNS = "/apis/repack.volcano.sh/v1alpha1/repackruns"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/repack-system/leases"
