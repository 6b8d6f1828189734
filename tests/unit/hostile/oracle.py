"""The one oracle of the hostile-input suites: refused with exit 2, one `error:` line naming the
object and field, no traceback, and not a single call to the cluster.

The recorder sits at the lowest layer every Kubernetes call goes through (the client library's
REST transport), so it sees calls whichever module makes them; it answers none of them.
"""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from kubectl_repack.cli import main

EXIT_USAGE = 2


class RecordingTransport:
    """Stands in for kubernetes.client.rest.RESTClientObject.request: records, never answers."""

    def __init__(self):
        self.calls = []

    def __call__(self, _client, method, url, *args, **kwargs):
        self.calls.append((method, url))
        raise AssertionError(f"hostile input reached the cluster: {method} {url}")

    @property
    def writes(self):
        return [c for c in self.calls if c[0] not in ("GET", "HEAD", "OPTIONS")]


@pytest.fixture
def recorder(monkeypatch):
    from kubernetes.client import rest

    rec = RecordingTransport()
    monkeypatch.setattr(rest.RESTClientObject, "request", rec)
    return rec


def invoke(args, input=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=input)


def assert_refused(result, recorder, names: re.Pattern | str):
    """Exit 2; stderr is `error: ...` lines only, the first matching `names` (the object and
    field at fault); nothing reached the cluster; no traceback anywhere."""
    out = (result.stdout or "") + (result.stderr or "")
    assert "Traceback" not in out, out
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == EXIT_USAGE, f"exit {result.exit_code}: {out}"
    lines = result.stderr.splitlines()
    assert lines and all(line.startswith("error: ") for line in lines[:1]), result.stderr
    pattern = names if isinstance(names, re.Pattern) else re.compile(re.escape(names))
    assert any(pattern.search(line) for line in lines), f"{pattern.pattern!r} not in {result.stderr!r}"
    assert recorder.calls == [], recorder.calls
