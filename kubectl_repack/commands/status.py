"""`kubectl repack status NAME`: one stored RepackRun, plan against result, per-pod relocations."""
from __future__ import annotations

import click

from kubectl_repack import render
from kubectl_repack.kube import runs

from .options import (OUTPUT_JSON, OUTPUT_YAML, RUN_NAME, cluster_options, output_option, settings,
                      template_options)


@click.command("status")
@click.argument("name", type=RUN_NAME)
@output_option(OUTPUT_YAML, OUTPUT_JSON, templates=True,
               help_text="yaml|json|name|jsonpath=...|jsonpath-as-json=...|custom-columns=...: the RepackRun "
                         "as stored, printed as `kubectl get repackrun -o ...` prints it.")
@template_options
@cluster_options
def command(name, output, allow_missing):
    """Show a RepackRun: phase, conditions, plan vs result, moves and relocations.

    \b
    Example:
      kubectl repack status ascend-guarded-dryrun
    """
    obj = runs.RunStore(settings().api()).get(name)
    if output:
        click.echo(render.object_output(obj, output, allow_missing), nl=False)
    else:
        click.echo(render.run_status(obj), nl=False)
