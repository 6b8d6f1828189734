"""`kubectl repack status NAME`: one stored RepackRun, plan against result, per-pod relocations.
With -w, follow the run (commands.follow) until it finishes, then print the same."""
from __future__ import annotations

import sys

import click

from .options import (OUTPUT_JSON, OUTPUT_YAML, RUN_NAME, cluster_options, duration, output_option, settings,
                      template_options)

EXIT_OK, EXIT_NOT_FINISHED, EXIT_INTERRUPTED = 0, 4, 130
DEFAULT_WATCH_TIMEOUT = "30m"

EPILOG = """\b
Exit codes with -w:
  0    the run finished (Succeeded or Failed: the phase and reason are printed)
  1    runtime error (cluster unreachable, no such run, the run was deleted while followed)
  4    --timeout passed while the run was not finished
  130  interrupted (Ctrl-C): only the following stopped, the run goes on in the cluster

\b
Examples:
  kubectl repack status ascend-guarded-dryrun
  kubectl repack status ascend-execute-001 -w
  kubectl repack status ascend-execute-001 -w --timeout 1h -o jsonpath='{.status.phase}'
"""




@click.command("status", epilog=EPILOG)
@click.argument("name", type=RUN_NAME)
@click.option("-w", "--watch", is_flag=True,
              help="Follow the run until it finishes (progress on stderr), then print it.")
@click.option("--timeout", callback=duration, default=None, metavar="DURATION",
              help=f"With -w: stop following after this long (exit 4). Default {DEFAULT_WATCH_TIMEOUT}.")
@output_option(OUTPUT_YAML, OUTPUT_JSON, templates=True,
               help_text="yaml|json|name|jsonpath=...|jsonpath-as-json=...|custom-columns=...: the RepackRun "
                         "as stored, printed as `kubectl get repackrun -o ...` prints it.")
@template_options
@cluster_options
def command(name, watch, timeout, output, allow_missing):
    """Show a RepackRun: phase, conditions, plan vs result, moves and relocations.

    With -w, follow the run as the in-cluster controller carries it out: one line per change
    (phase, reason, evictions, replacements bound; a self-rewriting line on a terminal), also while
    it waits Pending for another run or the cooldown; when it finishes, the status as without -w.
    Ctrl-C stops following, never the run.
    """
    from kubectl_repack import render
    from kubectl_repack.api.run import is_finished, phase_of, run_reason
    from kubectl_repack.api.times import format_duration, parse_duration
    from kubectl_repack.kube import runs

    if timeout is not None and not watch:
        raise click.UsageError("--timeout applies to -w/--watch only")
    store = runs.RunStore(settings().api())
    code = EXIT_OK
    if watch:
        from .follow import SILENT, follow

        limit = timeout if timeout is not None else parse_duration(DEFAULT_WATCH_TIMEOUT)
        quiet = output is not None
        try:
            obj = follow(store, name, limit, SILENT if quiet else sys.stderr,
                         tty=not quiet and sys.stderr.isatty())
        except KeyboardInterrupt:
            click.echo(f"stopped following; the run goes on in the cluster: kubectl repack status {name} -w",
                       err=True)
            raise click.exceptions.Exit(EXIT_INTERRUPTED)
        if not is_finished(obj):
            reason = run_reason(obj)
            click.echo(f"stopped following after {format_duration(limit)}: the run is {phase_of(obj) or 'Pending'}"
                       f"{' (' + reason + ')' if reason else ''}; it goes on in the cluster: "
                       f"kubectl repack status {name} -w", err=True)
            code = EXIT_NOT_FINISHED
    else:
        obj = store.get(name)
    if output:
        click.echo(render.object_output(obj, output, allow_missing), nl=False)
    else:
        click.echo(render.run_status(obj), nl=False)
    if code:
        raise click.exceptions.Exit(code)
