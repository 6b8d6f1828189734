"""`kubectl repack apply`: carry out an Execute RepackRun with the user's own credentials.

Order (EXEC-1..7): validate locally -> delete finished runs past their TTL -> create the run (or
pick up the existing one) -> take the cluster-wide execute Lease (else the run stays Pending with
AnotherRunActive / ExecuteCooldownActive and apply waits or exits) -> plan again on live state ->
persist the plan and every relocation record -> evict PodGroup by PodGroup -> wait for the
replacements -> verify on live state -> result and terminal condition -> release the Lease.
Re-running apply on the same run (or `--resume NAME`) continues from the persisted records.
"""
from __future__ import annotations

import datetime as dt
import os
import sys
import time

import click

import planner
from kubectl_repack import render, schema
from kubectl_repack.errors import ClusterAPIError, NotFound, ValidationError

from .options import OUTPUT_JSON, OUTPUT_YAML, RUN_NAME, cluster_options, output_option, settings, stamp
from .runspec import QuickFlags, build_run

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_NOT_RECOMMENDED, EXIT_WAITING, EXIT_RUN_FAILED = 0, 1, 2, 3, 4, 5
NOT_RECOMMENDED = ("NoFragmentation", "InsufficientImprovement")

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
    from kubectl_repack.execute import parse_duration
    try:
        return parse_duration(value)
    except (ValueError, OverflowError) as e:  # OverflowError: more days than a timedelta holds
        raise click.BadParameter(str(e) if isinstance(e, ValueError) else f"{value!r} is too long a duration",
                                 ctx=ctx, param=param) from e


