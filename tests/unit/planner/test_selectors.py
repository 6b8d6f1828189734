"""Label selectors and node selector terms with metav1 / component-helpers semantics."""
from types import SimpleNamespace

import pytest

from planner.model import LabelSelector, NodeSelectorTerm, Requirement as Req
from planner.selectors import describe_selector, selector_matches, term_matches, terms_match

LABELS = {"zone": "a", "tier": "gpu", "gen": "3"}

SELECTORS = [
    ("empty-matches-all", LabelSelector(), True),
    ("match-labels-hit", LabelSelector((("zone", "a"),)), True),
    ("match-labels-miss", LabelSelector((("zone", "b"),)), False),
    ("match-labels-and", LabelSelector((("zone", "a"), ("tier", "cpu"))), False),
    ("in-hit", LabelSelector((), (Req("zone", "In", ("a", "b")),)), True),
    ("in-miss", LabelSelector((), (Req("zone", "In", ("b",)),)), False),
    ("in-absent-key", LabelSelector((), (Req("rack", "In", ("a",)),)), False),
    ("notin-hit", LabelSelector((), (Req("zone", "NotIn", ("b",)),)), True),
    ("notin-miss", LabelSelector((), (Req("zone", "NotIn", ("a",)),)), False),
    ("notin-absent-key-matches", LabelSelector((), (Req("rack", "NotIn", ("a",)),)), True),
    ("exists-hit", LabelSelector((), (Req("tier", "Exists"),)), True),
    ("exists-miss", LabelSelector((), (Req("rack", "Exists"),)), False),
    ("doesnotexist-hit", LabelSelector((), (Req("rack", "DoesNotExist"),)), True),
    ("doesnotexist-miss", LabelSelector((), (Req("tier", "DoesNotExist"),)), False),
    ("labels-and-expressions", LabelSelector((("zone", "a"),), (Req("tier", "In", ("gpu",)),)), True),
    ("labels-and-expressions-one-fails", LabelSelector((("zone", "a"),), (Req("tier", "NotIn", ("gpu",)),)),
     False),
    ("unknown-operator-never", LabelSelector((), (Req("zone", "Gt", ("1",)),)), False),
]


@pytest.mark.parametrize("sel,want", [c[1:] for c in SELECTORS], ids=[c[0] for c in SELECTORS])
def test_label_selector(sel, want):
    assert selector_matches(sel, LABELS) is want


def test_none_selector_matches_nothing():
    assert selector_matches(None, LABELS) is False
    assert selector_matches(None, {}) is False


def test_empty_selector_matches_empty_labels():
    assert selector_matches(LabelSelector(), {}) is True


NODE = SimpleNamespace(name="n1", labels={"zone": "a", "gpus": "8", "odd": "1_0", "plus": "+5"})


def term(*exprs, fields=()):
    return NodeSelectorTerm(tuple(exprs), tuple(fields))


