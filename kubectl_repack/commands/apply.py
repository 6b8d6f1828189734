"""`kubectl repack apply`: carry out an Execute RepackRun with the user's own credentials.

The command validates locally and wires the workflow (kubectl_repack.engine.workflow) to the
cluster; what happens in which order, and why, is documented there.
"""
from __future__ import annotations

import sys
import time

import click

import planner
from kubectl_repack import render, schema
from kubectl_repack.api.run import (MODE_EXECUTE, NOT_RECOMMENDED, PHASE_FAILED, PHASE_SUCCEEDED, relocations,
                                    run_reason)
from kubectl_repack.api.times import parse_duration, rfc3339, utcnow
from kubectl_repack.errors import ValidationError

from .options import (OUTPUT_JSON, OUTPUT_YAML, RUN_NAME, cluster_options, output_option, settings, stamp,
                      template_options)
from .runspec import QuickFlags, build_run

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_NOT_RECOMMENDED, EXIT_WAITING, EXIT_RUN_FAILED = 0, 1, 2, 3, 4, 5

EPILOG = """\b
Exit codes:
  0  the run Succeeded (ExecutionCompleted or ExecutionCompletedWithAlternativePlacement)
  1  runtime error (cluster unreachable or refusing); the run can be continued with --resume
  2  usage or validation error (nothing was sent)
  3  the live re-plan recommended nothing (NoFragmentation, InsufficientImprovement): no eviction
  4  the run is Pending: another Execute holds the Lease or the cooldown runs (--no-wait, or
     --timeout passed while waiting)
  5  the run ended Failed (reason in its Failed condition, e.g. EvictionBlockedByPDB)

\b
Cooldown: one cluster-wide setting, stored as the annotation repack.volcano.sh/execute-cooldown
on the Lease repack-system/repack-execute (namespace from $REPACK_NAMESPACE); --cooldown sets it
for this and every later apply. The cooldown counts from the completion of the last Execute that
evicted at least one pod.

\b
Examples:
  kubectl repack apply -f ascend-execute-001.yaml
  kubectl repack apply -f ascend-guarded-dryrun.yaml --mode Execute --name ascend-execute-002
  kubectl repack apply --resume ascend-execute-001
  kubectl repack apply -f run.yaml --no-wait -o json
"""


def _duration(ctx, param, value):
    if value is None:
        return None
    try:
        return parse_duration(value)
    except (ValueError, OverflowError) as e:  # OverflowError: more days than a timedelta holds
        raise click.BadParameter(str(e) if isinstance(e, ValueError) else f"{value!r} is too long a duration",
                                 ctx=ctx, param=param) from e


class _Reporter:
    """The workflow's notes on stderr (unless -o yaml|json), and one self-rewriting progress line
    on a terminal: evictions, replacements bound, elapsed."""

    def __init__(self, quiet: bool, tty: bool):
        self.quiet = quiet
        self.enabled = not quiet and tty
        self.t0 = time.monotonic()
        self.shown = False

    def note(self, message: str) -> None:
        if not self.quiet:
            click.echo(message, err=True)

    def progress(self, p) -> None:
        if not self.enabled:
            return
        elapsed = int(time.monotonic() - self.t0)
        extra = f", {p.rejected} rejected" if p.rejected else ""
        sys.stderr.write(f"\revictions {p.evicted}/{p.total}{extra}, replacements bound {p.bound}/{p.evicted}, "
                         f"elapsed {elapsed // 60}m{elapsed % 60:02d}s ")
        sys.stderr.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _summary(run: dict) -> str:
    st = run.get("status") or {}
    lines = [f"RepackRun:      {run['metadata']['name']}",
             f"Phase:          {st.get('phase', '')} ({run_reason(run)})",
             f"Message:        {st.get('message', '')}"]
    summ = (st.get("plan") or {}).get("summary")
    if summ:
        lines.append(f"Plan:           frag {summ['fragBeforePercent']}% -> {summ['fragAfterPercent']}%, "
                     f"freed {summ['freedNodeCount']}, moved {summ['movedCardCount']} card(s)")
    res = st.get("result")
    if res:
        lines.append(f"Result:         frag {res['fragAfterPercent']}%, freed {res['freedNodeCount']} "
                     f"{res.get('freedNodes') or []}, moved {res['movedCardCount']} card(s), "
                     f"verified {str(res['metricsVerified']).lower()}")
    relocs = relocations(st)
    if relocs:
        rows = [[r.victim, r.eviction.phase, r.placement.phase, r.planned_node_name, r.placement.actual_node_name]
                for r in relocs]
        lines.append("")
        lines.append(render.table(["VICTIM", "EVICTION", "PLACEMENT", "PLANNED", "ACTUAL"], rows).rstrip("\n"))
    return "\n".join(lines) + "\n"


