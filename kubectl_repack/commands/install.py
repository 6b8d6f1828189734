"""`kubectl repack install` / `uninstall`: the RepackRun CRD plus the webhook, coordinator and controller.

Install renders the objects (deploy.manifests) after the CRD and applies each one with server-side
apply (field manager `kubectl-repack`, forced), so running it again converges instead of failing.
It makes no certificate and renders no Secret or caBundle: the controller makes the webhook's TLS
Secret in the cluster and keeps the caBundle current (webhook.certmanager), so the rendered objects
carry no key material and install needs no compiled library (the krew zipapp runs it).
`--dry-run` (=client) renders without reading or touching the cluster; `--dry-run=server` sends
each object with dryRun=All.

The webhook's port is closed to everything but the API server by a NetworkPolicy, on by default
where the API server's source can be known: `--apiserver-cidr` names it, else install reads the
addresses the API servers advertise (the `default/kubernetes` Service's EndpointSlices, else its
Endpoints; on a self-hosted cluster the source of their webhook calls). When they cannot be known
(none, not readable, loopback) no policy is rendered and install warns that the port is open to
every pod; `--no-network-policy` opts out. A client dry run reads no cluster, so it renders the
policy only from `--apiserver-cidr` (and says so); a server dry run reads the addresses as install
does. A policy an earlier install made and this one does not render is deleted. `--webhook-url` points the MutatingWebhookConfiguration at a URL (a
webhook served outside the cluster, e.g. on loopback in tests): no Deployment or Service is
installed then, install generates the TLS pair itself (needs `cryptography`), renders it as the
Secret and the caBundle, keeps a still-valid pair on a re-install, and `--cert-dir` receives it.

Uninstall deletes what install created, webhook configuration first (so no pod creation waits
on a webhook that is going away), then releases any pod still carrying the placement gate (the
coordinator that would have is going away too); the CRD, and with it every RepackRun, only with
`--include-crd`. An existing namespace is used as it is and never deleted: uninstall deletes only
a namespace install created (it carries the install's part-of label). The TLS Secret the
controller made is deleted too.
"""
from __future__ import annotations

import base64
import json
import time
from typing import Optional
from urllib.parse import urlparse

import click

from kubectl_repack import render
from kubectl_repack.errors import ClusterAPIError, RepackError

from .options import IMAGE_REF, NAMESPACE, OUTPUT_JSON, OUTPUT_YAML, RUN_NAME, cluster_options, output_option, settings

FIELD_MANAGER = "kubectl-repack"

DRY_RUN_MODES = ("none", "client", "server")   # kubectl's --dry-run values; bare --dry-run is client

# kind -> (plural, namespaced); the only kinds install writes.
KINDS = {
    "CustomResourceDefinition": ("customresourcedefinitions", False),
    "Namespace": ("namespaces", False),
    "ServiceAccount": ("serviceaccounts", True),
    "ClusterRole": ("clusterroles", False),
    "ClusterRoleBinding": ("clusterrolebindings", False),
    "Role": ("roles", True),
    "RoleBinding": ("rolebindings", True),
    "Secret": ("secrets", True),
    "Deployment": ("deployments", True),
    "Service": ("services", True),
    "MutatingWebhookConfiguration": ("mutatingwebhookconfigurations", False),
    "NetworkPolicy": ("networkpolicies", True),
    "Lease": ("leases", True),
    "ValidatingAdmissionPolicy": ("validatingadmissionpolicies", False),
    "ValidatingAdmissionPolicyBinding": ("validatingadmissionpolicybindings", False),
}


