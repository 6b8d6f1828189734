"""Label selectors and node selector terms, matched with Kubernetes' exact semantics."""
import re

from .model import LabelSelector, NodeSelectorTerm


def requirement_matches(req, labels) -> bool:
    """A label-selector requirement (In/NotIn/Exists/DoesNotExist) against a label map."""
    op = req.operator
    if op == "In":
        return req.key in labels and labels[req.key] in req.values
    if op == "NotIn":
        return req.key not in labels or labels[req.key] not in req.values
    if op == "Exists":
        return req.key in labels
    if op == "DoesNotExist":
        return req.key not in labels
    return False


def selector_matches(sel: LabelSelector, labels) -> bool:
    """metav1.LabelSelector semantics: None matches nothing, an empty selector matches everything."""
    if sel is None:
        return False
    for k, v in sel.match_labels:
        if labels.get(k) != v:
            return False
    return all(requirement_matches(r, labels) for r in sel.match_expressions)


_INT64 = re.compile(r"[+-]?[0-9]+")


def parse_int64(text):
    """Go's strconv.ParseInt(text, 10, 64): ASCII digits, optional sign, no spaces or underscores."""
    if not isinstance(text, str) or not _INT64.fullmatch(text):
        return None
    v = int(text)
    return v if -2 ** 63 <= v < 2 ** 63 else None


def _node_requirement(req, labels) -> bool:
    """A NodeSelectorRequirement; a requirement upstream cannot parse makes its term match nothing."""
    op = req.operator
    if op in ("Gt", "Lt"):
        if len(req.values) != 1:
            return False
        want = parse_int64(req.values[0])
        if want is None or req.key not in labels:
            return False
        have = parse_int64(labels[req.key])
        if have is None:
            return False
        return have > want if op == "Gt" else have < want
    if op in ("In", "NotIn") and not req.values:
        return False
    if op in ("Exists", "DoesNotExist") and req.values:
        return False
    return requirement_matches(req, labels)


def _field_parses(req) -> bool:
    """Upstream's field selector takes only In/NotIn with exactly one value; anything else is an error."""
    return req.operator in ("In", "NotIn") and len(req.values) == 1


def _field_requirement(req, fields) -> bool:
    have = fields.get(req.key, "")      # a field the node lacks reads as "", as in fields.Set
    return (have == req.values[0]) == (req.operator == "In")


def term_matches(term: NodeSelectorTerm, node, match_fields=True) -> bool:
    """A node selector term: all expressions AND all fields; an empty term matches no node.

    A requirement upstream cannot parse makes the whole term match nothing. `match_fields=False` is
    how VolumeBinding checks a PV: upstream builds a node with labels only, and matchFields are
    skipped when the node has no fields.
    """
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(_field_parses(r) for r in term.match_fields):
        return False
    if not all(_node_requirement(r, node.labels) for r in term.match_expressions):
        return False
    if not match_fields:
        return True
    fields = {"metadata.name": node.name}
    return all(_field_requirement(r, fields) for r in term.match_fields)


def terms_match(terms, node, match_fields=True) -> bool:
    """Required node affinity: OR of terms. None means unrestricted; an empty list matches nothing."""
    if terms is None:
        return True
    return any(term_matches(t, node, match_fields) for t in terms)


def describe_selector(sel: LabelSelector) -> str:
    """Render a selector the way kubectl does (`a=b,c in (x,y)`)."""
    if sel is None:
        return "<none>"
    parts = [f"{k}={v}" for k, v in sel.match_labels]
    for r in sel.match_expressions:
        if r.operator in ("In", "NotIn"):
            parts.append(f"{r.key} {r.operator.lower()} ({','.join(r.values)})")
        elif r.operator == "Exists":
            parts.append(r.key)
        else:
            parts.append(f"!{r.key}")
    return ",".join(parts) or "<all>"
