"""Preflight: is this cluster ready for in-cluster RepackRuns? Shared by `kubectl repack doctor` and
`kubectl repack apply` (issue 12).

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
  kubernetes           the API server is Kubernetes >= 1.30 (ValidatingAdmissionPolicy is GA there)
  admission-policies   the admission policies that vouch for run creators and confine pod writes are
                       bound with Deny (without them no in-cluster Execute evicts anything)
  webhook-network-policy
                       the install's NetworkPolicy admits only some sources (the API server) to the
                       webhook port, and one made from the API server's addresses still covers them
                       (WARN otherwise: the webhook fails open, so an open port is a risk, not a breakage)

The verdicts are pure functions of the objects read (unit-tested on canned objects); `run_checks`
reads them. One check's error (API refusal, unreachable, unexpected data) is that check's FAIL and
never stops the others; a 403 is a WARN (it says what the caller may read, not what the cluster
lacks), and CRD presence then falls back on API discovery, which every user may read. Certificates are read with a small DER walk (the krew zipapp carries no
compiled code, so no `cryptography` here).
"""
from __future__ import annotations

import base64
import binascii
import datetime as dt
import ipaddress
import os
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, Sequence

from kubectl_repack.api.control import ADMISSION_POLICY_NAMES, CONTROLLER_LEASE_NAME
from kubectl_repack.api.gates import COORDINATOR_LEASE_NAME
from kubectl_repack.api.installed import (NAMESPACE, NAMESPACE_ENV, POLICY_SOURCE_ANNOTATION, SOURCE_ENDPOINTS,
                                          SOURCE_FLAG, TLS_SECRET, WEBHOOK, WEBHOOK_CONFIG, WEBHOOK_NAME, WEBHOOK_PORT)
from kubectl_repack.api.lease import LeaseRecord
from kubectl_repack.api.run import GROUP, PLURAL, VERSION, as_map
from kubectl_repack.api.times import parse_time, utcnow
from kubectl_repack.errors import ClusterAPIError, NotFound, RepackError

from .client import request

# What `kubectl repack install` creates, by the names the installer gives it (api.installed).
DEFAULT_NAMESPACE = NAMESPACE
SERVICE = WEBHOOK
NETWORK_POLICY = SERVICE      # the install's NetworkPolicy has the webhook's name
SOURCE_TEXT = {SOURCE_ENDPOINTS: "from the kubernetes Service's endpoints", SOURCE_FLAG: "from --apiserver-cidr"}
CRD_NAME = f"{PLURAL}.{GROUP}"
VOLCANO_CRDS = ("podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh")
VOLCANO_NAMESPACE = "volcano-system"
SCHEDULER_LEASE_PATTERN = re.compile(r"(vc|volcano)-scheduler")
CERT_MIN_REMAINING = dt.timedelta(days=30)
SCHEDULER_RECENT = dt.timedelta(hours=24)
INSTALL = "kubectl repack install"

OK, FAIL, WARN = True, False, None


@dataclass(frozen=True)
class Check:
    """One preflight answer: ok True (OK), False (FAIL) or None (WARN: could not tell, or not needed)."""
    name: str
    ok: Optional[bool]
    detail: str
    fix: str = ""

    @property
    def verdict(self) -> str:
        return "OK" if self.ok else ("FAIL" if self.ok is False else "WARN")


@dataclass(frozen=True)
class Access:
    """One SelfSubjectAccessReview: may the caller `verb` the cluster-scoped `resource` of `group`?"""
    verb: str
    resource: str = PLURAL
    group: str = GROUP
    why: str = ""

    @property
    def check_name(self) -> str:
        return f"rbac-{self.verb}"


# doctor asks for both; apply needs only `create`
CREATE_RUNS = Access("create", why="kubectl repack apply and kubectl apply of a RepackRun")
PATCH_RUNS = Access("patch", why="kubectl repack cancel")
DEFAULT_ACCESS = (CREATE_RUNS, PATCH_RUNS)


def failed(checks: Sequence[Check]) -> list:
    """The checks that FAILed."""
    return [c for c in checks if c.ok is False]


