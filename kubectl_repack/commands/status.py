"""`kubectl repack status NAME`: one stored RepackRun, plan against result, per-pod relocations."""
from __future__ import annotations

import click

from kubectl_repack import render
from kubectl_repack.kube import runs

from .options import OUTPUT_JSON, OUTPUT_YAML, RUN_NAME, cluster_options, output_option, settings


@click.command("status")
@click.argument("name", type=RUN_NAME)
@output_option(OUTPUT_YAML, OUTPUT_JSON, help_text="yaml|json: the RepackRun object as stored.")
@cluster_options
def command(name, output):
    """Show a RepackRun: phase, conditions, plan vs result, moves and relocations.

    \b
    Example:
      kubectl repack status ascend-guarded-dryrun
    """
    obj = runs.RunStore(settings().api()).get(name)
    if output:
        click.echo(render.dump(render.canonical_run(obj), output), nl=False)
    else:
        click.echo(render.run_status(obj), nl=False)
