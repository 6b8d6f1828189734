"""Text -> documents: the one place where YAML and JSON input is parsed, strictly and within bounds.

Snapshot files and RepackRun files both come from people and tools outside our control, so the
parser, not each caller, refuses what the API server would never hand out or accept:

- bytes that are not UTF-8 (the error gives the offset of the first bad byte),
- duplicate keys in a mapping, in YAML and in JSON alike (the API server's strict decoding refuses
  them too; with lenient decoding the last one silently wins),
- YAML aliases that expand the document far beyond the size of its text (a "billion laughs": a
  few hundred bytes that stand for millions of values), and nesting deeper than any Kubernetes
  object needs. Both are checked by one bounded walk, so the work per input byte stays bounded:
  the walk stops at the first value past the bound instead of expanding the rest,
- integers with more digits than Python converts (4,300) and timestamps turned into datetime
  objects (they stay strings, as kubectl keeps them).

Every error is a DocumentError whose message starts with the source and, where known, the
line and column: `snap.yaml:3:7: invalid YAML: found duplicate key 'name' (first at line 2)`.
"""
import json

import yaml

from .errors import DocumentError, UnreadableInput

# Kubernetes objects nest about 15 levels deep (a pod's affinity terms); a List of Lists a few more.
MAX_DEPTH = 64
# Values a document may expand to: its text length times this, plus a floor for tiny inputs. An
# alias-free document always has fewer values than characters, so only aliases can reach it.
EXPANSION_PER_BYTE = 4
EXPANSION_FLOOR = 100_000
# JSON has no aliases, and its decoder refuses nesting past the interpreter's recursion limit, so
# the walk is only needed for small JSON (RepackRun files, which schema code walks recursively);
# large JSON snapshots skip it (it would add a tenth to the load time of 10,000 nodes) and their
# one consumer, planner.load, reads them without recursion.
JSON_WALK_MAX_CHARS = 1 << 20


def decode(data: bytes, source: str) -> str:
    """UTF-8 bytes (a leading byte-order mark allowed) -> text, or a DocumentError naming the
    offset of the first byte that is not UTF-8."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentError(f"{source}: not UTF-8 text: byte 0x{data[exc.start]:02x} at offset "
                            f"{exc.start} cannot be decoded") from exc


def read_file(path) -> str:
    """The text of a file, decoded strictly as UTF-8."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise UnreadableInput(f"{path}: {exc.strerror}") from exc
    return decode(data, str(path))


class _Loader(yaml.SafeLoader):
    """Safe YAML that refuses duplicate keys and keeps timestamps as strings (as kubectl does)."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _construct_mapping(loader, node, deep=False):
    loader.flatten_mapping(node)
    seen = {}
    for key_node, _value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        try:
            hash(key)
        except TypeError:
            continue  # SafeLoader reports unhashable keys itself
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark,
                f"found duplicate key {key!r} (first at line {seen[key] + 1})", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

if hasattr(yaml, "CSafeLoader"):
    class _FastLoader(yaml.CSafeLoader):
        """The same rules over libyaml's parser (about ten times faster on large snapshots)."""

    _FastLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers
    _FastLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
else:  # the pure-Python zipapp's PyYAML has no C extension
    _FastLoader = _Loader


def _unique_pairs(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    pass


def _check_bounds(documents, source: str, text_length: int):
    """One walk over the parsed values, stopping at the first one past the depth or size bound."""
    limit = EXPANSION_FLOOR + EXPANSION_PER_BYTE * text_length
    count = 0
    stack = [(doc, 1) for doc in documents]
    while stack:
        value, depth = stack.pop()
        count += 1
        if count > limit:
            raise DocumentError(
                f"{source}: expands to more than {limit} values for {text_length} characters of "
                "text (YAML aliases that repeat large parts?); refused")
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth >= MAX_DEPTH and children:
            raise DocumentError(f"{source}: nested deeper than {MAX_DEPTH} levels; refused")
        stack.extend((child, depth + 1) for child in children)


def _json(text: str, source: str) -> list:
    try:
        data = json.loads(text, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{source}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from exc
    except _DuplicateKey as exc:
        raise DocumentError(f"{source}: invalid JSON: duplicate key {exc.args[0]!r}") from exc
    except RecursionError as exc:
        raise DocumentError(f"{source}: invalid JSON: nested too deeply; refused") from exc
    except ValueError as exc:  # an integer beyond int's digit limit
        raise DocumentError(f"{source}: invalid JSON: {exc}") from exc
    return data if isinstance(data, list) else [data]


def _yaml(text: str, source: str, fast: bool) -> list:
    try:
        loader = _FastLoader if fast else _Loader
        return [doc for doc in yaml.load_all(text, Loader=loader) if doc is not None]
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark else source
        problem = " ".join(str(exc.problem or exc.context or "invalid YAML").split())
        raise DocumentError(f"{where}: invalid YAML: {problem}") from exc
    except yaml.YAMLError as exc:
        raise DocumentError(f"{source}: invalid YAML: {' '.join(str(exc).split())}") from exc
    except RecursionError as exc:
        raise DocumentError(f"{source}: invalid YAML: nested too deeply; refused") from exc
    except ValueError as exc:  # an integer beyond int's digit limit
        raise DocumentError(f"{source}: invalid YAML: {exc}") from exc


class _Dumper(yaml.SafeDumper):
    """Block-style YAML as kubectl prints it: list items level with their key, multi-line strings
    as literal blocks, and never an anchor (`&id001`) and alias for a sub-object that happens to be
    shared in memory: readers of manifests and plans expect each value written out."""

    def ignore_aliases(self, data):
        return True


def _str_presenter(dumper, data):
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|" if "\n" in data else None)


_Dumper.add_representer(str, _str_presenter)


def dump_yaml(*documents) -> str:
    """One YAML document, or a `---` stream of several, keys in the order given."""
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, width=100000)


def parse(text: str, source: str = "<input>", *, flatten_array: bool = True, fast: bool = True) -> list:
    """JSON (an object or an array) or a YAML stream -> the list of its documents, uninterpreted.

    A top-level JSON array gives its elements when `flatten_array` is true, else one document.
    `fast` parses YAML with libyaml where installed; without it, with the pure-Python parser,
    whose messages are the same wherever the plugin runs (the zipapp has no libyaml).
    """
    is_json = text.lstrip().startswith(("{", "["))
    if is_json:
        documents = _json(text, source)
        if not flatten_array and text.lstrip().startswith("["):
            documents = [documents]
    else:
        documents = _yaml(text, source, fast)
    if not is_json or len(text) <= JSON_WALK_MAX_CHARS:
        _check_bounds(documents, source, len(text))
    return documents


__all__ = ["MAX_DEPTH", "decode", "read_file", "parse", "dump_yaml"]
