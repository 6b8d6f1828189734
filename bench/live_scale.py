"""Live planning at scale: `kubectl repack snapshot` and `kubectl repack plan` against a real API server
holding 5,000 nodes and ~20,000 pods (opt-in, not a test, not part of .ci/run).

Starts the e2e control plane (tests/harness: etcd, kube-apiserver, and Volcano's CRDs), stops its
controllers (kube-controller-manager, vc-controller-manager, vc-scheduler: nothing runs the fake
objects, and no garbage collector or job controller acts on them), then creates a generated cluster
(`bench.generate`, seed 1: Namespaces, Nodes with their allocatable in status and their own taints
only, VCJobs, PodGroups,
pods bound to their nodes and set Running through pods/status; ModelServings are left out, their
CRD is not installed) with several clients in parallel. Then it times, each as its own process
with its peak RSS:

- `kubectl-repack snapshot -o FILE` (paged lists of every kind the planner reads),
- `kubectl-repack plan --resource huawei.com/ascend-1980 -o json` (live: the same lists, then the plan),
- `kubectl-repack plan --snapshot FILE ... -o json` (the same cluster from the file, for comparison),

with the time spent listing the cluster (paged lists), in the snapshot source (listing or reading the
file, and the model) and in `planner.plan` (bench.scale's child process).

    eval "$(bash hack/build-control-plane.sh --print-env)"
    python -m bench.live_scale                      # 5,000 nodes, ~20,000 pods
    python -m bench.live_scale --nodes 500 --runs 1 # a quick look
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.generate import R, generate  # noqa: E402
from bench.scale import CHILD  # noqa: E402

CONTROLLERS = ("kube-controller-manager", "vc-controller-manager", "vc-scheduler")
CRD_KINDS = {"PodGroup": ("scheduling.volcano.sh", "v1beta1", "podgroups"),
             "Job": ("batch.volcano.sh", "v1alpha1", "jobs")}


def _strip(obj):
    """What a create may carry: no status (set afterwards where it matters), no server-set fields."""
    out = {k: v for k, v in obj.items() if k != "status"}
    out["metadata"] = {k: v for k, v in obj["metadata"].items() if k not in ("uid", "resourceVersion")}
    return out


class Loader:
    """Bulk creation with one API client per worker thread."""

    def __init__(self, cp, workers):
        import threading

        self.cp, self.workers = cp, workers
        self.local = threading.local()

    def _apis(self):
        from kubernetes import client

        if not hasattr(self.local, "core"):
            api = self.cp.new_api_client()
            self.local.core, self.local.custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        return self.local.core, self.local.custom

    def _create(self, obj):
        from kubernetes.client.exceptions import ApiException

        core, custom = self._apis()
        kind, ns = obj["kind"], obj["metadata"].get("namespace")
        body = _strip(obj)
        try:
            if kind == "Namespace":
                core.create_namespace(body)
            elif kind == "Node":
                core.create_node(dict(body, status=obj.get("status", {})))   # a Node keeps its status on create
                # the API server marks a new node not-ready with a taint (no kubelet will lift it): the node's own
                taints = (obj.get("spec") or {}).get("taints")
                core.patch_node(obj["metadata"]["name"], [{"op": "replace", "path": "/spec/taints", "value": taints}]
                                if taints else [{"op": "remove", "path": "/spec/taints"}])
            elif kind == "Pod":
                core.create_namespaced_pod(ns, body)
                core.patch_namespaced_pod_status(obj["metadata"]["name"], ns, {"status": obj.get("status", {})})
            elif kind in CRD_KINDS:
                group, version, plural = CRD_KINDS[kind]
                custom.create_namespaced_custom_object(group, version, ns, plural, body)
            else:
                return kind, "skipped"
        except ApiException as e:
            if e.status == 409:
                return kind, "exists"
            return kind, f"error {e.status}: {(e.body or '')[:200]}"
        return kind, "created"

    def create(self, objects):
        counts = {}
        with ThreadPoolExecutor(self.workers) as pool:
            for kind, result in pool.map(self._create, objects):
                key = (kind, result if not result.startswith("error") else "error")
                counts[key] = counts.get(key, 0) + 1
                if result.startswith("error") and counts[key] <= 3:
                    print(f"  {kind}: {result}", file=sys.stderr)
        return counts


def populate(cp, nodes, seed, workers):
    """Create the generated cluster; returns {(kind, result): count} and the seconds it took."""
    from kubernetes import client

    objects = generate(nodes, seed)
    core = client.CoreV1Api(cp.api_client())
    t0 = time.perf_counter()
    loader = Loader(cp, workers)
    namespaces = sorted({o["metadata"].get("namespace") for o in objects if o["metadata"].get("namespace")})
    counts = loader.create([o for o in objects if o["kind"] == "Namespace"] +
                           [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in namespaces])
    for n in namespaces:   # the ServiceAccount admission wants one; its controller is stopped
        try:
            core.create_namespaced_service_account(n, {"metadata": {"name": "default"}})
        except client.exceptions.ApiException as e:
            if e.status != 409:
                raise
    for kinds in (("Node", "Job"), ("PodGroup",), ("Pod",)):
        part = loader.create([o for o in objects if o["kind"] in kinds])
        for k, v in part.items():
            counts[k] = counts.get(k, 0) + v
        print(f"  created {', '.join(kinds)} in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    return counts, time.perf_counter() - t0


def timed(args, kubeconfig):
    """Run the CLI with `args` (bench.scale's child: the snapshot source and planner.plan timed);
    {process_s, load_s, plan_s, peak_rss_mb, stdout}."""
    with tempfile.TemporaryDirectory(prefix="repack-live-") as tmp:
        times = os.path.join(tmp, "times.json")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env.update(KUBECONFIG=kubeconfig, REPACK_BENCH_TIMES=times)
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            t0 = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-c", CHILD, *args], cwd=ROOT, env=env, stdout=out, stderr=err)
            _, status, usage = os.wait4(proc.pid, 0)
            proc.returncode = os.waitstatus_to_exitcode(status)
            wall = time.perf_counter() - t0
            if proc.returncode != 0:
                err.seek(0)
                raise RuntimeError(f"{' '.join(args)} failed ({proc.returncode}):\n{err.read().decode()[-2000:]}")
            out.seek(0)
            stdout = out.read()
        with open(times, encoding="utf-8") as f:
            inside = json.load(f)
    return {"process_s": wall, "list_s": inside.get("list_s", 0.0), "load_s": inside.get("load_s", 0.0),
            "plan_s": inside.get("plan_s", 0.0),
            "peak_rss_mb": usage.ru_maxrss / 1024, "stdout": stdout}


def _median(rows, what, key):
    values = sorted(r[what][key] for r in rows)
    return values[len(values) // 2]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=8, help="parallel clients creating the objects")
    args = ap.parse_args(argv)

    from tests.harness.controlplane import ControlPlane

    t0 = time.perf_counter()
    cp = ControlPlane(keep=False)
    cp.start()
    try:
        for name in CONTROLLERS:
            cp.components[name].stop()
        print(f"control plane up in {time.perf_counter() - t0:.0f} s (controllers stopped): {cp.server}",
              file=sys.stderr, flush=True)
        counts, seconds = populate(cp, args.nodes, args.seed, args.workers)
        made = {}
        for (kind, result), n in sorted(counts.items()):
            made.setdefault(kind, []).append(f"{n} {result}")
        print(f"populated in {seconds:.0f} s: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in made.items()),
              flush=True)
        rows = []
        with tempfile.TemporaryDirectory(prefix="repack-live-") as tmp:
            snap = os.path.join(tmp, "snapshot.json")
            for i in range(args.runs):
                row = {"snapshot": timed(["snapshot", "-o", snap], cp.kubeconfig),
                       "live": timed(["plan", "--resource", R, "-o", "json"], cp.kubeconfig),
                       "file": timed(["plan", "--snapshot", snap, "--resource", R, "-o", "json"], cp.kubeconfig)}
                row["bytes"] = os.path.getsize(snap)
                plan = json.loads(row["live"]["stdout"])["status"]["plan"]["summary"]
                row["same"] = json.loads(row["file"]["stdout"])["status"]["plan"]["summary"] == plan
                rows.append(row)
                print(f"run {i + 1}/{args.runs}: " + "; ".join(
                    f"{what} {row[what]['process_s']:.2f} s (list {row[what]['list_s']:.2f}, snapshot source "
                    f"{row[what]['load_s']:.2f}, plan "
                    f"{row[what]['plan_s']:.2f}, {row[what]['peak_rss_mb']:.0f} MB)" for what in ("snapshot", "live", "file"))
                    + f"; freed {plan.get('freedNodeCount')}, same plan live and from the file: {row['same']}", flush=True)
    finally:
        cp.stop()
    print()
    print(f"| {args.nodes:,} nodes, live (median of {len(rows)}) | whole process | listing the cluster "
          "| snapshot source (list or read + model) | plan | peak RSS |")
    print("|---|---:|---:|---:|---:|---:|")
    labels = {"snapshot": f"`kubectl repack snapshot -o FILE` ({rows[0]['bytes'] / 1e6:.0f} MB of JSON)",
              "live": f"`kubectl repack plan --resource {R} -o json`, live",
              "file": "the same plan from the snapshot file"}
    for what, label in labels.items():
        print(f"| {label} | {_median(rows, what, 'process_s'):.2f} s | {_median(rows, what, 'list_s'):.2f} s | "
              f"{_median(rows, what, 'load_s'):.2f} s | "
              f"{_median(rows, what, 'plan_s'):.2f} s | {_median(rows, what, 'peak_rss_mb'):.0f} MB |")
    if not all(r["same"] for r in rows):
        print("warning: the live plan and the plan from the file differ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
