"""client-go's JSONPath executor and `kubectl get -o jsonpath=`: evaluation of a parsed template
over an object (ranges, filters with Go's comparison rules, recursive descent, unions) and the
printing of its results, byte for byte as kubectl prints them.
"""
from __future__ import annotations

from .errors import JSONPathError
from .gofmt import INT64_MAX, INT64_MIN, INVALID, Uint8, go_json, go_quote, go_sprint, go_type, is_int
from .parse import Node, parse


class EvalError(Exception):
    """An evaluation error plus the values the Go function returned with it (an exists-filter
    looks at those values even when there was an error)."""

    def __init__(self, message: str, values: list):
        super().__init__(message)
        self.values = values


def _kind(v):
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, Uint8):
        return "uint"
    if is_int(v):
        return "int" if INT64_MIN <= v <= INT64_MAX else "float"
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
        return [Uint8(b) for b in v.encode("utf-8", "surrogateescape")]
    return []


class Engine:
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
                        full.extend(self.find_results(INVALID if value is None else value, i + 1))
                else:
                    self.find_results(INVALID, i + 1)
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

    def walk(self, values: list, node: Node) -> list:
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
        raise EvalError(f"unexpected Node {node}", values)

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
            raise EvalError("not in range, nothing to end", [])
        raise EvalError(f"unrecognized identifier {name}", values)

    def eval_field(self, values, name):
        if not values:
            return []
        results = []
        for v in values:
            if isinstance(v, dict) and name in v:
                results.append(v[name])
        if not results and not self.allow_missing:
            raise EvalError(f"{name} is not found", [])
        return results

    def eval_array(self, values, params):
        result = []
        for v in values:
            if v is None:
                continue
            if not isinstance(v, list):
                if v is INVALID:
                    # kubectl panics here (reflect: call of reflect.Value.Type on zero Value)
                    raise EvalError("reflect: call of reflect.Value.Type on zero Value", values)
                raise EvalError(f"{go_type(v)} is not array or slice", values)
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
                raise EvalError(f"array index out of bounds: index {p0}, length {n}", values)
            if p1 > n or p1 < 0:
                raise EvalError(f"array index out of bounds: index {p1 - 1}, length {n}", values)
            if p0 > p1:
                raise EvalError(f"starting index {p0} is greater than ending index {p1}", values)
            step = 1
            if params[2].known:
                if params[2].value <= 0:
                    raise EvalError("step must be > 0", values)
                step = params[2].value
            result.extend(v[p0:p1:step])
        return result

    def eval_union(self, values, lists):
        result = []
        for nodes in lists:
            try:
                result.extend(self.eval_list(values, nodes))
            except EvalError as e:
                raise EvalError(str(e), values) from None
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
                raise EvalError(f"{go_sprint(v)} is not array or slice and cannot be filtered", values)
            for item in v:
                temp = [item]
                try:
                    lefts, err = self.eval_list(temp, node.left), None
                except EvalError as e:
                    lefts, err = e.values, e
                if node.op == "exists":
                    if lefts:
                        results.append(item)
                    continue
                if err is not None:
                    raise EvalError(str(err), values)
                if not lefts:
                    continue
                if len(lefts) > 1:
                    raise EvalError("can only compare one element at a time", values)
                try:
                    rights = self.eval_list(temp, node.right)
                except EvalError as e:
                    raise EvalError(str(e), values) from None
                if not rights:
                    continue
                if len(rights) > 1:
                    raise EvalError("can only compare one element at a time", values)
                compare = _OPERATORS.get(node.op)
                if compare is None:
                    raise EvalError(f"unrecognized filter operator {node.op}", results)
                try:
                    passed = compare(lefts[0], rights[0])
                except _CompareError as e:
                    raise EvalError(str(e), results) from None
                if passed:
                    results.append(item)
        return results


def _to_text(v) -> str:
    if v is None:
        return "null"
    if v is INVALID:
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
    root = parse(template)
    engine = Engine(root, allow_missing_keys)
    try:
        full = engine.find_results(INVALID if obj is None else obj)
    except EvalError as e:
        raise JSONPathError(f"error executing jsonpath {go_quote(template)}: Error executing template: "
                            f"{e}.", str(e), template) from None
    return "".join(_print_results(r, as_json) for r in full)
