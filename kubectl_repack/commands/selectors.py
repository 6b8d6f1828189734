"""kubectl label-selector syntax -> metav1.LabelSelector (matchLabels / matchExpressions).

`a=b,c!=d,e in (x,y),f notin (z),g,!h` is what `kubectl get -l` accepts. The RepackRun API only
has the set-based operators In, NotIn, Exists and DoesNotExist, so `>`/`<` are refused.
"""
from __future__ import annotations

import re

# A qualified label key: optional DNS-subdomain prefix and a name of at most 63 characters.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_PREFIX = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_KEY = re.compile(rf"^({_PREFIX}/)?{_NAME}$")
_VALUE = re.compile(rf"^({_NAME})?$")

_SET = re.compile(r"^(?P<key>[^\s!=<>(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)$")
_EQ = re.compile(r"^(?P<key>[^\s!=<>(),]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=<>(),]*)$")
_EXISTS = re.compile(r"^(?P<not>!?)\s*(?P<key>[^\s!=<>(),]+)$")


class SelectorSyntaxError(ValueError):
    """The selector text is not kubectl label-selector syntax (the message says which term)."""


def _split_terms(text: str) -> list:
    """Split on commas that are not inside a parenthesised value set."""
    terms, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise SelectorSyntaxError(f"unbalanced ')' in {text!r}")
        if ch == "," and depth == 0:
            terms.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if depth:
        raise SelectorSyntaxError(f"unbalanced '(' in {text!r}")
    terms.append("".join(cur).strip())
    return terms


def _check_key(key: str, term: str) -> str:
    if len(key.rpartition("/")[2]) > 63 or not _KEY.match(key):
        raise SelectorSyntaxError(f"invalid label key {key!r} in {term!r}")
    return key


def _check_value(value: str, term: str) -> str:
    if len(value) > 63 or not _VALUE.match(value):
        raise SelectorSyntaxError(f"invalid label value {value!r} in {term!r}")
    return value


def parse_selector(text: str) -> dict:
    """The LabelSelector dict for kubectl selector syntax; {} (match everything) for ''.

    Equality terms become matchLabels (a key given twice with different values can never match,
    so it is refused); every other term becomes a matchExpressions entry, in the order written.
    """
    text = (text or "").strip()
    if not text:
        return {}
    match_labels, expressions = {}, []
    for term in _split_terms(text):
        if not term:
            raise SelectorSyntaxError(f"empty term in {text!r}")
        if any(op in term for op in ("<", ">")) and not _SET.match(term):
            raise SelectorSyntaxError(f"{term!r}: the operators > and < are not supported by RepackRun "
                                      "selectors (use in, notin, =, !=, key or !key)")
        m = _SET.match(term)
        if m:
            key = _check_key(m.group("key"), term)
            values = [v.strip() for v in m.group("values").split(",")]
            if values == [""]:
                raise SelectorSyntaxError(f"{term!r}: a value set needs at least one value")
            for v in values:
                _check_value(v, term)
            op = "In" if m.group("op") == "in" else "NotIn"
            expressions.append({"key": key, "operator": op, "values": values})
            continue
        m = _EQ.match(term)
        if m:
            key = _check_key(m.group("key"), term)
            value = _check_value(m.group("value"), term)
            if m.group("op") == "!=":
                expressions.append({"key": key, "operator": "NotIn", "values": [value]})
            elif key in match_labels and match_labels[key] != value:
                raise SelectorSyntaxError(f"{term!r}: label {key!r} is already required to be "
                                          f"{match_labels[key]!r}; the selector could never match")
            else:
                match_labels[key] = value
            continue
        m = _EXISTS.match(term)
        if m:
            key = _check_key(m.group("key"), term)
            expressions.append({"key": key, "operator": "DoesNotExist" if m.group("not") else "Exists"})
            continue
        raise SelectorSyntaxError(f"cannot parse {term!r}: expected key=value, key!=value, "
                                  "key in (v1,v2), key notin (v1,v2), key or !key")
    selector = {}
    if match_labels:
        selector["matchLabels"] = match_labels
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


__all__ = ["parse_selector", "SelectorSyntaxError"]
