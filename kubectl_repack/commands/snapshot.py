"""`kubectl repack snapshot`: everything the planner reads, in one file, for offline planning.

The file is one `v1 List` whose items keep apiVersion and kind (managedFields dropped), the form
`kubectl get -o json` prints, so `plan --snapshot FILE` plans on exactly what was read, and a bug
report can carry the cluster state that produced a plan.
"""
from __future__ import annotations

import os
import tempfile

import click

from .options import cluster_options, settings
from .progress import Progress


def snapshot_list(objects) -> dict:
    """The v1 List written to the file."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": list(objects)}


@click.command("snapshot")
@click.option("-o", "--output", "out", metavar="FILE", default="-", show_default=True,
              type=click.Path(dir_okay=False, allow_dash=True),
              help="Where to write the snapshot ('-' = stdout).")
@click.option("--format", "fmt", type=click.Choice(["json", "yaml"]), default="json", show_default=True,
              help="json: one v1 List; yaml: the same List as YAML.")
@cluster_options
def command(out, fmt):
    """Write the cluster state the planner reads to a file (cluster-wide).

    Nodes, pods, PodGroups, VCJobs, ModelServings, PersistentVolumes and claims,
    PodDisruptionBudgets and namespaces. CRDs that are not installed are skipped. The file is
    checked by loading it as the planner would before it is written.

    \b
    Example:
      kubectl repack snapshot -o cluster.json
      kubectl repack plan --snapshot cluster.json --resource huawei.com/ascend-1980
    """
    import planner
    from kubectl_repack import render
    from kubectl_repack.errors import RepackError
    from kubectl_repack.kube import objects as kube_objects

    if out != "-" and not os.path.isdir(os.path.dirname(os.path.abspath(out))):
        raise click.BadParameter(f"cannot write {out}: directory {os.path.dirname(os.path.abspath(out))} "
                                 "does not exist", param_hint="'-o' / '--output'")
    from planner.gcpause import paused_gc

    progress = Progress()  # stderr, and only on a terminal
    # many small objects, no cycles: collector passes over them cost seconds at scale (as in plan)
    with paused_gc(freeze=True):
        try:
            objects = (kube_objects.read_snapshot(settings().api(), progress=progress) if progress.enabled
                       else kube_objects.read_snapshot(settings().api()))
        finally:
            progress.done()
        planner.load_objects(objects)  # fail here, not at planning time, if something is unreadable
        text = render.dump(snapshot_list(objects), fmt)
    if out == "-":
        click.echo(text, nl=False)
        return
    directory = os.path.dirname(os.path.abspath(out))
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".snapshot-", dir=directory)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, out)  # never leave a half-written snapshot behind
    except OSError as e:
        if tmp and os.path.exists(tmp):
            os.unlink(tmp)
        raise RepackError(f"cannot write snapshot {out}: {e.strerror}") from e
    summary = kube_objects.kind_summary(objects)
    click.echo(f"wrote {out}: {len(objects)} objects ({summary or 'none'})", err=True)
