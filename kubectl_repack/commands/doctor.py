"""`kubectl repack doctor`: the preflight (kubectl_repack.kube.preflight), one line per check."""
from __future__ import annotations

from typing import Sequence

import click

from .options import cluster_options, repack_namespace_option, settings

EPILOG = """\b
Checks:
  crd                 the RepackRun CRD is installed and the one this plugin bundles
  webhook             the MutatingWebhookConfiguration repack-placement exists
  webhook-endpoints   its Service has ready endpoints
  webhook-cert        its serving certificate is not within 30 days of expiry
  controller          the in-cluster RepackRun controller holds its Lease
  coordinator         the placement coordinator holds its Lease
  rbac-create         you may create RepackRuns (kubectl repack apply, kubectl apply)
  rbac-patch          you may patch RepackRuns (kubectl repack cancel)
  volcano-crds        Volcano's PodGroup and Queue CRDs are installed
  volcano-scheduler   a Volcano scheduler was seen acting (its Lease, or a PodGroup
                      status it wrote in the last 24h)
  kubernetes          the API server is Kubernetes 1.30 or later
  admission-policies  the admission policies of the install are bound with Deny
  webhook-network-policy
                      a NetworkPolicy admits only the API server to the webhook port
                      (WARN when there is none: the port is reachable from every pod)

\b
Exit codes:
  0  nothing FAILed (WARN lines are things that could not be told or are not needed yet)
  1  at least one check FAILed (each line says what to do), or the cluster cannot be reached

\b
Examples:
  kubectl repack doctor
  kubectl repack doctor --context prod --repack-namespace repack-system
"""


def format_checks(checks: Sequence) -> str:
    """`OK    name  detail` lines, `— fix` appended to FAIL and WARN lines; names aligned."""
    width = max((len(c.name) for c in checks), default=0)
    lines = []
    for c in checks:
        line = f"{c.verdict:<4}  {c.name:<{width}}  {c.detail}"
        if c.fix and c.ok is not True:
            line += f" — {c.fix}"
        lines.append(line)
    return "".join(line + "\n" for line in lines)


@click.command("doctor", epilog=EPILOG)
@repack_namespace_option()
@cluster_options
def command(repack_namespace):
    """Check that the cluster is ready for in-cluster RepackRuns.

    One line per check, OK, FAIL or WARN, with what was seen and, when something is wrong, what to
    do. Every check runs even when another fails.
    """
    from kubectl_repack.errors import RepackError
    from kubectl_repack.kube.preflight import run_checks
    from kubectl_repack.kube.preflight.checks import failed

    checks = run_checks(settings().api(), repack_namespace)
    if checks and all(c.ok is False and "cannot reach the API server" in c.detail for c in checks):
        raise RepackError(checks[0].detail.removeprefix("cannot check: "))   # one error, not ten
    click.echo(format_checks(checks), nl=False)
    if failed(checks):
        raise click.exceptions.Exit(1)
