"""The `kubectl repack` commands, one module per command (or per small family of commands).

Every click command *defined* in a module of this package (`command`, `uninstall_command`, ...)
is registered by `register()`; adding a command is adding a module. Helper modules (options,
selectors, runspec) define no command and contribute nothing.

Every module here is imported to list the commands, for `--help` and for every TAB, so a module
imports at its top only click, `options` and other light modules; the planner, the error tree,
render, the schema (jsonschema), YAML and the kube layer (the `kubernetes` client) are imported by
the functions that use them (tests/unit/cli/test_startup.py keeps it so: the krew zipapp compiles
every module it imports from source, and those cost a second before the first line is printed).
"""
import importlib
import pkgutil

import click


def discover():
    """Every click command defined by a module of this package, sorted by command name."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for value in vars(module).values():
            if isinstance(value, click.Command) and getattr(value.callback, "__module__", None) == module.__name__:
                found[value.name] = value
    return [found[name] for name in sorted(found)]


def register(group: click.Group) -> None:
    """Add every discovered command to the `kubectl repack` group."""
    for cmd in discover():
        group.add_command(cmd)