def namespace_from_env() -> str:
    """The namespace of the in-cluster parts ($REPACK_NAMESPACE, as every command; else repack-system)."""
    return os.environ.get(NAMESPACE_ENV) or DEFAULT_NAMESPACE


def age(seconds: float) -> str:
    """kubectl's AGE style: 45s, 12m, 5h, 3d."""
    seconds = int(max(0, seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size * (2 if unit != "m" else 1):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


# ---- certificates (pure) ------------------------------------------------------------------------
_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.S)


def pem_certificates(pem: bytes) -> list:
    """The DER bytes of every CERTIFICATE block of a PEM text, in order."""
    out = []
    for block in _PEM.findall(pem):
        try:
            out.append(base64.b64decode(re.sub(rb"\s+", b"", block), validate=True))
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"a CERTIFICATE block is not base64: {e}") from None
    return out


def _der(data: bytes, pos: int) -> tuple:
    """(tag, content start, content end) of the DER element at `pos`."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        if not 1 <= n <= 4 or pos + n > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos:pos + n], "big")
        pos += n
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def der_not_after(der: bytes) -> dt.datetime:
    """notAfter of one X.509 certificate (DER): Certificate > tbsCertificate > [version], serial,
    signature, issuer, validity > (notBefore, notAfter). ValueError when it is not one."""
    tag, start, _ = _der(der, 0)
    if tag != 0x30:
        raise ValueError("not an X.509 certificate (no outer SEQUENCE)")
    tag, pos, _ = _der(der, start)
    if tag != 0x30:
        raise ValueError("not an X.509 certificate (no tbsCertificate)")
    tag, _, end = _der(der, pos)
    if tag == 0xA0:           # [0] version, absent in v1 certificates
        pos = end
    for _ in range(3):        # serialNumber, signature AlgorithmIdentifier, issuer Name
        _, _, pos = _der(der, pos)
    tag, vstart, _ = _der(der, pos)
    if tag != 0x30:
        raise ValueError("not an X.509 certificate (no validity)")
    _, _, pos = _der(der, vstart)          # notBefore
    tag, tstart, tend = _der(der, pos)     # notAfter
    text = der[tstart:tend].decode("ascii", "replace")
    if tag == 0x17 and re.fullmatch(r"\d{12}Z", text):      # UTCTime YYMMDDHHMMSSZ (RFC 5280: 50-99 -> 19xx)
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif not (tag == 0x18 and re.fullmatch(r"\d{14}Z", text)):  # GeneralizedTime YYYYMMDDHHMMSSZ
        raise ValueError(f"notAfter {text!r} is not a UTCTime or GeneralizedTime")
    return dt.datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=dt.timezone.utc)


def pem_not_after(pem: bytes) -> dt.datetime:
    """The earliest notAfter among a PEM text's certificates (a chain or bundle is as good as its
    first expiry). ValueError when it holds none, or one that is not a certificate."""
    ders = pem_certificates(pem)
    if not ders:
        raise ValueError("no PEM CERTIFICATE block")
    return min(der_not_after(d) for d in ders)


def cert_verdict(not_after: dt.datetime, what: str, now: dt.datetime) -> Check:
    left = not_after - now
    when = not_after.strftime("%Y-%m-%dT%H:%M:%SZ")
    fix = f"{INSTALL} (renews certificates that expire within 30 days)"
    if left <= dt.timedelta(0):
        return Check("webhook-cert", FAIL, f"{what} expired {age(-left.total_seconds())} ago ({when})", fix)
    if left < CERT_MIN_REMAINING:
        return Check("webhook-cert", FAIL, f"{what} expires in {age(left.total_seconds())} ({when})", fix)
    return Check("webhook-cert", OK, f"{what} valid for {age(left.total_seconds())} (until {when})")


# ---- verdicts on objects (pure) -----------------------------------------------------------------
def _difference(a: Any, b: Any, path: str = "") -> str:
    """The path of the first difference between two JSON values ('' when equal)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}"
            sub = _difference(a[key], b[key], f"{path}.{key}")
            if sub:
                return sub
        return ""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} (length {len(a)} vs {len(b)})"
        for i, (x, y) in enumerate(zip(a, b)):
            sub = _difference(x, y, f"{path}[{i}]")
            if sub:
                return sub
        return ""
    return "" if a == b else (path or ".")


