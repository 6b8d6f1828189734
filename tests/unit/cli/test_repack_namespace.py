"""Where the product lives: one rule for every command. `--repack-namespace`, else
$REPACK_NAMESPACE, else repack-system, defined once (options.repack_namespace_option); install and
uninstall keep `--namespace` as an alias; `-n` is not the product's namespace anywhere (kubectl's -n
names the namespace of an object on the command line).

The install/uninstall cases run the installed `kubectl-repack` executable: client dry runs read no
cluster, so they show the namespace each command resolved without one."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import click
import pytest

from kubectl_repack.api.installed import NAMESPACE as DEFAULT_NAMESPACE
from kubectl_repack.api.installed import NAMESPACE_ENV
from kubectl_repack.cli import main

BIN = os.path.dirname(sys.executable)
# The commands that act on what install put in the cluster (its namespace, its Leases).
NEEDS_IT = {"install", "uninstall", "doctor", "apply"}


def _repack(*args, env=None):
    path = shutil.which("kubectl-repack", path=BIN)
    assert path, f"kubectl-repack is not installed next to {sys.executable}: pip install -e . installs it"
    base = {k: v for k, v in os.environ.items() if k != NAMESPACE_ENV}
    return subprocess.run([path, *args], capture_output=True, text=True, timeout=60, env={**base, **(env or {})})


def _installed_namespaces(out: str) -> set:
    return {line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("  namespace:")}


@pytest.mark.parametrize("args, env, expected", [
    ([], {}, DEFAULT_NAMESPACE),
    ([], {NAMESPACE_ENV: "team-a"}, "team-a"),
    (["--repack-namespace", "team-b"], {NAMESPACE_ENV: "team-a"}, "team-b"),   # the flag wins
    (["--namespace", "team-c"], {}, "team-c"),                                  # install's old spelling
], ids=["default", "env", "flag-over-env", "alias"])
def test_install_dry_run_follows_the_rule(args, env, expected):
    r = _repack("install", "--dry-run", *args, env=env)
    assert r.returncode == 0, r.stderr
    assert _installed_namespaces(r.stdout) == {expected}


@pytest.mark.parametrize("args, env, expected", [
    ([], {}, DEFAULT_NAMESPACE),
    ([], {NAMESPACE_ENV: "team-a"}, "team-a"),
    (["--repack-namespace", "team-b"], {NAMESPACE_ENV: "team-a"}, "team-b"),
    (["--namespace", "team-c"], {}, "team-c"),
], ids=["default", "env", "flag-over-env", "alias"])
def test_uninstall_dry_run_follows_the_rule(args, env, expected):
    r = _repack("uninstall", "--dry-run", *args, env=env)
    assert r.returncode == 0, r.stderr
    assert f"namespace/{expected} deleted only if install created it" in r.stdout


def test_a_bad_namespace_from_the_environment_is_a_usage_error():
    r = _repack("install", "--dry-run", env={NAMESPACE_ENV: "Team_A"})
    assert r.returncode == 2
    assert "--repack-namespace" in r.stderr and "Team_A" in r.stderr


def _namespace_options(command):
    return [p for p in command.params if isinstance(p, click.Option) and "--repack-namespace" in p.opts]


def test_every_command_that_needs_it_takes_the_one_definition():
    having = {name for name, cmd in main.commands.items() if _namespace_options(cmd)}
    assert having == NEEDS_IT
    shapes = set()
    for name in NEEDS_IT:
        (option,) = _namespace_options(main.commands[name])
        aliases = {"--repack-namespace", "--namespace"} if name in ("install", "uninstall") else {"--repack-namespace"}
        assert set(option.opts) == aliases, name
        shapes.add((option.name, option.envvar, option.default, option.type, option.help))
    assert len(shapes) == 1 and next(iter(shapes))[:3] == ("repack_namespace", NAMESPACE_ENV, DEFAULT_NAMESPACE)


@pytest.mark.parametrize("name", sorted(NEEDS_IT))
def test_dash_n_is_not_the_products_namespace(name):
    r = _repack(name, "-n", "team-a")   # refused before anything is read or sent
    assert r.returncode == 2
    if name == "apply":   # apply's -n is kubectl's: the namespace of its --for object (RELIEF-2)
        assert "the namespace of the --for object" in r.stderr and "--repack-namespace" in r.stderr
    else:
        assert "No such option '-n'" in r.stderr


def test_apply_takes_its_lease_and_checks_in_the_products_namespace(monkeypatch):
    """apply --local: the execute Lease, the preflight's webhook check and the records-seal key use the resolved namespace."""
    from click.testing import CliRunner

    from kubectl_repack.engine import execute_lease
    from kubectl_repack.errors import RepackError
    from kubectl_repack.kube import client, incluster, objects, preflight, runs

    seen = []

    class FakePreflight:
        def __init__(self, api, namespace=None, *args, **kwargs):
            seen.append(("preflight", namespace))

        def webhook(self):
            return preflight.Check("webhook", True, "present")

    def fake_lease(api, namespace=None, *args, **kwargs):
        seen.append(("lease", namespace))
        raise RepackError("stop here")

    monkeypatch.setattr(client, "connect", lambda *a, **kw: object())
    monkeypatch.setattr(preflight, "Preflight", FakePreflight)
    monkeypatch.setattr(objects, "LiveCluster", lambda api: object())
    monkeypatch.setattr(runs, "RunStore", lambda api: object())
    monkeypatch.setattr(execute_lease, "ExecuteLease", fake_lease)
    monkeypatch.setattr(incluster, "read_key", lambda api, namespace: seen.append(("seal-key", namespace)))
    for args, env, expected in (([], {}, DEFAULT_NAMESPACE), ([], {NAMESPACE_ENV: "team-a"}, "team-a"),
                                (["--repack-namespace", "team-b"], {NAMESPACE_ENV: "team-a"}, "team-b")):
        seen.clear()
        r = CliRunner().invoke(main, ["apply", "--local", "--resume", "run-1", *args], env={NAMESPACE_ENV: None, **env})
        assert r.exit_code == 1 and "stop here" in r.stderr, r.output
        assert seen == [("preflight", expected), ("seal-key", expected), ("lease", expected)]