def object_path(obj: dict, with_name: bool = True) -> str:
    """REST path of an object from its apiVersion, kind, namespace and name."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural, namespaced = KINDS[kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespaced:
        base += f"/namespaces/{obj['metadata']['namespace']}"
    path = f"{base}/{plural}"
    return f"{path}/{obj['metadata']['name']}" if with_name else path


def describe(obj: dict) -> str:
    """`kind.group/name` as kubectl prints it."""
    group = obj["apiVersion"].rpartition("/")[0]
    return f"{obj['kind'].lower()}{'.' + group if group else ''}/{obj['metadata']['name']}"


def _request(api, method: str, path: str, body: Optional[dict] = None, query=None, content_type=None):
    from kubectl_repack.kube.client import request

    return request(api, method, path, body, query, content_type)


def server_side_apply(api, obj: dict, dry_run: bool = False) -> dict:
    """Create or update `obj` with server-side apply (forced: install owns these objects); with
    `dry_run`, the API server only says what it would do (dryRun=All: validated, admitted, not stored)."""
    query = [("fieldManager", FIELD_MANAGER), ("force", "true")] + ([("dryRun", "All")] if dry_run else [])
    return _request(api, "PATCH", object_path(obj), obj, query=query, content_type="application/apply-patch+yaml")


def delete_object(api, obj: dict) -> bool:
    """Delete `obj`; False when it was not there."""
    from kubectl_repack.errors import NotFound

    try:
        _request(api, "DELETE", object_path(obj), {"propagationPolicy": "Background"},
                 content_type="application/json")
        return True
    except NotFound:
        return False


def existing_certs(api, namespace: str, sans: list[str]):
    """The CertBundle of an existing Secret if still valid and covering `sans`, else None."""
    from kubectl_repack.errors import NotFound
    from kubectl_repack.deploy import certs, manifests

    try:
        obj = _request(api, "GET", f"/api/v1/namespaces/{namespace}/secrets/{manifests.SECRET_NAME}")
    except NotFound:
        return None
    data = obj.get("data") or {}
    try:
        bundle = certs.CertBundle(ca_cert_pem=base64.b64decode(data[certs.CA_CRT]),
                                  cert_pem=base64.b64decode(data[certs.TLS_CRT]),
                                  key_pem=base64.b64decode(data[certs.TLS_KEY]))
        if certs.needs_rotation(bundle.cert_pem) or not set(sans) <= set(certs.sans_of(bundle.cert_pem)):
            return None
    except (KeyError, ValueError):
        return None
    return bundle


def namespace_state(api, namespace: str) -> str:
    """"absent", "ours" (it carries the install's part-of label: install only labels namespaces it
    creates) or "foreign"."""
    from kubectl_repack.errors import NotFound
    from kubectl_repack.deploy import manifests

    try:
        obj = _request(api, "GET", f"/api/v1/namespaces/{namespace}")
    except NotFound:
        return "absent"
    labels = (obj.get("metadata") or {}).get("labels") or {}
    key = "app.kubernetes.io/part-of"
    return "ours" if labels.get(key) == manifests.LABELS[key] else "foreign"


def ours(api, namespace: str, absent: bool) -> bool:
    """Whether install manages this namespace: it carries the install's part-of label, or, when
    missing, `absent` (install will create it)."""
    state = namespace_state(api, namespace)
    return absent if state == "absent" else state == "ours"


def extra_sans(webhook_url: Optional[str]) -> list[str]:
    """The URL's host, which the API server verifies the serving certificate against."""
    if not webhook_url:
        return []
    host = urlparse(webhook_url).hostname
    return [host] if host else []


def manifests_for(namespace: str, image: str, bundle, webhook_url: Optional[str],
                  placement: Optional[dict] = None) -> list[dict]:
    """CRD first, then the webhook's objects (no Deployment/Service when served from a URL).
    `placement`: node_selector / tolerations / priority_class for the Deployment's pods."""
    from kubectl_repack.schema import load_crd
    from kubectl_repack.deploy import manifests

    objs = manifests.render(namespace=namespace, image=image, certs=bundle, url=webhook_url, **(placement or {}))
    if webhook_url:
        objs = [o for o in objs if o["kind"] not in ("Deployment", "Service")]
    return [load_crd()] + objs


def _check_url(ctx, param, value):
    if value is None:
        return None
    parsed = urlparse(value)
    if parsed.scheme != "https" or not parsed.hostname:
        raise click.BadParameter(f"{value!r} is not an https:// URL (the API server only calls webhooks over TLS)",
                                 ctx=ctx, param=param)
    return value


# ---- placement and --wait options (issue 10); the image reference is options.IMAGE_REF --------------
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def check_cidrs(ctx, param, values):
    """IPv4 or IPv6 networks (10.0.0.0/24, 2001:db8::/64); a host address is its /32 or /128."""
    import ipaddress

    out = []
    for value in values or ():
        try:
            out.append(str(ipaddress.ip_network(value, strict=False)))
        except ValueError as e:
            raise click.BadParameter(f"{value!r} is not a CIDR: {e}", ctx=ctx, param=param) from e
    return tuple(out)


def _get(api, path: str, query=None) -> Optional[dict]:
    """GET `path`; None for 404."""
    from kubectl_repack.errors import NotFound

    try:
        return _request(api, "GET", path, query=query)
    except NotFound:
        return None