def _served(crd: Mapping) -> Optional[Mapping]:
    for v in as_map(crd.get("spec")).get("versions") or ():
        if as_map(v).get("name") == VERSION:
            return as_map(v)
    return None


def _columns(version: Mapping) -> list:
    # The API server drops zero values (priority 0) on its way back; compare without them.
    return [{k: v for k, v in as_map(c).items() if v not in (0, "", None)}
            for c in version.get("additionalPrinterColumns") or ()]


def crd_verdict(found: Optional[Mapping], bundled: Mapping) -> Check:
    """The cluster's RepackRun CRD against the bundled one: served version, schema, printer columns."""
    name = "crd"
    if found is None:
        return Check(name, FAIL, f"CustomResourceDefinition {CRD_NAME} not found", INSTALL)
    conds = {as_map(c).get("type"): as_map(c).get("status") for c in as_map(found.get("status")).get("conditions") or ()}
    if conds.get("Established") != "True":
        return Check(name, FAIL, f"CustomResourceDefinition {CRD_NAME} is not Established",
                     f"kubectl describe crd {CRD_NAME}")
    ours, theirs = _served(bundled), _served(found)
    if theirs is None or not theirs.get("served"):
        return Check(name, FAIL, f"CustomResourceDefinition {CRD_NAME} does not serve {GROUP}/{VERSION}", INSTALL)
    where = _difference(as_map(theirs.get("schema")).get("openAPIV3Schema"),
                        as_map(as_map(ours).get("schema")).get("openAPIV3Schema"))
    if where:
        return Check(name, FAIL, f"{CRD_NAME} {VERSION}: the schema differs from this plugin's at "
                                 f"openAPIV3Schema{where} (an older or newer release installed it)", INSTALL)
    where = _difference(_columns(theirs), _columns(as_map(ours)))
    if where:
        return Check(name, FAIL, f"{CRD_NAME} {VERSION}: the printer columns differ from this plugin's at "
                                 f"additionalPrinterColumns{where}", INSTALL)
    return Check(name, OK, f"{CRD_NAME} {VERSION} Established, schema and printer columns current")


def _our_webhook(config: Mapping) -> Mapping:
    hooks = [as_map(h) for h in config.get("webhooks") or ()]
    return next((h for h in hooks if h.get("name") == WEBHOOK_NAME), hooks[0] if hooks else {})


def webhook_verdict(config: Optional[Mapping]) -> Check:
    name = "webhook"
    if config is None:
        return Check(name, FAIL, f"MutatingWebhookConfiguration {WEBHOOK_CONFIG} not found: replacement pods "
                                 "will not be steered to their planned nodes", INSTALL)
    hook = _our_webhook(config)
    if not hook:
        return Check(name, FAIL, f"MutatingWebhookConfiguration {WEBHOOK_CONFIG} has no webhooks", INSTALL)
    cc = as_map(hook.get("clientConfig"))
    svc = as_map(cc.get("service"))
    target = (f"Service {svc.get('namespace')}/{svc.get('name')}" if svc else f"URL {cc.get('url')}")
    return Check(name, OK, f"MutatingWebhookConfiguration {WEBHOOK_CONFIG} calls {target} "
                           f"(failurePolicy {hook.get('failurePolicy') or 'Fail'})")


def webhook_service(config: Optional[Mapping], namespace: str) -> Optional[tuple]:
    """(namespace, name) of the Service the webhook calls; install's default when there is no
    configuration; None when it calls a URL."""
    if config is None:
        return namespace, SERVICE
    cc = as_map(_our_webhook(config).get("clientConfig"))
    svc = as_map(cc.get("service"))
    if not svc:
        return None
    return str(svc.get("namespace") or namespace), str(svc.get("name") or SERVICE)


