"""`kubectl repack`: the click entry point. It only wires commands and maps errors to exit codes.

Installed as the console script `kubectl-repack`, so kubectl's plugin discovery runs it for
`kubectl repack ...`. Commands live one per module in kubectl_repack/commands/ and are found
there; shared flags are defined once in kubectl_repack/commands/options.py.

Exit codes (for scripts):
  0  success (any outcome of a DryRun evaluation is a success)
  1  runtime error: API server unreachable or refusing, object not found, snapshot file missing
  2  usage or validation error: bad flags, invalid RepackRun (every violation is printed), a
     snapshot file whose content is not valid (the object and field are named)
  3  with --exit-code: the evaluation succeeded but did not recommend a repack
  130  interrupted (Ctrl-C): `error: interrupted`, for every command (status -w and apply say first
     that the run goes on in the cluster)
"""
from __future__ import annotations

import sys
from typing import Optional

import click

from kubectl_repack import __version__, commands
from kubectl_repack.commands.completion import COMPLETE_VAR, cobra_complete
from kubectl_repack.commands.options import cluster_options
from kubectl_repack.commands.status import EXIT_INTERRUPTED

PROG_NAME = "kubectl repack"
EXIT_RUNTIME, EXIT_USAGE, EXIT_NOT_RECOMMENDED = 1, 2, 3


class CommandFailed(click.ClickException):
    """An expected error, printed kubectl-style as `error: ...` lines (never a traceback), then
    an optional hint line (`See 'kubectl repack plan -h' for help and examples.`)."""

    def __init__(self, lines, exit_code, hint=""):
        self.lines = list(lines) or ["unknown error"]
        self.exit_code = exit_code
        self.hint = hint
        super().__init__(self.lines[0])

    def show(self, file=None):
        file = file or sys.stderr
        for line in self.lines:
            click.echo(f"error: {line}", file=file)
        if self.hint:
            click.echo(self.hint, file=file)


def usage_failed(exc: click.UsageError) -> CommandFailed:
    """A click usage error as kubectl prints one: `error: <message>` and where to find help
    (click's own `Usage: ... Error: ...` block is not what kubectl users parse)."""
    ctx = exc.ctx
    path = ctx.command_path if ctx is not None else PROG_NAME
    return CommandFailed([exc.format_message()], EXIT_USAGE, f"See '{path} -h' for help and examples.")


class RepackGroup(click.Group):
    """The `kubectl repack` group: prog name, and expected errors turned into exit codes."""

    def main(self, *args, **kwargs):
        kwargs["prog_name"] = PROG_NAME  # also under CliRunner and `python -m`
        kwargs.setdefault("complete_var", COMPLETE_VAR)
        return super().main(*args, **kwargs)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.exceptions.NoArgsIsHelpError as e:  # bare `kubectl repack`: help, as kubectl does
            click.echo(e.ctx.get_help())
            raise click.exceptions.Exit(0) from None
        except click.UsageError as e:  # the group's own flags, or an unknown command
            raise usage_failed(e) from e
        except KeyboardInterrupt:
            raise CommandFailed(["interrupted"], EXIT_INTERRUPTED) from None

    def format_commands(self, ctx, formatter):
        """Each command's whole first sentence (wrapped, as kubectl lists its commands); click cuts
        it to the terminal width with "..."."""
        rows = [(name, cmd.get_short_help_str(limit=1000)) for name, cmd in
                ((name, self.get_command(ctx, name)) for name in self.list_commands(ctx))
                if cmd is not None and not cmd.hidden]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except CommandFailed:
            raise
        except KeyboardInterrupt:  # Ctrl-C: one line and 130, as a shell reports SIGINT (not click's `Aborted!`)
            raise CommandFailed(["interrupted"], EXIT_INTERRUPTED) from None
        except click.UsageError as e:  # a command's flags and arguments
            raise usage_failed(e) from e
        except (click.exceptions.Exit, click.exceptions.Abort):  # `plan --help`, exit codes
            raise
        except BrokenPipeError:  # `kubectl repack plan ... | head`
            sys.stderr.close()
            raise click.exceptions.Exit(0)
        except Exception as e:
            failed = expected_failure(e)
            if failed is None:  # a bug: its traceback shows
                raise
            raise failed from e


def expected_failure(e: Exception) -> Optional[CommandFailed]:
    """An expected error as the CommandFailed that prints it and its exit code, else None. The error
    tree (which loads the planner) and the printers are imported only once something has failed:
    `--help` and every TAB go through this group and must not pay for them."""
    from kubectl_repack.errors import InvalidSnapshotFile, RepackError, SpecError, ValidationError
    from kubectl_repack.printing import JSONPathError

    if isinstance(e, ValidationError):
        return CommandFailed(e.errors, EXIT_USAGE)
    if isinstance(e, JSONPathError):  # a template that fails on this object, as kubectl: exit 1
        return CommandFailed([str(e)], EXIT_RUNTIME)
    if isinstance(e, (SpecError, InvalidSnapshotFile)):
        return CommandFailed([str(e)], EXIT_USAGE)
    if isinstance(e, RepackError):
        return CommandFailed([str(e)], EXIT_RUNTIME)
    return None


@click.group(cls=RepackGroup, context_settings={"help_option_names": ["-h", "--help"],
                                                "max_content_width": 100})
@cluster_options
@click.version_option(__version__, prog_name=PROG_NAME, message="%(prog)s %(version)s")
def main():
    """Defragment GPU/NPU capacity on Volcano-scheduled clusters.

    Plans gang-aware pod moves that empty whole accelerator nodes, offline from a snapshot
    file or live from the cluster, and stores the result as a RepackRun.

    \b
    Exit codes: 0 success, 1 runtime error (cluster, snapshot file),
    2 usage or validation error, 3 not recommended (with --exit-code).
    """


commands.register(main)


def complete_main() -> None:
    """Entry point of `kubectl_complete-repack` (called by kubectl's own completion)."""
    sys.stdout.write(cobra_complete(main, sys.argv[1:]))


if __name__ == "__main__":  # pragma: no cover
    main()
