"""kubectl's own output dialects (`-o jsonpath=`, `-o custom-columns=`, `-o name`) as pure functions.

Why this exists: platform teams script kubectl with `-o jsonpath=...`, and a plugin that claims
kubectl's conventions must render the same template to the same bytes (issue #14). Python's JSONPath
libraries implement a different dialect (no `{range}`/`{end}`, no text between actions, other
filter and printing rules), so this module re-implements the one in k8s.io/client-go/util/jsonpath
with the settings kubectl's printers use (k8s.io/cli-runtime/pkg/printers/jsonpath.go,
genericclioptions/jsonpath_flags.go, k8s.io/kubectl/pkg/cmd/get/customcolumn.go, printers/name.go).
It is stdlib only, with no I/O, so it runs in the krew zipapp under `python3 -I -S`; the commands
decide where the text goes. tests/e2e/test_output_differential.py compares it byte for byte with
the real kubectl.

The data model is the one kubectl's unstructured objects have: dict = map[string]interface{},
list = []interface{}, int = int64, float = float64, str, bool, None = JSON null.

kubectl behaviours that this module reproduces on purpose (they surprise people):
  * `{.a['b.c']}` is `{.a.b.c}`: a bracketed key is re-parsed as a dotted path. A key with a dot
    must be written `{.a.b\\.c}`.
  * Missing keys print nothing (kubectl's `--allow-missing-template-keys` defaults to true), but
    an index out of range, a slice end past the end (`[0:10]` on 3 items: no clamping) or an index
    into an empty list is an error.
  * Several results of one action are joined by a space; maps and lists print as compact JSON
    (sorted keys, no spaces, `<`, `>`, `&` escaped as \\u003c...); floats print like Go's %v
    (1e+06, 1.5e-05), ints as integers.
  * `..` yields only non-empty maps, lists and strings (never numbers or bools), and `.*` / `..`
    over a string yield its UTF-8 bytes as numbers.
  * Filters compare like Go templates: an int field against a float literal, or a string against a
    number, is an error ("incompatible types for comparison"), not false.
  * Go visits map entries in random order for `.*` and `..`; this module uses sorted key order,
    so those two constructs over maps with several keys can differ from kubectl in order only.
  * A JSON null prints `null`, but a null that a `{range}` iterates over is Go's zero value:
    `{range .a[*]}{@}{end}` prints `<no value>` for it.
  * `{range}` without `{end}` runs the rest of the template per item and then once more on the
    object; an empty slice (`[2:2]`, or `[*]` of an empty list) among several inputs ends the
    selection early (client-go returns at once).
  * kubectl's jsonpath sees metadata.managedFields (only `-o json|yaml` hide them), so give this
    module the object as the API server returned it.
  * custom-columns headers are printed as given (not upper-cased); values are Go's fmt.Sprint
    (`map[k:v]`, `[a b]`), several values are joined by commas, no value is `<none>`.

Errors are JSONPathError (a ValueError) whose str() is what kubectl prints after "error: " (for
execution errors without kubectl's dump of the object); `.reason` is client-go's own message.
"""
from __future__ import annotations

import re
from decimal import Decimal

__all__ = ["JSONPathError", "jsonpath", "custom_columns", "tabwrite", "name", "names", "go_json", "go_sprint"]


class JSONPathError(ValueError):
    """A template kubectl would refuse to parse, or that fails on the given object.

    `reason` is client-go's own message (e.g. "unclosed action", "array index out of bounds:
    index 5, length 2"); str(error) is the line kubectl prints after "error: "."""

    def __init__(self, message: str, reason: str | None = None, template: str | None = None):
        super().__init__(message)
        self.reason = reason if reason is not None else message
        self.template = template


class _EvalError(Exception):
    """An evaluation error plus the values the Go function returned with it (an exists-filter
    looks at those values even when there was an error)."""

    def __init__(self, message: str, values: list):
        super().__init__(message)
        self.values = values


class _Uint8(int):
    """A byte of a string (Go's uint8), produced by `.*` / `..` over a string."""