def ready_endpoints(slices: Sequence[Mapping], endpoints: Optional[Mapping]) -> tuple:
    """(ready, not ready) addresses: EndpointSlices when there are any (`ready` unset counts as
    ready, as discovery.k8s.io/v1 says), else the Endpoints object's subsets."""
    if slices:
        ready = not_ready = 0
        for s in slices:
            for ep in as_map(s).get("endpoints") or ():
                n = len(as_map(ep).get("addresses") or ())
                if as_map(as_map(ep).get("conditions")).get("ready") is False:
                    not_ready += n
                else:
                    ready += n
        return ready, not_ready
    subsets = as_map(endpoints).get("subsets") or ()
    return (sum(len(as_map(s).get("addresses") or ()) for s in subsets),
            sum(len(as_map(s).get("notReadyAddresses") or ()) for s in subsets))


def endpoints_verdict(ref: str, service: Optional[Mapping], ready: int, not_ready: int) -> Check:
    name = "webhook-endpoints"
    ns, _, svc = ref.partition("/")
    if service is None:
        return Check(name, FAIL, f"Service {ref} not found", INSTALL)
    if ready == 0:
        return Check(name, FAIL, f"Service {ref} has no ready endpoints ({not_ready} not ready): the webhook "
                                 "is not serving, pods are created without placement",
                     f"kubectl -n {ns} get pods -l app.kubernetes.io/name={svc}; kubectl -n {ns} logs "
                     f"deployment/{svc} -c webhook")
    return Check(name, OK, f"Service {ref}: {ready} ready endpoint(s)" + (f", {not_ready} not ready" if not_ready else ""))


# ---- the API server's own addresses (pure, and one reader shared with install) ------------------
KUBERNETES_SERVICE = ("default", "kubernetes")
_NOT_A_SOURCE = "loopback or unspecified"


@dataclass(frozen=True)
class APIServerSources:
    """The addresses the API servers advertise (the `default/kubernetes` Service's endpoints), as
    one /32 or /128 each: on a self-hosted cluster the source of their webhook calls. `cidrs` is
    empty when they cannot be known; `why` says why (or where they came from)."""
    cidrs: tuple
    why: str

    @property
    def known(self) -> bool:
        return bool(self.cidrs)


def _slice_addresses(slices: Sequence[Mapping]) -> list:
    # Every endpoint, ready or not: an API server that is not ready now still calls webhooks later.
    return [str(a) for s in slices for ep in as_map(s).get("endpoints") or ()
            for a in as_map(ep).get("addresses") or ()]


def _endpoints_addresses(endpoints: Optional[Mapping]) -> list:
    return [str(as_map(a).get("ip")) for s in as_map(endpoints).get("subsets") or ()
            for key in ("addresses", "notReadyAddresses") for a in as_map(s).get(key) or ()]


def apiserver_sources(slices: Sequence[Mapping], endpoints: Optional[Mapping], unreadable: str = "") -> APIServerSources:
    """The API servers' addresses from the kubernetes Service's EndpointSlices, else its Endpoints.
    Not known when there are none, or when any of them is loopback (127.0.0.1, ::1) or unspecified:
    that API server calls from an address nobody can tell, and a policy without it would block its
    calls. `unreadable`: why the objects could not be read, if they could not."""
    where = "/".join(KUBERNETES_SERVICE)
    addresses = _slice_addresses(slices) or _endpoints_addresses(endpoints)
    if not addresses:
        if unreadable:
            return APIServerSources((), f"the endpoints of the Service {where} are not readable ({unreadable})")
        return APIServerSources((), f"the Service {where} has no endpoints (no EndpointSlice, no Endpoints)")
    ips, odd = [], []
    for text in addresses:
        try:
            ip = ipaddress.ip_address(text)
        except ValueError:
            return APIServerSources((), f"the Service {where} lists {text!r}, which is not an IP address")
        if ip.is_loopback or ip.is_unspecified:
            odd.append(text)
        elif ip not in ips:
            ips.append(ip)
    if odd:
        return APIServerSources((), f"the Service {where} lists only {_NOT_A_SOURCE} addresses ({', '.join(odd)}), "
                                    "which are not where the API server's calls come from" if not ips else
                                f"the Service {where} lists {_NOT_A_SOURCE} addresses ({', '.join(odd)}) besides "
                                f"{', '.join(map(str, ips))}: where those API servers call from is not known")
    ips.sort(key=lambda ip: (ip.version, int(ip)))
    return APIServerSources(tuple(f"{ip}/{ip.max_prefixlen}" for ip in ips),
                            SOURCE_TEXT[SOURCE_ENDPOINTS])


