"""`kubectl repack plan`: evaluate a DryRun RepackRun on the live cluster or a snapshot file.

Order matters: the RepackRun is built and validated first (nothing is read or sent when it is
invalid), then the snapshot is read, the pure planner runs, and the result is printed and,
with --save, stored on the cluster as a DryRun RepackRun whose status carries the plan.
"""
from __future__ import annotations

import click

from .options import (MODE_DRY_RUN, OUTPUT_JSON, OUTPUT_WIDE, OUTPUT_YAML, RUN_NAME, IntRange, cluster_options,
                      for_namespace, mode_option, now_option, now_or_current, output_option, settings, stamp,
                      target_options, template_options, terminal_width)
from .progress import Progress

EPILOG = """\b
Examples:
  # Plan offline from a bundled snapshot with the seed's guarded DryRun
  kubectl repack plan --snapshot examples/seed-3-nodes.yaml -f examples/guarded-dryrun.yaml

\b
  # Plan live with quick flags, and keep the result as a RepackRun
  kubectl repack plan --resource huawei.com/ascend-1980 --min-improvement 10 \\
      --podgroup-selector repack.volcano.sh/eligible=true \\
      --exclude-podgroup-selector repack.volcano.sh/protected=true \\
      --node-selector accelerator-pool=ascend-npu --save --name ascend-guarded-dryrun

\b
  # Scriptable: the complete RepackRun as JSON; exit 3 unless a repack is recommended
  kubectl repack plan --snapshot S -f R -o json --exit-code

\b
Exit codes: 0 evaluated (any outcome), 1 runtime error (cluster, snapshot file),
2 usage or validation error (nothing was read or sent), a snapshot file that is not one (no Node),
or a goal resource no node advertises, 3 with --exit-code: not RepackRecommended, 130 interrupted.
"""


@click.command("plan", epilog=EPILOG)
@click.option("-f", "--filename", "file", metavar="RUN.yaml", type=click.Path(dir_okay=False, allow_dash=True),
              help="The RepackRun to evaluate (YAML or JSON; '-' reads stdin). Flags given as well "
                   "override the file's fields.")
@mode_option(MODE_DRY_RUN, "Set spec.mode to DryRun: plans an Execute run file (-f) without executing it "
                          "(`apply --mode Execute` is the way back).")
@click.option("--resource", metavar="NAME", help="Target resource, e.g. huawei.com/ascend-1980 (goals[0].resource).")
@click.option("--min-improvement", type=IntRange(0, 100), metavar="POINTS",
              help="Required drop of fragmentation in percentage points (goals[0].minFragImprovementPercent).")
@click.option("--max-podgroups", type=IntRange(0), metavar="N",
              help="Most PodGroups one run may affect (maxPerRun.podGroups).")
@click.option("--max-cards", metavar="N", help="Most units of the resource one run may move "
                                               "(maxPerRun.resources[RESOURCE]).")
@click.option("--podgroup-selector", metavar="SELECTOR",
              help="Label selector of PodGroups that may be evicted (scope.podGroups.include), "
                   "kubectl syntax: 'a=b,c!=d,e in (x,y),!f'.")
@click.option("--exclude-podgroup-selector", metavar="SELECTOR",
              help="Label selector of PodGroups never evicted (scope.podGroups.exclude).")
@click.option("--node-selector", metavar="SELECTOR",
              help="Label selector of nodes that may be vacated (scope.nodes.include).")
@click.option("--exclude-node-selector", metavar="SELECTOR",
              help="Label selector of nodes never vacated (scope.nodes.exclude).")
@click.option("--name", metavar="NAME", type=RUN_NAME, help="metadata.name of the run (default repack-plan-<timestamp>).")
@click.option("--snapshot", "snapshot_file", metavar="FILE",
              type=click.Path(exists=True, dir_okay=False, allow_dash=True),
              help="Plan offline from this snapshot file ('-' = stdin) instead of the live cluster; "
                   "nothing is contacted.")
@click.option("--save", is_flag=True,
              help="Create the DryRun RepackRun on the cluster and write the plan to its status.")
@click.option("--exit-code", is_flag=True,
              help="Exit 3 when the outcome is not RepackRecommended (NoFragmentation, InsufficientImprovement, "
                   "RequiredNodeBlocksNotMet).")
@output_option(OUTPUT_YAML, OUTPUT_JSON, OUTPUT_WIDE, templates=True,
               help_text="yaml|json: the complete RepackRun object; wide: the summary plus blocked "
                         "candidates, rounds and every node in the card map (by default only the nodes "
                         "that change); name|jsonpath=...|jsonpath-as-json=...|custom-columns=...: "
                         "the RepackRun as kubectl prints these. Default: a readable summary.")
