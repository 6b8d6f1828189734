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
    exprs = []
    for i, e in enumerate(d.get("matchExpressions") or []):
        if not isinstance(e, dict) or "key" not in e or "operator" not in e:
            raise SpecError(f"{path}.matchExpressions[{i}]: key and operator are required")
        if e["operator"] not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise SpecError(f"{path}.matchExpressions[{i}].operator: unknown operator {e['operator']!r}")
        exprs.append(Requirement(e["key"], e["operator"], tuple(e.get("values") or ())))
    return LabelSelector(tuple(sorted((str(k), str(v)) for k, v in ml.items())), tuple(exprs))


def _selection(d, path):
    if d is None:
        return None
    if not isinstance(d, dict):
        raise SpecError(f"{path}: expected an object with names and/or selector")
    names = d.get("names") or []
    if not isinstance(names, list):
        raise SpecError(f"{path}.names: expected a list")
    sel = _selector(d.get("selector"), f"{path}.selector")
    if not names and sel is None:
        return None if path.endswith("include") else Selection()
    return Selection(frozenset(names), sel)


def parse_axis(d, path) -> Axis:
    if d is None:
        return Axis()
    if not isinstance(d, dict):
        raise SpecError(f"{path}: expected an object with include/exclude")
    return Axis(_selection(d.get("include"), f"{path}.include"), _selection(d.get("exclude"), f"{path}.exclude"))


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
        return cls(parse_axis(spec_scope.get("podGroups"), "spec.scope.podGroups"),
                   parse_axis(spec_scope.get("nodes"), "spec.scope.nodes"))

    def podgroup_in_scope(self, pg) -> bool:
        return self.podgroups.admits(pg.key, pg.labels)

    def node_in_scope(self, node) -> bool:
        return self.nodes.admits(node.name, node.labels)
