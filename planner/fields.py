"""Typed readers of Kubernetes JSON fields for `planner.load`: each reads one field of an object,
checks its type (and range, or allowed values) and, when it is wrong, raises SnapshotError naming
the object (`Ctx`) and the full path of the field, as the API server's validation would.
"""
from types import MappingProxyType

from .errors import SnapshotError
from .model import EMPTY, LabelSelector, NodeSelectorTerm, Requirement, controller_of
from .quantity import parse_quantity_cached, scaled


class Ctx:
    """Names the object being read, so every error says where it is. The name is worked out only
    when an error is raised: a snapshot of 10,000 nodes makes ~70,000 of these and fails on none.
    `kind` is the object's kind when it comes from elsewhere (an item of a typed List)."""

    __slots__ = ("obj", "index", "given_kind")

    def __init__(self, obj, index, kind=None):
        self.obj = obj
        self.index = index
        self.given_kind = kind

    @property
    def kind(self):
        kind = self.given_kind
        if kind is None:
            kind = self.obj.get("kind") if isinstance(self.obj, dict) else None
        return kind if isinstance(kind, str) and kind else "?"

    @property
    def label(self):
        obj, index, kind = self.obj, self.index, self.kind
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        ns, name = meta.get("namespace"), meta.get("name")
        ns = ns if isinstance(ns, str) else ""
        named = isinstance(name, str) and name
        name = name if named else f"#{index}"
        if kind == "?":   # no kind (a values file, a stray mapping): its place in the input names it
            return f"item #{index}" + (f" ({ns + '/' if ns else ''}{name})" if named else "")
        return f"{kind} {ns + '/' if ns else ''}{name}"

    def fail(self, path, msg):
        raise SnapshotError(f"{self.label}: {path}: {msg}")


def read_field(ctx, obj, path, typ, default=None, required=False, at=""):
    """obj[path] checked for type; `at` is where obj sits in the object, so errors give the full path."""
    cur = obj
    full = at + path
    walked = at.rstrip(".")
    for part in path.split("."):
        if not isinstance(cur, dict):
            ctx.fail(walked, f"expected an object, got {type(cur).__name__}")
        walked = f"{walked}.{part}" if walked else part
        if part not in cur or cur[part] is None:
            if required:
                ctx.fail(full, "required field is missing")
            return default
        cur = cur[part]
    if typ is not None and not isinstance(cur, typ) or (typ is int and isinstance(cur, bool)):
        ctx.fail(full, f"expected {typ.__name__ if isinstance(typ, type) else typ[0].__name__}, got {type(cur).__name__}")
    return cur


_INT32 = (-2 ** 31, 2 ** 31 - 1)


def read_int(ctx, obj, path, default=None, *, at="", low=_INT32[0], high=_INT32[1]):
    """An integer field (int32 unless told), refused outside [low, high] as the API server would."""
    value = read_field(ctx, obj, path, int, default, at=at)
    if value is not None and not low <= value <= high:
        ctx.fail(at + path, f"{value} is out of range: must be between {low} and {high}")
    return value


def read_str(ctx, obj, path, default="", *, at="", choices=None):
    """A string field; with `choices`, one of them (an empty or missing value gives `default`)."""
    value = read_field(ctx, obj, path, str, default, at=at) or default
    if choices is not None and value not in choices:
        ctx.fail(at + path, f"unsupported value {value!r}: supported values: "
                            + ", ".join(repr(c) for c in choices))
    return value


def read_list(ctx, obj, path, at=""):
    return read_field(ctx, obj, path, list, [], at=at)


def read_strings(ctx, obj, path, at=""):
    values = read_list(ctx, obj, path, at=at)
    if any(not isinstance(v, str) for v in values):
        ctx.fail(at + path, "expected a list of strings")
    return tuple(values)


def read_objects(ctx, items, path, what="an object"):
    """(path of item, item) for a list of objects; anything else in the list is refused."""
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            ctx.fail(f"{path}[{i}]", f"expected {what}, got {type(item).__name__}")
        yield f"{path}[{i}]", item


