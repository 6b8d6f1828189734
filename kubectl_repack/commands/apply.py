"""`kubectl repack apply`: an Execute RepackRun, carried out in the cluster (default) or here (--local).

Default: validate, plan locally on live state and print the plan to expect, check that the
in-cluster controller runs, create the run (the admission webhook records who created it), and
follow it until it ends (webhook.controller carries it out; Ctrl-C stops the following only).
`--local` keeps the foreground execution with the user's own credentials (the workflow in
kubectl_repack.engine.workflow, whose docstring gives the order and why) for clusters without the
in-cluster part.
"""
from __future__ import annotations

import sys
import time

import click

# Only light modules at the top: every module of this package is imported for --help and every TAB;
# the planner, render, the run API and the kube layer are imported by the functions that use them.
from .options import (MODE_EXECUTE, OUTPUT_JSON, OUTPUT_YAML, RUN_NAME, cluster_options, duration, for_namespace,
                      mode_option, output_option, repack_namespace_option, settings, stamp, target_options,
                      template_options, terminal_width)
from .status import EXIT_INTERRUPTED

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, EXIT_NOT_RECOMMENDED, EXIT_WAITING, EXIT_RUN_FAILED = 0, 1, 2, 3, 4, 5

EPILOG = """\b
Where it runs: by default the in-cluster controller (`kubectl repack install`) carries the run
out and apply follows it; --local carries it out from this process instead (it stops when this
process stops; `apply --local --resume NAME` continues it).

\b
Exit codes:
  0  the run Succeeded (ExecutionCompleted or ExecutionCompletedWithAlternativePlacement)
  1  runtime error (cluster unreachable or refusing); the run can be continued with --resume
  2  usage or validation error (nothing was sent)
  3  the live re-plan recommended nothing (NoFragmentation, InsufficientImprovement,
     RequiredNodeBlocksNotMet): no eviction
  4  the run is not finished: Pending (another Execute holds the Lease or the cooldown runs)
     or still running when --timeout passed (--no-wait: not followed)
  5  the run ended Failed (reason in its Failed condition, e.g. EvictionBlockedByPDB)

\b
Cooldown: one cluster-wide setting, stored as the annotation repack.volcano.sh/execute-cooldown
on the Lease repack-execute in --repack-namespace (repack-system by default); --cooldown sets it
for this and every later apply. The cooldown counts from the completion of the last Execute that
evicted at least one pod.

\b
Examples:
  kubectl repack apply -f ascend-execute-001.yaml
  kubectl repack apply -f ascend-guarded-dryrun.yaml --mode Execute --name ascend-execute-002
  kubectl repack apply --resume ascend-execute-001      (follow it again)
  kubectl repack apply -f run.yaml --local              (no in-cluster controller)
  kubectl repack apply --for vcjob/train-7 -n team-a    (make room for this pending gang)
  kubectl repack apply -f run.yaml --no-wait -o json
"""




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
    from kubectl_repack import render
    from kubectl_repack.api.run import RunView, run_reason
    from kubectl_repack.api.view import as_map

    view = RunView(run)
    st = view.status
    lines = [f"RepackRun:      {run['metadata']['name']}",
             f"Phase:          {st.get('phase', '')} ({run_reason(run)})",
             f"Message:        {st.get('message', '')}"]
    summ = view.plan.get("summary")
    if summ:
        blocks = as_map(summ.get("nodeBlocks"))
        lines.append(f"Plan:           frag {summ['fragBeforePercent']}% -> {summ['fragAfterPercent']}%, "
                     f"freed {summ['freedNodeCount']}, moved {summ['movedCardCount']} card(s)"
                     + (f", blocks {blocks.get('before')} -> {blocks.get('after')}" if blocks else ""))
    res = st.get("result")
    if res:
        blocks = as_map(res.get("nodeBlocks"))
        lines.append(f"Result:         frag {res['fragAfterPercent']}%, freed {res['freedNodeCount']} "
                     f"{res.get('freedNodes') or []}, moved {res['movedCardCount']} card(s), "
                     + (f"blocks {blocks.get('after')}, " if blocks else "")
                     + f"verified {str(res['metricsVerified']).lower()}")
    relocs = view.relocations
    if relocs:
        rows = [[r.victim, r.eviction.phase, r.placement.phase, r.planned_node_name, r.placement.actual_node_name]
                for r in relocs]
        lines.append("")
        lines.append(render.table(["VICTIM", "EVICTION", "PLACEMENT", "PLANNED", "ACTUAL"], rows).rstrip("\n"))
    return "\n".join(lines) + "\n"


