"""Label selectors and node selector terms, matched with Kubernetes' exact semantics."""
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


def _node_requirement(req, labels) -> bool:
    op = req.operator
    if op in ("Gt", "Lt"):
        if req.key not in labels or len(req.values) != 1:
            return False
        try:
            have, want = int(labels[req.key]), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    if op in ("In", "NotIn") and not req.values:
        return False
    return requirement_matches(req, labels)


def term_matches(term: NodeSelectorTerm, node) -> bool:
    """A node selector term: all expressions AND all fields; an empty term matches no node."""
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(_node_requirement(r, node.labels) for r in term.match_expressions):
        return False
    fields = {"metadata.name": node.name}
    return all(r.key == "metadata.name" and r.operator in ("In", "NotIn") and _node_requirement(r, fields)
               for r in term.match_fields)


def terms_match(terms, node) -> bool:
    """Required node affinity: OR of terms. None means unrestricted; an empty list matches nothing."""
    if terms is None:
        return True
    return any(term_matches(t, node) for t in terms)


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