class PolicyDecision:
    """What install does about the webhook's NetworkPolicy: `cidrs` to admit (none: no policy),
    where they came from (`source`), and the line to print (`said`; `warning` when it is one)."""

    def __init__(self, cidrs=(), source=None, said="", warning=False):
        self.cidrs, self.source, self.said, self.warning = tuple(cidrs), source, said, warning


def policy_ref() -> str:
    from kubectl_repack.deploy import manifests

    return f"networkpolicy.networking.k8s.io/{manifests.NAME}"


def decide_network_policy(api, apiserver_cidrs, no_network_policy: bool, webhook_url, dry_run: str) -> PolicyDecision:
    """--apiserver-cidr wins; --no-network-policy and a webhook served outside the cluster (no pod
    of the install to guard) render none; a client dry run reads no cluster; otherwise the
    addresses the API servers advertise, or none and a warning when they cannot be known."""
    from kubectl_repack.deploy import manifests
    from kubectl_repack.kube.preflight import read_apiserver_sources

    open_port = f"the webhook port ({manifests.CONTAINER_PORT}) is reachable from every pod"
    close = ("close it with --apiserver-cidr CIDR (the address your API servers call webhooks from, "
             "repeatable), or say so with --no-network-policy")
    if apiserver_cidrs:
        return PolicyDecision(apiserver_cidrs, manifests.SOURCE_FLAG,
                              f"{policy_ref()}: webhook port admits only the API server "
                              f"({', '.join(apiserver_cidrs)}, from --apiserver-cidr)")
    if no_network_policy:
        return PolicyDecision(said=f"no NetworkPolicy (--no-network-policy): {open_port}")
    if webhook_url:
        return PolicyDecision()
    if dry_run == "client":
        return PolicyDecision(said=f"note: no NetworkPolicy rendered: a client dry run reads no cluster, so the API "
                                   f"server's addresses are not known and {open_port}; add --apiserver-cidr CIDR, or "
                                   "use --dry-run=server (it reads them as install does)", warning=True)
    sources = read_apiserver_sources(lambda path, query: _get(api, path, query))
    if not sources.known:
        return PolicyDecision(said=f"warning: no NetworkPolicy: the API server's addresses cannot be known "
                                   f"({sources.why}), so {open_port}; {close}", warning=True)
    return PolicyDecision(sources.cidrs, manifests.SOURCE_ENDPOINTS,
                          f"{policy_ref()}: webhook port admits only the API server "
                          f"({', '.join(sources.cidrs)}, {sources.why})")


def remove_stale_policy(api, namespace: str, dry_run: bool = False) -> str:
    """Delete the NetworkPolicy an earlier install made (this one renders none); '' when there
    is none, else the line to print. One of the same name that install did not make is left alone."""
    from kubectl_repack.deploy import manifests
    from kubectl_repack.errors import NotFound

    path = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/{manifests.NAME}"
    found = _get(api, path)
    if found is None:
        return ""
    labels = (found.get("metadata") or {}).get("labels") or {}
    key = "app.kubernetes.io/part-of"
    if labels.get(key) != manifests.LABELS[key]:
        return f"{policy_ref()} exists, left as it is (not made by install)"
    try:
        _request(api, "DELETE", path, {"propagationPolicy": "Background"},
                 query=[("dryRun", "All")] if dry_run else None, content_type="application/json")
    except NotFound:
        return ""
    return (f"{policy_ref()} {'would be deleted (server dry run)' if dry_run else 'deleted'} "
            "(an earlier install's; this one renders none)")


def check_usernames(ctx, param, values):
    """Kubernetes usernames (`system:serviceaccount:NS:NAME`, a user's name): not empty, no comma (the
    webhook reads them as one comma-separated variable), no control character or surrounding space."""
    for value in values or ():
        if not value or value != value.strip() or "," in value or any(ord(c) < 32 or ord(c) == 127 for c in value) \
                or len(value) > 1024:
            raise click.BadParameter(f"{value!r} is not a username (non-empty, at most 1024 characters, no comma, "
                                     "no control character or surrounding space)", ctx=ctx, param=param)
    return tuple(values or ())


