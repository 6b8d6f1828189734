"""`kubectl get -o name`: `kind.group/name` per object; and `items`, the objects of what a printer
is given (one object, a List, or a list of objects).
"""
from __future__ import annotations

from .errors import JSONPathError


def items(objects) -> list:
    """The objects of `objects`: a List's items, one object alone, or the list as it is."""
    if isinstance(objects, dict):
        listed = objects.get("items")
        return list(listed) if isinstance(listed, list) else [objects]
    return list(objects)


def name(obj: dict) -> str:
    """`kubectl get -o name` of one object, without the newline: `kind.group/name`
    (`repackrun.repack.volcano.sh/nightly`), `kind/name` for the core group."""
    api_version = obj.get("apiVersion") or ""
    kind = obj.get("kind") or ""
    if api_version.count("/") > 1:
        api_version, kind = "", ""     # not a GroupVersion: kubectl sees no type at all
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    version = api_version.split("/", 1)[-1] if api_version else ""
    obj_name = (obj.get("metadata") or {}).get("name") or "<unknown>"
    if not (group or version or kind):
        raise JSONPathError("missing apiVersion or kind; try GetObjectKind().SetGroupVersionKind() "
                            "if you know the type")
    if not kind:
        raise JSONPathError(f"missing kind for resource with name {obj_name}")
    if not group:
        return f"{kind.lower()}/{obj_name}"
    return f"{kind.lower()}.{group}/{obj_name}"


def names(objects) -> str:
    """What `-o name` prints for an object, a List or a list of objects: one line per object."""
    if isinstance(objects, dict) and not isinstance(objects.get("items"), list):
        return name(objects) + "\n"
    return "".join(name(o) + "\n" for o in items(objects))
