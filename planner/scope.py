"""Scope of a run (SCOPE-1..4): which PodGroups may be evicted and which nodes may be vacated.

Inside include or exclude, names and selector are a union; exclude beats include; an absent
include means everything. Scope never limits receivers (SCOPE-4).
"""
from dataclasses import dataclass
from typing import Optional

from .errors import SpecError
from .model import LabelSelector, Requirement
from .selectors import selector_matches


@dataclass(frozen=True)
class Selection:
    """One include or exclude: explicit names plus an optional label selector."""
    names: frozenset = frozenset()
    selector: Optional[LabelSelector] = None

    def matches(self, name, labels) -> bool:
        return name in self.names or (self.selector is not None and selector_matches(self.selector, labels))


@dataclass(frozen=True)
class Axis:
    include: Optional[Selection] = None
    exclude: Optional[Selection] = None

    def admits(self, name, labels) -> bool:
        if self.exclude is not None and self.exclude.matches(name, labels):
            return False
        return self.include is None or self.include.matches(name, labels)


def _selector(d, path):
    if d is None:
        return None
    if not isinstance(d, dict):
        raise SpecError(f"{path}: expected a label selector object")
    ml = d.get("matchLabels") or {}
    if not isinstance(ml, dict):
        raise SpecError(f"{path}.matchLabels: expected a map of strings")
    for k, v in ml.items():
        if not isinstance(v, str):
            raise SpecError(f"{path}.matchLabels.{k}: expected a string, got {type(v).__name__}")
    me = d.get("matchExpressions") or []
    if not isinstance(me, list):
        raise SpecError(f"{path}.matchExpressions: expected a list")
    exprs = []
    for i, e in enumerate(me):
        p = f"{path}.matchExpressions[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("key"), str) or "operator" not in e:
            raise SpecError(f"{p}: key and operator are required")
        op = e["operator"]
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise SpecError(f"{p}.operator: unknown operator {op!r}")
        values = e.get("values") or []
        if not isinstance(values, list) or any(not isinstance(v, str) for v in values):
            raise SpecError(f"{p}.values: expected a list of strings")
        # metav1 label selector validation: In/NotIn need values, Exists/DoesNotExist take none.
        if op in ("In", "NotIn") and not values:
            raise SpecError(f"{p}.values: must be specified when operator is {op}")
        if op in ("Exists", "DoesNotExist") and values:
            raise SpecError(f"{p}.values: may not be specified when operator is {op}")
        exprs.append(Requirement(e["key"], op, tuple(values)))
    return LabelSelector(tuple(sorted(ml.items())), tuple(exprs))


def parse_selector(d, path) -> Optional[LabelSelector]:
    """A metav1 LabelSelector dict (None when absent); SpecError naming `path` when malformed."""
    return _selector(d, path)


def _selection(d, path, qualified):
    if d is None:
        return None
    if not isinstance(d, dict):
        raise SpecError(f"{path}: expected an object with names and/or selector")
    names = d.get("names") or []
    if not isinstance(names, list):
        raise SpecError(f"{path}.names: expected a list")
    for i, n in enumerate(names):
        if not isinstance(n, str) or not n:
            raise SpecError(f"{path}.names[{i}]: expected a non-empty string")
        if qualified and (n.count("/") != 1 or n.startswith("/") or n.endswith("/")):
            raise SpecError(f"{path}.names[{i}]: expected namespace/name, got {n!r}")
    sel = _selector(d.get("selector"), f"{path}.selector")
    if not names and sel is None:
        return None if path.endswith("include") else Selection()
    return Selection(frozenset(names), sel)


def parse_axis(d, path, qualified=False) -> Axis:
    """One of scope.podGroups / scope.nodes; `qualified` names are namespace/name."""
    if d is None:
        return Axis()
    if not isinstance(d, dict):
        raise SpecError(f"{path}: expected an object with include/exclude")
    return Axis(_selection(d.get("include"), f"{path}.include", qualified),
                _selection(d.get("exclude"), f"{path}.exclude", qualified))


@dataclass(frozen=True)
class Scope:
    podgroups: Axis = Axis()
    nodes: Axis = Axis()

    @classmethod
    def from_spec(cls, spec_scope) -> "Scope":
        if spec_scope is None:
            return cls()
        if not isinstance(spec_scope, dict):
            raise SpecError("spec.scope: expected an object")
        return cls(parse_axis(spec_scope.get("podGroups"), "spec.scope.podGroups", qualified=True),
                   parse_axis(spec_scope.get("nodes"), "spec.scope.nodes"))

    def podgroup_in_scope(self, pg) -> bool:
        return self.podgroups.admits(pg.key, pg.labels)

    def node_in_scope(self, node) -> bool:
        return self.nodes.admits(node.name, node.labels)
