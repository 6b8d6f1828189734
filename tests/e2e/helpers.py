"""Helpers shared by the e2e tests: polling with a clear failure, the seed's Volcano Job, and the
plugin as a user runs it (`repack`, `doctor_all_ok`) with the image hack/build-image.sh built."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.harness import NPU_RESOURCE
from tests.harness.controlplane import REPO_ROOT


def wait_for(what, fn, timeout=90.0, interval=0.25):
    """Poll `fn` until it returns something truthy; fail naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}; last: {last!r}")


def absent(read) -> bool:
    """True when `read()` answers 404; any other API error is raised."""
    from kubernetes.client.rest import ApiException
    try:
        read()
        return False
    except ApiException as e:
        if e.status == 404:
            return True
        raise


def vcjob(name, labels, tasks, node_selector):
    """A Volcano Job as the seed writes it; tasks: [(task, replicas, cards)].

    Queue, minAvailable, maxRetry and task minAvailable are spelled out: the harness runs without
    Volcano's admission webhook that defaults them. cpu/memory are requested as well: Volcano
    counts a pod without them as BestEffort, which only its backfill action places.
    """
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "schedulerName": "volcano", "queue": "default",
            "minAvailable": sum(r for _, r, _ in tasks), "maxRetry": 3,
            "tasks": [{
                "name": task, "replicas": replicas, "minAvailable": replicas,
                "template": {"metadata": {"labels": {"app": name}}, "spec": {
                    "schedulerName": "volcano", "nodeSelector": node_selector,
                    "terminationGracePeriodSeconds": 30, "restartPolicy": "Never",
                    "containers": [{
                        "name": "trainer", "image": "alpine:3.20",
                        "command": ["sh", "-c", "tail -f /dev/null"],
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi", NPU_RESOURCE: str(cards)},
                                      "limits": {"cpu": "1", "memory": "1Gi", NPU_RESOURCE: str(cards)}},
                    }],
                }},
            } for task, replicas, cards in tasks],
        },
    }


def repack(kubeconfig, *args, timeout=400, tree=REPO_ROOT):
    """`kubectl repack` as its own process, as a user runs it: from today's tree, or (`tree`) an old one."""
    return subprocess.run([sys.executable, "-m", "kubectl_repack.cli", "--kubeconfig", kubeconfig, *args],
                          cwd=tree, env=dict(os.environ, PYTHONPATH=tree), capture_output=True, text=True,
                          timeout=timeout)


def built_image_parts() -> tuple:
    """(repository, sha256:digest) of the image hack/build-image.sh built (hack/test.sh exports it)."""
    name, digest = os.environ.get("REPACK_IMAGE"), os.environ.get("REPACK_IMAGE_DIGEST")
    if not name or not digest:
        pytest.fail("REPACK_IMAGE/REPACK_IMAGE_DIGEST are not set: run `eval \"$(bash hack/build-image.sh "
                    "--print-env)\"` first (hack/test.sh does this)", pytrace=False)
    return name.rsplit(":", 1)[0], digest


def built_image() -> str:
    """REPOSITORY@sha256:<digest> of the image hack/build-image.sh built."""
    return "@".join(built_image_parts())


def doctor_all_ok(kubeconfig, namespace, timeout=60, interval=2) -> str:
    """`kubectl repack doctor`: every line OK (waited for: a Lease is renewed, vc-scheduler acts)."""
    last = None

    def ok():
        nonlocal last
        last = repack(kubeconfig, "doctor", "--repack-namespace", namespace)
        lines = [line for line in last.stdout.splitlines() if line.strip()]
        return last.returncode == 0 and lines and all(line.startswith("OK ") for line in lines)

    deadline = time.monotonic() + timeout
    while not ok():
        assert time.monotonic() < deadline, f"doctor is not all OK after {timeout}s:\n{last.stdout}{last.stderr}"
        time.sleep(interval)
    return last.stdout
