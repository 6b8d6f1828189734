"""Code and docs name the requirement they are about (SEC-4, RELIEF-3: the ids of the product
specification), never a tracker entry: the tracker is not in the repository, so a reference to one
of its entries tells a reader nothing. This fails on any new such reference in a tracked text file."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Spelled so that this file does not match itself.
REFERENCE = re.compile(r"\b" + "iss" + r"ues? ?#?\d+", re.IGNORECASE)
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".sh", ".txt", ".cfg", ".toml", ".ini", ".json", ".tpl", ".in", ""}
# Files other engineers were rewriting when this test was written: they still carry such references,
# which the lead removes after merging. Not a place for new entries.
NOT_YET = {
    "docs/benchmarks.md",
    "planner/setsearch.py",
    "tests/unit/planner/test_cover.py",
    "tests/unit/planner/test_exact_small.py",
    "tests/unit/planner/test_improve_search.py",
    "tests/unit/planner/test_incremental_identity.py",
    "tests/unit/planner/test_not_evictable.py",
    "tests/unit/planner/test_quality_cases.py",
    "tests/unit/planner/test_setsearch.py",
}


def tracked_text_files():
    names = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in names.decode().split("\0"):
        path = REPO / name
        if name and Path(name).suffix in TEXT_SUFFIXES and path.is_file() and not path.is_symlink():
            yield name, path


def references(text: str) -> list[str]:
    return [m.group(0) for m in REFERENCE.finditer(text)]


def test_no_tracker_references_in_code_and_docs():
    found = {}
    for name, path in tracked_text_files():
        if name in NOT_YET:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if hits := references(text):
            found[name] = hits
    assert found == {}, f"name the requirement id (docs SPEC ids such as SEC-4) instead: {found}"


def test_the_pattern_catches_the_usual_spellings_and_nothing_else():
    word = "iss" + "ue"
    for text in (f"({word} 24)", f"{word.title()} 22's Done-means", f"{word} #13 item 7", f"{word}s 11 and 20",
                 f"Security {word} 19"):
        assert references(text), text
    for text in ("SEC-4", "RELIEF-3", f"the {word} with it", f"{word}r", "tissue 5 x"):
        assert not references(text), text


def test_files_not_yet_cleaned_still_exist():
    """An entry of NOT_YET goes once its file is clean or gone, so the list only shrinks."""
    tracked = dict(tracked_text_files())
    for name in NOT_YET:
        assert name in tracked, f"{name}: gone, drop it from NOT_YET"
        assert references(tracked[name].read_text(encoding="utf-8")), f"{name}: clean now, drop it from NOT_YET"
