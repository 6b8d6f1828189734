"""The krew zipapp against the real control plane, run as krew users run it (`python3 -I -S`).

The defect this guards against (CLI-3): the zipapp evicted pods and then died importing a module it does not
carry (`find_replacements` ran after the evictions). Here the built archive runs `apply` end to
end (evictions, replacement tracking, verification), then `--resume` of the finished run,
`status`, `snapshot` and a live `plan`; the offline commands are in tests/unit/packaging.
"""
from __future__ import annotations

import json
import os

import pytest
import yaml

from tests.e2e.execute_helpers import (LEASE_NAMESPACE, build_seed_layout, delete_runs, execute_run, unique,
                                       write_run)
from tests.release import build_release, run_zipapp

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def zipapp(tmp_path_factory):
    return build_release(tmp_path_factory.mktemp("zipapp"))[2] / "kubectl-repack"


def _run(zipapp, control_plane, *args):
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/"),
           "REPACK_NAMESPACE": LEASE_NAMESPACE}
    done = run_zipapp(zipapp, *args, "--kubeconfig", control_plane.kubeconfig, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_zipapp_applies_resumes_shows_and_snapshots(zipapp, control_plane, fake_nodes, make_namespace, tmp_path):
    api = control_plane.api_client
    ns = make_namespace("repack-zipapp")
    layout = build_seed_layout(api, fake_nodes, ns, ("zip-node-01", "zip-node-02", "zip-node-03"))
    name = unique("zipapp-execute")
    try:
        done = _run(zipapp, control_plane, "apply", "--local", "-f", write_run(tmp_path, execute_run(name)),
                    "--cooldown", "0s", "-o", "json")
        # 0: node 01 freed; 5: vc-scheduler bound a replacement back (no webhook here): both are
        # complete runs whose replacements were found and verified.
        assert done.returncode in (0, 5), done.stderr
        st = json.loads(done.stdout)["status"]
        assert sorted(r["victimPodName"] for r in st["relocations"]) == sorted(layout["batch"])
        assert all(r["eviction"]["phase"] == "Accepted" for r in st["relocations"])
        assert all(r["placement"]["phase"] == "Placed" and r["placement"]["actualNodeName"]
                   for r in st["relocations"])
        assert st["result"]["metricsVerified"] is True and st["result"]["movedCardCount"] == 2

        again = _run(zipapp, control_plane, "apply", "--local", "--resume", name, "-o", "json")
        assert again.returncode == done.returncode, again.stderr
        assert json.loads(again.stdout)["status"] == st

        status = _run(zipapp, control_plane, "status", name)
        assert status.returncode == 0, status.stderr
        assert name in status.stdout and st["phase"] in status.stdout

        snap = tmp_path / "snapshot.yaml"
        done = _run(zipapp, control_plane, "snapshot", "-o", str(snap))
        assert done.returncode == 0, done.stderr
        pods = [o for o in yaml.safe_load(snap.read_text())["items"]
                if o["kind"] == "Pod" and o["metadata"]["namespace"] == ns]
        assert len(pods) == len(layout["batch"]) + len(layout["protected"])

        dry = execute_run(unique("zipapp-dryrun"))
        dry["spec"]["mode"] = "DryRun"
        plan = _run(zipapp, control_plane, "plan", "-f", write_run(tmp_path, dry))
        assert plan.returncode == 0, plan.stderr
        assert "Outcome:" in plan.stdout
    finally:
        delete_runs(api, [name])
