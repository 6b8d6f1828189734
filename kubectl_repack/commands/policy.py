"""`kubectl repack policy create|get|suspend|resume|trigger` (POLICY-1, POLICY-2): RepackPolicies, the runs
that start themselves. `kubectl apply -f POLICY.yaml` works as well (the installed webhook fills in
the creator record); `create` first validates the policy locally, as the API server and the
controller would judge it (schema and CEL, the cron strings and time zone, the planner's view of the
template), so a bad policy is refused naming the field before anything is sent.

`trigger NAME` asks the controller for one run now: the annotation repack.volcano.sh/trigger set to
the current time, which the controller honours once (suspend, windows and "never two unfinished
runs" still hold; status.lastEvaluation says what happened).
"""
from __future__ import annotations

import click

from .options import OUTPUT_NAME, RUN_NAME, cluster_options, output_option, settings

POLICY_REF = "repackpolicy.repack.volcano.sh"


def _store():
    from kubectl_repack.kube.policies import PolicyStore

    return PolicyStore(settings().api())


def _done(name: str, what: str, output) -> None:
    click.echo(f"{POLICY_REF}/{name}" if output == OUTPUT_NAME else f"{POLICY_REF}/{name} {what}")


def _table(policies: list, wide: bool) -> str:
    from kubectl_repack.api.policy import healthy
    from kubectl_repack.api.view import ObjectView

    head = ["NAME", "SUSPEND", "LAST-TRIGGER", "NEXT", "LAST-RESULT", "HEALTHY"] + (["MESSAGE"] if wide else [])
    rows = [head]
    for obj in policies:
        view = ObjectView(obj)
        st = view.status
        cond = healthy(st) or {}
        row = [view.name, "true" if view.spec.get("suspend") else "false", str(st.get("lastTriggerTime") or "<none>"),
               str(st.get("nextTriggerTime") or "<none>"),
               str((st.get("lastRunStatus") or {}).get("reason") or "<none>"), str(cond.get("status") or "<unknown>")]
        if wide:
            row.append(str((st.get("lastEvaluation") or {}).get("message") or cond.get("message") or ""))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - (1 if wide else 0))]
    lines = []
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r, widths)] + (r[len(widths):] if wide else [])
        lines.append("   ".join(cells).rstrip())
    return "\n".join(lines)


def _policy_group() -> click.Group:
    """The group and its subcommands (built here so that only the group is a command of this module)."""

    @click.group("policy")
    def group():
        """RepackPolicies: runs created by the controller on a cron schedule, above a fragmentation
        threshold, or for a gang blocked by fragmentation.

        \b
        Examples:
          kubectl repack policy create -f config/samples/ascend-nightly-policy.yaml
          kubectl apply -f config/samples/ascend-nightly-policy.yaml      # the same, without local checks
          kubectl repack policy get
          kubectl repack policy suspend ascend-nightly-policy
          kubectl repack policy trigger ascend-nightly-policy
        """

    @group.command("create")
    @click.option("-f", "--filename", "file", metavar="POLICY.yaml", required=True,
                  type=click.Path(dir_okay=False, allow_dash=True),
                  help="The RepackPolicy (YAML or JSON; '-' reads stdin).")
    @output_option(OUTPUT_NAME, help_text="name: print only repackpolicy.repack.volcano.sh/NAME.")
    @cluster_options
    def create(file, output):
        """Validate a RepackPolicy locally, then create it (with your creator record)."""
        from kubectl_repack.errors import DocumentError, UnreadableInput, ValidationError
        from kubectl_repack.policy_schema import validate_policy_text
        from planner import documents

        from .runspec import read_stdin

        if file == "":
            raise ValidationError(["-f/--filename: an empty path; give a RepackPolicy file, or '-' for stdin"])
        try:
            text, source = (read_stdin(), "<stdin>") if file == "-" else (documents.read_file(file), file)
        except (DocumentError, UnreadableInput) as e:
            raise ValidationError([str(e)]) from e
        obj = validate_policy_text(text, source)
        stored = _store().create(obj)
        _done(stored["metadata"]["name"], "created", output)

    @group.command("get")
    @click.argument("name", type=RUN_NAME, required=False)
    @output_option("yaml", "json", "wide", help_text="yaml|json: the objects; wide: with the last evaluation's message.")
    @cluster_options
    def get(name, output):
        """List RepackPolicies (or one): SUSPEND, LAST-TRIGGER, NEXT, LAST-RESULT, HEALTHY."""
        import json

        store = _store()
        items = [store.get(name)] if name else sorted(store.list(), key=lambda o: o["metadata"]["name"])
        if output in ("yaml", "json"):
            doc = items[0] if name else {"apiVersion": "v1", "kind": "List", "items": items}
            if output == "json":
                click.echo(json.dumps(doc, indent=4))
            else:
                from planner import documents
                click.echo(documents.dump_yaml(doc), nl=False)
            return
        if not items:
            click.echo("No resources found", err=True)
            return
        click.echo(_table(items, output == "wide"))

    def _suspend(name, output, value: bool):
        _store().merge_patch(name, {"spec": {"suspend": value}})
        _done(name, "suspended" if value else "resumed", output)

    @group.command("suspend")
    @click.argument("name", type=RUN_NAME)
    @output_option(OUTPUT_NAME, help_text="name: print only repackpolicy.repack.volcano.sh/NAME.")
    @cluster_options
    def suspend(name, output):
        """Stop the policy creating runs (spec.suspend: true); runs already created go on."""
        _suspend(name, output, True)

    @group.command("resume")
    @click.argument("name", type=RUN_NAME)
    @output_option(OUTPUT_NAME, help_text="name: print only repackpolicy.repack.volcano.sh/NAME.")
    @cluster_options
    def resume(name, output):
        """Let the policy create runs again (spec.suspend: false); a cron slot missed meanwhile runs once."""
        _suspend(name, output, False)

    @group.command("trigger")
    @click.argument("name", type=RUN_NAME)
    @output_option(OUTPUT_NAME, help_text="name: print only repackpolicy.repack.volcano.sh/NAME.")
    @cluster_options
    def trigger(name, output):
        """Ask the controller for one run of the policy now (suspend and windows still hold)."""
        import datetime as dt

        from kubectl_repack.api.policy import MANUAL_TRIGGER_ANNOTATION

        now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        _store().merge_patch(name, {"metadata": {"annotations": {MANUAL_TRIGGER_ANNOTATION: now}}})
        _done(name, f"triggered ({MANUAL_TRIGGER_ANNOTATION}={now}; kubectl repack policy get {name} -o wide "
                    "shows what the controller did)", output)

    return group


command = _policy_group()
