"""docs/architecture.md stays true: the modules it names exist, its requirement index is the code's.

The index is generated (hack/requirement_index.py); a document that names a module after it moved,
or an index that misses a citation the code added, fails here instead of misleading a newcomer.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "architecture.md"
sys.path.insert(0, str(REPO / "hack"))
import requirement_index  # noqa: E402  (a script in hack/, not a package)

MODULE = re.compile(r"`((?:planner|kubectl_repack|webhook)(?:\.[a-z_]+)*)`")


def test_every_module_the_document_names_exists():
    named = sorted(set(MODULE.findall(DOC.read_text(encoding="utf-8"))))
    assert len(named) > 20
    missing = [name for name in named if importlib.util.find_spec(name) is None]
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_the_requirement_index_is_the_one_the_code_cites():
    text = DOC.read_text(encoding="utf-8")
    block = requirement_index.render(REPO)
    assert block in text, "the requirement index is stale: run `python3 hack/requirement_index.py --write`"
    assert "| GANG-3 |" in block and "`planner.rounds`" in block  # the scan finds what the code cites


def test_the_index_lists_a_citation_planted_in_a_copy(tmp_path):
    for package in requirement_index.PACKAGES:
        (tmp_path / package).mkdir()
    (tmp_path / "planner" / "planted.py").write_text('"""Implements TOPO-99."""\n')
    assert "| TOPO-99 | `planner.planted` |" in requirement_index.render(tmp_path)


def test_the_import_contracts_cite_this_document():
    assert "docs/architecture.md" in (REPO / ".importlinter").read_text(encoding="utf-8")