def _exit_code(run: dict) -> int:
    from kubectl_repack.api.run import NOT_RECOMMENDED, PHASE_FAILED, PHASE_SUCCEEDED, RunView, run_reason

    phase = RunView(run).phase
    if phase == PHASE_SUCCEEDED:
        return EXIT_NOT_RECOMMENDED if run_reason(run) in NOT_RECOMMENDED else EXIT_OK
    if phase == PHASE_FAILED:
        return EXIT_RUN_FAILED
    return EXIT_WAITING


def _emit(run: dict, output, note: str = "", allow_missing: bool = True) -> None:
    from kubectl_repack import render

    if render.prints_object(output):
        click.echo(render.object_output(run, output, allow_missing), nl=False)
    else:
        if note:
            click.echo(note, err=True)
        click.echo(_summary(run), nl=False)


@click.command("apply", epilog=EPILOG)
@click.option("-f", "--filename", "file", metavar="RUN.yaml", type=click.Path(dir_okay=False, allow_dash=True),
              help="The Execute RepackRun (YAML or JSON; '-' reads stdin).")
@click.option("--resume", metavar="NAME", type=RUN_NAME,
              help="Follow the existing Execute RepackRun NAME again (with --local: continue it from its records).")
@mode_option(MODE_EXECUTE, "Set spec.mode (lets a reviewed DryRun file be executed; use with --name).")
@click.option("--name", metavar="NAME", type=RUN_NAME, help="metadata.name of the run (overrides the file's).")
@click.option("--local", is_flag=True,
              help="Carry the run out from this process with your credentials, not in the cluster (for "
                   "clusters without `kubectl repack install`; it stops when this process stops).")
@click.option("--wait/--no-wait", default=True, show_default=True,
              help="Follow the run to its end (while another Execute holds the Lease or the cooldown runs: "
                   "keep waiting), or return at once (exit 4 while it is not finished).")
@click.option("--timeout", callback=duration, default="10m", show_default=True, metavar="DURATION",
              help="Execution deadline (status.executionDeadline: evictions, retries, placement), and the "
                   "longest wait for the Lease.")
@click.option("--cooldown", callback=duration, default=None, metavar="DURATION",
              help="Cluster-wide pause after an Execute before the next may start (default: the stored "
                   "setting, else 10m). Given, it is stored as the new setting.")
@click.option("--eviction-retry-timeout", callback=duration, default="60s", show_default=True,
              metavar="DURATION", help="How long an eviction refused by a PodDisruptionBudget (429) is retried "
                                       "(--local; in the cluster the controller's setting).")
@output_option(OUTPUT_YAML, OUTPUT_JSON, templates=True,
               help_text="yaml|json|name|jsonpath=...|jsonpath-as-json=...|custom-columns=...: the final "
                         "RepackRun object, no progress display. Default: a summary.")