def parse_node_selector(values) -> dict:
    """KEY=VALUE pairs, comma-separated and/or repeated, in kubectl's selector syntax (one parser:
    commands.selectors), label keys and values checked; only equality, as a nodeSelector holds."""
    from .selectors import SelectorSyntaxError, parse_selector

    selector = {}
    for value in values or ():
        try:
            parsed = parse_selector(value)
        except SelectorSyntaxError as e:
            raise click.BadParameter(str(e), param_hint="--node-selector") from e
        if parsed.get("matchExpressions") or not parsed.get("matchLabels"):
            raise click.BadParameter(f"{value!r}: a nodeSelector is KEY=VALUE pairs only",
                                     param_hint="--node-selector")
        selector.update(parsed["matchLabels"])
    return selector


def parse_tolerations(values) -> list[dict]:
    """Each value: a JSON/YAML list of Toleration objects, or comma-separated KEY[=VALUE][:EFFECT]
    items (without =VALUE the key only has to exist; without :EFFECT every effect is tolerated)."""
    from planner import documents
    from planner.errors import DocumentError

    out: list[dict] = []
    for value in values or ():
        text = value.strip()
        if text.startswith("["):
            try:
                (items,) = documents.parse(text, "--tolerations", flatten_array=False, fast=False)
            except DocumentError as e:
                raise click.BadParameter(str(e), param_hint="--tolerations") from None
            if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
                raise click.BadParameter("expected a list of Toleration objects", param_hint="--tolerations")
            allowed = {"key", "operator", "value", "effect", "tolerationSeconds"}
            for item in items:
                unknown = set(item) - allowed
                if unknown:
                    raise click.BadParameter(f"unknown Toleration field(s) {sorted(unknown)}",
                                             param_hint="--tolerations")
            out += items
            continue
        for item in filter(None, (part.strip() for part in text.split(","))):
            spec, colon, effect = item.rpartition(":") if ":" in item else (item, "", "")
            key, eq, val = spec.partition("=")
            if not key:
                raise click.BadParameter(f"{item!r} has no key", param_hint="--tolerations")
            if colon and effect not in TOLERATION_EFFECTS:
                raise click.BadParameter(f"{item!r}: effect must be one of {', '.join(TOLERATION_EFFECTS)}",
                                         param_hint="--tolerations")
            tol = {"key": key, "operator": "Equal" if eq else "Exists"}
            if eq:
                tol["value"] = val
            if effect:
                tol["effect"] = effect
            out.append(tol)
    return out


def parse_timeout(ctx, param, value) -> float:
    """--timeout in seconds, from a Go duration (90s, 5m) or whole seconds, as every duration flag."""
    from kubectl_repack.api.times import parse_duration

    try:
        return parse_duration(value).total_seconds()
    except (ValueError, OverflowError) as e:
        raise click.BadParameter(str(e) if isinstance(e, ValueError) else f"{value!r} is too long a duration",
                                 ctx=ctx, param=param) from e


class InstallNotReady(RepackError):
    """--wait ran out: the message names the pod and container that are not ready, and why."""


def _pod_problems(pod: dict) -> list[str]:
    """Why one of the Deployment's pods is not ready, container by container."""
    meta, status = pod.get("metadata") or {}, pod.get("status") or {}
    name = meta.get("name", "?")
    problems = []
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") != "True":
            problems.append(f"pod {name} is not scheduled: {cond.get('message') or cond.get('reason') or 'pending'}")
    statuses = {c.get("name"): c for c in status.get("containerStatuses") or []}
    for container in ((pod.get("spec") or {}).get("containers") or []):
        cname = container.get("name")
        cs = statuses.get(cname)
        if cs is None:
            if status.get("phase") == "Pending" and not problems:
                problems.append(f"container {cname} of pod {name} has not started (pod Pending)")
            continue
        if cs.get("ready"):
            continue
        state = cs.get("state") or {}
        if "waiting" in state:
            w = state["waiting"] or {}
            why = f"waiting: {w.get('reason', '')} {w.get('message', '')}".strip()
        elif "terminated" in state:
            t = state["terminated"] or {}
            why = f"terminated: {t.get('reason', '')} (exit code {t.get('exitCode')})"
        else:
            why = "running, but its readiness probe fails"
        last = (cs.get("lastState") or {}).get("terminated")
        if last:
            why += f"; last exit: {last.get('reason', '')} (exit code {last.get('exitCode')})"
        restarts = cs.get("restartCount") or 0
        problems.append(f"container {cname} of pod {name} is not ready ({why}; {restarts} restarts)")
    return problems