class _Invalid:
    """Go's zero reflect.Value: what a range body is evaluated on when the range is empty."""

    def __repr__(self):
        return "<invalid reflect.Value>"


_INVALID = _Invalid()
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_INF = float("inf")


# ---------------------------------------------------------------- Go value formatting

def _is_int(v) -> bool:
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
    if _is_int(v) and not isinstance(v, _Uint8) and not (_INT64_MIN <= v <= _INT64_MAX):
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
    if value is None or value is _INVALID:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_int(value):
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
    if value is _INVALID:
        return "<invalid reflect.Value>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_int(value):
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


def _go_type(value) -> str:
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, _Uint8):
        return "uint8"
    if _is_int(value):
        return "int64" if _INT64_MIN <= value <= _INT64_MAX else "float64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def _go_quote(s: str) -> str:
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


# ---------------------------------------------------------------- the parser

class _Node:
    __slots__ = ("kind", "value", "left", "right", "op")

    def __init__(self, kind, value=None, left=None, right=None, op=None):
        self.kind, self.value, self.left, self.right, self.op = kind, value, left, right, op

    def __repr__(self):
        return f"{self.kind}({self.value!r})"


class _Params:
    __slots__ = ("value", "known", "derived")

    def __init__(self, value=0, known=False, derived=False):
        self.value, self.known, self.derived = value, known, derived


class _ParseError(Exception):
    pass


_EOF = None
_DICT_KEY = re.compile(r"'([^']*)'")
_SLICE = re.compile(r"(-?[0-9]*)(:-?[0-9]*)?(:-?[0-9]*)?")
_FILTER = re.compile(r"([^!<>=]+)([!<>=]+)(.+)", re.S)
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")


def _atoi(text: str):
    if not _INT.fullmatch(text):
        return None
    v = int(text)
    return v if _INT64_MIN <= v <= _INT64_MAX else None


def _is_alnum(r) -> bool:
    return r is not None and (r == "_" or r.isalpha() or r.isdecimal())


def _is_terminator(r) -> bool:
    return r is None or r in " \t\r\n.,[]$@{}"


def _go_char(r: str) -> str:
    """Go's %#U."""
    code = f"U+{ord(r):04X}"
    return f"{code} '{r}'" if r.isprintable() else code