def read_strmap(ctx, obj, path):
    m = read_field(ctx, obj, path, dict, {})
    for k, v in m.items():
        if not isinstance(k, str):
            ctx.fail(f"{path}", f"key {k!r}: expected string, got {type(k).__name__}")
        if not isinstance(v, str):
            ctx.fail(f"{path}.{k}", f"expected string, got {type(v).__name__}")
    return MappingProxyType(dict(m)) if m else EMPTY


def _quantities(ctx, m, path, amount):
    """A ResourceList, each quantity read with `amount(resource, quantity)`; negatives are refused."""
    out = {}
    if not isinstance(m, dict):
        ctx.fail(path, "expected an object of quantities")
    for res, q in m.items():
        if not isinstance(res, str):
            ctx.fail(path, f"resource name {res!r}: expected string")
        try:
            out[res] = amount(res, q)
        except ValueError as e:
            ctx.fail(f"{path}.{res}", str(e))
        if out[res] < 0:
            ctx.fail(f"{path}.{res}", f"{q!r} is negative: must be greater than or equal to 0")
    return out


def read_resources(ctx, m, path):
    """A ResourceList in the planner's units (`quantity.scaled`)."""
    return _quantities(ctx, m, path, scaled)


def read_requirements(ctx, items, path):
    if not isinstance(items, list):
        ctx.fail(path, "expected a list")
    out = []
    for i, r in enumerate(items):
        p = f"{path}[{i}]"
        if not isinstance(r, dict):
            ctx.fail(p, "expected an object")
        key = read_field(ctx, r, "key", str, required=True, at=f"{p}.")
        op = read_field(ctx, r, "operator", str, required=True, at=f"{p}.")
        vals = read_field(ctx, r, "values", list, [], at=f"{p}.")
        if any(not isinstance(v, str) for v in vals):
            ctx.fail(f"{p}.values", "expected a list of strings")
        out.append(Requirement(key, op, tuple(vals)))
    return tuple(out)


def read_selector(ctx, sel, path):
    if sel is None:
        return None
    if not isinstance(sel, dict):
        ctx.fail(path, "expected a label selector object")
    ml = sel.get("matchLabels") or {}
    if not isinstance(ml, dict) or any(not isinstance(v, str) or not isinstance(k, str) for k, v in ml.items()):
        ctx.fail(f"{path}.matchLabels", "expected a map of strings")
    me = read_requirements(ctx, sel.get("matchExpressions") or [], f"{path}.matchExpressions")
    for i, r in enumerate(me):
        if r.operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            ctx.fail(f"{path}.matchExpressions[{i}].operator", f"unknown operator {r.operator!r}")
    return LabelSelector(tuple(sorted(ml.items())), me)


def read_node_terms(ctx, terms, path):
    if not isinstance(terms, list):
        ctx.fail(path, "expected a list of node selector terms")
    out = []
    for i, t in enumerate(terms):
        p = f"{path}[{i}]"
        if not isinstance(t, dict):
            ctx.fail(p, "expected an object")
        out.append(NodeSelectorTerm(read_requirements(ctx, t.get("matchExpressions") or [], f"{p}.matchExpressions"),
                                    read_requirements(ctx, t.get("matchFields") or [], f"{p}.matchFields")))
    return tuple(out)


def read_owner(ctx, meta):
    refs = meta.get("ownerReferences") or []
    if not isinstance(refs, list):
        ctx.fail("metadata.ownerReferences", "expected a list")
    for i, r in enumerate(refs):
        p = f"metadata.ownerReferences[{i}]"
        if not isinstance(r, dict) or not r.get("kind") or not r.get("name"):
            ctx.fail(p, "kind and name are required")
        for field_name in ("apiVersion", "kind", "name"):
            read_str(ctx, r, field_name, at=f"{p}.")
        read_field(ctx, r, "controller", bool, False, at=f"{p}.")
    return controller_of(refs)


def _exact_amount(resource, quantity):
    return parse_quantity_cached(quantity)


def read_exact(ctx, m, path):
    """A ResourceList as exact amounts (summed before scaling, as PodRequests sums Quantities)."""
    return _quantities(ctx, m, path, _exact_amount)