def deployment_ready(dep: dict) -> bool:
    """The rollout is complete: the current generation observed, every replica updated, ready and available."""
    spec, status, meta = dep.get("spec") or {}, dep.get("status") or {}, dep.get("metadata") or {}
    want = spec.get("replicas", 1)
    return (status.get("observedGeneration", 0) >= meta.get("generation", 1)
            and status.get("updatedReplicas", 0) == want and status.get("readyReplicas", 0) == want
            and status.get("availableReplicas", 0) == want and status.get("replicas", 0) == want)


def wait_for_deployment(api, namespace: str, name: str, timeout: float, poll: float = 1.0,
                        clock=time.monotonic, sleep=time.sleep) -> dict:
    """Polls the Deployment until `deployment_ready`; on timeout raises InstallNotReady naming
    every container that is not ready (and why), read from the Deployment's pods."""
    from kubectl_repack.errors import NotFound

    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    deadline = clock() + timeout
    dep: dict = {}
    while True:
        try:
            dep = _request(api, "GET", path)
        except NotFound:
            dep = {}
        if dep and deployment_ready(dep):
            return dep
        if clock() >= deadline:
            break
        sleep(poll)
    selector = f"app.kubernetes.io/name={name}"   # each Deployment's pods carry their own name
    pods = _request(api, "GET", f"/api/v1/namespaces/{namespace}/pods",
                    query=[("labelSelector", selector)]).get("items") or []
    problems = [p for pod in pods for p in _pod_problems(pod)]
    if not dep:
        problems.insert(0, "the Deployment does not exist")
    elif not pods:
        conds = [f"{c.get('type')}={c.get('status')}: {c.get('message', '')}"
                 for c in (dep.get("status") or {}).get("conditions") or []]
        problems.append("it has no pods" + (f" ({'; '.join(conds)})" if conds else ""))
    raise InstallNotReady(f"deployment {namespace}/{name} is not Ready after {timeout:.0f}s: "
                          + ("; ".join(problems) or "its pods are not available yet")
                          + " (the objects stay installed; `kubectl repack uninstall` removes them)")


@click.command("install")
@click.option("-n", "--namespace", default="repack-system", show_default=True, type=NAMESPACE,
              help="Namespace of the webhook, the coordinator and their Lease.")
@click.option("--image", default=None, type=IMAGE_REF, metavar="REF",
              help="Container image of the webhook and coordinator; pin it with REF@sha256:<digest>.")
@click.option("--node-selector", "node_selector", multiple=True, metavar="KEY=VALUE[,...]",
              help="Run the pod only on nodes with these labels (repeatable).")
@click.option("--tolerations", multiple=True, metavar="KEY[=VALUE][:EFFECT][,...]|JSON",
              help="Tolerations of the pod: KEY[=VALUE][:EFFECT] items, or a JSON list of Toleration objects.")
@click.option("--priority-class", default=None, metavar="NAME", type=RUN_NAME, help="priorityClassName of the pod.")
@click.option("--apiserver-cidr", "apiserver_cidrs", multiple=True, metavar="CIDR", callback=check_cidrs,
              help="Only these addresses (the API server's) may call the webhook port: a NetworkPolicy "
                   "(repeatable; enforced only where the CNI enforces policies). Without it install admits only "
                   "the addresses the API servers advertise (the endpoints of Service default/kubernetes, one /32 "
                   "or /128 each), and renders no policy, with a warning, when they cannot be known (none, not "
                   "readable, loopback). A client --dry-run reads no cluster: it renders the policy only from "
                   "this flag; --dry-run=server reads the addresses as install does.")
@click.option("--no-network-policy", "no_network_policy", is_flag=True,
              help="Render no NetworkPolicy: the webhook port is then reachable from every pod. For managed "
                   "clusters (GKE, EKS, AKS...) whose control plane calls webhooks from addresses other than the "
                   "kubernetes Service's endpoints, where you do not know that range for --apiserver-cidr (a "
                   "policy that blocks the API server makes the webhook fail open: pods created unsteered). A "
                   "policy an earlier install made is deleted.")
@click.option("--replacement-creator", "replacement_creators", multiple=True, metavar="USERNAME",
              callback=check_usernames,
              help="A username that re-creates evicted pods (repeatable; replaces the defaults: Volcano's "
                   "volcano-controllers and the built-in ReplicaSet, StatefulSet and Job controllers). A pod "
                   "created by anybody else claims no relocation record and may not carry repack's marks.")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Wait until the Deployments are rolled out and their containers are ready (the "
                   "webhook's pod starts once the controller has made its TLS Secret).")
@click.option("--timeout", default="5m", show_default=True, callback=parse_timeout, metavar="DURATION",
              help="How long --wait waits (e.g. 90s, 5m).")
