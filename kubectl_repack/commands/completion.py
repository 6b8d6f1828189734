"""Shell completion: `kubectl repack completion bash|zsh|fish`, and the protocol kubectl speaks to
a plugin's completion helper, so that `kubectl repack <TAB>` completes commands, flags and values.

kubectl (1.26+) completes a plugin by running an executable named `kubectl_complete-repack` from
PATH with the words typed so far and the word being completed as arguments; it reads one
candidate per line (`value<TAB>description`) and a last line `:<directive>` (cobra's
ShellCompDirective). pip installs that executable (setup.py); krew links one binary only, so its
caveats say how to make one (`kubectl-repack __complete "$@"`); the executable's entry point is
kubectl_repack.cli.complete_main. Both run `cobra_complete` over
click's own completion of this command tree, the same one `completion SHELL` scripts use.
"""
from __future__ import annotations

import click

PROGRAM = "kubectl-repack"
# Set explicitly: click would derive `_KUBECTL REPACK_COMPLETE` from the program name
# `kubectl repack` (with a space), a variable no shell can set.
COMPLETE_VAR = "_KUBECTL_REPACK_COMPLETE"
SHELLS = ("bash", "zsh", "fish")
# cobra's ShellCompDirective values kubectl understands.
DIRECTIVE_DEFAULT, DIRECTIVE_NO_SPACE, DIRECTIVE_NO_FILE, DIRECTIVE_DIRS = 0, 2, 4, 16


def _root() -> click.Command:
    """The `kubectl repack` group of the command being run (this module does not import the CLI,
    which lists this module's commands)."""
    return click.get_current_context().find_root().command


def cobra_complete(root: click.Command, words: list[str]) -> str:
    """Candidates for the last of `words` (the word being completed, possibly "") in the command
    tree `root`, in kubectl's plugin completion format."""
    from click.shell_completion import ShellComplete

    args, incomplete = list(words[:-1]), words[-1] if words else ""
    items = ShellComplete(root, {}, PROGRAM, COMPLETE_VAR).get_completions(args, incomplete)
    kinds = {item.type for item in items}
    if "file" in kinds:
        return f":{DIRECTIVE_DEFAULT}\n"  # let the shell complete file names
    if "dir" in kinds:
        return f":{DIRECTIVE_DIRS}\n"
    lines = [f"{item.value}\t{item.help}" if item.help else str(item.value) for item in items]
    directive = DIRECTIVE_NO_FILE
    if any(str(item.value).endswith("=") for item in items):  # `-o jsonpath=`: the template follows
        directive |= DIRECTIVE_NO_SPACE
    return "".join(line.replace("\n", " ") + "\n" for line in lines) + f":{directive}\n"


@click.command("completion", epilog="""\b
`kubectl repack <TAB>` goes through kubectl's own completion (`source <(kubectl completion bash)`),
which asks the executable kubectl_complete-repack on PATH: pip and pipx install it. With krew:
  printf '#!/bin/sh\\nexec kubectl-repack __complete "$@"\\n' > ~/.local/bin/kubectl_complete-repack
  chmod +x ~/.local/bin/kubectl_complete-repack
""")
@click.argument("shell", type=click.Choice(SHELLS))
def command(shell):
    """Print the completion script of `kubectl-repack` for SHELL.

    \b
    Examples:
      source <(kubectl-repack completion bash)
      kubectl-repack completion zsh > "${fpath[1]}/_kubectl-repack"
      kubectl-repack completion fish > ~/.config/fish/completions/kubectl-repack.fish
    """
    from click.shell_completion import get_completion_class

    click.echo(get_completion_class(shell)(_root(), {}, PROGRAM, COMPLETE_VAR).source())


@click.command("__complete", hidden=True, add_help_option=False,
               context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.argument("words", nargs=-1, type=click.UNPROCESSED)
def complete_command(words):
    """kubectl's plugin completion protocol on the plugin binary itself (for krew installs)."""
    click.echo(cobra_complete(_root(), list(words)), nl=False)


__all__ = ["PROGRAM", "COMPLETE_VAR", "cobra_complete"]
