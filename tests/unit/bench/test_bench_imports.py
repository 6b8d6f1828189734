"""What is shared between benchmarks is in bench.common (public): no benchmark and no test imports
a private name (`_x`) of a bench module, so a benchmark's internals can change without breaking
another one or a test."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# Owned by another engineer at the time of writing; the lead moves it to bench.topology.instance.
KNOWN = {("tests/unit/planner/test_incremental_identity.py", "bench.topology", "_instance")}


def private_bench_imports(path: Path, root: Path = REPO):
    """(file, module, name) of each `from bench... import _name` and `bench_module._name` use in `path`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(root).as_posix()
    aliases = {}   # local name -> bench module
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "bench":
            for a in node.names:
                if a.name.startswith("_"):
                    found.append((where, node.module, a.name))
                elif node.module == "bench":
                    aliases[a.asname or a.name] = f"bench.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("bench.") and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                and isinstance(node.value, ast.Name) and node.value.id in aliases):
            found.append((where, aliases[node.value.id], node.attr))
    return found


def test_no_bench_private_is_imported_outside_its_module():
    files = sorted(p for d in ("bench", "tests", "hack") for p in (REPO / d).rglob("*.py"))
    found = {hit for p in files for hit in private_bench_imports(p)}
    assert found - KNOWN == set(), sorted(found - KNOWN)


def test_the_check_sees_both_forms(tmp_path):
    (tmp_path / "t.py").write_text("from bench.generate import _pod\nfrom bench import quality as q\nq._Model()\n")
    assert private_bench_imports(tmp_path / "t.py", tmp_path) == [
        ("t.py", "bench.generate", "_pod"), ("t.py", "bench.quality", "_Model")]