@template_options
@target_options
@repack_namespace_option()
@cluster_options
def command(file, resume, mode, name, local, wait, timeout, cooldown, eviction_retry_timeout, output,
            allow_missing, for_ref, for_namespace_flag, repack_namespace):
    """Execute a repack: re-plan on live state and move pods through the Eviction API.

    One Execute runs at a time per cluster (a Lease in --repack-namespace), with a cooldown after each.
    Every relocation is recorded in the RepackRun before its eviction, so a stopped run is
    continued from its records without evicting any pod twice: by the in-cluster controller
    after a restart, or with --local by `apply --local --resume NAME`.
    """
    from kubectl_repack import render
    from kubectl_repack.api.times import rfc3339, utcnow
    from kubectl_repack.errors import ValidationError

    from .runspec import QuickFlags, build_run, check_spec, require_target_served, resolve_target

    if for_ref is None and for_namespace_flag is not None:
        raise click.UsageError("-n/--namespace is the namespace of the --for object (the product's namespace is "
                               "--repack-namespace): give --for KIND/NAME")
    if resume and (file or for_ref):
        raise click.UsageError("--resume NAME follows a run that exists: not with -f or --for")
    if not (file or resume or for_ref):
        raise click.UsageError("give either -f RUN.yaml or --resume NAME (or --for KIND/NAME)")
    quiet = render.prints_object(output)
    spec_run = None
    if resume is None:
        run = build_run(file, QuickFlags(name=name, mode=MODE_EXECUTE if for_ref and not file else mode,
                                         targeted=for_ref is not None),
                        default_name=f"repack-execute-{stamp(rfc3339(utcnow()))}")
        if run["spec"].get("mode") != MODE_EXECUTE:
            raise ValidationError([f"spec.mode: {run['spec'].get('mode')!r}: `kubectl repack apply` executes "
                                   "Execute runs; set mode: Execute or pass --mode Execute (with a new --name)"])
        if for_ref is not None and "target" in run["spec"]:
            raise click.UsageError("--for and a run file with spec.target: name the target once")
        check_spec(run, for_ref is not None)  # SpecError exits 2 before anything is sent
        spec_run = run
        name = run["metadata"]["name"]
    else:
        name = resume
    api = settings().api()
    snapshot = None
    if for_ref is not None:
        from planner.gcpause import paused_gc
        from kubectl_repack.kube.objects import LiveSource

        with paused_gc():
            snapshot = LiveSource(api).snapshot()   # also the in-cluster path's plan preview
        spec_run, _ = resolve_target(spec_run, snapshot, for_ref, for_namespace(for_namespace_flag, False))
    if spec_run is not None:
        # before the run is created: a CRD without spec.target would prune it and execute untargeted (exit 2)
        require_target_served(api, spec_run)
    if local:
        _apply_local(api, name, spec_run, wait, timeout, cooldown, eviction_retry_timeout, output, allow_missing,
                     quiet, repack_namespace)
    else:
        _apply_in_cluster(api, name, spec_run, wait, timeout, cooldown, output, allow_missing, quiet,
                          repack_namespace, snapshot)


def _apply_local(api, name, spec_run, wait, timeout, cooldown, eviction_retry_timeout, output, allow_missing,
                 quiet, repack_namespace) -> None:
    from kubectl_repack.api.control import EXECUTOR_ANNOTATION, EXECUTOR_LOCAL
    from kubectl_repack.engine.execute_lease import ExecuteLease
    from kubectl_repack.engine.workflow import ApplyRequest, apply_run
    from kubectl_repack.kube.objects import LiveCluster
    from kubectl_repack.kube.runs import RunStore

    if spec_run is not None:   # an installed controller leaves a run this process carries out alone
        spec_run["metadata"].setdefault("annotations", {})[EXECUTOR_ANNOTATION] = EXECUTOR_LOCAL
    warning = _no_webhook_warning(api, repack_namespace)
    if warning:   # stderr, also with -o (stdout then carries only the object)
        click.echo(f"warning: {warning}", err=True)
    cluster = LiveCluster(api)
    reporter = _Reporter(quiet, sys.stderr.isatty())
    request = ApplyRequest(name, spec_run, wait=wait, timeout=timeout, cooldown=cooldown,
                           eviction_retry_timeout=eviction_retry_timeout)
    store = RunStore(api)
    seal, why_not = _local_seal(api, store, name, repack_namespace)
    if why_not and not warning:
        click.echo(f"warning: {why_not}", err=True)
    try:
        result = apply_run(request, store, ExecuteLease(api, repack_namespace), cluster, cluster, reporter,
                           seal=seal)
    finally:
        reporter.done()
    _emit(result.run, output, result.note, allow_missing)
    raise click.exceptions.Exit(EXIT_WAITING if result.pending else _exit_code(result.run))


def _local_seal(api, store, name: str, repack_namespace: str):
    """(seal, '') when this user may read the records-seal key (SEC-2: the webhook and the coordinator
    steer a replacement only by records that verify against it; cluster admins may read it), else
    (None, why this run's replacements get no placement hint)."""
    from kubectl_repack.api import control
    from kubectl_repack.api.view import ObjectView
    from kubectl_repack.errors import RepackError
    from kubectl_repack.kube.incluster import read_key

    no_hint = ("replacements of this run get no placement hint: the webhook and the coordinator act only on "
               f"relocation records sealed with the key in secret {repack_namespace}/{control.SEAL_SECRET_NAME}")
    try:
        key = read_key(api, repack_namespace)
    except RepackError as e:
        return None, f"{no_hint}, which you may not read ({e}); apply without --local to have the controller seal them"
    if key is None:
        return None, f"{no_hint}, which does not exist (the controller creates it when it starts)"

    def seal(run: dict, records: list) -> None:
        uid = ObjectView(run).uid   # admission lets this user write the digest: they may read the key
        store.annotate_all(name, {control.RECORDS_SEAL_ANNOTATION: control.seal(key, uid, records),
                                  control.RECORDS_DIGEST_ANNOTATION: control.records_digest(uid, records)})
    return seal, ""


