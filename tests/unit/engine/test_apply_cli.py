"""`kubectl repack apply` validates locally before contacting anything (exit 2 with the field)."""
from __future__ import annotations

import os

from click.testing import CliRunner

from kubectl_repack.cli import main
from tests.harness.controlplane import REPO_ROOT

GUARDED = os.path.join(REPO_ROOT, "examples", "guarded-dryrun.yaml")
NOWHERE = ["--kubeconfig", "/nonexistent/kubeconfig"]


def run(*args):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_needs_a_file_or_resume():
    r = run("apply", *NOWHERE)
    assert r.exit_code == 2 and "give either -f RUN.yaml or --resume NAME" in r.output
    r = run("apply", "-f", GUARDED, "--resume", "x", *NOWHERE)
    assert r.exit_code == 2


def test_a_dryrun_file_needs_mode_execute():
    r = run("apply", "-f", GUARDED, *NOWHERE)
    assert r.exit_code == 2
    assert "spec.mode: 'DryRun'" in r.stderr and "--mode Execute" in r.stderr


def test_mode_execute_passes_validation_and_then_needs_the_cluster():
    r = run("apply", "-f", GUARDED, "--mode", "Execute", "--name", "x-exec", *NOWHERE)
    assert r.exit_code == 1                      # validation passed; the kubeconfig is missing
    assert "kubeconfig /nonexistent/kubeconfig: no such file" in r.stderr


def test_bad_durations_are_usage_errors():
    r = run("apply", "-f", GUARDED, "--timeout", "soon", *NOWHERE)
    assert r.exit_code == 2 and "is not a duration" in r.output


def test_help_documents_exit_codes_and_the_cooldown_setting():
    r = run("apply", "--help")
    assert r.exit_code == 0
    for text in ("4  the run is not finished: Pending", "5  the run ended Failed", "repack.volcano.sh/execute-cooldown", "--local",
                 "--resume NAME", "--no-wait"):
        assert text in r.output


def test_progress_line_on_a_terminal(capsys):
    from kubectl_repack.commands.apply import _Reporter
    from kubectl_repack.engine.executor import Progress
    line = _Reporter(quiet=False, tty=True)
    line.progress(Progress(evicted=1, total=2, bound=0))
    line.progress(Progress(evicted=2, total=2, bound=1, rejected=0))
    line.done()
    err = capsys.readouterr().err
    assert "\revictions 1/2, replacements bound 0/1, elapsed 0m00s" in err
    assert "\revictions 2/2, replacements bound 1/2, elapsed 0m00s" in err and err.endswith("\n")
    quiet = _Reporter(quiet=True, tty=True)
    quiet.progress(Progress(evicted=1, total=2))
    quiet.note("not shown with -o yaml|json")
    quiet.done()
    assert capsys.readouterr().err == ""
