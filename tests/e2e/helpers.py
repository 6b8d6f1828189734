"""Helpers shared by the e2e tests: polling with a clear failure, and the seed's Volcano Job."""
from __future__ import annotations

import time

import pytest

from tests.harness import NPU_RESOURCE


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