def _no_webhook_warning(api, repack_namespace: str) -> str:
    """Why replacements will not be steered ('' when the placement webhook is installed, or when
    this user may not read webhook configurations: then nothing is known either way). The preflight's
    own webhook check decides."""
    from kubectl_repack.errors import ClusterAPIError
    from kubectl_repack.kube.preflight import FAIL, Preflight

    try:
        check = Preflight(api, repack_namespace).webhook()
    except ClusterAPIError:
        return ""
    if check.ok is not FAIL:
        return ""
    return (f"no placement webhook is installed ({check.detail}): the scheduler alone places the replacements, "
            "which may land back on the nodes being emptied (NodesNotFreed); `kubectl repack install` adds it")


def _apply_in_cluster(api, name, spec_run, wait, timeout, cooldown, output, allow_missing, quiet,
                      repack_namespace, snapshot=None) -> None:
    import planner
    from planner.gcpause import paused_gc
    from kubectl_repack import render
    from kubectl_repack.api.control import (COOLDOWN_ANNOTATION, EXECUTOR_ANNOTATION, EXECUTOR_LOCAL,
                                            TIMEOUT_ANNOTATION, executed_locally)
    from kubectl_repack.api.run import NOT_RECOMMENDED, is_finished
    from kubectl_repack.api.status import plan_status
    from kubectl_repack.api.times import rfc3339, utcnow
    from kubectl_repack.errors import ClusterAPIError, ValidationError
    from kubectl_repack.api.times import format_duration
    from kubectl_repack.kube.objects import LiveSource
    from kubectl_repack.kube.preflight import FAIL, Preflight
    from kubectl_repack.kube.runs import RunStore

    from .follow import SILENT, follow

    store = RunStore(api)
    info = SILENT if quiet else sys.stderr
    if spec_run is not None:
        check = Preflight(api, repack_namespace).controller()
        if check.ok is FAIL:
            raise ClusterAPIError(f"{check.detail}; `kubectl repack install` runs it, or carry the run out from here "
                                  f"with --local")
        # The plan to expect: the controller plans again when it starts (EXEC-1), on the state of then.
        with paused_gc():
            source = LiveSource(api)
            result = planner.plan(snapshot if snapshot is not None else source.snapshot(),
                                  planner.RunSpec.from_spec(spec_run["spec"]))
        expected = dict(spec_run, status=plan_status(result, rfc3339(utcnow())))
        summary = render.plan_summary(expected, result, source.description, width=terminal_width())
        click.echo(summary, nl=False, err=quiet)
        if result.outcome in NOT_RECOMMENDED:
            if not quiet:
                click.echo(f"nothing to execute ({result.outcome}): no RepackRun was created", err=True)
            raise click.exceptions.Exit(EXIT_NOT_RECOMMENDED)
        ann = spec_run["metadata"].setdefault("annotations", {})
        ann[TIMEOUT_ANNOTATION] = format_duration(timeout)
        if cooldown is not None:
            ann[COOLDOWN_ANNOTATION] = format_duration(cooldown)
        store.create(spec_run)
        click.echo(f"repackrun.repack.volcano.sh/{name} created; the in-cluster controller carries it out", err=True)
    else:
        existing = store.get(name)
        if executed_locally(existing):
            raise ValidationError([f"repackrun {name} is carried out by `kubectl repack apply --local` (annotation "
                                   f"{EXECUTOR_ANNOTATION}={EXECUTOR_LOCAL}); continue it with "
                                   f"`kubectl repack apply --local --resume {name}`"])
    if not wait:
        run = store.get(name)
        _emit(run, output, f"not following (--no-wait): kubectl repack status {name} -w", allow_missing)
        raise click.exceptions.Exit(_exit_code(run))
    try:
        run = follow(store, name, timeout, info, tty=not quiet and sys.stderr.isatty())
    except KeyboardInterrupt:
        click.echo(f"\nstopped following; the run goes on in the cluster: kubectl repack status {name} -w", err=True)
        raise click.exceptions.Exit(EXIT_INTERRUPTED)
    note = "" if is_finished(run) else (f"repackrun {name} is not finished after --timeout {format_duration(timeout)}; "
                                        f"it goes on in the cluster: kubectl repack status {name} -w")
    _emit(run, output, note, allow_missing)
    raise click.exceptions.Exit(_exit_code(run))
