"""The seam under the kube layer's whole I/O, for tests: an ApiClient's rest client replaced by a
`send(method, url, headers, body, timeout)` function, so tests answer 409/429/500, time out or
record requests without a server and without touching any other code. The product has no hook for
this: it is the kubernetes client's own `rest_client` attribute, set from here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

# The Kubernetes Python client changed generator at 36: ApiClient.param_serialize/call_api(method,
# url) and a rest client whose request() returns every answer, against call_api(path, method) and a
# rest client with GET/POST/... that raises ApiException itself. constraints.txt pins 35 (the
# pure-Python set the krew zipapp vendors), an unpinned pip install gets the newest: both must work.
_NEW_CLIENT = None


def _new_client() -> bool:
    global _NEW_CLIENT
    if _NEW_CLIENT is None:
        from kubernetes.client import ApiClient

        _NEW_CLIENT = hasattr(ApiClient, "param_serialize")
    return _NEW_CLIENT


@dataclass(frozen=True)
class HTTPResponse:
    """One HTTP answer as a transport returns it (with urllib3's header accessors)."""
    status: int
    data: bytes = b""
    reason: str = ""
    headers: Mapping[str, str] = field(default_factory=lambda: {"content-type": "application/json"})

    def getheaders(self):
        return self.headers

    def getheader(self, name, default=None):
        return self.headers.get(name, default)


Transport = Callable[[str, str, dict, Any, Any], HTTPResponse]
"""send(method, url, headers, body, timeout) -> HTTPResponse: one HTTP call to the API server.
It raises urllib3's errors (timeouts, refused connections) as the real one does."""


class _Text(str):
    """A decoded body that may be decoded again (a no-op)."""

    def decode(self, encoding="utf-8", errors="strict"):
        return str(self)


class _TransportREST:
    """The ApiClient's `rest_client` interface over a Transport."""

    def __init__(self, send: Transport):
        self.send = send

    def request(self, method, url, query_params=None, headers=None, body=None, post_params=None,
                _preload_content=True, _request_timeout=None):
        from urllib.parse import urlencode

        from kubernetes.client.rest import ApiException, RESTResponse

        if query_params:
            url += ("&" if "?" in url else "?") + urlencode(query_params)
        raw = self.send(method, url, dict(headers or {}), body, _request_timeout)
        resp = RESTResponse(raw)
        if _new_client():
            return resp  # the ApiClient reads it and raises for the status itself
        # The older rest client raises for a non-2xx answer and decodes preloaded bodies (up to 35;
        # from 36.0 the ApiClient decodes them itself: _Text serves both).
        if _preload_content:
            resp.data = _Text(raw.data.decode("utf8") if isinstance(raw.data, bytes) else raw.data)
        if not 200 <= raw.status <= 299:
            raise ApiException(http_resp=resp)
        return resp if _preload_content else raw

    def _verb(method):
        def call(self, url, headers=None, query_params=None, post_params=None, body=None, _preload_content=True,
                 _request_timeout=None):
            return self.request(method, url, query_params=query_params, headers=headers, body=body,
                                post_params=post_params, _preload_content=_preload_content,
                                _request_timeout=_request_timeout)
        return call

    GET, HEAD, OPTIONS = _verb("GET"), _verb("HEAD"), _verb("OPTIONS")
    POST, PUT, PATCH, DELETE = _verb("POST"), _verb("PUT"), _verb("PATCH"), _verb("DELETE")
    del _verb

    def close(self) -> None:
        pass


def use_transport(api, send: Transport):
    """Route every HTTP call of `api` (an ApiClient from kubectl_repack.kube.client.connect) through
    `send`. When connect() wrapped the client's rest client to apply kubectl's flags to every request
    (its `inner` is the real one), only the inner one is replaced, so the flags still apply."""
    rest = _TransportREST(send)
    if hasattr(api.rest_client, "inner"):
        api.rest_client.inner = rest
    else:
        api.rest_client = rest
    return api