def read_apiserver_sources(get: Callable) -> APIServerSources:
    """`get(path, query)`: the object, None for 404, ClusterAPIError otherwise. EndpointSlices
    (discovery.k8s.io/v1, label kubernetes.io/service-name=kubernetes) first, the Endpoints object
    when they list no address or are not readable."""
    ns, svc = KUBERNETES_SERVICE
    errors, slices, endpoints = [], [], None
    try:
        page = get(f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
                   [("labelSelector", f"kubernetes.io/service-name={svc}")])
        slices = list(as_map(page).get("items") or ())
    except ClusterAPIError as e:
        errors.append(str(e))
    if not _slice_addresses(slices):
        try:
            endpoints = get(f"/api/v1/namespaces/{ns}/endpoints/{svc}", None)
        except ClusterAPIError as e:
            errors.append(str(e))
    return apiserver_sources(slices, endpoints, "; ".join(errors))


def network_policy_fix(namespace: str, sources: Optional[APIServerSources]) -> str:
    """The command that closes the webhook port (install keeps everything else it renders, so run it
    with the options of the install)."""
    ns = f" -n {namespace}" if namespace != DEFAULT_NAMESPACE else ""
    if sources is not None and sources.known:
        return (f"{INSTALL}{ns} (with the options you installed with: it reads the API server's addresses, "
                f"now {', '.join(sources.cidrs)}, and admits only them), or {INSTALL}{ns} --apiserver-cidr CIDR")
    return (f"{INSTALL}{ns} --apiserver-cidr CIDR (the address your API servers call webhooks from, repeatable; "
            "with the options you installed with)")


def _policy_cidrs(policy: Mapping) -> Optional[list]:
    """The ipBlock CIDRs the policy's ingress rules admit; None when it admits every source (no
    Ingress isolation, or a rule without `from`)."""
    spec = as_map(policy.get("spec"))
    types = spec.get("policyTypes")
    if types is not None and "Ingress" not in types:
        return None
    cidrs = []
    for rule in spec.get("ingress") or ():
        peers = as_map(rule).get("from")
        if not peers:
            return None
        for peer in peers:
            block = as_map(as_map(peer).get("ipBlock"))
            if block.get("cidr"):
                cidrs.append(str(block["cidr"]))
    return cidrs


def network_policy_verdict(namespace: str, policy: Optional[Mapping],
                           sources: Optional[APIServerSources] = None) -> Check:
    """The install's NetworkPolicy in `namespace`: present and admitting only some sources (OK),
    else a WARN (the webhook fails open, so an open port is a risk, not a breakage). `sources`: the
    API server's addresses now, compared with a policy install made from them."""
    name, ref = "webhook-network-policy", f"{namespace}/{NETWORK_POLICY}"
    if policy is None:
        return Check(name, WARN, f"no NetworkPolicy {ref}: the webhook port ({WEBHOOK_PORT}) is reachable from every "
                                 "pod" + (f" ({sources.why})" if sources is not None and not sources.known else ""),
                     network_policy_fix(namespace, sources))
    cidrs = _policy_cidrs(policy)
    if cidrs is None:
        return Check(name, WARN, f"NetworkPolicy {ref} admits every source: the webhook port ({WEBHOOK_PORT}) is "
                                 "reachable from every pod", network_policy_fix(namespace, sources))
    source = as_map(as_map(policy.get("metadata")).get("annotations")).get(POLICY_SOURCE_ANNOTATION)
    admitted = ", ".join(cidrs) or "nothing"
    if source == SOURCE_ENDPOINTS and sources is not None and sources.known:
        nets = [ipaddress.ip_network(c, strict=False) for c in cidrs]
        missing = [c for c in sources.cidrs if not any(ipaddress.ip_network(c).subnet_of(n) for n in nets
                                                       if n.version == ipaddress.ip_network(c).version)]
        if missing:
            return Check(name, WARN, f"NetworkPolicy {ref} admits {admitted}, but the API server now advertises "
                                     f"{', '.join(missing)} too: where the CNI enforces policies its webhook calls "
                                     "are blocked (the webhook fails open: pods are created unsteered)",
                         network_policy_fix(namespace, sources))
    how = f", {SOURCE_TEXT[source]}" if source in SOURCE_TEXT else ""
    return Check(name, OK, f"NetworkPolicy {ref}: the webhook port admits only {admitted}{how}")


