"""The opt-in NetworkPolicy of `install --apiserver-cidr` is accepted by the real API server (server-side
dry run of exactly what install renders). The e2e cluster's CNI (the bridge plugin) does not enforce
NetworkPolicies, so what the policy blocks is not tested here, only that it is valid and as rendered."""
from __future__ import annotations

import json
import os
import subprocess
import sys

EXE = os.path.join(os.path.dirname(sys.executable), "kubectl-repack")


def test_the_rendered_policy_is_accepted_by_the_api_server(control_plane):
    rendered = subprocess.run([EXE, "install", "--dry-run", "-o", "json", "-n", "default",
                               "--apiserver-cidr", "10.244.0.1", "--apiserver-cidr", "fd00::/64"],
                              capture_output=True, text=True, timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    (policy,) = [o for o in json.loads(rendered.stdout)["items"] if o["kind"] == "NetworkPolicy"]
    out = control_plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(policy))
    stored = json.loads(out.stdout)
    assert stored["kind"] == "NetworkPolicy" and stored["metadata"]["namespace"] == "default"
    assert stored["spec"]["ingress"] == policy["spec"]["ingress"]
    assert stored["spec"]["policyTypes"] == ["Ingress"]