@click.option("--webhook-url", default=None, callback=_check_url, metavar="URL",
              help="Call the webhook at this https URL instead of the in-cluster Service (no Deployments; "
                   "install then makes the TLS pair itself, which needs the Python library `cryptography`).")
@click.option("--cert-dir", default=None, type=click.Path(file_okay=False),
              help="With --webhook-url: also write tls.crt, tls.key and ca.crt here (for the webhook "
                   "served outside the cluster).")
@click.option("--dry-run", "dry_run", type=click.Choice(DRY_RUN_MODES), is_flag=False, flag_value="client",
              default="none", show_default=False, metavar="[=client|server]",
              help="client (also bare --dry-run): print the objects, touching nothing. server: send each "
                   "object to the API server as a server-side apply with dryRun=All and print what it "
                   "would do, storing nothing; when the namespace does not exist yet, a server dry run "
                   "cannot create it, so the objects inside it are listed as `would be created in the "
                   "new namespace` without being checked by the server.")
@output_option(OUTPUT_YAML, OUTPUT_JSON, help_text="yaml|json: with --dry-run, the format (default yaml); with "
                                                   "--dry-run=server, the objects as the API server returned them.")
@cluster_options
def command(namespace, image, node_selector, tolerations, priority_class, apiserver_cidrs, no_network_policy,
            replacement_creators, wait, timeout, webhook_url, cert_dir, dry_run, output):
    """Install the RepackRun CRD, the placement webhook and its coordinator, and the RepackRun controller.

    No certificate or private key is made here: the controller makes the webhook's TLS Secret
    (repack-webhook-tls) in the cluster when it starts, keeps the webhook configuration's caBundle
    equal to its CA and rotates it 30 days before it expires. Until the controller has made the
    Secret, the webhook's pod waits for its volume (ContainerCreating); --wait waits for both.
    The rendered objects carry no key material, so they can be committed (GitOps).

    \b
    Examples:
      kubectl repack install
      kubectl repack install --dry-run -o yaml > repack-install.yaml
      kubectl repack install --dry-run=server
      kubectl repack install --webhook-url https://127.0.0.1:9443/mutate --cert-dir ./tls
      kubectl repack install --image registry.example/repack-webhook@sha256:<digest> \\
          --node-selector node-role.kubernetes.io/control-plane= --tolerations node-role.kubernetes.io/control-plane
    """
    from kubectl_repack.deploy import manifests

    if cert_dir and not webhook_url:
        raise click.UsageError("--cert-dir only applies with --webhook-url: in the cluster the controller "
                               "makes the webhook's certificates (Secret repack-webhook-tls)")
    if output and dry_run == "none":
        raise click.UsageError("-o/--output only applies with --dry-run")
    if no_network_policy and apiserver_cidrs:
        raise click.UsageError("--no-network-policy renders no NetworkPolicy, --apiserver-cidr one that admits "
                               "those addresses: give one of them")
    placement = {"node_selector": parse_node_selector(node_selector), "tolerations": parse_tolerations(tolerations),
                 "priority_class": priority_class, "replacement_creators": list(replacement_creators) or None}
    image = image or manifests.DEFAULT_IMAGE
    if webhook_url:
        from kubectl_repack.deploy import certs

        certs.require_cryptography("kubectl repack install --webhook-url")
    api = settings().api() if dry_run != "client" else None
    bundle = None
    if webhook_url:   # a webhook outside the cluster: no controller there, so install makes its pair
        sans = extra_sans(webhook_url)
        if dry_run == "none":
            bundle = existing_certs(api, namespace, sans)
        if bundle is None:
            bundle = certs.generate(manifests.NAME, namespace, extra_sans=sans)
        if cert_dir:
            certs.write_pem(cert_dir, bundle)
    policy = decide_network_policy(api, list(apiserver_cidrs), no_network_policy, webhook_url, dry_run)
    if policy.cidrs:
        placement.update(apiserver_cidrs=list(policy.cidrs), apiserver_source=policy.source)
    objs = manifests_for(namespace, image, bundle, webhook_url, placement)
    if dry_run == "client":
        if not policy.cidrs:   # why there is none, on stderr: stdout is the objects
            _echo_if(lambda line: click.echo(line, err=True), policy.said)
        _print_objects(objs, output)
        return
    echo = (lambda _line: None) if output else click.echo
    said = (lambda obj: echo(policy.said) if obj["kind"] == "NetworkPolicy" else None)
    if dry_run == "server":
        answers = server_dry_run(api, objs, echo, said)
        if not policy.cidrs:
            _no_policy(policy, remove_stale_policy(api, namespace, dry_run=True), echo)
        if output:
            _print_objects(answers, output)
        return
    for obj in objs:
        if obj["kind"] == "Namespace" and not ours(api, obj["metadata"]["name"], absent=True):
            click.echo(f"{describe(obj)} exists, left as it is (not created by install)")
            continue
        server_side_apply(api, obj)
        click.echo(f"{describe(obj)} serverside-applied")
        said(obj)
    if not policy.cidrs:
        _no_policy(policy, remove_stale_policy(api, namespace), click.echo)
    legacy = legacy_secret(namespace)
    if delete_object(api, legacy):   # an older install's creator-stamp key: readable by the old webhook
        click.echo(f"{describe(legacy)} deleted (the creator-stamp key of an older install)")
    deployments = [o["metadata"] for o in objs if o["kind"] == "Deployment"]
    if wait and deployments:
        started = time.monotonic()
        for dep in deployments:   # one --timeout for all of them
            left = max(1.0, timeout - (time.monotonic() - started))
            click.echo(f"waiting up to {left:.0f}s for deployment {dep['namespace']}/{dep['name']} to be Ready ...")
            try:
                wait_for_deployment(api, dep["namespace"], dep["name"], left)
            except InstallNotReady as e:
                if dep["name"] == manifests.NAME and not _exists(api, f"/api/v1/namespaces/{dep['namespace']}/"
                                                                      f"secrets/{manifests.SECRET_NAME}"):
                    raise InstallNotReady(
                        f"{e}; its pod waits for the Secret {dep['namespace']}/{manifests.SECRET_NAME}, which the "
                        f"controller (deployment {dep['namespace']}/{manifests.CONTROLLER_NAME}) makes when it runs: "
                        f"`kubectl -n {dep['namespace']} logs deploy/{manifests.CONTROLLER_NAME}`") from None
                raise
            click.echo(f"deployment.apps/{dep['name']} Ready")