def lease_verdict(name: str, ref: str, lease: Optional[Mapping], now: dt.datetime, what: str) -> Check:
    """A Lease held and fresh (renewTime + leaseDurationSeconds after `now`, on this clock)."""
    record = LeaseRecord.from_dict(lease)
    down = f"the {what} is not running"
    if record is None:
        return Check(name, FAIL, f"Lease {ref} not found: {down}", INSTALL)
    if not record.holder:
        return Check(name, FAIL, f"Lease {ref} is not held: {down}", INSTALL)
    expires = record.expires()
    renewed = f"renewed {age((now - record.renew_time).total_seconds())} ago" if record.renew_time else "never renewed"
    if expires is None or now >= expires:
        return Check(name, FAIL, f"Lease {ref} held by {record.holder} but expired ({renewed}): {down}",
                     f"{INSTALL}; kubectl -n {ref.partition('/')[0]} get pods")
    return Check(name, OK, f"Lease {ref} held by {record.holder}, {renewed}")


def access_verdict(access: Access, review: Mapping) -> Check:
    st = as_map(review.get("status"))
    what = f"{access.verb} {access.resource}.{access.group}"
    for_ = f" (needed by {access.why})" if access.why else ""
    if st.get("allowed"):
        return Check(access.check_name, OK, f"may {what}")
    why = st.get("reason") or st.get("evaluationError") or "no RBAC rule allows it"
    return Check(access.check_name, FAIL, f"may not {what}{for_}: {why}",
                 f"ask a cluster admin for a ClusterRole with verb {access.verb} on {access.resource} "
                 f"in API group {access.group}")


MIN_KUBERNETES = (1, 30)
ADMISSION_POLICIES = ADMISSION_POLICY_NAMES


def kubernetes_verdict(version: Optional[Mapping]) -> Check:
    """`version`: the API server's /version."""
    v = as_map(version)
    found = re.match(r"v?(\d+)\.(\d+)", str(v.get("gitVersion") or ""))
    if not found:
        return Check("kubernetes", None, f"the API server reports no version ({v.get('gitVersion')!r})")
    got = (int(found.group(1)), int(found.group(2)))
    need = ".".join(map(str, MIN_KUBERNETES))
    if got < MIN_KUBERNETES:
        return Check("kubernetes", FAIL, f"Kubernetes {v['gitVersion']}: kubectl-repack needs >= {need} "
                                          "(ValidatingAdmissionPolicy vouches for who created a run)",
                     f"upgrade the cluster to Kubernetes {need} or later")
    return Check("kubernetes", OK, f"Kubernetes {v['gitVersion']} (>= {need})")


def policies_verdict(policies: Mapping, bindings: Mapping) -> Check:
    """`policies`/`bindings`: name -> object or None, for each of ADMISSION_POLICIES."""
    missing = [n for n in ADMISSION_POLICIES if policies.get(n) is None or bindings.get(n) is None]
    if missing:
        return Check("admission-policies", FAIL, f"ValidatingAdmissionPolicy (or binding) missing: {', '.join(missing)}; "
                                                 "the controller evicts nothing without them", INSTALL)
    weak = [n for n in ADMISSION_POLICIES if as_map(as_map(policies[n]).get("spec")).get("failurePolicy", "Fail") != "Fail"
            or "Deny" not in (as_map(as_map(bindings[n]).get("spec")).get("validationActions") or [])]
    if weak:
        return Check("admission-policies", FAIL, f"not enforced (failurePolicy Fail, binding action Deny): "
                                                 f"{', '.join(weak)}", INSTALL)
    return Check("admission-policies", OK, f"{', '.join(ADMISSION_POLICIES)} bound with Deny")


