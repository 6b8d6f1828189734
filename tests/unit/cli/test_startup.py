"""Start-up: `--help` and completion import only click and the command modules, never the
`kubernetes` client nor the other heavy modules (the planner, the error tree that loads it, render,
the schema's jsonschema, YAML). The krew zipapp compiles every module it imports from source on each
run, so each of them is paid on every TAB; bench/startup.py measures the time, no test here does."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.unit.cli.conftest import REPO

HEAVY = ("kubernetes", "urllib3", "jsonschema", "yaml", "planner", "kubectl_repack.errors", "kubectl_repack.render",
         "kubectl_repack.schema", "kubectl_repack.kube", "kubectl_repack.printing", "kubectl_repack.api.run")

CODE = """
import json, sys
from kubectl_repack.cli import main
try:
    main(json.loads(sys.argv[1]))
except SystemExit as e:
    assert e.code in (0, None), e.code
print(json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
"""


@pytest.mark.parametrize("argv", [
    ["--help"], ["plan", "--help"], ["apply", "--help"], ["install", "--help"], ["version"],
    ["__complete", ""], ["__complete", "plan", "-f", "ex"], ["__complete", "plan", "--"],
    ["__complete", "status", "-o", "j"], ["completion", "bash"],
], ids=" ".join)
def test_help_and_completion_import_nothing_heavy(argv):
    done = subprocess.run([sys.executable, "-c", CODE, json.dumps(argv), json.dumps(HEAVY)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    imported = json.loads(done.stdout.splitlines()[-1])
    assert imported == [], (f"{' '.join(argv)} imported {imported}: a command module imports them at its top; "
                            "import them in the function that uses them (kubectl_repack/commands/__init__.py)")


def test_the_mode_names_the_flags_spell_are_the_run_apis():
    from kubectl_repack.api import run
    from kubectl_repack.commands import options

    assert (options.MODE_DRY_RUN, options.MODE_EXECUTE) == (run.MODE_DRY_RUN, run.MODE_EXECUTE)
