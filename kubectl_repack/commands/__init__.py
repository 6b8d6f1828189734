"""The `kubectl repack` commands, one per module.

A module here that defines a click command named `command` is registered by `register()`; adding
a command (e.g. `apply`) is adding one module. Helper modules (options, selectors, runspec) define
no `command` and are skipped.
"""
import importlib
import pkgutil

import click


def discover():
    """Every `command` defined by a module of this package, sorted by command name."""
    found = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        cmd = getattr(module, "command", None)
        if isinstance(cmd, click.Command):
            found.append(cmd)
    return sorted(found, key=lambda c: c.name)


def register(group: click.Group) -> None:
    """Add every discovered command to the `kubectl repack` group."""
    for cmd in discover():
        group.add_command(cmd)
