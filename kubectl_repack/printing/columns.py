"""`kubectl get -o custom-columns=`: column specs (kubectl's relaxed jsonpath), one row per object,
aligned as kubectl's tabwriter does (`tabwrite`); and `check_template`, which refuses a template
kubectl could not parse before any object is read.
"""
from __future__ import annotations

import re

from .errors import JSONPathError
from .gofmt import go_sprint
from .jsonpath import Engine, EvalError
from .names import items
from .parse import ParseError, Parser, parse


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
            engines.append(Engine(Parser(fieldspec).parse(), True))
        except ParseError as e:
            raise JSONPathError(str(e), template=fieldspec) from None
    for obj in items(objects):
        cells = []
        for engine in engines:
            try:
                values = engine.find_results(obj)
            except EvalError as e:
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
        parse(template)


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
