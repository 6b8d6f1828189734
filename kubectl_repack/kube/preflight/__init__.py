"""Preflight: is this cluster ready for in-cluster RepackRuns? Shared by `kubectl repack doctor` and
`kubectl repack apply` (EXEC-8).

Each check answers one question with a `Check` (OK, FAIL or WARN, what was seen, what to do):

  crd                  the RepackRun CRD is installed, Established, and its served version's
                       schema and printer columns are the ones this plugin bundles
  webhook              the MutatingWebhookConfiguration repack-placement exists
  webhook-endpoints    the Service it calls has ready endpoints (EndpointSlices, else Endpoints)
  webhook-cert         the serving certificate (Secret tls.crt, else the caBundle) is 30+ days from expiry
  controller           the in-cluster controller's Lease is held and fresh
  coordinator          the placement coordinator's Lease is held and fresh
  rbac-<verb>          SelfSubjectAccessReview: the caller may <verb> repackruns
  volcano-crds         Volcano's PodGroup and Queue CRDs are installed
  volcano-scheduler    a Volcano scheduler was seen acting: its Lease, else a recent PodGroup status write
  volcano-version      the vc-scheduler image of Volcano's namespace names the Volcano version CI tests
                       (WARN on another, or when none is found)
  kubernetes           the API server is Kubernetes >= 1.30 (ValidatingAdmissionPolicy is GA there);
                       WARN on a minor CI does not test (kubectl_repack.api.versions)
  admission-policies   the admission policies that vouch for run creators and confine pod writes are
                       bound with Deny (without them no in-cluster Execute evicts anything)
  webhook-network-policy
                       the install's NetworkPolicy admits only some sources (the API server) to the
                       webhook port, and one made from the API server's addresses still covers them
                       (WARN otherwise: the webhook fails open, so an open port is a risk, not a breakage)

The verdicts are pure functions of the objects read (unit-tested on canned objects); `run_checks`
reads them. One check's error (API refusal, unreachable, unexpected data) is that check's FAIL and
never stops the others; a 403 is a WARN (it says what the caller may read, not what the cluster
lacks), and CRD presence then falls back on API discovery, which every user may read.

The package, by concern: `checks` (the Check and Access types, what every check shares),
`verdicts` (the install's objects, access, versions, Volcano), `certificates` (expiry by a small
DER walk: the krew zipapp carries no compiled code, so no `cryptography` here), `network` (the API
server's addresses, also read by install, and the NetworkPolicy); this module reads and runs them.
"""
from __future__ import annotations

import base64
import binascii
import datetime as dt
from typing import Callable, Optional, Sequence

from kubectl_repack.api.control import CONTROLLER_LEASE_NAME
from kubectl_repack.api.gates import COORDINATOR_LEASE_NAME
from kubectl_repack.api.installed import POLICY_SOURCE_ANNOTATION, SOURCE_ENDPOINTS, TLS_SECRET, WEBHOOK_CONFIG
from kubectl_repack.api.lease import LeaseRecord
from kubectl_repack.api.run import GROUP, PLURAL, VERSION, as_map
from kubectl_repack.api.times import utcnow
from kubectl_repack.errors import ClusterAPIError, NotFound, RepackError

from ..client import request
from .checks import CRD_NAME, DEFAULT_ACCESS, FAIL, INSTALL, WARN, Access, Check, namespace_from_env
from .certificates import cert_verdict, pem_not_after
from .network import NETWORK_POLICY, network_policy_verdict, read_apiserver_sources
from .verdicts import (ADMISSION_POLICIES, SCHEDULER_LEASE_PATTERN, VOLCANO_CRDS, VOLCANO_NAMESPACE, our_webhook,
                       access_verdict, crd_verdict, endpoints_verdict, kubernetes_verdict, lease_verdict,
                       policies_verdict, ready_endpoints, scheduler_verdict, serves_field, volcano_crds_verdict,
                       volcano_version_verdict,
                       webhook_service, webhook_verdict)

class _Reader:
    """GETs by path, None for 404, each path read once per preflight (errors remembered too)."""

    def __init__(self, api):
        self.api = api
        self._seen: dict = {}

    def get(self, path: str, query=None) -> Optional[dict]:
        key = (path, tuple(query or ()))
        if key not in self._seen:
            try:
                self._seen[key] = request(self.api, "GET", path, query=query)
            except NotFound:
                self._seen[key] = None
            except RepackError as e:
                self._seen[key] = e
        value = self._seen[key]
        if isinstance(value, Exception):
            raise value
        return value

    def crd(self, name: str) -> Optional[dict]:
        return self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")

    def webhook_config(self) -> Optional[dict]:
        return self.get(f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{WEBHOOK_CONFIG}")

    def lease(self, namespace: str, name: str) -> Optional[dict]:
        return self.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}")

    def items(self, path: str, query=None) -> list:
        """Every item of a list (paginated); [] when the kind or namespace is not there."""
        items, token = [], None
        while True:
            page = self.get(path, list(query or ()) + [("limit", 500)] + ([("continue", token)] if token else []))
            if page is None:
                return items
            items.extend(page.get("items") or ())
            token = as_map(page.get("metadata")).get("continue")
            if not token:
                return items