@target_options
@template_options
@cluster_options
@now_option
def command(file, mode, resource, min_improvement, max_podgroups, max_cards, podgroup_selector,
            exclude_podgroup_selector, node_selector, exclude_node_selector, name, snapshot_file, save,
            exit_code, output, allow_missing, now, for_ref, for_namespace_flag):
    """Plan a repack (DryRun): fragmentation before/after, moves, freed nodes.

    The RepackRun comes from -f, or from the quick flags (--resource is then required); flags
    given with -f override the file's fields. It is validated against the RepackRun schema
    before anything is read: an invalid run exits 2 with every violated field named.
    """
    # Here, not at the top: every module of this package is imported for --help and every TAB.
    import planner
    from planner.gcpause import paused_gc
    from kubectl_repack import render
    from kubectl_repack.api.control import EXECUTOR_ANNOTATION, EXECUTOR_LOCAL
    from kubectl_repack.api.run import Reason
    from kubectl_repack.api.status import plan_status
    from kubectl_repack.errors import ValidationError
    from kubectl_repack.kube import objects, runs

    from .runspec import QuickFlags, build_run, check_spec, read_stdin, require_target_served, resolve_target

    if save and snapshot_file:
        raise click.UsageError("--save stores the plan of the live cluster; it cannot be combined with --snapshot")
    if file == "-" and snapshot_file == "-":
        raise click.UsageError("-f - and --snapshot - cannot both read stdin")
    now = now_or_current(now)
    flags = QuickFlags(name, resource, min_improvement, max_podgroups, max_cards, podgroup_selector,
                       exclude_podgroup_selector, node_selector, exclude_node_selector, mode,
                       targeted=for_ref is not None)
    run = build_run(file, flags, default_name=f"repack-plan-{stamp(now)}")
    mode = run["spec"].get("mode")
    if mode != MODE_DRY_RUN:
        raise ValidationError([f"spec.mode: {mode!r}: `kubectl repack plan` evaluates DryRun runs only; "
                               "set mode: DryRun or pass --mode DryRun (Execute runs are started by "
                               "`kubectl repack apply`)"])
    if for_ref is not None and "target" in run["spec"]:
        raise click.UsageError("--for and a run file with spec.target: name the target once")
    spec = check_spec(run, for_ref is not None)   # SpecError exits 2, still before any read

    progress = Progress()  # stderr, and only on a terminal
    if snapshot_file:
        if snapshot_file == "-":
            source = objects.FileSource("-", read_stdin())
        else:
            source = objects.FileSource(snapshot_file)
    else:
        source = objects.LiveSource(settings().api(), progress=progress if progress.enabled else None)
    try:
        progress.step(f"reading {source.description}")
        # many small immutable objects, no cycles: collector passes cost seconds; the command ends soon after
        with paused_gc(freeze=True):
            snapshot = source.snapshot()
        progress.done()
        if for_ref is not None:
            run, spec = resolve_target(run, snapshot, for_ref, for_namespace(for_namespace_flag, bool(snapshot_file)))
        unknown = render.unknown_resource(snapshot, spec.resource) if spec.resource else ""
        if unknown:   # a typo, or the wrong cluster: planning it would only say NoFragmentation
            raise ValidationError([f"spec.goals[0].resource: {unknown}"])
        warning = render.no_provider_warning(snapshot, spec.resource) if spec.resource else ""
        if warning:
            click.echo(f"warning: {warning}", err=True)
        progress.step("planning")
        with paused_gc(freeze=True):
            result = planner.plan(snapshot, spec, progress=progress if progress.enabled else None)
    finally:
        progress.done()
    run = dict(run, status=plan_status(result, now))

    saved = ""
    if save:
        require_target_served(settings().api(), run)   # before the store sends anything
        store = runs.RunStore(settings().api())
        # this command writes the plan itself: the in-cluster controller leaves the run alone
        run["metadata"].setdefault("annotations", {})[EXECUTOR_ANNOTATION] = EXECUTOR_LOCAL
        store.create(run)
        run = store.write_status(run["metadata"]["name"], run["status"])
        saved = f"repackrun.repack.volcano.sh/{run['metadata']['name']}"
        if render.prints_object(output):
            click.echo(f"{saved} created", err=True)

    if render.prints_object(output):
        click.echo(render.object_output(run, output, allow_missing), nl=False)
    else:
        click.echo(render.plan_summary(run, result, source.description, wide=output == OUTPUT_WIDE,
                                       saved=saved, pools=render.node_pools(snapshot, result.resource),
                                       width=terminal_width()), nl=False)
    if exit_code and result.outcome != Reason.RECOMMENDED:
        raise click.exceptions.Exit(3)