def volcano_crds_verdict(found: Mapping) -> Check:
    """`found`: CRD name -> object or None."""
    missing = [n for n, crd in found.items() if crd is None]
    if missing:
        return Check("volcano-crds", FAIL, f"Volcano is not installed: CustomResourceDefinition "
                                           f"{', '.join(missing)} not found",
                     "install Volcano: https://volcano.sh/en/docs/installation/")
    return Check("volcano-crds", OK, f"{', '.join(found)} installed")


def _scheduler_marks(pg: Mapping) -> list:
    """(time, what) of every trace a scheduler left on a PodGroup: its conditions' transitions, and
    status writes by a scheduler in managedFields (vc-scheduler moves a PodGroup to Inqueue without
    any condition)."""
    marks = []
    for c in as_map(pg.get("status")).get("conditions") or ():
        t = parse_time(as_map(c).get("lastTransitionTime"))
        if t is not None:
            marks.append((t, f"condition {as_map(c).get('type')}"))
    for m in as_map(pg.get("metadata")).get("managedFields") or ():
        m = as_map(m)
        manager = str(m.get("manager") or "")
        if "sched" not in manager or not (m.get("subresource") == "status" or "f:status" in as_map(m.get("fieldsV1"))):
            continue
        t = parse_time(m.get("time"))
        if t is not None:
            marks.append((t, f"status written by {manager}"))
    return marks


def scheduler_verdict(leases: Sequence[Mapping], podgroups: Sequence[Mapping], now: dt.datetime) -> Check:
    """A scheduler seen acting: a fresh scheduler Lease in volcano-system, else the newest trace it
    left on a PodGroup (a condition transition, a status write) within SCHEDULER_RECENT."""
    name = "volcano-scheduler"
    stale = ""
    for lease in leases:
        meta = as_map(lease.get("metadata"))
        if not SCHEDULER_LEASE_PATTERN.search(str(meta.get("name") or "")):
            continue
        record = LeaseRecord.from_dict(lease)
        ref = f"{meta.get('namespace') or VOLCANO_NAMESPACE}/{meta.get('name')}"
        if record is not None and record.is_fresh(now):
            return Check(name, OK, f"Lease {ref} held by {record.holder}, renewed "
                                   f"{age((now - record.renew_time).total_seconds())} ago")
        stale = f"Lease {ref} is not held or expired; "
    newest, where = None, ""
    for pg in podgroups:
        meta = as_map(pg.get("metadata"))
        ref = f"PodGroup {meta.get('namespace')}/{meta.get('name')}"
        for when, what in _scheduler_marks(pg):
            if newest is None or when > newest:
                newest, where = when, f"{ref} {what}"
    fix = f"kubectl -n {VOLCANO_NAMESPACE} get pods; kubectl -n {VOLCANO_NAMESPACE} logs deployment/volcano-scheduler"
    if newest is None:
        return Check(name, WARN, f"{stale}no PodGroup status written by a scheduler: no sign of a Volcano "
                                 "scheduler acting (fine on a cluster with no gang yet)", fix)
    ago = age((now - newest).total_seconds())
    if now - newest > SCHEDULER_RECENT:
        return Check(name, WARN, f"{stale}the newest scheduler trace on a PodGroup is {ago} old ({where}): no "
                                 "sign of a Volcano scheduler acting in the last 24h", fix)
    return Check(name, OK, f"last seen {ago} ago: {where}")


# ---- reading ------------------------------------------------------------------------------------
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
                  ("kubernetes", self.kubernetes), ("admission-policies", self.policies),
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

    def endpoints(self) -> Check:
        config = self.reader.webhook_config()
        target = webhook_service(config, self.namespace)
        if target is None:
            url = as_map(_our_webhook(config).get("clientConfig")).get("url")
            return Check("webhook-endpoints", WARN, f"the webhook is called at URL {url}, not through a Service: "
                                                    "not checked")
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
        bundle = as_map(_our_webhook(config).get("clientConfig")).get("caBundle")
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
        config = self.reader.webhook_config()
        target = webhook_service(config, self.namespace)
        if target is None:
            url = as_map(_our_webhook(config).get("clientConfig")).get("url")
            return Check("webhook-network-policy", WARN, f"the webhook is called at URL {url}, not served by a pod "
                                                         "of the install: not checked")
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