class _Parser:
    """client-go's jsonpath parser, token by token (iterative: long templates do not recurse)."""

    def __init__(self, text: str):
        self.input = text
        self.pos = 0
        self.start = 0
        self.width = 0
        self.root: list = []

    # --- scanning
    def next(self):
        if self.pos >= len(self.input):
            self.width = 0
            return _EOF
        r = self.input[self.pos]
        self.width = 1
        self.pos += 1
        return r

    def peek(self):
        r = self.next()
        self.backup()
        return r

    def backup(self):
        self.pos -= self.width

    def consume(self) -> str:
        value = self.input[self.start:self.pos]
        self.start = self.pos
        return value

    # --- grammar
    def parse(self) -> list:
        cur = None          # None: in text; else the ListNode (a python list) of the action
        while True:
            if cur is None:
                idx = self.input.find("{", self.pos)
                if idx < 0:
                    self.pos = len(self.input)
                    if self.pos > self.start:
                        self.root.append(_Node("text", self.consume()))
                    return self.root
                self.pos = idx
                if self.pos > self.start:
                    self.root.append(_Node("text", self.consume()))
                self.pos += 1
                self.consume()
                cur = []
                self.root.append(_Node("list", cur))
                continue
            if not self._inside_action(cur):
                cur = None

    def _inside_action(self, cur: list) -> bool:
        """Parses one token of an action into cur; False when the action's '}' was read."""
        rest = self.input[self.pos:]
        if rest.startswith("}"):
            self.pos += 1
            self.consume()
            return False
        if rest.startswith("[?("):
            self._filter(cur)
            return True
        if rest.startswith(".."):
            self._recursive(cur)
            return True
        r = self.next()
        if r is _EOF or r in "\r\n":
            raise _ParseError("unclosed action")
        if r == " " or r == "@" or r == "$":
            self.consume()
        elif r == "[":
            self._array(cur)
        elif r == '"' or r == "'":
            self._quote(cur, r)
        elif r == ".":
            self._field(cur)
        elif r == "+" or r == "-" or r.isdecimal():
            self.backup()
            self._number(cur)
        elif _is_alnum(r):
            self.backup()
            self._identifier(cur)
        else:
            raise _ParseError(f"unrecognized character in action: {_go_char(r)}")
        return True

    def _identifier(self, cur):
        while True:
            r = self.next()
            if _is_terminator(r):
                self.backup()
                break
        value = self.consume()
        if value in ("true", "false"):
            cur.append(_Node("bool", value == "true"))
        else:
            cur.append(_Node("ident", value))

    def _recursive(self, cur):
        if cur and cur[-1].kind == "rec":
            raise _ParseError("invalid multiple recursive descent")
        self.pos += 2
        self.consume()
        cur.append(_Node("rec"))
        if _is_alnum(self.peek()):
            self._field(cur)

    def _number(self, cur):
        r = self.peek()
        if r == "+" or r == "-":
            self.next()
        while True:
            r = self.next()
            if r != "." and not (r is not None and r.isdecimal()):
                self.backup()
                break
        value = self.consume()
        i = _atoi(value)
        if i is not None:
            cur.append(_Node("int", i))
            return
        if value.isascii() and _FLOAT.fullmatch(value):
            cur.append(_Node("float", float(value)))
            return
        raise _ParseError(f"cannot parse number {value}")

    def _array(self, cur):
        while True:
            r = self.next()
            if r is _EOF or r == "\n":
                raise _ParseError("unterminated array")
            if r == "]":
                break
        text = self.consume()[1:-1]
        if text == "*":
            text = ":"
        parts = text.split(",")
        if len(parts) > 1:
            union = [_parse_action(f"[{p.strip(' ')}]") for p in parts]
            cur.append(_Node("union", union))
            return
        m = _DICT_KEY.fullmatch(text)
        if m:
            cur.extend(_parse_action("." + m.group(1)))
            return
        m = _SLICE.fullmatch(text)
        if not m:
            raise _ParseError(f"invalid array index {text}")
        groups = [g or "" for g in m.groups()]
        params = [_Params(), _Params(), _Params()]
        for i in range(3):
            if groups[i] != "":
                if i > 0:
                    groups[i] = groups[i][1:]
                if i > 0 and groups[i] == "":
                    params[i].known = False
                else:
                    v = _atoi(groups[i])
                    if v is None:
                        raise _ParseError(f"array index {groups[i]} is not a number")
                    params[i].known = True
                    params[i].value = v
            elif i == 1:
                params[i] = _Params(params[0].value + 1, True, True)
        cur.append(_Node("array", params))

    def _filter(self, cur):
        self.pos += 3
        self.consume()
        begin = end = False
        pair = None
        while True:
            r = self.next()
            if r is _EOF or r == "\n":
                raise _ParseError("unterminated filter")
            if r == '"' or r == "'":
                if not begin:
                    begin, pair = True, r
                    continue
                if self.input[self.pos - 2] != "\\" and r == pair:
                    end = True
            elif r == ")":
                if begin == end:
                    break
        if self.next() != "]":
            raise _ParseError("unclosed array expect ]")
        text = self.consume()[:-2]
        m = _FILTER.fullmatch(text)
        if m is None:
            cur.append(_Node("filter", left=_parse_action(text), right=[], op="exists"))
        else:
            cur.append(_Node("filter", left=_parse_action(m.group(1)), right=_parse_action(m.group(3)),
                             op=m.group(2)))

    def _quote(self, cur, end):
        while True:
            r = self.next()
            if r is _EOF or r == "\n":
                raise _ParseError("unterminated quoted string")
            if r == end and self.input[self.pos - 2] != "\\":
                break
        value = self.consume()
        try:
            s = _unquote_extend(value)
        except _ParseError:
            raise _ParseError(f"unquote string {value} error invalid syntax") from None
        cur.append(_Node("text", s))

    def _field(self, cur):
        self.consume()
        while True:
            r = self.next()
            if r == "\\":
                self.next()
            elif _is_terminator(r):
                self.backup()
                break
        value = self.consume()
        if value == "*":
            cur.append(_Node("wild"))
        else:
            cur.append(_Node("field", value.replace("\\", "")))


