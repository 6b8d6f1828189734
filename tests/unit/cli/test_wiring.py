"""How the CLI is put together: commands found one per module, offline runs never load the client."""
import subprocess
import sys

import click

from kubectl_repack import commands
from kubectl_repack.cli import main
from tests.unit.cli.conftest import GUARDED, REPO, SEED3


def test_every_command_module_is_registered():
    names = [c.name for c in commands.discover()]
    assert names == sorted(names)
    assert {"plan", "snapshot", "status"} <= set(names)
    assert set(main.commands) == set(names)


def test_a_new_command_module_is_all_it_takes(tmp_path, monkeypatch):
    (tmp_path / "hello.py").write_text(
        "import click\nfrom kubectl_repack.commands.plan import command as imported\n"
        "@click.command('hello')\ndef command():\n    click.echo('hi')\n"
        "@click.command('goodbye')\ndef goodbye_command():\n    click.echo('bye')\n")
    monkeypatch.setattr(commands, "__path__", list(commands.__path__) + [str(tmp_path)])
    monkeypatch.syspath_prepend(str(tmp_path))
    import importlib.util
    spec = importlib.util.spec_from_file_location("kubectl_repack.commands.hello", tmp_path / "hello.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "kubectl_repack.commands.hello", module)
    group = click.Group("g")
    commands.register(group)
    assert {"hello", "goodbye", "plan"} <= set(group.commands)
    assert group.commands["plan"].callback.__module__ == "kubectl_repack.commands.plan"


def test_shared_flags_are_the_same_objects_everywhere():
    def flags(cmd):
        return {p.name: (p.opts, p.help) for p in cmd.params if p.name in ("kubeconfig", "context")}
    expected = flags(main)
    assert set(expected) == {"kubeconfig", "context"}
    commands = []
    for cmd in main.commands.values():   # a group's (policy's) flags are its subcommands'
        commands += list(cmd.commands.values()) if isinstance(cmd, click.Group) else [cmd]
    for cmd in commands:
        if cmd.name in ("completion", "__complete", "version"):  # never reach a cluster: no cluster flags
            assert flags(cmd) == {}, cmd.name
            continue
        assert flags(cmd) == expected, cmd.name


def test_offline_plan_never_imports_the_kubernetes_client():
    code = ("import sys\nfrom kubectl_repack.cli import main\n"
            "try:\n    main(['plan', '--snapshot', sys.argv[1], '-f', sys.argv[2]])\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print('kubernetes' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code, SEED3, GUARDED], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False"
