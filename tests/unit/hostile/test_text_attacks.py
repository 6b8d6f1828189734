"""Hostile text, for both kinds of file the plugin reads (a snapshot and a RepackRun): alias bombs,
nesting thousands deep, bytes that are not UTF-8, integers past Python's digit limit, duplicate
keys in JSON and YAML. Each is refused by the one oracle with an error that names the file.
Before planner.documents these raised tracebacks, ran out of memory, or ran unbounded."""
from __future__ import annotations

import re

import pytest

from .oracle import assert_refused, invoke, recorder  # noqa: F401 - fixture

R = "huawei.com/ascend-1980"
RUN_HEAD = "apiVersion: repack.volcano.sh/v1alpha1\nkind: RepackRun\nmetadata: {name: x}\n"


def _alias_bomb(levels, width=9):
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def _nested_lists_bomb(levels):
    """A List whose items are a List of nine Lists of nine Lists...: under 1,000 bytes, 9**levels objects."""
    lines = ["apiVersion: v1", "kind: List", "defs:",
             "  l0: &l0 {apiVersion: v1, kind: List, items: [{apiVersion: v1, kind: Namespace, metadata: {name: n}}]}"]
    for i in range(1, levels):
        lines.append(f"  l{i}: &l{i} {{apiVersion: v1, kind: List, items: [" + ", ".join([f"*l{i - 1}"] * 9) + "]}")
    lines.append(f"items: [*l{levels - 1}]")
    return "\n".join(lines) + "\n"


ATTACKS = {
    # name: (text or bytes, what the error must say after the file name)
    "alias-bomb-7": (_alias_bomb(7), r"expands to more than \d+ values"),
    "alias-bomb-11": (_alias_bomb(11), r"expands to more than \d+ values"),
    "yaml-flow-nesting-5000": ("a: " + "[" * 5000 + "]" * 5000 + "\n", r"nest"),
    "yaml-block-nesting-1500": ("".join("  " * i + "a:\n" for i in range(1500)), r"nest"),
    "yaml-nesting-100": ("a: " + "[" * 100 + "]" * 100 + "\n", r"nested deeper than 64 levels"),
    "json-nesting-50000": ("[" * 50000 + "]" * 50000, r"nested too deeply"),
    "json-nesting-900": ('{"a": ' + "[" * 900 + "]" * 900 + "}", r"nested (too deeply|deeper than 64 levels)"),
    "not-utf8": (b"apiVersion: v1\nkind: \xff\xfe\n", r"not UTF-8 text: byte 0xff at offset 21 cannot be decoded"),
    "latin1-name": ("metadata: {name: caf\xe9}\n".encode("latin-1"), r"not UTF-8 text"),
    "json-int-5000-digits": ('{"a": ' + "9" * 5000 + "}", r"invalid JSON: .*4300"),
    "yaml-int-5000-digits": ("a: " + "9" * 5000 + "\n", r"invalid YAML: .*4300"),
    "json-duplicate-key": ('{"kind": "List", "kind": "Pod"}', r"invalid JSON: duplicate key 'kind'"),
    "yaml-duplicate-key": ("kind: List\nkind: Pod\n", r"invalid YAML: found duplicate key 'kind'"),
}


def _write(tmp_path, content):
    path = tmp_path / "input.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_snapshot_text_is_refused(tmp_path, recorder, name):
    content, says = ATTACKS[name]
    path = _write(tmp_path, content)
    r = invoke(["plan", "--snapshot", path, "--resource", R])
    assert_refused(r, recorder, re.compile(rf"^error: {re.escape(str(path))}(:\d+:\d+)?: .*{says}"))


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_run_text_is_refused(tmp_path, recorder, name):
    content, says = ATTACKS[name]
    if isinstance(content, bytes):
        content = RUN_HEAD.encode() + content
        says = says.replace("offset 21", f"offset {21 + len(RUN_HEAD)}")
    elif not content.startswith(("{", "[")):  # the attack inside a RepackRun's spec
        content = RUN_HEAD + "spec:\n" + "".join(f"  {line}\n" for line in content.splitlines())
    path = _write(tmp_path, content)
    r = invoke(["plan", "-f", path, "--snapshot", "examples/seed-3-nodes.yaml"])
    assert_refused(r, recorder, re.compile(rf"^error: {re.escape(str(path))}(:\d+:\d+)?: .*{says}"))


def test_nested_lists_bomb_snapshot_is_refused(tmp_path, recorder):
    text = _nested_lists_bomb(8)
    assert len(text) < 1000
    path = _write(tmp_path, text)
    r = invoke(["plan", "--snapshot", path, "--resource", R])
    assert_refused(r, recorder, re.compile(rf"^error: {re.escape(str(path))}: expands to more than"))


def test_small_repetition_by_aliases_is_still_accepted(tmp_path, recorder):
    """Anchors for a repeated toleration or label set are ordinary YAML: only blow-ups are refused."""
    text = ("apiVersion: v1\nkind: List\nitems:\n"
            "- {apiVersion: v1, kind: Node, metadata: {name: n1, labels: &l {pool: a}},"
            " status: {allocatable: {huawei.com/ascend-1980: '8'}}}\n"
            "- {apiVersion: v1, kind: Node, metadata: {name: n2, labels: *l},"
            " status: {allocatable: {huawei.com/ascend-1980: '8'}}}\n")
    r = invoke(["plan", "--snapshot", _write(tmp_path, text), "--resource", R])
    assert r.exit_code == 0, r.output