def controller_secret_names() -> tuple:
    """Secrets the controller (or an older install) makes in its namespace, besides the TLS pair."""
    from kubectl_repack.api.control import LEGACY_SIGNING_SECRET_NAME, SEAL_SECRET_NAME

    return SEAL_SECRET_NAME, LEGACY_SIGNING_SECRET_NAME


def legacy_secret(namespace: str) -> dict:
    from kubectl_repack.api.control import LEGACY_SIGNING_SECRET_NAME

    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": LEGACY_SIGNING_SECRET_NAME, "namespace": namespace}}


def _exists(api, path: str) -> bool:
    from kubectl_repack.errors import NotFound

    try:
        _request(api, "GET", path)
        return True
    except NotFound:
        return False


def _print_objects(objs: list, output: Optional[str]) -> None:
    if (output or OUTPUT_YAML) == OUTPUT_JSON:
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}, indent=2))
    else:
        click.echo("---\n".join(render.to_yaml(o) for o in objs), nl=False)


def _echo_if(echo, line: str) -> None:
    if line:
        echo(line)


def _no_policy(policy: PolicyDecision, stale: str, echo) -> None:
    """After the objects: the stale policy removed, and why there is none (a warning on stderr)."""
    _echo_if(echo, stale)
    if policy.warning:
        click.echo(policy.said, err=True)
    else:
        _echo_if(echo, policy.said)


def server_dry_run(api, objs: list, echo, after=None) -> list:
    """Each object as a server-side apply with dryRun=All; returns what the API server answered.
    The server does not create a namespace in a dry run, so objects in a namespace that does not
    exist yet cannot be checked: they are listed as they would be created (and returned as rendered).
    `after(obj)` is called once each object's line is printed."""
    answers, new_namespace = [], None
    for obj in objs:
        if obj["kind"] == "Namespace":
            state = namespace_state(api, obj["metadata"]["name"])
            if state == "foreign":
                echo(f"{describe(obj)} exists, left as it is (not created by install)")
                continue
            if state == "absent":
                new_namespace = obj["metadata"]["name"]
        if KINDS[obj["kind"]][1] and obj["metadata"].get("namespace") == new_namespace:
            echo(f"{describe(obj)} would be created in the new namespace {new_namespace} "
                 "(not checked by the server: a server dry run does not create the namespace)")
            answers.append(obj)
        else:
            answers.append(server_side_apply(api, obj, dry_run=True))
            echo(f"{describe(obj)} serverside-applied (server dry run)")
        if after is not None:
            after(obj)
    return answers


