"""client-go's jsonpath template parser (k8s.io/client-go/util/jsonpath/parser.go): a template
-> a list of nodes (text, and the actions inside `{...}`) that `jsonpath.Engine` evaluates.
`parse` raises JSONPathError with kubectl's "error parsing jsonpath ..." line.
"""
from __future__ import annotations

import re

from .errors import JSONPathError
from .gofmt import INT64_MAX, INT64_MIN


class Node:
    __slots__ = ("kind", "value", "left", "right", "op")

    def __init__(self, kind, value=None, left=None, right=None, op=None):
        self.kind, self.value, self.left, self.right, self.op = kind, value, left, right, op

    def __repr__(self):
        return f"{self.kind}({self.value!r})"


class _Params:
    __slots__ = ("value", "known", "derived")

    def __init__(self, value=0, known=False, derived=False):
        self.value, self.known, self.derived = value, known, derived


class ParseError(Exception):
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
    return v if INT64_MIN <= v <= INT64_MAX else None


def _is_alnum(r) -> bool:
    return r is not None and (r == "_" or r.isalpha() or r.isdecimal())


def _is_terminator(r) -> bool:
    return r is None or r in " \t\r\n.,[]$@{}"


def _go_char(r: str) -> str:
    """Go's %#U."""
    code = f"U+{ord(r):04X}"
    return f"{code} '{r}'" if r.isprintable() else code


class Parser:
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
                        self.root.append(Node("text", self.consume()))
                    return self.root
                self.pos = idx
                if self.pos > self.start:
                    self.root.append(Node("text", self.consume()))
                self.pos += 1
                self.consume()
                cur = []
                self.root.append(Node("list", cur))
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
            raise ParseError("unclosed action")
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
            raise ParseError(f"unrecognized character in action: {_go_char(r)}")
        return True

    def _identifier(self, cur):
        while True:
            r = self.next()
            if _is_terminator(r):
                self.backup()
                break
        value = self.consume()
        if value in ("true", "false"):
            cur.append(Node("bool", value == "true"))
        else:
            cur.append(Node("ident", value))

    def _recursive(self, cur):
        if cur and cur[-1].kind == "rec":
            raise ParseError("invalid multiple recursive descent")
        self.pos += 2
        self.consume()
        cur.append(Node("rec"))
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
            cur.append(Node("int", i))
            return
        if value.isascii() and _FLOAT.fullmatch(value):
            cur.append(Node("float", float(value)))
            return
        raise ParseError(f"cannot parse number {value}")

    def _array(self, cur):
        while True:
            r = self.next()
            if r is _EOF or r == "\n":
                raise ParseError("unterminated array")
            if r == "]":
                break
        text = self.consume()[1:-1]
        if text == "*":
            text = ":"
        parts = text.split(",")
        if len(parts) > 1:
            union = [_parse_action(f"[{p.strip(' ')}]") for p in parts]
            cur.append(Node("union", union))
            return
        m = _DICT_KEY.fullmatch(text)
        if m:
            cur.extend(_parse_action("." + m.group(1)))
            return
        m = _SLICE.fullmatch(text)
        if not m:
            raise ParseError(f"invalid array index {text}")
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
                        raise ParseError(f"array index {groups[i]} is not a number")
                    params[i].known = True
                    params[i].value = v
            elif i == 1:
                params[i] = _Params(params[0].value + 1, True, True)
        cur.append(Node("array", params))

    def _filter(self, cur):
        self.pos += 3
        self.consume()
        begin = end = False
        pair = None
        while True:
            r = self.next()
            if r is _EOF or r == "\n":
                raise ParseError("unterminated filter")
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
            raise ParseError("unclosed array expect ]")
        text = self.consume()[:-2]
        m = _FILTER.fullmatch(text)
        if m is None:
            cur.append(Node("filter", left=_parse_action(text), right=[], op="exists"))
        else:
            cur.append(Node("filter", left=_parse_action(m.group(1)), right=_parse_action(m.group(3)),
                             op=m.group(2)))

    def _quote(self, cur, end):
        while True:
            r = self.next()
            if r is _EOF or r == "\n":
                raise ParseError("unterminated quoted string")
            if r == end and self.input[self.pos - 2] != "\\":
                break
        value = self.consume()
        try:
            s = _unquote_extend(value)
        except ParseError:
            raise ParseError(f"unquote string {value} error invalid syntax") from None
        cur.append(Node("text", s))

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
            cur.append(Node("wild"))
        else:
            cur.append(Node("field", value.replace("\\", "")))


def _parse_action(text: str) -> list:
    """client-go's parseAction: the nodes of `{text}`."""
    root = Parser("{" + text + "}").parse()
    return root[0].value


_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\"}
_HEX = "0123456789abcdefABCDEF"


def _byte(v: int) -> str:
    return chr(v) if v < 0x80 else chr(0xDC00 + v)     # a raw byte, as surrogateescape


def _unquote_extend(s: str) -> str:
    """client-go's UnquoteExtend: strconv.Unquote that also accepts single-quoted strings."""
    if len(s) < 2 or s[0] != s[-1] or s[0] not in "\"'":
        raise ParseError("invalid syntax")
    quote, s = s[0], s[1:-1]
    if "\\" not in s and quote not in s:
        return s
    out = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == quote:
            raise ParseError("invalid syntax")
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 >= n:
            raise ParseError("invalid syntax")
        c = s[i + 1]
        i += 2
        if c in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[c])
        elif c in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[c]
            digits = s[i:i + width]
            if len(digits) < width or any(d not in _HEX for d in digits):
                raise ParseError("invalid syntax")
            v = int(digits, 16)
            i += width
            if c == "x":
                out.append(_byte(v))
            else:
                if v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
                    raise ParseError("invalid syntax")
                out.append(chr(v))
        elif c in "01234567":
            digits = s[i:i + 2]
            if len(digits) < 2 or any(d not in "01234567" for d in digits):
                raise ParseError("invalid syntax")
            v = int(c + digits, 8)
            i += 2
            if v > 255:
                raise ParseError("invalid syntax")
            out.append(_byte(v))
        elif c in "'\"":
            if c != quote:
                raise ParseError("invalid syntax")
            out.append(c)
        else:
            raise ParseError("invalid syntax")
    return "".join(out)


def parse(template: str) -> list:
    try:
        return Parser(template).parse()
    except ParseError as e:
        raise JSONPathError(f"error parsing jsonpath {template}, {e}", str(e), template) from None
