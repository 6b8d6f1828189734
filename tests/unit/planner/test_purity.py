"""The planner stays a pure library (DESIGN convention 1): no Kubernetes client, Flask or click,
and no I/O beyond reading the snapshot file it is handed."""
import ast
import pathlib

import pytest

PLANNER = pathlib.Path(__file__).resolve().parents[3] / "planner"
FORBIDDEN = {"kubernetes", "flask", "click", "requests", "urllib3", "kubectl_repack", "webhook", "subprocess", "socket"}


@pytest.mark.parametrize("path", sorted(PLANNER.glob("*.py")), ids=lambda p: p.name)
def test_planner_module_imports_nothing_impure(path):
    tree = ast.parse(path.read_text(), str(path))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            imported.add(node.module.split(".")[0])
    assert not imported & FORBIDDEN, f"{path.name} imports {sorted(imported & FORBIDDEN)}"


def test_planner_package_found():
    assert (PLANNER / "plan.py").exists() and (PLANNER / "load.py").exists()
