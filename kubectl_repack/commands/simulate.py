"""`kubectl repack simulate`: what a RepackPolicy would buy, replayed before it is enabled.

The cluster is a snapshot (a file, or the live cluster); the work is a job history (the openb CSV
format, or a List of Volcano Jobs with their creation and run times), replayed on its own timestamps
or, with --load, sampled FGD-style at that load plus the default gang mix. The same replay runs
twice, without defragmentation (`none`) and with the policy (kubectl_repack.simulate: the real
planner, the policy's own trigger and template, the executor's semantics), and the table compares
them. Pods already running in the snapshot keep their nodes through the replay.
"""
from __future__ import annotations

import click

from .options import OUTPUT_JSON, cluster_options, output_option, settings

EPILOG = """\b
Examples:
  # What would this policy have done for last week's jobs on the cluster in this snapshot?
  kubectl repack simulate -f policy.yaml --snapshot cluster.yaml --history jobs.yaml

\b
  # The openb trace format, sampled at load 1.1 with the default gang mix, as JSON
  kubectl repack simulate -f policy.yaml --snapshot cluster.yaml --history pods.csv --load 1.1 -o json

\b
Exit codes: 0 replayed, 1 runtime error (cluster), 2 bad input (policy, snapshot or history: the
file and the field, line or column are named), 130 interrupted.
"""


@click.command("simulate", epilog=EPILOG)
@click.option("-f", "--filename", "file", metavar="POLICY.yaml", required=True,
              type=click.Path(dir_okay=False, allow_dash=True), help="The RepackPolicy to replay ('-' reads stdin).")
@click.option("--history", metavar="FILE", required=True, type=click.Path(dir_okay=False),
              help="Job history: an openb-format CSV, or a List of Volcano Jobs (YAML or JSON).")
@click.option("--snapshot", "snapshot_file", metavar="FILE", type=click.Path(dir_okay=False),
              help="The cluster as a snapshot file instead of the live cluster (nothing is contacted).")
@click.option("--load", type=click.FloatRange(min=0, min_open=True), metavar="F",
              help="Sample the history FGD-style at this load (offered card-seconds / capacity) with the "
                   "default gang mix, instead of replaying it on its own timestamps.")
@click.option("--days", type=click.FloatRange(min=0, min_open=True), metavar="D",
              help="Simulated days (default: the history's span; with --load 8).")
@click.option("--warmup-days", type=click.FloatRange(min=0), metavar="W",
              help="Days not measured at the start (default 0; with --load 1).")
@click.option("--seed", type=int, default=1, show_default=True, help="Seed of the sampling (--load).")
@output_option(OUTPUT_JSON, help_text="json: the result document (settings and every metric per arm). "
                                      "Default: a table.")
