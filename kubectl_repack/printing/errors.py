"""The error every printing dialect raises: what kubectl prints after "error: " for a template it
refuses or that fails on an object."""
from __future__ import annotations


class JSONPathError(ValueError):
    """A template kubectl would refuse to parse, or that fails on the given object.

    `reason` is client-go's own message (e.g. "unclosed action", "array index out of bounds:
    index 5, length 2"); str(error) is the line kubectl prints after "error: "."""

    def __init__(self, message: str, reason: str | None = None, template: str | None = None):
        super().__init__(message)
        self.reason = reason if reason is not None else message
        self.template = template
