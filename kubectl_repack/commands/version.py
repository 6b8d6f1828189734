"""`kubectl repack version`: the plugin's version, as `kubectl repack --version` prints it (kubectl
users type `kubectl version`, not a flag)."""
from __future__ import annotations

import click

from kubectl_repack import __version__


@click.command("version")
def command():
    """Print the version of kubectl-repack."""
    click.echo(f"{click.get_current_context().find_root().info_name} {__version__}")