def _parse_action(text: str) -> list:
    """client-go's parseAction: the nodes of `{text}`."""
    root = _Parser("{" + text + "}").parse()
    return root[0].value


_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\"}
_HEX = "0123456789abcdefABCDEF"


def _byte(v: int) -> str:
    return chr(v) if v < 0x80 else chr(0xDC00 + v)     # a raw byte, as surrogateescape


def _unquote_extend(s: str) -> str:
    """client-go's UnquoteExtend: strconv.Unquote that also accepts single-quoted strings."""
    if len(s) < 2 or s[0] != s[-1] or s[0] not in "\"'":
        raise _ParseError("invalid syntax")
    quote, s = s[0], s[1:-1]
    if "\\" not in s and quote not in s:
        return s
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == quote:
            raise _ParseError("invalid syntax")
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            raise _ParseError("invalid syntax")
        c = s[i + 1]
        i += 2
        if c in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[c])
        elif c in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[c]
            digits = s[i:i + width]
            if len(digits) < width or any(d not in _HEX for d in digits):
                raise _ParseError("invalid syntax")
            v = int(digits, 16)
            i += width
            if c == "x":
                out.append(_byte(v))
            else:
                if v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
                    raise _ParseError("invalid syntax")
                out.append(chr(v))
        elif c in "01234567":
            digits = s[i:i + 2]
            if len(digits) < 2 or any(d not in "01234567" for d in digits):
                raise _ParseError("invalid syntax")
            v = int(c + digits, 8)
            i += 2
            if v > 255:
                raise _ParseError("invalid syntax")
            out.append(_byte(v))
        elif c in "'\"":
            if c != quote:
                raise _ParseError("invalid syntax")
            out.append(c)
        else:
            raise _ParseError("invalid syntax")
    return "".join(out)


def _parse(template: str) -> list:
    try:
        return _Parser(template).parse()
    except _ParseError as e:
        raise JSONPathError(f"error parsing jsonpath {template}, {e}", str(e), template) from None


# ---------------------------------------------------------------- evaluation

def _kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, _Uint8):
        return "uint"
    if _is_int(v):
        return "int" if _INT64_MIN <= v <= _INT64_MAX else "float"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "string"
    return None


_BAD_TYPE = "invalid type for comparison"
_BAD_CMP = "incompatible types for comparison"


def _equal(a, b) -> bool:
    k1, k2 = _kind(a), _kind(b)
    if k1 is None or k2 is None:
        raise _CompareError(_BAD_TYPE)
    if k1 != k2:
        if {k1, k2} == {"int", "uint"}:
            return a == b
        raise _CompareError(_BAD_CMP)
    return a == b


def _less(a, b) -> bool:
    k1, k2 = _kind(a), _kind(b)
    if k1 is None or k2 is None:
        raise _CompareError(_BAD_TYPE)
    if k1 != k2:
        if {k1, k2} == {"int", "uint"}:
            return a < b
        raise _CompareError(_BAD_CMP)
    if k1 == "bool":
        raise _CompareError(_BAD_TYPE)
    return a < b


class _CompareError(Exception):
    pass


def _less_equal(a, b):
    return _less(a, b) or _equal(a, b)


_OPERATORS = {
    "<": _less,
    ">": lambda a, b: not _less_equal(a, b),
    "==": _equal,
    "!=": lambda a, b: not _equal(a, b),
    "<=": _less_equal,
    ">=": lambda a, b: not _less(a, b),
}


def _children(v) -> list:
    if isinstance(v, dict):
        return [v[k] for k in sorted(v)]
    if isinstance(v, list):
        return list(v)
    if isinstance(v, str):
        return [_Uint8(b) for b in v.encode("utf-8", "surrogateescape")]
    return []


