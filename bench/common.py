"""What the benchmarks share, in one public module, so no benchmark imports another's private
helpers and none imports another in a cycle: the Kubernetes objects of a generated cluster
(bench.generate, bench.hypernodes and bench.relief build theirs with these), the cached scale
clusters (bench.scale measures them, bench.topology adds a HyperNode tree to them), and how a
benchmark records its results (the commit the figures are for, the machine, the output files)."""
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
R = "huawei.com/ascend-1980"
SCALE_SEED = 1  # the seed of bench.scale's clusters


# ---- the objects of a generated cluster ---------------------------------------------------------
def node_object(name, pool, cards, cpu, mem, taint, zone):
    alloc = {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110", R: str(cards)}
    spec = {"taints": [taint]} if taint else {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "accelerator-pool": pool,
                                                  "topology.kubernetes.io/zone": zone}},
            "spec": spec, "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def pod_object(name, ns, node, cards, cpu, mem, owner, group=None, labels=None, annotations=None, pool=None,
               toleration=None, scheduler="volcano"):
    req = {"cpu": str(cpu), "memory": f"{mem}Gi"}
    if cards:
        req[R] = str(cards)
    ann = dict(annotations or {})
    if group:
        ann["scheduling.k8s.io/group-name"] = group
    spec = {"schedulerName": scheduler, "nodeName": node,
            "containers": [{"name": "main", "image": "registry.local/ai:1", "resources": {"requests": req, "limits": req}}]}
    if pool:
        spec["nodeSelector"] = {"accelerator-pool": pool}
    if toleration:
        spec["tolerations"] = [toleration]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": f"{ns}-{name}", "labels": dict(labels or {}),
                         "annotations": ann,
                         "ownerReferences": [{"apiVersion": owner[0], "kind": owner[1], "name": owner[2],
                                              "uid": f"{ns}-{owner[2]}", "controller": True}]},
            "spec": spec, "status": {"phase": "Running"}}


def base_objects():
    """The namespaces every generated cluster has."""
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": ns}}}
            for ns in ("training", "serving", "kube-system")]


# ---- the cached scale clusters ------------------------------------------------------------------
def cluster_file(nodes, seed=SCALE_SEED):
    """The cached generated cluster of `nodes` nodes (written on first use)."""
    path = OUT / f"cluster-{nodes}-seed{seed}.json"
    if not path.exists():
        OUT.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "bench.generate", "--nodes", str(nodes), "--seed", str(seed),
                        "-o", str(tmp)], cwd=ROOT, check=True)
        tmp.rename(path)
        print(f"generated {path.name} in {time.perf_counter() - t0:.1f} s", flush=True)
    return path


# ---- results ------------------------------------------------------------------------------------
def git_head():
    """The last commit that changed planner/, marked when planner/ has uncommitted changes."""
    try:
        head = subprocess.run(["git", "log", "-1", "--format=%h", "--", "planner"], cwd=ROOT, capture_output=True,
                              text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "planner"], cwd=ROOT, capture_output=True,
                               text=True).stdout.strip()
        return head + ("+planner-changes" if dirty else "")
    except OSError:
        return ""


def write_results(doc: dict, md: str, json_path: str, md_path: str) -> None:
    """A benchmark's results: `doc` as JSON at `json_path`, its markdown `md` at `md_path`."""
    for path, text in ((json_path, json.dumps(doc, indent=1) + "\n"), (md_path, md)):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    print(f"wrote {json_path} and {md_path}")


def machine():
    """What the figures were measured on."""
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f.readline().split(":")[1].strip()
    except OSError:
        pass
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": cpu, "memory": mem, "python": platform.python_version(),
            "platform": platform.platform(), "loadavg_at_start": os.getloadavg()}
