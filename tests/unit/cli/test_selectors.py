"""kubectl label-selector syntax -> RepackRun LabelSelector, as the scope flags use it."""
import pytest

from kubectl_repack.commands.selectors import SelectorSyntaxError, parse_selector
from planner.model import LabelSelector, Requirement
from planner.selectors import selector_matches

CASES = [
    ("", {}),
    ("a=b", {"matchLabels": {"a": "b"}}),
    ("a==b", {"matchLabels": {"a": "b"}}),
    ("repack.volcano.sh/eligible=true", {"matchLabels": {"repack.volcano.sh/eligible": "true"}}),
    ("a=b,c=d", {"matchLabels": {"a": "b", "c": "d"}}),
    ("a=", {"matchLabels": {"a": ""}}),
    ("a!=b", {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["b"]}]}),
    ("e in (x,y)", {"matchExpressions": [{"key": "e", "operator": "In", "values": ["x", "y"]}]}),
    ("e in (x, y )", {"matchExpressions": [{"key": "e", "operator": "In", "values": ["x", "y"]}]}),
    ("e notin (x)", {"matchExpressions": [{"key": "e", "operator": "NotIn", "values": ["x"]}]}),
    ("f", {"matchExpressions": [{"key": "f", "operator": "Exists"}]}),
    ("!f", {"matchExpressions": [{"key": "f", "operator": "DoesNotExist"}]}),
    ("a=b,c!=d,e in (x,y),!f", {
        "matchLabels": {"a": "b"},
        "matchExpressions": [{"key": "c", "operator": "NotIn", "values": ["d"]},
                             {"key": "e", "operator": "In", "values": ["x", "y"]},
                             {"key": "f", "operator": "DoesNotExist"}]}),
    (" a = b , g ", {"matchLabels": {"a": "b"}, "matchExpressions": [{"key": "g", "operator": "Exists"}]}),
    ("a=b,a=b", {"matchLabels": {"a": "b"}}),
]


@pytest.mark.parametrize("text, expected", CASES, ids=[c[0] or "empty" for c in CASES])
def test_parse(text, expected):
    assert parse_selector(text) == expected


ERRORS = [
    ("a>1", "the operators > and < are not supported"),
    ("a<1", "the operators > and < are not supported"),
    ("a in (x", "unbalanced '('"),
    ("a in x)", "unbalanced ')'"),
    ("a=b,,c=d", "empty term"),
    ("a in ()", "needs at least one value"),
    ("-bad=x", "invalid label key '-bad'"),
    ("a=b c", "cannot parse 'a=b c'"),
    ("a=" + "v" * 64, "invalid label value"),
    ("a=b,a=c", "the selector could never match"),
    ("Bad.Prefix/x=y", "invalid label key"),
]


@pytest.mark.parametrize("text, message", ERRORS, ids=[c[0][:20] for c in ERRORS])
def test_errors(text, message):
    with pytest.raises(SelectorSyntaxError) as exc:
        parse_selector(text)
    assert message in str(exc.value)


@pytest.mark.parametrize("text, labels, matches", [
    ("a!=b", {}, True),                     # like kubectl: != also matches objects without the key
    ("a!=b", {"a": "b"}, False),
    ("e in (x,y)", {"e": "y"}, True),
    ("e in (x,y)", {}, False),
    ("!f", {"f": ""}, False),
    ("a=b,!f", {"a": "b"}, True),
])
def test_semantics_match_kubectl(text, labels, matches):
    sel = parse_selector(text)
    model = LabelSelector(tuple(sorted((sel.get("matchLabels") or {}).items())),
                          tuple(Requirement(e["key"], e["operator"], tuple(e.get("values", ())))
                                for e in sel.get("matchExpressions") or ()))
    assert selector_matches(model, labels) is matches
