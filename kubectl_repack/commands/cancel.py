"""`kubectl repack cancel NAME`: ask a running RepackRun to stop before its next eviction.

The spec is immutable, so a cancel is the annotation `repack.volcano.sh/cancel: "true"` (see
kubectl_repack.api.control), set with a JSON merge patch on metadata only. Whoever carries the run
out (the in-cluster controller, or `apply --local`) reads it before every eviction and ends the run
with reason Cancelled, recording what was and was not moved. A finished run is left as it is.
"""
from __future__ import annotations

import click

from .options import OUTPUT_NAME, RUN_NAME, cluster_options, output_option, settings


@click.command("cancel")
@click.argument("name", type=RUN_NAME)
@output_option(OUTPUT_NAME, help_text="name: print only repackrun.repack.volcano.sh/NAME (as kubectl annotate -o name).")
@cluster_options
def command(name, output):
    """Cancel a RepackRun: stop it before its next eviction.

    Sets the annotation repack.volcano.sh/cancel=true on the run. The run ends Failed with reason
    Cancelled and its relocations say what was and was not moved; pods already evicted are not
    brought back. Deleting a running run stops it the same way. A run that has already finished
    is left unchanged (exit 0).

    \b
    Examples:
      kubectl repack cancel ascend-execute-001
      kubectl repack cancel ascend-execute-001 && kubectl repack status ascend-execute-001 -w
    """
    from kubectl_repack.api.control import CANCEL_ANNOTATION
    from kubectl_repack.api.run import GROUP, is_finished, phase_of, run_reason
    from kubectl_repack.kube import runs

    store = runs.RunStore(settings().api())
    run = store.get(name)
    ref = f"repackrun.{GROUP}/{name}"
    if is_finished(run):
        note = f"{ref} already finished ({phase_of(run)}{', ' + run_reason(run) if run_reason(run) else ''}): " \
               "nothing to cancel"
        if output == OUTPUT_NAME:
            click.echo(note, err=True)
            click.echo(ref)
        else:
            click.echo(note)
        return
    store.annotate(name, CANCEL_ANNOTATION, "true")
    click.echo(ref if output == OUTPUT_NAME else f"{ref} cancel requested")
