"""Go's view of unstructured values (kubectl's objects as Go holds them) and how Go prints them:
encoding/json's Marshal (`go_json`), fmt's Sprint (`go_sprint`), the type names and quoting Go's
error messages use. The jsonpath evaluator and custom-columns print every value through here.

The data model: dict = map[string]interface{}, list = []interface{}, int = int64 (beyond int64 a
float64), float = float64, str, bool, None = JSON null; plus the two values only a template
evaluation makes (`Uint8`, a byte of a string, and `INVALID`, Go's zero reflect.Value).
"""
from __future__ import annotations

import re
from decimal import Decimal

from .errors import JSONPathError


class Uint8(int):
    """A byte of a string (Go's uint8), produced by `.*` / `..` over a string."""


class Invalid:
    """Go's zero reflect.Value: what a range body is evaluated on when the range is empty."""

    def __repr__(self):
        return "<invalid reflect.Value>"


INVALID = Invalid()
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
_INF = float("inf")


def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _shortest_digits(f: float) -> tuple[str, int]:
    """(digits, dp) with f == 0.digits * 10**dp, digits the shortest that round-trip (as Go's)."""
    sign, digits, exp = Decimal(repr(abs(f))).as_tuple()
    ds = "".join(map(str, digits)).lstrip("0")
    if not ds:
        return "0", 1
    # digits * 10**exp; strip trailing zeros
    stripped = ds.rstrip("0")
    exp += len(ds) - len(stripped)
    return stripped, len(stripped) + exp


def _fmt_e(digits: str, dp: int) -> str:
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    exp = dp - 1
    return f"{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"


def _fmt_f(digits: str, dp: int) -> str:
    if dp <= 0:
        return "0." + "0" * (-dp) + digits
    if dp >= len(digits):
        return digits + "0" * (dp - len(digits))
    return digits[:dp] + "." + digits[dp:]


def _go_float_v(f: float) -> str:
    """fmt's %v of a float64: strconv's 'g' with the shortest digits, which switches to %e when
    the decimal exponent is < -4 or >= 6 (1e+06, 1.5e-05, 123456.5)."""
    if f != f:
        return "NaN"
    if f in (_INF, -_INF):
        return "+Inf" if f > 0 else "-Inf"
    neg = f < 0 or (f == 0 and str(f).startswith("-"))
    if f == 0:
        return "-0" if neg else "0"
    digits, dp = _shortest_digits(f)
    exp = dp - 1
    text = _fmt_e(digits, dp) if (exp < -4 or exp >= 6) else _fmt_f(digits, dp)
    return ("-" if neg else "") + text


def _go_float_json(f: float) -> str:
    """encoding/json's float64: 'f' unless |f| < 1e-6 or >= 1e21, then 'e' with e-7 not e-07."""
    if f != f or f in (_INF, -_INF):
        raise JSONPathError(f"json: unsupported value: {_go_float_v(f)}")
    neg = f < 0 or (f == 0 and str(f).startswith("-"))
    if f == 0:
        return "-0" if neg else "0"
    digits, dp = _shortest_digits(f)
    a = abs(f)
    if a < 1e-6 or a >= 1e21:
        text = _fmt_e(digits, dp)
        m = re.search(r"e([+-])0(\d)$", text)
        if m:
            text = text[: m.start()] + "e" + m.group(1) + m.group(2)
    else:
        text = _fmt_f(digits, dp)
    return ("-" if neg else "") + text


def _as_go_number(v):
    """An int outside int64 is a float64 in kubectl's unstructured objects."""
    if is_int(v) and not isinstance(v, Uint8) and not (INT64_MIN <= v <= INT64_MAX):
        return float(v)
    return v


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b",
                 "\f": "\\f", "<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
                 "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _json_string(s: str) -> str:
    out = ['"']
    for ch in s:
        esc = _JSON_ESCAPES.get(ch)
        if esc is not None:
            out.append(esc)
        elif ch < " ":
            out.append("\\u%04x" % ord(ch))
        elif "\udc80" <= ch <= "\udcff" or "\ud800" <= ch <= "\udfff":
            out.append("\\ufffd")      # a byte that is not UTF-8
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_json(value, indent: str | None = None, _level: int = 0) -> str:
    """Go's json.Marshal of an unstructured value (json.MarshalIndent(v, "", indent) if indent)."""
    value = _as_go_number(value)
    if value is None or value is INVALID:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_int(value):
        return str(int(value))
    if isinstance(value, float):
        return _go_float_json(value)
    if isinstance(value, str):
        return _json_string(value)
    if isinstance(value, dict):
        items = [(_json_string(str(k)), v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))]
        if not items:
            return "{}"
        if indent is None:
            return "{" + ",".join(k + ":" + go_json(v) for k, v in items) + "}"
        inner = "\n" + indent * (_level + 1)
        return ("{" + ",".join(inner + k + ": " + go_json(v, indent, _level + 1) for k, v in items)
                + "\n" + indent * _level + "}")
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        if indent is None:
            return "[" + ",".join(go_json(v) for v in value) + "]"
        inner = "\n" + indent * (_level + 1)
        return ("[" + ",".join(inner + go_json(v, indent, _level + 1) for v in value)
                + "\n" + indent * _level + "]")
    raise TypeError(f"cannot encode {type(value).__name__} as JSON")


def go_sprint(value) -> str:
    """Go's fmt.Sprint of an unstructured value: `map[a:1 b:[x y]]`, `<nil>`, floats as %v."""
    value = _as_go_number(value)
    if value is None:
        return "<nil>"
    if value is INVALID:
        return "<invalid reflect.Value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_int(value):
        return str(int(value))
    if isinstance(value, float):
        return _go_float_v(value)
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_sprint(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, (list, tuple)):
        return "[" + " ".join(go_sprint(v) for v in value) + "]"
    return str(value)


def go_type(value) -> str:
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, Uint8):
        return "uint8"
    if is_int(value):
        return "int64" if INT64_MIN <= value <= INT64_MAX else "float64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def go_quote(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch < " " or ch == "\x7f":
            out.append("\\x%02x" % ord(ch))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)
