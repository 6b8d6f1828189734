"""`kubectl repack why KIND/NAME -n NS`: why a Volcano gang is not running (RELIEF-1).

One screen in the order vc-scheduler decides: the queue, the PodGroup, then for its pending pods
the planner's own filters against every node, grouped by reason; then how many of the pods it
still needs fit now, whether fragmentation is the cause and, if a repack can make room, the
smallest one with the command to run. The diagnosis is `planner.relief.explain` (pure); this
module reads the snapshot (live or a file) and prints it.
"""
from __future__ import annotations

import json

import click

from .options import GANG_REF, NAMESPACE, OUTPUT_JSON, OUTPUT_YAML, cluster_options, for_namespace, output_option, settings
from .runspec import read_stdin

EPILOG = """\b
Examples:
  # Why does the seed's large training job wait?
  kubectl repack why vcjob/ascend-large-training -n repack-demo

\b
  # The same from a snapshot file, as data
  kubectl repack why podgroup/large-pg -n default --snapshot snap.yaml -o yaml

\b
Exit codes: 0 explained (whatever the cause), 1 runtime error (cluster, snapshot file),
2 the object is not found or is no Volcano gang, 130 interrupted.
"""


@click.command("why", epilog=EPILOG)
@click.argument("ref", metavar="KIND/NAME", type=GANG_REF)
@click.option("-n", "--namespace", type=NAMESPACE, metavar="NAMESPACE", default=None,
              help="The namespace of KIND/NAME, as in kubectl (default: the kubeconfig context's, else default).")
@click.option("--snapshot", "snapshot_file", metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="Explain from this snapshot file ('-' = stdin) instead of the live cluster.")
@click.option("--resource", metavar="NAME", callback=lambda ctx, param, value: _resource(value),
              help="The resource to look at (default: the one extended resource the gang's pods request).")
@output_option(OUTPUT_YAML, OUTPUT_JSON, help_text="yaml|json: the same as data. Default: one screen of text.")
@cluster_options
def command(ref, namespace, snapshot_file, resource, output):
    """Explain why a gang (vcjob, podgroup or pod) is not running, and what would make room.

    KIND is vcjob, podgroup or pod (a pod stands for its PodGroup). The queue comes first (closed,
    or at its capability), then the PodGroup's phase and conditions as vc-scheduler wrote them,
    then every node's verdict for its pending pods, grouped by reason.
    """
    from planner import relief
    from planner.gcpause import paused_gc
    from kubectl_repack.kube import objects

    if snapshot_file:
        source = objects.FileSource("-", read_stdin()) if snapshot_file == "-" else objects.FileSource(snapshot_file)
    else:
        source = objects.LiveSource(settings().api())
    namespace = for_namespace(namespace, bool(snapshot_file))
    with paused_gc():
        snapshot = source.snapshot()
    key = relief.resolve_gang(snapshot, ref, namespace)
    diagnosis = relief.explain(snapshot, key, resource or "")
    if output == OUTPUT_JSON:
        click.echo(json.dumps(diagnosis.as_dict(), indent=2))
    elif output == OUTPUT_YAML:
        import yaml
        click.echo(yaml.safe_dump(diagnosis.as_dict(), sort_keys=False), nl=False)
    else:
        click.echo(text(ref, diagnosis, source.description), nl=False)


def _resource(value):
    if value is not None and "/" not in value:
        raise click.BadParameter(f"{value!r}: a fully-qualified extended resource (e.g. huawei.com/ascend-1980) is required")
    return value


def text(ref, d, source) -> str:
    """The one screen."""
    out = [f"{ref} (PodGroup {d.podgroup}) from {source}", ""]
    q = f"Queue:     {d.queue}"
    if not d.queue_found:
        q += " (not readable, or not in the snapshot: not checked)" if not d.queue_problem else ""
    else:
        q += f", state {d.queue_state or 'unknown'}"
    out.append(q)
    for r, allocated, cap, guarantee in d.queue_rows:
        out.append(f"           {r}: allocated {allocated}" + (f" of capability {cap}" if cap else ", no capability")
                   + (f", guarantee {guarantee}" if guarantee else ""))
    if d.queue_problem:
        out.append(f"           -> {d.queue_problem}")
    pg = f"PodGroup:  phase {d.phase or 'unknown'}, minMember {d.min_member}, {d.bound} bound, {d.pending} pending"
    if d.min_resources:
        pg += ", minResources " + ", ".join(f"{r}={v}" for r, v in sorted(d.min_resources.items()))
    out.append(pg)
    for c in d.conditions:
        out.append(f"           {c.type}={c.status}" + (f" {c.reason}" if c.reason else "")
                   + (f": {c.message}" if c.message else ""))
    if d.pods:
        out += ["", "Nodes for its pending pods:"]
        for v in d.pods:
            names = ", ".join(k.split("/", 1)[1] for k in v.pods[:3]) + (f" and {len(v.pods) - 3} more" if len(v.pods) > 3 else "")
            req = ", ".join(f"{r}={q}" for r, q in sorted(v.requests.items()))
            out.append(f"  {names} ({req}):")
            for f, reason, n, detail in v.verdicts:
                what = "fits now" if not f else f"{detail or reason} ({f})"
                out.append(f"    {n:>6} node(s): {what}")
    out.append("")
    if d.need:
        out.append(f"Fit now:   {d.fit_now} of the {d.need} pod(s) it needs")
    out.append(f"Verdict:   {d.cause}: {d.summary}")
    if d.fix:
        out.append(f"Repack:    {d.fix}")
    return "\n".join(out) + "\n"