class _ProgressLine:
    """One self-rewriting line on a terminal: evictions, replacements bound, elapsed."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.t0 = time.monotonic()
        self.shown = False

    def __call__(self, p) -> None:
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
    from kubectl_repack.execute import run_reason
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
    relocs = st.get("relocations") or []
    if relocs:
        rows = [[f"{r['namespace']}/{r.get('victimPodName', '')}", (r.get("eviction") or {}).get("phase", ""),
                 (r.get("placement") or {}).get("phase", ""), r.get("plannedNodeName", ""),
                 (r.get("placement") or {}).get("actualNodeName", "")] for r in relocs]
        lines.append("")
        lines.append(render.table(["VICTIM", "EVICTION", "PLACEMENT", "PLANNED", "ACTUAL"], rows).rstrip("\n"))
    return "\n".join(lines) + "\n"


def _exit_code(run: dict) -> int:
    from kubectl_repack.execute import run_reason
    phase = (run.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return EXIT_NOT_RECOMMENDED if run_reason(run) in NOT_RECOMMENDED else EXIT_OK
    if phase == "Failed":
        return EXIT_RUN_FAILED
    return EXIT_WAITING


def _emit(run: dict, output, note: str = "") -> None:
    if output in (OUTPUT_YAML, OUTPUT_JSON):
        click.echo(render.dump(render.canonical_run(run), output), nl=False)
    else:
        if note:
            click.echo(note, err=True)
        click.echo(_summary(run), nl=False)


@click.command("apply", epilog=EPILOG)
@click.option("-f", "--filename", "file", metavar="RUN.yaml",
              help="The Execute RepackRun (YAML or JSON; '-' reads stdin).")
@click.option("--resume", metavar="NAME", type=RUN_NAME, help="Continue the existing Execute RepackRun NAME from its records.")
@click.option("--mode", type=click.Choice(["Execute"]),
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
@output_option(OUTPUT_YAML, OUTPUT_JSON,
               help_text="yaml|json: the final RepackRun object, no progress display. Default: a summary.")
@cluster_options
def command(file, resume, mode, name, wait, timeout, cooldown, eviction_retry_timeout, output):
    """Execute a repack: re-plan on live state and move pods through the Eviction API.

    One Execute runs at a time per cluster (a Lease in repack-system), with a cooldown after each.
    Every relocation is recorded in the RepackRun before its eviction, so a killed apply is
    continued by `apply --resume NAME` (or by applying the same run again) without evicting any
    pod twice.
    """
    from kubectl_repack import execute as ex
    from kubectl_repack import execute_api as xa

    if bool(file) == bool(resume):
        raise click.UsageError("give either -f RUN.yaml or --resume NAME")
    quiet = output in (OUTPUT_YAML, OUTPUT_JSON)
    spec_run = None
    if file:
        run = build_run(file, QuickFlags(name=name), default_name=f"repack-execute-{stamp(ex.rfc3339(dt.datetime.now(dt.timezone.utc)))}")
        if mode:
            run["spec"]["mode"] = mode
            run = schema.validate_run(run)
        if run["spec"].get("mode") != "Execute":
            raise ValidationError([f"spec.mode: {run['spec'].get('mode')!r}: `kubectl repack apply` executes "
                                   "Execute runs; set mode: Execute or pass --mode Execute (with a new --name)"])
        planner.RunSpec.from_spec(run["spec"])  # SpecError exits 2 before anything is sent
        spec_run = run
        name = run["metadata"]["name"]
    else:
        name = resume

    api = settings().api()
    runs = xa.KubeRunWriter(api)
    now = dt.datetime.now(dt.timezone.utc)
    for old in xa.expired_runs(runs.list(), now, keep=name):
        if runs.delete(old["metadata"]["name"], old["metadata"].get("uid")) and not quiet:
            click.echo(f"repackrun.repack.volcano.sh/{old['metadata']['name']} deleted "
                       f"(ttlSecondsAfterFinished passed)", err=True)

    try:
        current = runs.get(name)
    except NotFound:
        if resume:
            raise
        current = None
    if current is not None and (current.get("spec") or {}).get("mode") != "Execute":
        raise ValidationError([f"repackrun {name} exists with mode {current['spec'].get('mode')}; "
                               "choose a new name (--name) for the Execute run"])
    if current is not None and spec_run is not None and current.get("spec") != spec_run["spec"]:
        raise ValidationError([f"repackrun {name} exists with a different spec (a RepackRun's spec is immutable); "
                               f"continue it with `kubectl repack apply --resume {name}` or choose a new name (--name)"])
    if current is None:
        current = runs.create(spec_run)
        if not quiet:
            click.echo(f"repackrun.repack.volcano.sh/{name} created", err=True)
    elif not quiet:
        click.echo(f"repackrun.repack.volcano.sh/{name} exists: continuing it from its records", err=True)
    if ex.is_finished(current):
        _emit(current, output, f"repackrun {name} already finished")
        raise click.exceptions.Exit(_exit_code(current))

    lease = xa.ExecuteLease(api)
    store_cooldown = cooldown
    if cooldown is None:
        cooldown = lease.stored_cooldown()
    if (current.get("status") or {}).get("relocations"):
        cooldown_now = dt.timedelta(0)  # a started run continues; the cooldown gates new runs only
    else:
        cooldown_now = cooldown
    me = ex.holder_identity(name)
    progress = _ProgressLine(enabled=not quiet and sys.stderr.isatty())
    options = ex.Options(execution_timeout=timeout, eviction_retry_timeout=eviction_retry_timeout,
                         crash_after_evictions=int(os.environ.get(ex.CRASH_AFTER_EVICTIONS_ENV) or 0))
    engine = ex.Executor(xa.LiveReader(api), xa.KubeEvictor(api), runs, options=options, on_progress=progress,
                         guard=lambda: "the execute Lease was lost (not renewed in time)" if lease.lost.is_set() else None)

    wait_until = time.monotonic() + timeout.total_seconds()
    last_reason = None
    while True:
        decision = lease.try_acquire(me, dt.datetime.now(dt.timezone.utc), cooldown_now, store_cooldown)
        if decision.acquire:
            break
        if decision.reason != last_reason:
            current = engine.mark_pending(name, decision.reason, decision.message)
            last_reason = decision.reason
            if not quiet:
                click.echo(f"waiting: {decision.reason}: {decision.message}", err=True)
        if not wait or time.monotonic() >= wait_until:
            current = runs.get(name)
            _emit(current, output, f"repackrun {name} is Pending ({decision.reason}); "
                                   f"run `kubectl repack apply --resume {name}` later")
            raise click.exceptions.Exit(EXIT_WAITING)
        time.sleep(max(0.5, min(decision.retry_after, 5.0, wait_until - time.monotonic())))

    lease.start_renewing(me)
    evicted_any = False
    try:
        st = current.get("status") or {}
        if not st.get("relocations") and not ex.is_finished(current):
            plan = engine.plan_live(current)     # EXEC-1: never a DryRun's plan
            current = engine.start(name, plan)
        if not ex.is_finished(current):
            current = engine.execute(name)
        evicted_any = any((r.get("eviction") or {}).get("phase") in ex.EVICTED_PHASES
                          for r in (current.get("status") or {}).get("relocations") or ())
    except ClusterAPIError:
        try:
            evicted_any = any((r.get("eviction") or {}).get("phase") not in ("Pending", "Rejected")
                              for r in (runs.get(name).get("status") or {}).get("relocations") or ())
        except ClusterAPIError:
            evicted_any = True
        raise
    finally:
        progress.done()
        lease.release(me, name, dt.datetime.now(dt.timezone.utc) if evicted_any else None)
    _emit(current, output)
    raise click.exceptions.Exit(_exit_code(current))
