"""Read-only views of Kubernetes objects as the API returns them (dicts), pure.

Wire data is read without trusting its shape: `.meta`, `.spec` and `.status` are the object's
mappings, or empty ones when a field is absent or not an object, so callers stop writing
`(obj.get("status") or {}).get(...)` at every stop (kopf's `Body.meta/.spec/.status` is the model).
A view never copies and never writes: status writers still edit the dicts they read
(read-modify-write keeps fields this code does not know about). `run.RunView` adds what a RepackRun
says (mode, phase, its relocation records parsed once).
"""
from __future__ import annotations

from typing import Any, Mapping

def as_map(value: Any) -> Mapping[str, Any]:
    """`value` if it is a mapping, else an empty one: wire data read without trusting its shape."""
    return value if isinstance(value, Mapping) else {}


class ObjectView:
    """One Kubernetes object (any kind) read through typed accessors; `obj` is the dict itself."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj: Mapping[str, Any] = as_map(obj)

    @classmethod
    def of(cls, obj: Any):
        """`obj` if it already is a view of this class, else a new view of it."""
        return obj if isinstance(obj, cls) else cls(obj)

    @property
    def meta(self) -> Mapping[str, Any]:
        """metadata ({} when absent)."""
        return as_map(self.obj.get("metadata"))

    @property
    def spec(self) -> Mapping[str, Any]:
        """spec ({} when absent)."""
        return as_map(self.obj.get("spec"))

    @property
    def status(self) -> Mapping[str, Any]:
        """status ({} when absent)."""
        return as_map(self.obj.get("status"))

    @property
    def name(self) -> str:
        """metadata.name ('' when absent)."""
        return str(self.meta.get("name") or "")

    @property
    def namespace(self) -> str:
        """metadata.namespace ('' when absent)."""
        return str(self.meta.get("namespace") or "")

    @property
    def uid(self) -> str:
        """metadata.uid ('' when absent)."""
        return str(self.meta.get("uid") or "")

    @property
    def labels(self) -> Mapping[str, Any]:
        """metadata.labels ({} when absent)."""
        return as_map(self.meta.get("labels"))

    @property
    def annotations(self) -> Mapping[str, Any]:
        """metadata.annotations ({} when absent)."""
        return as_map(self.meta.get("annotations"))

    @property
    def deleting(self) -> bool:
        """metadata.deletionTimestamp is set."""
        return bool(self.meta.get("deletionTimestamp"))