class _Engine:
    """client-go's JSONPath executor, with its range bookkeeping (counters shared by nested
    ranges, the last `{end}` seen, the node list a range leaves behind)."""

    def __init__(self, root: list, allow_missing_keys: bool):
        self.nodes = root
        self.root_start = 0
        self.allow_missing = allow_missing_keys
        self.begin_range = self.in_range = self.end_range = 0
        self.last_end = None

    def find_results(self, data, start=None) -> list:
        if start is None:
            start = self.root_start
        nodes = self.nodes
        cur = [data]
        full = []
        i = start
        while i < len(nodes):
            results = self.walk(cur, nodes[i])
            if self.end_range > 0 and self.end_range <= self.in_range:
                self.end_range -= 1
                self.last_end = i
                break
            if self.begin_range > 0:
                self.begin_range -= 1
                self.in_range += 1
                self.root_start = i + 1
                if results:
                    for value in results:
                        # Go passes value.Interface(): a JSON null becomes the zero reflect.Value
                        full.extend(self.find_results(_INVALID if value is None else value, i + 1))
                else:
                    self.find_results(_INVALID, i + 1)
                self.in_range -= 1
                for k in range(i + 1, len(nodes)):
                    if k == self.last_end:
                        i = k
                        break
                i += 1
                continue
            full.append(results)
            i += 1
        return full

    def walk(self, values: list, node: _Node) -> list:
        kind = node.kind
        if kind == "list":
            return self.eval_list(values, node.value)
        if kind == "text":
            return [node.value]
        if kind == "field":
            return self.eval_field(values, node.value)
        if kind == "array":
            return self.eval_array(values, node.value)
        if kind == "filter":
            return self.eval_filter(values, node)
        if kind in ("int", "float", "bool"):
            return [node.value for _ in values]
        if kind == "wild":
            out = []
            for v in values:
                if v is not None:
                    out.extend(_children(v))
            return out
        if kind == "rec":
            return self.eval_recursive(values)
        if kind == "union":
            return self.eval_union(values, node.value)
        if kind == "ident":
            return self.eval_identifier(values, node.value)
        raise _EvalError(f"unexpected Node {node}", values)

    def eval_list(self, values: list, nodes: list) -> list:
        for node in nodes:
            values = self.walk(values, node)
        return values

    def eval_identifier(self, values, name):
        if name == "range":
            self.begin_range += 1
            return values
        if name == "end":
            if self.in_range > 0:
                self.end_range += 1
                return []
            raise _EvalError("not in range, nothing to end", [])
        raise _EvalError(f"unrecognized identifier {name}", values)

    def eval_field(self, values, name):
        if not values:
            return []
        results = []
        for v in values:
            if isinstance(v, dict) and name in v:
                results.append(v[name])
        if not results and not self.allow_missing:
            raise _EvalError(f"{name} is not found", [])
        return results

    def eval_array(self, values, params):
        result = []
        for v in values:
            if v is None:
                continue
            if not isinstance(v, list):
                if v is _INVALID:
                    # kubectl panics here (reflect: call of reflect.Value.Type on zero Value)
                    raise _EvalError("reflect: call of reflect.Value.Type on zero Value", values)
                raise _EvalError(f"{_go_type(v)} is not array or slice", values)
            n = len(v)
            p0 = params[0].value if params[0].known else 0
            if p0 < 0:
                p0 += n
            p1 = params[1].value if params[1].known else n
            if p1 < 0 or (p1 == 0 and params[1].derived):
                p1 += n
            if p1 == p0:
                return result
            if p0 >= n or p0 < 0:
                raise _EvalError(f"array index out of bounds: index {p0}, length {n}", values)
            if p1 > n or p1 < 0:
                raise _EvalError(f"array index out of bounds: index {p1 - 1}, length {n}", values)
            if p0 > p1:
                raise _EvalError(f"starting index {p0} is greater than ending index {p1}", values)
            step = 1
            if params[2].known:
                if params[2].value <= 0:
                    raise _EvalError("step must be > 0", values)
                step = params[2].value
            result.extend(v[p0:p1:step])
        return result

    def eval_union(self, values, lists):
        result = []
        for nodes in lists:
            try:
                result.extend(self.eval_list(values, nodes))
            except _EvalError as e:
                raise _EvalError(str(e), values) from None
        return result

    def eval_recursive(self, values):
        result = []
        for v in values:
            if v is None:
                continue
            children = _children(v)
            if children:
                result.append(v)
                result.extend(self.eval_recursive(children))
        return result

    def eval_filter(self, values, node):
        results = []
        for v in values:
            if not isinstance(v, list):
                raise _EvalError(f"{go_sprint(v)} is not array or slice and cannot be filtered", values)
            for item in v:
                temp = [item]
                try:
                    lefts, err = self.eval_list(temp, node.left), None
                except _EvalError as e:
                    lefts, err = e.values, e
                if node.op == "exists":
                    if lefts:
                        results.append(item)
                    continue
                if err is not None:
                    raise _EvalError(str(err), values)
                if not lefts:
                    continue
                if len(lefts) > 1:
                    raise _EvalError("can only compare one element at a time", values)
                try:
                    rights = self.eval_list(temp, node.right)
                except _EvalError as e:
                    raise _EvalError(str(e), values) from None
                if not rights:
                    continue
                if len(rights) > 1:
                    raise _EvalError("can only compare one element at a time", values)
                compare = _OPERATORS.get(node.op)
                if compare is None:
                    raise _EvalError(f"unrecognized filter operator {node.op}", results)
                try:
                    passed = compare(lefts[0], rights[0])
                except _CompareError as e:
                    raise _EvalError(str(e), results) from None
                if passed:
                    results.append(item)
        return results


