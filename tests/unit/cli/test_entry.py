"""The `kubectl repack` entry point itself: bare invocation, `version`, the command list, Ctrl-C."""
import signal
import subprocess
import sys

import pytest

from kubectl_repack import __version__
from tests.unit.cli.conftest import R, REPO, run

ENTRY = [sys.executable, "-c", "from kubectl_repack.cli import main; main()"]  # the console script's body


def test_no_arguments_prints_the_help_on_stdout_and_exits_0():
    r = run()
    assert r.exit_code == 0, r.output
    assert r.stderr == ""
    assert r.stdout.startswith("Usage: kubectl repack [OPTIONS] COMMAND [ARGS]...\n")
    assert r.stdout == run("--help").stdout


def test_command_summaries_are_whole_sentences():
    top = " ".join(run("--help").stdout.partition("\nCommands:\n")[2].split())
    assert top and "..." not in top
    assert "apply Execute a repack: re-plan on live state and move pods through the Eviction API." in top
    assert "install Install the RepackRun CRD, the placement webhook and its coordinator, and the RepackRun " \
           "controller." in top


def test_version_command_prints_what_version_flag_prints():
    r = run("version")
    assert r.exit_code == 0, r.output
    assert r.stdout == f"kubectl repack {__version__}\n"
    assert run("--version").stdout == r.stdout
    assert "  version " in run("--help").stdout


@pytest.fixture(scope="module")
def big_snapshot(tmp_path_factory):
    path = tmp_path_factory.mktemp("snap") / "big.json"
    subprocess.run([sys.executable, "-m", "bench.generate", "--nodes", "3000", "--seed", "1", "-o", str(path)],
                   cwd=REPO, check=True, timeout=120)
    return path.read_bytes()


def test_ctrl_c_during_plan_is_one_error_line_and_exit_130(big_snapshot):
    proc = subprocess.Popen(ENTRY + ["plan", "--snapshot", "-", "--resource", R], cwd=REPO,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Once the pipe has taken the whole snapshot (all but what the pipe buffers), the command is
    # reading it: parsing and planning it take seconds more, so the signal lands inside the command.
    proc.stdin.write(big_snapshot)
    proc.stdin.close()
    assert proc.poll() is None, "plan finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(timeout=60) == 130, err
    assert err.decode() == "error: interrupted\n"
    assert out == b""
