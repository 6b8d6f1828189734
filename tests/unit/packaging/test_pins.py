"""One dependency set: the image's hash-pinned requirements (hack/image/requirements.txt) are the
versions constraints.txt pins for the pip install, the tests and the krew zipapp."""
from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _pins(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s\\;]+)", line)
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return out


def test_the_image_installs_the_pinned_versions():
    image, pinned = _pins(REPO / "hack/image/requirements.txt"), _pins(REPO / "constraints.txt")
    assert image and pinned
    assert {n: v for n, v in image.items() if n in pinned} == {n: pinned[n] for n in image if n in pinned}
    unpinned = sorted(set(image) - set(pinned))
    assert not unpinned, f"the image installs {unpinned}, which constraints.txt does not pin"


def _webhook_extra() -> list:
    import ast

    tree = ast.parse((REPO / "setup.py").read_text())
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup")
    extras = ast.literal_eval(next(k.value for k in call.keywords if k.arg == "extras_require"))
    return [re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", r).group(0)).lower() for r in extras["webhook"]]


def test_the_webhook_extra_is_pinned_and_in_the_image():
    # prometheus_client serves both processes' /metrics: the image must carry it, at the pinned version.
    extra = _webhook_extra()
    assert "prometheus-client" in extra
    image, pinned = _pins(REPO / "hack/image/requirements.txt"), _pins(REPO / "constraints.txt")
    assert [n for n in extra if n not in pinned] == [] and [n for n in extra if n not in image] == []
