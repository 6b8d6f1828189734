"""`kubectl repack install` / `uninstall`: the RepackRun CRD plus the webhook, coordinator and controller.

Install renders the objects (deploy.manifests) after the CRD and applies each one with server-side
apply (field manager `kubectl-repack`, forced), so running it again converges instead of failing.
It makes no certificate and renders no Secret or caBundle: the controller makes the webhook's TLS
Secret in the cluster and keeps the caBundle current (webhook.controller.certmanager), so the rendered objects
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

Over an earlier install, install is an upgrade (deploy.installer.Applied): each object is read
before it is applied, and install ends by saying what changed, what it created and how many objects
were already current. An earlier install applied with kubectl (`kubectl apply -f` of the rendered
manifests, create, replace, or `kubectl apply --server-side`) owns its fields under kubectl's field
managers, so server-side apply alone would keep what this version no longer sets (a container, a
Service port): install takes those managers' fields over first, as kubectl does when an object moves
from client-side to server-side apply, and the apply then removes them. Other managers' fields (the
controller's caBundle, a user's label) stay theirs. The RepackRuns are not touched.

Uninstall deletes what install created, webhook configuration first (so no pod creation waits
on a webhook that is going away), then releases any pod still carrying the placement gate (the
coordinator that would have is going away too); the CRD, and with it every RepackRun, only with
`--include-crd`. An existing namespace is used as it is and never deleted: uninstall deletes only
a namespace install created (it carries the install's part-of label). The TLS Secret the
controller made is deleted too.

This module is the command line; the steps (apply, delete, wait, release) are
kubectl_repack.deploy.installer, and every API call goes through kubectl_repack.kube.
"""
from __future__ import annotations

import json
from typing import Optional
from urllib.parse import urlparse

import click

from .options import (IMAGE_REF, OUTPUT_JSON, OUTPUT_YAML, RUN_NAME, cluster_options, output_option,
                      repack_namespace_option, settings)

DRY_RUN_MODES = ("none", "client", "server")   # kubectl's --dry-run values; bare --dry-run is client


def dry_run_option(help_text: str):
    """kubectl's --dry-run, for install and uninstall alike: bare or =client, =server, none (the default)."""
    return click.option("--dry-run", "dry_run", type=click.Choice(DRY_RUN_MODES), is_flag=False, flag_value="client",
                        default="none", show_default=False, metavar="[=client|server]", help=help_text)


def _check_url(ctx, param, value):
    if value is None:
        return None
    parsed = urlparse(value)
    if parsed.scheme != "https" or not parsed.hostname:
        raise click.BadParameter(f"{value!r} is not an https:// URL (the API server only calls webhooks over TLS)",
                                 ctx=ctx, param=param)
    return value


# ---- placement and --wait options (NOM-6); the image reference is options.IMAGE_REF --------------
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


@click.command("install")
@repack_namespace_option("--namespace")
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
@dry_run_option("client (also bare --dry-run): print the objects, touching nothing. server: send each "
                "object to the API server as a server-side apply with dryRun=All and print what it "
                "would do, storing nothing; when the namespace does not exist yet, a server dry run "
                "cannot create it, so the objects inside it are listed as `would be created in the "
                "new namespace` without being checked by the server.")
@output_option(OUTPUT_YAML, OUTPUT_JSON, help_text="yaml|json: with --dry-run, the format (default yaml); with "
                                                   "--dry-run=server, the objects as the API server returned them.")