def _exit_code(run: dict) -> int:
    phase = (run.get("status") or {}).get("phase")
    if phase == PHASE_SUCCEEDED:
        return EXIT_NOT_RECOMMENDED if run_reason(run) in NOT_RECOMMENDED else EXIT_OK
    if phase == PHASE_FAILED:
        return EXIT_RUN_FAILED
    return EXIT_WAITING


def _emit(run: dict, output, note: str = "", allow_missing: bool = True) -> None:
    if render.prints_object(output):
        click.echo(render.object_output(run, output, allow_missing), nl=False)
    else:
        if note:
            click.echo(note, err=True)
        click.echo(_summary(run), nl=False)


@click.command("apply", epilog=EPILOG)
@click.option("-f", "--filename", "file", metavar="RUN.yaml",
              help="The Execute RepackRun (YAML or JSON; '-' reads stdin).")
@click.option("--resume", metavar="NAME", type=RUN_NAME,
              help="Continue the existing Execute RepackRun NAME from its records.")
@click.option("--mode", type=click.Choice([MODE_EXECUTE]),
              help="Set spec.mode (lets a reviewed DryRun file be executed; use with --name).")
@click.option("--name", metavar="NAME", type=RUN_NAME, help="metadata.name of the run (overrides the file's).")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="While another Execute holds the Lease or the cooldown runs: wait and retry, or exit 4.")
@click.option("--timeout", callback=_duration, default="10m", show_default=True, metavar="DURATION",
              help="Execution deadline (status.executionDeadline: evictions, retries, placement), and the "
                   "longest --wait for the Lease.")
@click.option("--cooldown", callback=_duration, default=None, metavar="DURATION",
              help="Cluster-wide pause after an Execute before the next may start (default: the stored "
                   "setting, else 10m). Given, it is stored as the new setting.")
@click.option("--eviction-retry-timeout", callback=_duration, default="60s", show_default=True,
              metavar="DURATION", help="How long an eviction refused by a PodDisruptionBudget (429) is retried.")
@output_option(OUTPUT_YAML, OUTPUT_JSON, templates=True,
               help_text="yaml|json|name|jsonpath=...|jsonpath-as-json=...|custom-columns=...: the final "
                         "RepackRun object, no progress display. Default: a summary.")
@template_options
@cluster_options
def command(file, resume, mode, name, wait, timeout, cooldown, eviction_retry_timeout, output, allow_missing):
    """Execute a repack: re-plan on live state and move pods through the Eviction API.

    One Execute runs at a time per cluster (a Lease in repack-system), with a cooldown after each.
    Every relocation is recorded in the RepackRun before its eviction, so a killed apply is
    continued by `apply --resume NAME` (or by applying the same run again) without evicting any
    pod twice.
    """
    from kubectl_repack.engine.execute_lease import ExecuteLease
    from kubectl_repack.engine.workflow import ApplyRequest, apply_run
    from kubectl_repack.kube.objects import LiveCluster
    from kubectl_repack.kube.runs import RunStore

    if bool(file) == bool(resume):
        raise click.UsageError("give either -f RUN.yaml or --resume NAME")
    quiet = render.prints_object(output)
    spec_run = None
    if file:
        run = build_run(file, QuickFlags(name=name), default_name=f"repack-execute-{stamp(rfc3339(utcnow()))}")
        if mode:
            run["spec"]["mode"] = mode
            run = schema.validate_run(run)
        if run["spec"].get("mode") != MODE_EXECUTE:
            raise ValidationError([f"spec.mode: {run['spec'].get('mode')!r}: `kubectl repack apply` executes "
                                   "Execute runs; set mode: Execute or pass --mode Execute (with a new --name)"])
        planner.RunSpec.from_spec(run["spec"])  # SpecError exits 2 before anything is sent
        spec_run = run
        name = run["metadata"]["name"]
    else:
        name = resume

    api = settings().api()
    cluster = LiveCluster(api)
    reporter = _Reporter(quiet, sys.stderr.isatty())
    request = ApplyRequest(name, spec_run, wait=wait, timeout=timeout, cooldown=cooldown,
                           eviction_retry_timeout=eviction_retry_timeout)
    try:
        result = apply_run(request, RunStore(api), ExecuteLease(api), cluster, cluster, reporter)
    finally:
        reporter.done()
    _emit(result.run, output, result.note, allow_missing)
    raise click.exceptions.Exit(EXIT_WAITING if result.pending else _exit_code(result.run))