def _to_text(v) -> str:
    if v is None:
        return "null"
    if v is _INVALID:
        return "<no value>"
    return go_sprint(v)


def _print_results(results: list, as_json: bool) -> str:
    if as_json:
        return go_json(list(results), indent="    ") + "\n"
    parts = []
    for r in results:
        parts.append(go_json(r) if isinstance(r, (dict, list)) else _to_text(r))
    return " ".join(parts)


def jsonpath(template: str, obj, allow_missing_keys: bool = True, as_json: bool = False) -> str:
    """`kubectl get -o jsonpath=TEMPLATE` of obj (an object, or a List {"kind": "List", "items":
    [...]} as kubectl builds it for several objects), byte for byte.

    allow_missing_keys=False is `--allow-missing-template-keys=false`; as_json=True is
    `-o jsonpath-as-json=`. Raises JSONPathError for a template kubectl would reject, and for one
    that fails on this object (index out of range, comparison of incompatible types, ...)."""
    if not template:
        raise JSONPathError("template format specified but no template given", template=template)
    root = _parse(template)
    engine = _Engine(root, allow_missing_keys)
    try:
        full = engine.find_results(_INVALID if obj is None else obj)
    except _EvalError as e:
        raise JSONPathError(f"error executing jsonpath {_go_quote(template)}: Error executing template: "
                            f"{e}.", str(e), template) from None
    return "".join(_print_results(r, as_json) for r in full)


# ---------------------------------------------------------------- custom-columns

_RELAXED = re.compile(r"\{\.?([^{}]+)\}|\.?([^{}]+)", re.S)
_TERMINAL_ESCAPES = str.maketrans({"\x1b": "^[", "\r": "\\r"})


def _relaxed_expression(path: str) -> str:
    """kubectl's RelaxedJSONPathExpression: `a.b`, `.a.b`, `{a.b}`, `{.a.b}` all mean `{.a.b}`."""
    if not path:
        return path
    m = _RELAXED.fullmatch(path)
    if m is None:
        raise JSONPathError("unexpected path string, expected a 'name1.name2' or '.name1.name2' or "
                            "'{name1.name2}' or '{.name1.name2}'")
    return "{.%s}" % (m.group(1) if m.group(1) else m.group(2))


def _items(objects) -> list:
    if isinstance(objects, dict):
        items = objects.get("items")
        return list(items) if isinstance(items, list) else [objects]
    return list(objects)


