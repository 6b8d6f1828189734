"""In-memory implementations of the Execute engine's interfaces, for unit tests of the
orchestration only (the e2e tests use the real API server)."""
from __future__ import annotations

import copy
import datetime as dt

import planner
from kubectl_repack.engine import executor
from kubectl_repack.engine import ports
from kubectl_repack.api import times
from tests import builders as b

T0 = dt.datetime(2026, 7, 30, 8, 0, 0, tzinfo=dt.timezone.utc)
NS = "demo"


class FakeClock(ports.Clock):
    def __init__(self, start=T0):
        self.t = start
        self.slept = []

    def now(self):
        return self.t

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.t += dt.timedelta(seconds=seconds)


class FakeCluster:
    """Objects as the API returns them; an accepted eviction deletes the pod and, as a workload
    controller plus scheduler would, re-creates it under the same name bound to `rebind[name]`."""

    def __init__(self, objects, responses=None, rebind=None, pdbs=None, clock=None):
        self.objects = [copy.deepcopy(o) for o in objects]
        self.responses = {k: list(v) for k, v in (responses or {}).items()}
        self.rebind = dict(rebind or {})
        self.pdbs = list(pdbs or [])
        self.calls = []        # (name, uid, grace)
        self.clock = clock
        self.on_evict = None   # hook(name) called before answering
        self.generation = 0

    # ClusterReader
    def snapshot_objects(self):
        return copy.deepcopy(self.objects)

    def _pods(self):
        return [o for o in self.objects if o["kind"] == "Pod"]

    def get_pod(self, namespace, name):
        for p in self._pods():
            if p["metadata"]["namespace"] == namespace and p["metadata"]["name"] == name:
                return copy.deepcopy(p)
        return None

    def get_podgroup(self, namespace, name):
        for o in self.objects:
            if o["kind"] == "PodGroup" and o["metadata"]["namespace"] == namespace and o["metadata"]["name"] == name:
                return copy.deepcopy(o)
        return None

    def list_pods(self, namespace):
        return [copy.deepcopy(p) for p in self._pods() if p["metadata"]["namespace"] == namespace]

    def list_pdbs(self, namespace):
        return [copy.deepcopy(p) for p in self.pdbs if p["metadata"]["namespace"] == namespace]

    # Evictor
    def evict(self, namespace, name, uid, grace_seconds):
        self.calls.append((name, uid, grace_seconds))
        if self.on_evict:
            self.on_evict(name)
        script = self.responses.get(name)
        code = script.pop(0) if script else 201
        if isinstance(code, tuple):
            code, message = code
        else:
            message = {429: "Cannot evict pod as it would violate the pod's disruption budget.",
                       500: "This pod has more than one PodDisruptionBudget, which the eviction subresource "
                            "does not support."}.get(code, "")
        pod = self.get_pod(namespace, name)
        if code in (200, 201):
            if pod is None:
                return ports.EvictionResponse(404, f'pods "{name}" not found')
            if uid and pod["metadata"]["uid"] != uid:
                return ports.EvictionResponse(409, "Precondition failed: UID in precondition")
            self.remove(namespace, name)
            if name in self.rebind:
                target = self.rebind[name]
                node, new_name = target if isinstance(target, tuple) else (target, name)
                self.recreate(namespace, new_name, node, pod)
        return ports.EvictionResponse(code, message)

    def remove(self, namespace, name):
        self.objects = [o for o in self.objects if not (
            o["kind"] == "Pod" and o["metadata"]["namespace"] == namespace and o["metadata"]["name"] == name)]

    def recreate(self, namespace, name, node, like):
        self.generation += 1
        new = copy.deepcopy(like)
        new["metadata"]["name"] = name
        new["metadata"]["uid"] = f"{like['metadata']['uid']}-r{self.generation}"
        new["metadata"]["creationTimestamp"] = times.rfc3339(self.clock.now() if self.clock else T0)
        new["spec"]["nodeName"] = node
        self.objects.append(new)


class FakeRuns:
    """RepackRuns in memory; update_status applies the mutation to the freshest copy.
    `interleave(status)` runs before each mutation, standing in for the coordinator's writes."""

    def __init__(self, runs=()):
        self.runs = {r["metadata"]["name"]: copy.deepcopy(r) for r in runs}
        self.interleave = None
        self.writes = 0

    def get(self, name):
        return copy.deepcopy(self.runs[name])

    def update_status(self, name, mutate, uid=None):
        run = self.runs[name]
        if uid is not None:
            assert run["metadata"].get("uid") == uid, "another incarnation of the run"
        status = run.setdefault("status", {})
        if self.interleave:
            self.interleave(status)
        st = copy.deepcopy(status)
        mutate(st)
        run["status"] = st
        self.writes += 1
        return copy.deepcopy(run)


def seed_objects(eligible_on=("n1", "n1")):
    """The seed in miniature: n1 holds the eligible 2x1-card training gang; n2 and n3 are 7/8 full
    with pods that are not movable (not scheduled by Volcano)."""
    objs = [b.node("n1"), b.node("n2"), b.node("n3")]
    objs += b.gang("train", ns=NS, workers=eligible_on, labels={"app": "train"})
    for n in ("n2", "n3"):
        objs.append(b.pod(f"fixed-{n}", cards=7, on=n, ns=NS, scheduler="default-scheduler",
                          owner=("ReplicaSet", f"fixed-{n}-abc")))
    for o in objs:
        if o["kind"] == "Pod":
            o["metadata"]["creationTimestamp"] = "2026-07-30T07:00:00Z"
    return objs


def execute_run(name="run-1", grace=0):
    spec = b.spec(min_improvement=10)
    spec["mode"] = "Execute"
    spec["eviction"] = {"gracePeriodSeconds": grace}
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackRun", "metadata": {"name": name, "uid": "run-uid"},
            "spec": spec}


def engine_for(cluster, runs, clock, **opts):
    options = executor.Options(poll_interval=1.0, **opts)
    return executor.Executor(cluster, cluster, runs, clock=clock, options=options)


def started(cluster, runs, clock, name="run-1", **opts):
    """An engine whose run has its plan and records persisted (the state right before evicting)."""
    eng = engine_for(cluster, runs, clock, **opts)
    run = runs.get(name)
    plan = eng.plan_live(run)
    assert plan.outcome == "RepackRecommended", plan.message
    eng.start(name, plan)
    return eng, plan


def planned_nodes(plan):
    return {m.pod.name: m.to_node for m in plan.moves}


__all__ = ["FakeClock", "FakeCluster", "FakeRuns", "seed_objects", "execute_run", "engine_for", "started",
           "planned_nodes", "T0", "NS", "planner"]