def installed_crd(api) -> Optional[dict]:
    """The RepackRun CRD as the API server has it (None: not installed), as the crd check reads it;
    ClusterAPIError 403 when the caller may not read CRDs (an admin's right)."""
    return _Reader(api).crd(CRD_NAME)


class Preflight:
    """The checks against one cluster. `run()` returns every Check, in the module docstring's order."""

    def __init__(self, api, namespace: Optional[str] = None, access: Sequence[Access] = DEFAULT_ACCESS,
                 now: Optional[dt.datetime] = None):
        self.api = api
        self.reader = _Reader(api)
        self.namespace = namespace or namespace_from_env()
        self.access = tuple(access)
        self.now = now or utcnow()

    def run(self) -> list:
        steps: list = [("crd", self.crd), ("webhook", self.webhook), ("webhook-endpoints", self.endpoints),
                       ("webhook-cert", self.cert), ("controller", self.controller),
                       ("coordinator", self.coordinator)]
        steps += [(a.check_name, (lambda a=a: self.rbac(a))) for a in self.access]
        steps += [("volcano-crds", self.volcano_crds), ("volcano-scheduler", self.scheduler),
                  ("volcano-version", self.volcano_version), ("kubernetes", self.kubernetes), ("admission-policies", self.policies),
                  ("webhook-network-policy", self.network_policy)]
        return [guarded(name, fn) for name, fn in steps]

    def crd(self) -> Check:
        from kubectl_repack.schema import load_crd

        try:
            return crd_verdict(self.reader.crd(CRD_NAME), load_crd())
        except ClusterAPIError as e:
            if e.status != 403:
                raise
        # Reading CRDs is an admin's right; API discovery is everyone's: served, yes or no.
        served = self.served(GROUP, VERSION)
        if PLURAL not in served:
            return Check("crd", FAIL, f"{GROUP}/{VERSION} {PLURAL} is not served: the RepackRun CRD is not "
                                      "installed", INSTALL)
        return Check("crd", WARN, f"{GROUP}/{VERSION} {PLURAL} is served; the CRD itself is not readable with "
                                  "your credentials, so whether it is this plugin's version is not checked",
                     "run kubectl repack doctor as a cluster admin")

    def served(self, group: str, version: str) -> set:
        """The resources API discovery lists for group/version (empty when it is not served)."""
        doc = self.reader.get(f"/apis/{group}/{version}")
        return {str(as_map(r).get("name")) for r in as_map(doc).get("resources") or ()}

    def webhook(self) -> Check:
        return webhook_verdict(self.reader.webhook_config())

    def _webhook_service(self, check: str, not_checked: str) -> tuple:
        """(namespace, Service) the webhook is called through, and None; or None and the WARN of
        `check` when it is called at a URL instead (`not_checked`: what that leaves unchecked)."""
        config = self.reader.webhook_config()
        target = webhook_service(config, self.namespace)
        if target is not None:
            return target, None
        url = as_map(our_webhook(config).get("clientConfig")).get("url")
        return None, Check(check, WARN, f"the webhook is called at URL {url}, {not_checked}: not checked")

    def endpoints(self) -> Check:
        target, unchecked = self._webhook_service("webhook-endpoints", "not through a Service")
        if unchecked:
            return unchecked
        ns, svc = target
        service = self.reader.get(f"/api/v1/namespaces/{ns}/services/{svc}")
        slices = [] if service is None else self.reader.items(
            f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
            [("labelSelector", f"kubernetes.io/service-name={svc}")])
        endpoints = None if service is None or slices else self.reader.get(f"/api/v1/namespaces/{ns}/endpoints/{svc}")
        ready, not_ready = ready_endpoints(slices, endpoints)
        return endpoints_verdict(f"{ns}/{svc}", service, ready, not_ready)

    def cert(self) -> Check:
        config = self.reader.webhook_config()
        target = webhook_service(config, self.namespace)
        ns = target[0] if target else self.namespace
        why = []
        try:
            secret = self.reader.get(f"/api/v1/namespaces/{ns}/secrets/{TLS_SECRET}")
            crt = as_map(as_map(secret).get("data")).get("tls.crt")
            if crt:
                return cert_verdict(pem_not_after(base64.b64decode(crt)), f"serving certificate (Secret {ns}/"
                                                                          f"{TLS_SECRET} tls.crt)", self.now)
            why.append(f"Secret {ns}/{TLS_SECRET} {'has no tls.crt' if secret else 'not found'}")
        except RepackError as e:   # e.g. 403: reading Secrets is rightly not everyone's
            why.append(f"Secret {ns}/{TLS_SECRET} not readable ({e})")
        except ValueError as e:
            why.append(f"Secret {ns}/{TLS_SECRET} tls.crt unreadable ({e})")
        if config is None:
            return Check("webhook-cert", WARN, f"no webhook configuration and {why[0]}: nothing to check", INSTALL)
        bundle = as_map(our_webhook(config).get("clientConfig")).get("caBundle")
        if not bundle:
            return Check("webhook-cert", WARN, f"{'; '.join(why)}; the webhook configuration has no caBundle: "
                                               "expiry not checked")
        try:
            return cert_verdict(pem_not_after(base64.b64decode(bundle)),
                                f"CA in the caBundle of {WEBHOOK_CONFIG} ({why[0]})", self.now)
        except (ValueError, binascii.Error) as e:
            return Check("webhook-cert", WARN, f"{'; '.join(why)}; the caBundle is unreadable ({e})")

    def controller(self) -> Check:
        return lease_verdict("controller", f"{self.namespace}/{CONTROLLER_LEASE_NAME}",
                             self.reader.lease(self.namespace, CONTROLLER_LEASE_NAME), self.now,
                             "in-cluster RepackRun controller")

    def coordinator(self) -> Check:
        return lease_verdict("coordinator", f"{self.namespace}/{COORDINATOR_LEASE_NAME}",
                             self.reader.lease(self.namespace, COORDINATOR_LEASE_NAME), self.now,
                             "placement coordinator")

    def rbac(self, access: Access) -> Check:
        review = request(self.api, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                         {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                          "spec": {"resourceAttributes": {"group": access.group, "resource": access.resource,
                                                          "verb": access.verb}}})
        return access_verdict(access, review)

    def kubernetes(self) -> Check:
        return kubernetes_verdict(self.reader.get("/version"))

    def policies(self) -> Check:
        base = "/apis/admissionregistration.k8s.io/v1"
        return policies_verdict({n: self.reader.get(f"{base}/validatingadmissionpolicies/{n}") for n in ADMISSION_POLICIES},
                                {n: self.reader.get(f"{base}/validatingadmissionpolicybindings/{n}")
                                 for n in ADMISSION_POLICIES})

    def network_policy(self) -> Check:
        target, unchecked = self._webhook_service("webhook-network-policy", "not served by a pod of the install")
        if unchecked:
            return unchecked
        ns = target[0]
        policy = self.reader.get(f"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies/{NETWORK_POLICY}")
        annotations = as_map(as_map(as_map(policy).get("metadata")).get("annotations"))
        wants_sources = policy is None or annotations.get(POLICY_SOURCE_ANNOTATION) == SOURCE_ENDPOINTS
        sources = read_apiserver_sources(self.reader.get) if wants_sources else None
        return network_policy_verdict(ns, policy, sources)

    def volcano_crds(self) -> Check:
        try:
            return volcano_crds_verdict({name: self.reader.crd(name) for name in VOLCANO_CRDS})
        except ClusterAPIError as e:
            if e.status != 403:
                raise
        served = self.served("scheduling.volcano.sh", "v1beta1")   # discovery, as for crd
        return volcano_crds_verdict({name: ({} if name.partition(".")[0] in served else None)
                                     for name in VOLCANO_CRDS})

    def scheduler(self) -> Check:
        try:
            leases = self.reader.items(f"/apis/coordination.k8s.io/v1/namespaces/{VOLCANO_NAMESPACE}/leases")
        except ClusterAPIError as e:
            if e.status != 403:
                raise
            leases = []   # Volcano's namespace is not everyone's to read: the PodGroups may still tell
        podgroups = [] if any(SCHEDULER_LEASE_PATTERN.search(str(as_map(x.get("metadata")).get("name")))
                              and LeaseRecord.from_dict(x).is_fresh(self.now) for x in leases) \
            else self.reader.items("/apis/scheduling.volcano.sh/v1beta1/podgroups")
        return scheduler_verdict(leases, podgroups, self.now)


    def volcano_version(self) -> Check:
        return volcano_version_verdict(self.reader.items(f"/apis/apps/v1/namespaces/{VOLCANO_NAMESPACE}/deployments"))


def guarded(name: str, fn: Callable[[], Check]) -> Check:
    """fn(), or a FAIL of check `name` saying what went wrong: one check never stops the others."""
    try:
        return fn()
    except ClusterAPIError as e:
        if e.status == 403:   # not an answer about the cluster, only about what the caller may read
            return Check(name, WARN, f"cannot check with your credentials: {e}",
                         "run kubectl repack doctor as a cluster admin")
        return Check(name, FAIL, f"cannot check: {e}")
    except RepackError as e:
        return Check(name, FAIL, f"cannot check: {e}")
    except Exception as e:  # noqa: BLE001 - unexpected data must not hide the other checks' answers
        return Check(name, FAIL, f"cannot check: {type(e).__name__}: {e}")


def run_checks(api, namespace: Optional[str] = None, access: Sequence[Access] = DEFAULT_ACCESS,
               now: Optional[dt.datetime] = None) -> list:
    """Every preflight Check against the cluster behind `api` (see Preflight)."""
    return Preflight(api, namespace, access, now).run()

