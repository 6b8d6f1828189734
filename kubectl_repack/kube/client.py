"""Connecting, the error tree for API failures, and the one retry policy for 409 Conflicts."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Callable, Optional, TypeVar

from kubectl_repack.errors import ClusterAPIError, Conflict, Invalid, NotFound, RepackError, TooManyRequests

REQUEST_TIMEOUT = 60        # seconds per request; a list page of 500 pods is well under this
# Optimistic concurrency: a write that meets a newer resourceVersion (409) re-reads and re-applies
# its change. Eight attempts with a growing pause (0.05 s, 0.1 s, ... 0.4 s; about 1.8 s in all)
# outlast a burst of writes by the other status writer; the last Conflict is raised.
CONFLICT_RETRIES = 8
CONFLICT_PAUSE = 0.05

_ERRORS_BY_STATUS = {404: NotFound, 409: Conflict, 422: Invalid, 429: TooManyRequests}
T = TypeVar("T")


@dataclass(frozen=True)
class Overrides:
    """kubectl's connection flags that change what the kubeconfig says: --server, --token,
    --insecure-skip-tls-verify, and impersonation (--as, --as-group)."""
    server: Optional[str] = None
    token: Optional[str] = None
    insecure: bool = False
    as_user: Optional[str] = None
    as_groups: tuple[str, ...] = ()
    request_timeout: Optional[float] = None   # seconds, 0 = no timeout (kubectl's --request-timeout)


def context_namespace(kubeconfig: Optional[str] = None, context: Optional[str] = None) -> str:
    """The namespace of the kubeconfig's current (or named) context, as kubectl defaults -n; "" when
    it sets none or there is no kubeconfig (in a pod: the ServiceAccount's namespace file)."""
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    path = kubeconfig or os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
    if not os.path.exists(path):
        sa = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
        return open(sa, encoding="utf-8").read().strip() if os.path.exists(sa) else ""
    try:
        contexts, current = config.list_kube_config_contexts(config_file=path)
    except ConfigException:
        return ""
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    return ((chosen or {}).get("context") or {}).get("namespace") or ""


def connect(kubeconfig: Optional[str] = None, context: Optional[str] = None,
            overrides: Overrides = Overrides()):
    """An ApiClient for --kubeconfig/--context, $KUBECONFIG, ~/.kube/config, or in-cluster config,
    with kubectl's overriding flags applied."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = client.Configuration()
    try:
        if kubeconfig:
            if not os.path.exists(kubeconfig):
                raise RepackError(f"kubeconfig {kubeconfig}: no such file")
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=cfg)
        else:
            default = os.path.expanduser(os.environ.get("KUBECONFIG", "~/.kube/config").split(os.pathsep)[0])
            if not os.path.exists(default) and os.environ.get("KUBERNETES_SERVICE_HOST") and not context:
                config.load_incluster_config(client_configuration=cfg)
            elif not os.path.exists(default) and overrides.server:
                pass  # --server (with --token) needs no kubeconfig, as with kubectl
            else:
                config.load_kube_config(context=context, client_configuration=cfg)
    except ConfigException as e:
        where = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise RepackError(f"cannot load kubeconfig {where}"
                          f"{' context ' + repr(context) if context else ''}: {e}") from e
    if overrides.server:
        cfg.host = overrides.server.rstrip("/")
    if overrides.token:
        cfg.api_key = {"authorization": f"Bearer {overrides.token}"}
        cfg.api_key_prefix = {}
        cfg.cert_file = cfg.key_file = None  # kubectl: a bearer token replaces client certificates
    if overrides.insecure:
        cfg.verify_ssl = False
        cfg.ssl_ca_cert = None
    if overrides.request_timeout:
        # kubectl's timeout bounds the whole request: urllib3's default three retries of a read or
        # connect that timed out would wait four times as long.
        from urllib3 import Retry

        cfg.retries = Retry(total=3, connect=0, read=0)
    api = client.ApiClient(cfg)
    if overrides.as_user:
        api.set_default_header("Impersonate-User", overrides.as_user)
    if overrides.as_groups or overrides.request_timeout is not None:
        api.rest_client = _PerRequest(api.rest_client, overrides.request_timeout, overrides.as_groups)
    return api


class _PerRequest:
    """The ApiClient's rest client with what kubectl's flags say about every request.

    --request-timeout replaces the plugin's default timeout (REQUEST_TIMEOUT) on every request; a
    shorter bound a caller sets for its own reasons (the Execute Lease's renewals must not outlast
    the Lease) is kept when it is shorter. Each --as-group becomes its own Impersonate-Group header,
    as kubectl sends them: the client's default headers are a dict (one value per name), and a
    comma-joined value would be one group named "a, b" to the API server. Both generations of the
    client reach the rest client through request() or through GET/POST/...; both are covered.
    """

    def __init__(self, inner, timeout: Optional[float], groups: tuple[str, ...]):
        self.inner, self.timeout, self.groups = inner, timeout, tuple(groups)

    def _timeout(self, asked):
        own = None if asked in (None, REQUEST_TIMEOUT) else asked
        if self.timeout is None:  # the flag is absent: the plugin's own bounds
            return asked
        bounds = [b for b in (own, self.timeout or None) if b]
        if not bounds:
            return None  # --request-timeout=0 and no bound of the caller's: wait as long as it takes
        if any(isinstance(b, tuple) for b in bounds):
            pairs = [b if isinstance(b, tuple) else (b, b) for b in bounds]
            return (min(p[0] for p in pairs), min(p[1] for p in pairs))
        bound = min(bounds)
        # The pinned client (35) applies only an int as a total timeout; (connect, read) takes any number.
        return int(bound) if float(bound).is_integer() else (bound, bound)

    def _headers(self, headers):
        if not self.groups:
            return headers
        try:
            from urllib3 import HTTPHeaderDict
        except ImportError:  # urllib3 1.26 (which an older kubernetes client allows): same class, its items()
            from urllib3._collections import HTTPHeaderDict  # also yields one pair per value

        out = HTTPHeaderDict(headers or {})
        out.discard("Impersonate-Group")
        for group in self.groups:
            out.add("Impersonate-Group", group)
        return out

    # Keyword arguments pass through as given: the two generations' rest clients take different ones
    # (query_params and _preload_content only up to 36).
    def request(self, method, url, **kwargs):
        kwargs["headers"] = self._headers(kwargs.get("headers"))
        kwargs["_request_timeout"] = self._timeout(kwargs.get("_request_timeout"))
        return self.inner.request(method, url, **kwargs)

    def _verb(method):
        def call(self, url, **kwargs):
            return self.request(method, url, **kwargs)
        return call

    GET, HEAD, OPTIONS = _verb("GET"), _verb("HEAD"), _verb("OPTIONS")
    POST, PUT, PATCH, DELETE = _verb("POST"), _verb("PUT"), _verb("PATCH"), _verb("DELETE")
    del _verb

    def __getattr__(self, name):  # pool_manager, close, ...
        return getattr(self.inner, name)


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
            parsed = json.loads(body)
            message = parsed.get("message") or message
            # e.g. a 429 from the Eviction API: the cause names the PodDisruptionBudget
            causes = [c.get("message") for c in (parsed.get("details") or {}).get("causes") or ()
                      if isinstance(c, dict) and c.get("message")]
            if causes:
                message = f"{message} ({'; '.join(causes)})"
        except (ValueError, AttributeError, TypeError):
            message = str(body)[:500]
    cls = _ERRORS_BY_STATUS.get(status, ClusterAPIError)
    return cls(f"{doing}: {message} (HTTP {status})", status)


def call(doing: str, fn: Callable[..., T], *args, **kwargs) -> T:
    """fn(*args, **kwargs), with every client failure raised as the errors tree."""
    from kubernetes.client.rest import ApiException
    from urllib3.exceptions import HTTPError

    try:
        return fn(*args, **kwargs)
    except ApiException as e:
        raise api_error(e, doing) from e
    except HTTPError as e:
        reason = getattr(e, "reason", None) or e  # MaxRetryError wraps the real failure
        raise ClusterAPIError(f"{doing}: cannot reach the API server: {reason}") from e


def call_json(doing: str, fn: Callable, *args, timeout: float = REQUEST_TIMEOUT, **kwargs):
    """call() of a client method with `_preload_content=False`: the raw JSON body, not typed models."""
    resp = call(doing, fn, *args, _preload_content=False, _request_timeout=timeout, **kwargs)
    return json.loads(resp.data) if resp.data else {}


def retry_on_conflict(attempt: Callable[[], T], sleep: Callable[[float], None] = time.sleep) -> T:
    """Run `attempt` (a read-modify-write) until it does not raise Conflict, CONFLICT_RETRIES times at
    most; the last Conflict propagates."""
    for i in range(CONFLICT_RETRIES):
        try:
            return attempt()
        except Conflict:
            if i + 1 == CONFLICT_RETRIES:
                raise
            sleep(CONFLICT_PAUSE * (i + 1))
    raise AssertionError("unreachable")  # pragma: no cover


def request(api, method: str, path: str, body: Optional[dict] = None, query=None, content_type=None) -> dict:
    """One REST call by path (for kinds without a typed client method, e.g. server-side apply);
    the JSON answer, or the errors tree."""
    from kubernetes.client.rest import ApiException

    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type

    def send():
        if hasattr(api, "param_serialize"):
            method_, url, headers_, payload, _ = api.param_serialize(
                method=method, resource_path=path, query_params=list(query or []), header_params=headers,
                body=body, auth_settings=["BearerToken"])
            resp = api.call_api(method_, url, header_params=headers_, body=payload, _request_timeout=REQUEST_TIMEOUT)
            resp.read()
            if not 200 <= resp.status < 300:
                raise ApiException(http_resp=resp)
        else:  # the rest client raises ApiException for a non-2xx answer
            resp = api.call_api(path, method, query_params=list(query or []), header_params=headers, body=body,
                                auth_settings=["BearerToken"], _preload_content=False,
                                _return_http_data_only=True, _request_timeout=REQUEST_TIMEOUT)
        return json.loads(resp.data) if resp.data else {}
    return call(f"{method} {path}", send)
