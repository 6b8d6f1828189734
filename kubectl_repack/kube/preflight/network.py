"""The API server's own addresses (pure, and one reader shared with install) and the
webhook-network-policy verdict."""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Callable, Mapping, Optional, Sequence

from kubectl_repack.api.installed import POLICY_SOURCE_ANNOTATION, SOURCE_ENDPOINTS, SOURCE_FLAG, WEBHOOK_PORT
from kubectl_repack.api.run import as_map
from kubectl_repack.errors import ClusterAPIError

from .checks import Check, DEFAULT_NAMESPACE, INSTALL, OK, SERVICE, WARN

NETWORK_POLICY = SERVICE      # the install's NetworkPolicy has the webhook's name
SOURCE_TEXT = {SOURCE_ENDPOINTS: "from the kubernetes Service's endpoints", SOURCE_FLAG: "from --apiserver-cidr"}


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
    ns = f" --repack-namespace {namespace}" if namespace != DEFAULT_NAMESPACE else ""
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