@cluster_options
def command(file, history, snapshot_file, load, days, warmup_days, seed, output):
    """Replay a job history with and without a RepackPolicy, and compare waits and lost work."""
    import json
    import os
    from dataclasses import replace

    from planner import documents
    from planner.gcpause import paused_gc
    from kubectl_repack.api.policy import parse_policy
    from kubectl_repack.errors import DocumentError, UnreadableInput, ValidationError
    from kubectl_repack.kube import objects
    from kubectl_repack.policy_schema import validate_policy_text
    from kubectl_repack.simulate.arms import RepackArm
    from kubectl_repack.simulate.history import csv_jobs, is_csv, running_jobs, vcjob_jobs
    from kubectl_repack.simulate.metrics import table
    from kubectl_repack.simulate.run import replay_arms
    from kubectl_repack.simulate.trace import DAY, TraceError, Workload, generate, read_shapes

    from .progress import Progress
    from .runspec import read_stdin

    # Each input is named by its flag, and read in the order given: policy, snapshot, history.
    try:
        text, source = (read_stdin(), "<stdin>") if file == "-" else (documents.read_file(file), file)
    except (DocumentError, UnreadableInput) as e:
        raise ValidationError([f"-f/--filename: {e}"]) from e
    if snapshot_file is not None and not os.path.isfile(snapshot_file):
        raise ValidationError([f"--snapshot: {snapshot_file or '(empty)'}: no such file"])
    try:
        history_text = documents.read_file(history)
    except (DocumentError, UnreadableInput) as e:
        raise ValidationError([f"--history: {e}"]) from e
    policy_obj = validate_policy_text(text, source)
    policy = parse_policy(policy_obj)
    resource = policy.resource
    if not resource:
        raise ValidationError(["spec.runTemplate.spec.goals[0].resource: simulate replays one resource; "
                               "name it in the template's goal"])
    progress = Progress()
    src = objects.FileSource(snapshot_file) if snapshot_file else objects.LiveSource(settings().api())
    progress.step(f"reading {src.description}")
    with paused_gc(freeze=True):
        snapshot = src.snapshot()
    progress.done()
    nodes = [n for n in snapshot.nodes if n.allocatable.get(resource, 0) > 0]
    if not nodes:
        raise ValidationError([f"{src.description}: no node advertises {resource} (the policy's goal resource)"])
    workload = Workload()
    try:
        if load is not None:
            if not is_csv(history, history_text):
                raise ValidationError(["--load samples an openb-format CSV history; a Volcano Job list is "
                                       "replayed on its own timestamps"])
            workload = replace(workload, load=load, days=days or workload.days,
                               warmup_days=workload.warmup_days if warmup_days is None else warmup_days)
            jobs = generate(nodes_as_specs(nodes, resource), read_shapes(history, workload.max_duration_s), workload,
                            seed)
        else:
            if is_csv(history, history_text):
                jobs = csv_jobs(history, resource, workload.max_duration_s)
            else:
                jobs = vcjob_jobs(history, _items(history_text, history), resource, workload.max_duration_s)
            span = max(j.submit + j.duration for j in jobs) / DAY
            workload = replace(workload, days=days or span, warmup_days=warmup_days or 0.0, gangs=())
    except TraceError as e:
        raise ValidationError([str(e)]) from None
    if workload.warmup_days >= workload.days:
        raise ValidationError([f"--warmup-days: {workload.warmup_days:g} is not shorter than the replay "
                               f"({workload.days:g} days)"])
    jobs = running_jobs(snapshot, resource, workload.days * DAY) + list(jobs)
    arm_name = f"policy/{policy.name}"
    shown = [None]

    def tick(arm, t, horizon):
        if progress.enabled and (shown[0] is None or t - shown[0] >= horizon / 100):
            shown[0] = t
            progress.step(f"replaying {arm}: day {t / DAY:.1f} of {horizon / DAY:.1f}")

    try:
        doc = replay_arms(nodes, None, workload, ["none", arm_name], seed, jobs=jobs, progress=tick,
                          sources={"snapshot": src.description, "history": history, "policy": policy.name},
                          resource=resource, factories={arm_name: lambda: RepackArm(arm_name, policy_obj)},
                          extras={k: getattr(snapshot, k) for k in ("pdbs", "vcjobs", "modelservings", "namespaces",
                                                                     "queues", "pvs", "pvcs")})
    finally:
        progress.done()
    if output == OUTPUT_JSON:
        click.echo(json.dumps(doc, indent=1))
    else:
        w = doc["settings"]["workload"]
        click.echo(f"Replayed {doc['settings']['jobs_generated']} jobs on {len(nodes)} nodes "
                   f"({doc['settings']['gpus']} {resource}) for {w['days']:g} days "
                   f"({w['warmup_days']:g} warm-up), {'load ' + format(load, 'g') if load else 'history timestamps'}:")
        click.echo(table(doc), nl=False)


def nodes_as_specs(nodes, resource):
    """Snapshot nodes as the sampler reads them (only their card counts matter to the load)."""
    from kubectl_repack.simulate.trace import NodeSpec
    return [NodeSpec(n.name, 0, 0, n.allocatable[resource], "") for n in nodes]


def _items(text, source):
    """The objects of a YAML stream, JSON array or List, Lists opened."""
    import planner
    from planner.load import flatten
    from kubectl_repack.errors import ValidationError
    try:
        return list(flatten(planner.parse_text(text, source)))
    except planner.RepackError as e:
        raise ValidationError([str(e)]) from e