@click.command("uninstall")
@click.option("-n", "--namespace", default="repack-system", show_default=True, type=NAMESPACE,
              help="Namespace the webhook was installed into.")
@click.option("--include-crd", is_flag=True,
              help="Also delete the RepackRun CRD, and with it every RepackRun.")
@click.option("--dry-run", is_flag=True, help="Print what would be deleted.")
@cluster_options
def uninstall_command(namespace, include_crd, dry_run):
    """Remove the webhook and coordinator (and with --include-crd the RepackRun CRD)."""
    # The NetworkPolicy is listed whether or not install made one (--apiserver-cidr): not found is fine.
    objs = manifests_for(namespace, "unused", None, None, {"apiserver_cidrs": ["0.0.0.0/32"]})
    from kubectl_repack.deploy.manifests import CONTROLLER_NAME

    # the TLS pair and the seal key are made by the controller; the legacy signing key by older versions
    secrets_ = [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": namespace}}
                for name in (_secret_name(), *controller_secret_names())]
    ordered = [o for o in reversed(objs) if o["kind"] != "CustomResourceDefinition"]
    at = ordered.index(next(o for o in ordered if o["kind"] == "Deployment")) + 1
    ordered[at:at] = secrets_
    if include_crd:
        ordered.append(objs[0])
    # Namespace last among ours: the namespaced objects go with it anyway, but explicitly first.
    ordered.sort(key=lambda o: o["kind"] == "Namespace" or o["kind"] == "CustomResourceDefinition")
    if dry_run:
        for obj in ordered:
            click.echo(f"{describe(obj)} deleted (dry run)")
        return
    api = settings().api()
    for obj in ordered:
        if obj["kind"] == "Namespace" and not ours(api, obj["metadata"]["name"], absent=False):
            click.echo(f"{describe(obj)} kept (not created by install)")
            continue
        gone = delete_object(api, obj)
        click.echo(f"{describe(obj)} {'deleted' if gone else 'not found'}")
        if obj["kind"] == "MutatingWebhookConfiguration":
            for pod in release_gates(api):
                click.echo(f"pod/{pod} placement gate removed")
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == CONTROLLER_NAME:
            for run, finished in release_finalizers(api):
                click.echo(f"repackrun.repack.volcano.sh/{run} finalizer removed"
                           + ("" if finished else " (the run is not finished and nothing in the cluster "
                                                  "carries it on now: `kubectl repack apply --local --resume`)"))


def release_finalizers(api) -> list:
    """Remove the controller's finalizer from every RepackRun: with the controller gone nobody would,
    and a delete would hang. Returns [(name, finished)]."""
    from kubectl_repack.api.control import finalizer_removal
    from kubectl_repack.api.run import GROUP, PLURAL, VERSION, is_finished

    released = []
    try:
        items = _request(api, "GET", f"/apis/{GROUP}/{VERSION}/{PLURAL}").get("items") or []
    except ClusterAPIError as e:
        if e.status == 404:    # no CRD: no runs
            return released
        raise
    for run in items:
        meta = run["metadata"]
        ops = finalizer_removal(run)
        if not ops:
            continue
        try:
            _request(api, "PATCH", f"/apis/{GROUP}/{VERSION}/{PLURAL}/{meta['name']}", ops,
                     content_type="application/json-patch+json")
        except ClusterAPIError as e:
            if e.status not in (404, 409, 422):
                raise
            continue
        released.append((meta["name"], is_finished(run)))
    return released


def release_gates(api) -> list[str]:
    """Remove the placement gate from every pod still carrying it: with the coordinator gone,
    nobody else would (fail open). Returns `namespace/name` of the pods released."""
    from kubectl_repack.api.gates import has_gate, ungate_patch

    released = []
    for pod in _request(api, "GET", "/api/v1/pods").get("items") or []:
        if not has_gate(pod):
            continue
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
        try:
            _request(api, "PATCH", path, ungate_patch(pod), content_type="application/json-patch+json")
        except ClusterAPIError as e:  # gone meanwhile, or released by someone else
            if e.status not in (404, 409, 422):
                raise
            continue
        released.append(f"{meta['namespace']}/{meta['name']}")
    return released


def _secret_name() -> str:
    from kubectl_repack.deploy import manifests

    return manifests.SECRET_NAME
