"""kubectl's connection flags on the plugin, against the real API server: --server,
--insecure-skip-tls-verify, --token, --request-timeout and impersonation with --as and one or more
--as-group, through the plugin's real entry point (`kubectl-repack`, the program kubectl runs for `kubectl repack`)."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid

EXE = os.path.join(os.path.dirname(sys.executable), "kubectl-repack")


def _repack(*args):
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=120)


def _missing_run():
    return f"no-such-run-{uuid.uuid4().hex[:6]}"


def test_server_override_reaches_the_same_api_server(control_plane):
    # The kubeconfig's client certificate, sent to the server given on the command line.
    r = _repack("status", _missing_run(), "--kubeconfig", control_plane.kubeconfig,
                "--server", control_plane.cp.server, "--insecure-skip-tls-verify")
    assert r.returncode == 1
    assert "not found (HTTP 404)" in r.stderr, r.stderr


def test_server_override_to_nowhere_fails_cleanly(control_plane):
    r = _repack("status", _missing_run(), "--kubeconfig", control_plane.kubeconfig,
                "--server", "https://127.0.0.1:1")
    assert r.returncode == 1 and "cannot reach the API server" in r.stderr and "Traceback" not in r.stderr


def test_a_token_replaces_the_client_certificate(control_plane):
    r = _repack("status", _missing_run(), "--kubeconfig", control_plane.kubeconfig, "--token", "not-a-token")
    assert r.returncode == 1
    assert "(HTTP 401)" in r.stderr, r.stderr


def test_impersonation_is_what_the_api_server_authorizes(control_plane):
    user = f"repack-e2e-nobody-{uuid.uuid4().hex[:4]}"
    r = _repack("status", _missing_run(), "--kubeconfig", control_plane.kubeconfig, "--as", user)
    assert r.returncode == 1
    assert f'User "{user}" cannot get resource "repackruns"' in r.stderr and "(HTTP 403)" in r.stderr, r.stderr
    # system:masters may do anything: impersonating that group brings the 404 back.
    r = _repack("status", _missing_run(), "--kubeconfig", control_plane.kubeconfig, "--as", user,
                "--as-group", "system:masters")
    assert r.returncode == 1 and "not found (HTTP 404)" in r.stderr, r.stderr


def test_every_group_reaches_the_api_server(control_plane):
    # Only the second group may read RepackRuns: the API server must see both groups (one header
    # each; a single comma-joined header would be one group "repack-e2e-none, system:masters").
    user = f"repack-e2e-nobody-{uuid.uuid4().hex[:4]}"
    r = _repack("status", _missing_run(), "--kubeconfig", control_plane.kubeconfig, "--as", user,
                "--as-group", "repack-e2e-none", "--as-group", "system:masters")
    assert r.returncode == 1 and "not found (HTTP 404)" in r.stderr, r.stderr
    r = _repack("status", _missing_run(), "--kubeconfig", control_plane.kubeconfig, "--as", user,
                "--as-group", "repack-e2e-none", "--as-group", "repack-e2e-other")
    assert r.returncode == 1 and "(HTTP 403)" in r.stderr, r.stderr


def test_request_timeout_is_accepted_in_kubectls_forms(control_plane):
    for value in ("0", "30", "30s", "1m"):
        r = _repack("status", _missing_run(), "--kubeconfig", control_plane.kubeconfig, "--request-timeout", value)
        assert r.returncode == 1 and "not found (HTTP 404)" in r.stderr, (value, r.stderr)


def test_an_invalid_request_timeout_is_refused_before_connecting():
    r = _repack("status", "x", "--request-timeout", "soon", "--kubeconfig", "/nonexistent")
    assert r.returncode == 2
    assert r.stderr.startswith("error: Invalid value for '--request-timeout'"), r.stderr
