"""The root of the project's one exception hierarchy.

The planner is pure, so the base classes live here and the CLI and webhook extend them
(`kubectl_repack.errors`). Every message names the object and field at fault.
"""


class RepackError(Exception):
    """Base of every error kubectl-repack raises on purpose."""


class SnapshotError(RepackError):
    """A Kubernetes object in the input cannot be understood (names the object and field)."""


class SpecError(RepackError):
    """A RepackRun spec the planner cannot act on (names the field)."""


class DocumentError(RepackError):
    """Input text that is not a well-formed, bounded YAML or JSON document (names the source)."""


class UnreadableInput(RepackError):
    """An input file that cannot be opened or read at all (missing, no permission)."""
