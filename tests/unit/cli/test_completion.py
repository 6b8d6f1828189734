"""Shell completion through the real entry points: the `kubectl_complete-repack` executable that
kubectl runs for `kubectl repack <TAB>` (cobra's plugin protocol), the same protocol on the plugin
binary (`kubectl-repack __complete`, for krew), click's own bash protocol under the variable name
kubectl-repack's scripts use, and `completion SHELL` scripts."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from kubectl_repack.cli import main
from kubectl_repack.commands.completion import COMPLETE_VAR, cobra_complete

BIN = os.path.dirname(sys.executable)


def _lines(text):
    return text.splitlines()


@pytest.mark.parametrize("words, expected, directive", [
    (["pl"], ["plan\tPlan a repack (DryRun): fragmentation..."], ":4"),
    (["plan", "-o", ""], ["yaml", "json", "wide", "name", "jsonpath=", "jsonpath-as-json=", "custom-columns="], ":6"),
    (["status", "-o", "y"], ["yaml"], ":4"),
    (["status", "-o", "j"], ["json", "jsonpath=", "jsonpath-as-json="], ":6"),
    (["snapshot", "--format", "y"], ["yaml"], ":4"),
    (["completion", ""], ["bash", "zsh", "fish"], ":4"),
    (["plan", "--snapshot", ""], [], ":0"),        # a file: the shell completes file names
    (["plan", "-f", "ex"], [], ":0"),              # a run file ('-' = stdin) is a file too
    (["apply", "-f", ""], [], ":0"),
    (["snapshot", "-o", ""], [], ":0"),            # where to write the snapshot
    (["install", "--cert-dir", ""], [], ":16"),    # a directory: the shell completes directories
], ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_cobra_protocol(words, expected, directive):
    out = _lines(cobra_complete(main, words))
    assert out[-1] == directive
    assert out[:-1] == expected


def _path_options():
    """Every option of every command that takes a path: a click.Path, or a FILE/DIR/.yaml metavar."""
    import click

    from kubectl_repack.cli import main

    for name, command in sorted(main.commands.items()):
        for option in command.params:
            if isinstance(option, click.Option) and not option.is_flag and (
                    isinstance(option.type, click.Path)
                    or re.search(r"FILE|DIR|\.ya?ml", option.metavar or "")):
                long = max(option.opts, key=len)
                yield pytest.param(name, long, id=f"{name} {long}")


@pytest.mark.parametrize("command, option", list(_path_options()))
def test_every_option_that_takes_a_path_completes_file_names(command, option):
    assert _lines(cobra_complete(main, [command, option, ""])) in ([":0"], [":16"])


def test_flags_complete_with_their_help():
    out = _lines(cobra_complete(main, ["plan", "--max"]))
    assert out == ["--max-podgroups\tMost PodGroups one run may affect (maxPerRun.podGroups).",
                   "--max-cards\tMost units of the resource one run may move (maxPerRun.resources[RESOURCE]).",
                   ":4"]


def test_hidden_commands_are_not_offered():
    names = [line.split("\t")[0] for line in _lines(cobra_complete(main, [""]))[:-1]]
    assert "__complete" not in names and {"plan", "apply", "status", "completion"} <= set(names)


def _run(program, *args, env=None):
    path = shutil.which(program, path=BIN)
    assert path, f"{program} is not installed next to {sys.executable}: pip install -e . installs it"
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_kubectl_complete_repack_executable_speaks_kubectls_protocol():
    r = _run("kubectl_complete-repack", "plan", "-o", "w")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "wide\n:4\n"


@pytest.mark.parametrize("words", [["plan", "-f", "ex"], ["apply", "-f", ""], ["snapshot", "-o", ""],
                                   ["plan", "--snapshot", "ex"]], ids=lambda words: " ".join(words))
def test_kubectl_complete_repack_leaves_paths_to_the_shell(words):
    r = _run("kubectl_complete-repack", *words)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ":0\n"   # no candidates, directive 0: the shell completes file names


def test_the_plugin_binary_speaks_it_too_for_krew():
    r = _run("kubectl-repack", "__complete", "plan", "-o", "w")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "wide\n:4\n"


def test_click_bash_protocol_uses_a_variable_a_shell_can_set():
    assert COMPLETE_VAR == "_KUBECTL_REPACK_COMPLETE" and " " not in COMPLETE_VAR
    r = _run("kubectl-repack", env={COMPLETE_VAR: "bash_complete", "COMP_WORDS": "kubectl-repack sta",
                                    "COMP_CWORD": "1"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "plain,status"


@pytest.mark.parametrize("shell, marker", [
    ("bash", "complete -o nosort -F _kubectl_repack_completion kubectl-repack"),
    ("zsh", "#compdef kubectl-repack"),
    ("fish", "complete --no-files --command kubectl-repack"),
])
def test_completion_scripts(shell, marker):
    r = _run("kubectl-repack", "completion", shell)
    assert r.returncode == 0, r.stderr
    assert marker in r.stdout and COMPLETE_VAR in r.stdout