def custom_columns(spec: str, objects, no_headers: bool = False) -> str:
    """`kubectl get -o custom-columns=SPEC` of objects (a list of objects, one object, or a List),
    byte for byte: headers as given, one row per object, `<none>` when a path has no value,
    several values joined by commas, columns aligned as kubectl's tabwriter does."""
    if not spec:
        raise JSONPathError("custom-columns format specified but no custom columns given")
    columns = []
    for part in spec.split(","):
        col = part.split(":", 1)
        if len(col) != 2:
            raise JSONPathError(f"unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>")
        columns.append((col[0], _relaxed_expression(col[1])))
    text = [] if no_headers else ["\t".join(h for h, _ in columns) + "\n"]
    engines = []
    for _, fieldspec in columns:
        try:
            engines.append(_Engine(_Parser(fieldspec).parse(), True))
        except _ParseError as e:
            raise JSONPathError(str(e), template=fieldspec) from None
    for obj in _items(objects):
        cells = []
        for engine in engines:
            try:
                values = engine.find_results(obj)
            except _EvalError as e:
                raise JSONPathError(str(e)) from None
            strings = []
            if not values or not values[0]:
                strings.append("<none>")
            for group in values:
                for v in group:
                    strings.append(go_sprint(v).translate(_TERMINAL_ESCAPES))
            cells.append(",".join(strings))
        text.append("\t".join(cells) + "\n")
    return tabwrite("".join(text))


def check_template(kind: str, template: str) -> None:
    """Refuse (JSONPathError) a jsonpath or custom-columns template kubectl could not parse, before
    any object is at hand: a command validates -o before it reads or changes anything."""
    if kind == "custom-columns":
        custom_columns(template, [])
    elif not template:
        raise JSONPathError("template format specified but no template given", template=template)
    else:
        _parse(template)


def tabwrite(text: str, minwidth: int = 6, tabwidth: int = 4, padding: int = 3) -> str:
    """What kubectl's tabwriter (github.com/liggitt/tabwriter with printers.GetNewTabWriter's
    settings: minwidth 6, padding 3, space padding, RememberWidths) prints for text whose cells
    are ended by tabs: columns padded to their widest cell + 3, the last cell of a line as is."""
    del tabwidth      # only used when padding with tabs
    out: list[str] = []
    lines: list[list[str]] = [[]]
    cell: list[str] = []
    widths: list[int] = []
    maxwidths: list[int] = []

    def write_lines(line0, line1):
        for i in range(line0, line1):
            line = lines[i]
            for j, c in enumerate(line):
                out.append(c)
                if j < len(widths):
                    out.append(" " * (widths[j] - len(c)))
            if i + 1 < len(lines):
                out.append("\n")

    def fmt(line0, line1):
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(lines[this]) - 1:
                this += 1
                continue
            write_lines(line0, this)
            line0 = this
            width = minwidth
            while this < line1:
                line = lines[this]
                if column >= len(line) - 1:
                    break
                width = max(width, len(line[column]) + padding)
                this += 1
            if len(maxwidths) < len(widths):
                maxwidths.extend(widths[len(maxwidths):])
            if len(maxwidths) == len(widths):
                maxwidths.append(width)
            elif maxwidths[len(widths)] > width:
                width = maxwidths[len(widths)]
            elif maxwidths[len(widths)] < width:
                maxwidths[len(widths)] = width
            widths.append(width)
            fmt(line0, this)
            widths.pop()
            line0 = this
        write_lines(line0, line1)

    def flush():
        nonlocal lines, cell
        if cell:
            lines[-1].append("".join(cell))
            cell = []
        fmt(0, len(lines))
        lines = [[]]
        widths.clear()

    for ch in text:
        if ch in "\t\v\n\f":
            lines[-1].append("".join(cell))
            cell = []
            ncells = len(lines[-1])
            if ch in "\n\f":
                lines.append([])
                if ch == "\f" or ncells == 1:
                    flush()
        else:
            cell.append(ch)
    flush()
    return "".join(out)


# ---------------------------------------------------------------- -o name

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
    return "".join(name(o) + "\n" for o in _items(objects))