@cluster_options
def command(repack_namespace, image, node_selector, tolerations, priority_class, apiserver_cidrs, no_network_policy,
            replacement_creators, wait, timeout, webhook_url, cert_dir, dry_run, output):
    """Install the RepackRun CRD, the placement webhook and its coordinator, and the RepackRun controller.

    No certificate or private key is made here: the controller makes the webhook's TLS Secret
    (repack-webhook-tls) in the cluster when it starts, keeps the webhook configuration's caBundle
    equal to its CA and rotates it 30 days before it expires. Until the controller has made the
    Secret, the webhook's pod waits for its volume (ContainerCreating); --wait waits for both.
    The rendered objects carry no key material, so they can be committed (GitOps).

    Over an earlier install (made by install, or by `kubectl apply` of its rendered manifests) this
    is an upgrade: it says which objects changed and which it created, and removes what this version
    no longer sets. RepackRuns are kept; the upgraded controller takes over those not finished.

    \b
    Examples:
      kubectl repack install
      kubectl repack install --dry-run -o yaml > repack-install.yaml
      kubectl repack install --dry-run=server
      kubectl repack install --webhook-url https://127.0.0.1:9443/mutate --cert-dir ./tls
      kubectl repack install --image registry.example/repack-webhook@sha256:<digest> \\
          --node-selector node-role.kubernetes.io/control-plane= --tolerations node-role.kubernetes.io/control-plane
    """
    from kubectl_repack.deploy import installer, manifests

    namespace = repack_namespace
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
        sans = installer.extra_sans(webhook_url)
        if dry_run == "none":
            bundle = installer.existing_certs(api, namespace, sans)
        if bundle is None:
            bundle = certs.generate(manifests.NAME, namespace, extra_sans=sans)
        if cert_dir:
            certs.write_pem(cert_dir, bundle)
    policy = installer.decide_network_policy(api, list(apiserver_cidrs), no_network_policy, webhook_url, dry_run)
    if policy.cidrs:
        placement.update(apiserver_cidrs=list(policy.cidrs), apiserver_source=policy.source)
    objs = installer.manifests_for(namespace, image, bundle, webhook_url, placement)
    if dry_run == "client":
        if not policy.cidrs:   # why there is none, on stderr: stdout is the objects
            _echo_if(lambda line: click.echo(line, err=True), policy.said)
        _print_objects(objs, output)
        return
    echo = (lambda _line: None) if output else click.echo
    said = (lambda obj: echo(policy.said) if obj["kind"] == "NetworkPolicy" else None)
    if dry_run == "server":
        answers = installer.server_dry_run(api, objs, echo, said)
        if not policy.cidrs:
            _no_policy(policy, installer.remove_stale_policy(api, namespace, dry_run=True), echo)
        if output:
            _print_objects(answers, output)
        return
    applied = installer.apply_all(api, objs, click.echo, said)
    if not policy.cidrs:
        _no_policy(policy, installer.remove_stale_policy(api, namespace), click.echo)
    installer.remove_legacy_secret(api, namespace, click.echo)
    for line in applied.report(namespace):   # over an earlier install: what the upgrade changed
        click.echo(line)
    deployments = [o["metadata"] for o in objs if o["kind"] == "Deployment"]
    if wait and deployments:
        installer.wait_all(api, deployments, timeout, click.echo)


def _print_objects(objs: list, output: Optional[str]) -> None:
    from kubectl_repack import render

    if (output or OUTPUT_YAML) == OUTPUT_JSON:
        click.echo(json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}, indent=2))
    else:
        click.echo("---\n".join(render.to_yaml(o) for o in objs), nl=False)


def _echo_if(echo, line: str) -> None:
    if line:
        echo(line)


def _no_policy(policy, stale: str, echo) -> None:
    """After the objects: the stale policy removed, and why there is none (a warning on stderr)."""
    _echo_if(echo, stale)
    if policy.warning:
        click.echo(policy.said, err=True)
    else:
        _echo_if(echo, policy.said)


@click.command("uninstall")
@repack_namespace_option("--namespace")
@click.option("--include-crd", is_flag=True,
              help="Also delete the RepackRun CRD, and with it every RepackRun.")
@dry_run_option("client (also bare --dry-run): print what would be deleted, reading nothing from the cluster: "
                "the namespace is then listed as deleted only if install created it, as the real uninstall "
                "decides from the namespace's label. server: decide as the real uninstall does (the "
                "namespace's label, the gated pods, the runs' finalizers) and send each delete with "
                "dryRun=All, changing nothing.")
@cluster_options
def uninstall_command(repack_namespace, include_crd, dry_run):
    """Remove what install created: the placement webhook and its coordinator, and the RepackRun controller.

    \b
    Deleted: the MutatingWebhookConfiguration (first, so no pod creation waits on a webhook going
    away), the three Deployments, their Services, ServiceAccounts, RBAC and Leases (the Lease
    repack-execute carries the stored cooldown setting), the admission policies, the NetworkPolicy,
    the Secrets the controller made (TLS pair, seal key), and the namespace if install created it
    (it carries the label app.kubernetes.io/part-of=kubectl-repack).
    Released: pods still carrying the placement gate (nothing would lift it any more), and the
    controller's finalizer on every RepackRun (an unfinished run is then carried on by nobody:
    `kubectl repack apply --local --resume NAME`).
    Kept: the RepackRun CRD and every RepackRun (with --include-crd both are deleted), and a
    namespace install did not create, with everything else in it.

    \b
    Examples:
      kubectl repack uninstall --dry-run
      kubectl repack uninstall --dry-run=server --repack-namespace repack-system
      kubectl repack uninstall --include-crd
    """
    from kubectl_repack.deploy import installer

    ordered = installer.uninstall_order(repack_namespace, include_crd)
    api = settings().api() if dry_run != "client" else None
    installer.uninstall(api, ordered, click.echo, dry_run)
