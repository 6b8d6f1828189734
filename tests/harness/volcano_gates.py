"""Volcano 1.15's queue-admission scheduling gate, as the tests need it: its names, its removal rule,
and a stand-in for the vc-scheduler gate manager that lifts it on the e2e control plane.

Volcano 1.15 (alpha feature `SchedulingGatesQueueAdmission`) puts the gate
`scheduling.volcano.sh/queue-allocation-gate` on pods annotated
`scheduling.volcano.sh/queue-allocation-gate: "true"`, and vc-scheduler removes it once the pod's queue
admits it — but only when it is the pod's *only* gate: `Enqueue` in
volcano.sh/volcano@v1.15.1 pkg/scheduler/gate/schedulinggate.go returns early unless
`api.HasOnlyVolcanoSchedulingGate(pod)` (pkg/scheduler/api/helpers.go: exactly one gate, named
QueueAllocationGateKey), and the removal itself is a strategic-merge patch deleting that one gate
(pkg/scheduler/cache/util.go `RemoveVolcanoSchGate`). So repack's placement gate must be lifted first,
or Volcano never lifts its own.

Volcano 1.15 cannot be built here (its volcano.sh/apis module is not served; hack/controlplane/README.md),
so the e2e tests run vc-scheduler v1.14.1 and `QueueGateLifter` does what v1.15's gate manager does
with the gate, by that rule (the queue check itself is not modelled: the default queue admits all).
"""
from __future__ import annotations

import threading
from typing import Any, Mapping

QUEUE_ALLOCATION_GATE = "scheduling.volcano.sh/queue-allocation-gate"
QUEUE_ALLOCATION_ANNOTATION = QUEUE_ALLOCATION_GATE   # the opt-in annotation, value "true"


def _gates(pod: Mapping[str, Any]) -> list:
    return [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or () if isinstance(g, Mapping)]


def has_only_volcano_gate(pod: Mapping[str, Any]) -> bool:
    """Volcano 1.15 `HasOnlyVolcanoSchedulingGate`: exactly one gate, and it is Volcano's."""
    return _gates(pod) == [QUEUE_ALLOCATION_GATE]


def volcano_lifts_its_gate(pod: Mapping[str, Any]) -> bool:
    """Whether vc-scheduler 1.15 would enqueue the removal of its gate from `pod` (once its queue
    admits it): the pod opted in (annotation "true") and Volcano's gate is its only gate."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return annotations.get(QUEUE_ALLOCATION_ANNOTATION) == "true" and has_only_volcano_gate(pod)


class QueueGateLifter:
    """Lifts Volcano's gate from the pods of `namespace` that `volcano_lifts_its_gate` allows, every
    `interval` seconds, while not paused: vc-scheduler 1.15's gate manager, on the real API server."""

    def __init__(self, core, namespace: str, interval: float = 0.3):
        self.core, self.namespace, self.interval = core, namespace, interval
        self.lifted: list = []          # names of the pods it lifted the gate from, in order
        self._run = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="volcano-queue-gate-lifter", daemon=True)

    def start(self) -> "QueueGateLifter":
        self._run.set()
        self._thread.start()
        return self

    def pause(self) -> None:
        self._run.clear()

    def resume(self) -> None:
        self._run.set()

    def stop(self) -> None:
        self._stop.set()
        self._run.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        api = self.core.api_client
        while not self._stop.is_set():
            self._run.wait()
            if self._stop.is_set():
                return
            for pod in self.core.list_namespaced_pod(self.namespace).items:
                obj = api.sanitize_for_serialization(pod)
                if volcano_lifts_its_gate(obj):
                    self.core.patch_namespaced_pod(pod.metadata.name, self.namespace, {"spec": {"schedulingGates": [
                        {"name": QUEUE_ALLOCATION_GATE, "$patch": "delete"}]}})
                    self.lifted.append(pod.metadata.name)
            self._stop.wait(self.interval)