TERMS = [
    ("in", term(Req("zone", "In", ("a", "b"))), True),
    ("in-miss", term(Req("zone", "In", ("b",))), False),
    ("in-empty-values-never", term(Req("zone", "In", ())), False),
    ("notin", term(Req("zone", "NotIn", ("b",))), True),
    ("notin-absent-key", term(Req("rack", "NotIn", ("b",))), True),
    ("notin-empty-values-never", term(Req("rack", "NotIn", ())), False),
    ("exists", term(Req("gpus", "Exists")), True),
    ("exists-with-values-never", term(Req("gpus", "Exists", ("8",))), False),
    ("doesnotexist", term(Req("rack", "DoesNotExist")), True),
    ("doesnotexist-miss", term(Req("zone", "DoesNotExist")), False),
    ("gt-true", term(Req("gpus", "Gt", ("4",))), True),
    ("gt-equal-false", term(Req("gpus", "Gt", ("8",))), False),
    ("lt-true", term(Req("gpus", "Lt", ("9",))), True),
    ("lt-false", term(Req("gpus", "Lt", ("8",))), False),
    ("gt-negative-value", term(Req("gpus", "Gt", ("-1",))), True),
    ("gt-signed-label", term(Req("plus", "Gt", ("4",))), True),
    ("gt-non-integer-label", term(Req("zone", "Gt", ("1",))), False),
    ("gt-underscore-label-is-not-an-integer", term(Req("odd", "Gt", ("1",))), False),
    ("gt-non-integer-value", term(Req("gpus", "Gt", ("x",))), False),
    ("gt-two-values", term(Req("gpus", "Gt", ("1", "2"))), False),
    ("gt-absent-key", term(Req("rack", "Gt", ("1",))), False),
    ("gt-beyond-int64", term(Req("gpus", "Lt", (str(2 ** 63),))), False),
    ("and-of-expressions", term(Req("zone", "In", ("a",)), Req("gpus", "Gt", ("4",))), True),
    ("and-one-fails", term(Req("zone", "In", ("a",)), Req("gpus", "Gt", ("9",))), False),
    ("fields-name-in", term(fields=[Req("metadata.name", "In", ("n1",))]), True),
    ("fields-name-in-miss", term(fields=[Req("metadata.name", "In", ("n2",))]), False),
    ("fields-name-notin", term(fields=[Req("metadata.name", "NotIn", ("n2",))]), True),
    ("fields-name-notin-miss", term(fields=[Req("metadata.name", "NotIn", ("n1",))]), False),
    ("fields-two-values-never", term(fields=[Req("metadata.name", "In", ("n1", "n2"))]), False),
    ("fields-exists-never", term(fields=[Req("metadata.name", "Exists")]), False),
    ("fields-and-labels", term(Req("zone", "In", ("a",)), fields=[Req("metadata.name", "In", ("n1",))]), True),
    ("fields-ok-labels-fail", term(Req("zone", "In", ("b",)), fields=[Req("metadata.name", "In", ("n1",))]),
     False),
    ("empty-term-matches-nothing", term(), False),
]


@pytest.mark.parametrize("t,want", [c[1:] for c in TERMS], ids=[c[0] for c in TERMS])
def test_node_selector_term(t, want):
    assert term_matches(t, NODE) is want


TERM_LISTS = [
    ("none-unrestricted", None, True),
    ("empty-list-matches-nothing", (), False),
    ("or-first", (term(Req("zone", "In", ("a",))), term(Req("zone", "In", ("z",)))), True),
    ("or-second", (term(Req("zone", "In", ("z",))), term(Req("gpus", "Exists"))), True),
    ("or-none", (term(Req("zone", "In", ("z",))), term(Req("rack", "Exists"))), False),
    ("empty-term-skipped-other-matches", (term(), term(Req("zone", "In", ("a",)))), True),
    ("only-empty-terms", (term(), term()), False),
    ("unparsable-term-skipped-other-matches", (term(Req("zone", "In", ())), term(Req("gpus", "Exists"))), True),
]


@pytest.mark.parametrize("terms,want", [c[1:] for c in TERM_LISTS], ids=[c[0] for c in TERM_LISTS])
def test_terms_or(terms, want):
    assert terms_match(terms, NODE) is want


def test_fields_ignored_without_node_fields():
    # VolumeBinding checks a PV against a node built from labels only: matchFields do not apply.
    t = (term(Req("zone", "In", ("a",)), fields=[Req("metadata.name", "In", ("other",))]),)
    assert terms_match(t, NODE) is False
    assert terms_match(t, NODE, match_fields=False) is True


@pytest.mark.parametrize("sel,want", [
    (None, "<none>"), (LabelSelector(), "<all>"),
    (LabelSelector((("a", "b"),), (Req("c", "In", ("x", "y")), Req("d", "Exists"), Req("e", "DoesNotExist"),
                                   Req("f", "NotIn", ("z",)))), "a=b,c in (x,y),d,!e,f notin (z)"),
], ids=["none", "empty", "all-operators"])
def test_describe_selector(sel, want):
    assert describe_selector(sel) == want
