"""Errors of the plugin and webhook, extending the planner's hierarchy (one tree for all)."""
from planner.errors import DocumentError, RepackError, SnapshotError, SpecError, UnreadableInput


class ValidationError(SpecError):
    """A RepackRun failed local schema validation; `errors` holds one line per violation."""

    def __init__(self, errors):
        self.errors = list(errors)
        super().__init__("; ".join(self.errors))


class InvalidSnapshotFile(SnapshotError):
    """A snapshot file (not the live cluster) holds something the planner cannot read: the input
    is at fault, so it is a usage error (exit 2) like an invalid RepackRun."""


class ClusterAPIError(RepackError):
    """The Kubernetes API answered with an error (status kept in `status`)."""

    def __init__(self, message, status=None):
        self.status = status
        super().__init__(message)


class NotFound(ClusterAPIError):
    """404 from the API server."""


class Conflict(ClusterAPIError):
    """409 from the API server (resourceVersion changed, or object exists)."""


class Invalid(ClusterAPIError):
    """422 from the API server (the object is invalid, or a JSON patch's `test` op failed: it changed)."""


class TooManyRequests(ClusterAPIError):
    """429 from the API server (for evictions: a PodDisruptionBudget forbids it now)."""


__all__ = ["RepackError", "SnapshotError", "SpecError", "ValidationError", "DocumentError",
           "UnreadableInput", "InvalidSnapshotFile", "ClusterAPIError",
           "NotFound", "Conflict", "Invalid", "TooManyRequests"]
