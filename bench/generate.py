"""Synthetic accelerator clusters, seeded, written as Kubernetes List files the CLI reads.

Nodes with 8 or 16 cards in pools with labels and taints; training gangs of 1-64 pods with
minAvailable (VCJobs and their PodGroups); inference ModelServings whose ServingGroups each have
a PodGroup (entry + worker pods); pod sizes 1/2/4/8 cards skewed towards small; ~10 % protected
workloads; a DaemonSet pod on every node; CPU and memory that sometimes run out before cards do;
60-85 % card utilisation, placed the way a busy scheduler leaves it: scattered.

    python -m bench.generate --nodes 200 --seed 7 -o examples/cluster-200.json
"""
import argparse
import json
import random
import sys

R = "huawei.com/ascend-1980"
POOLS = (  # name, cards per node, cpu, memory Gi, taint
    ("train-a", 16, 192, 1536, None),
    ("train-b", 8, 96, 768, {"key": "dedicated", "value": "train-b", "effect": "NoSchedule"}),
    ("infer", 8, 64, 512, None),
)
SIZES = (1, 2, 4, 8)
SIZE_WEIGHTS = (0.45, 0.25, 0.2, 0.1)


def _node(name, pool, cards, cpu, mem, taint, zone):
    alloc = {"cpu": str(cpu), "memory": f"{mem}Gi", "pods": "110", R: str(cards)}
    spec = {"taints": [taint]} if taint else {}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "accelerator-pool": pool,
                                                  "topology.kubernetes.io/zone": zone}},
            "spec": spec, "status": {"allocatable": alloc, "capacity": dict(alloc)}}


def _pod(name, ns, node, cards, cpu, mem, owner, group=None, labels=None, annotations=None, pool=None,
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


class _Placer:
    """Scattered first-fit among a few random nodes of a pool, like a busy cluster's history."""

    def __init__(self, rng, nodes):
        self.rng = rng
        self.nodes = nodes  # pool -> list of [name, free cards, free cpu, free mem]

    def place(self, pool, cards, cpu, mem):
        cands = self.nodes[pool]
        for _ in range(24):
            n = cands[self.rng.randrange(len(cands))]
            if n[1] >= cards and n[2] >= cpu and n[3] >= mem:
                n[1] -= cards
                n[2] -= cpu
                n[3] -= mem
                return n[0]
        return None


def generate(nodes=200, seed=1, utilisation=None):
    """Objects of a synthetic cluster (Namespaces, Nodes, Pods, PodGroups, VCJobs, ModelServings)."""
    rng = random.Random(seed)
    target = utilisation if utilisation is not None else rng.uniform(0.60, 0.85)
    objs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": ns}}}
            for ns in ("training", "serving", "kube-system")]
    by_pool, total_cards = {}, 0
    shares = (0.5, 0.25, 0.25)
    for i in range(nodes):
        pool_i = 0 if i < nodes * shares[0] else (1 if i < nodes * (shares[0] + shares[1]) else 2)
        pname, cards, cpu, mem, taint = POOLS[pool_i]
        name = f"{pname}-{i:05d}"
        objs.append(_node(name, pname, cards, cpu, mem, taint, f"zone-{i % 4}"))
        by_pool.setdefault(pname, []).append([name, cards, cpu - 2, mem - 4])
        total_cards += cards
        objs.append(_pod(f"node-exporter-{name}", "kube-system", name, 0, 1, 2,
                         ("apps/v1", "DaemonSet", "node-exporter"), scheduler="default-scheduler"))
    placer = _Placer(rng, by_pool)
    used, j, failures = 0, 0, 0
    while used < target * total_cards and failures < 200:
        j += 1
        protected = rng.random() < 0.10
        labels = {"repack.volcano.sh/eligible": "true", "repack.volcano.sh/protected": "true" if protected else "false"}
        if rng.random() < 0.7:
            pool = rng.choice(("train-a", "train-a", "train-b"))
            size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
            replicas = min(64, max(1, int(rng.paretovariate(1.2))))
            cpu = rng.choice((4, 8, 16)) * size if rng.random() < 0.15 else 2 * size
            mem = 16 * size
            name = f"train-{j:05d}"
            tol = {"key": "dedicated", "operator": "Equal", "value": "train-b", "effect": "NoSchedule"} if pool == "train-b" else None
            owner = ("batch.volcano.sh/v1alpha1", "Job", name)
            pods = []
            for w in range(replicas):
                n = placer.place(pool, size, cpu, mem)
                if n is None:
                    break
                pods.append(_pod(f"{name}-worker-{w}", "training", n, size, cpu, mem, owner, group=name,
                                 labels={**labels, "volcano.sh/job-name": name},
                                 annotations={"volcano.sh/task-spec": "worker", "volcano.sh/job-name": name},
                                 pool=pool, toleration=tol))
            if not pods:
                failures += 1
                continue
            policies = [{"event": "PodEvicted", "action": "RestartJob"}] if rng.random() < 0.05 else []
            objs.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                         "metadata": {"name": name, "namespace": "training", "labels": labels},
                         "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": len(pods),
                                  "policies": policies, "tasks": [{"name": "worker", "replicas": len(pods)}]}})
            objs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                         "metadata": {"name": name, "namespace": "training", "labels": labels,
                                      "ownerReferences": [{"apiVersion": owner[0], "kind": "Job", "name": name,
                                                           "uid": f"training-{name}", "controller": True}]},
                         "spec": {"minMember": max(1, int(len(pods) * rng.choice((1.0, 0.75, 0.5)))), "queue": "default"},
                         "status": {"phase": "Running", "running": len(pods)}})
            objs += pods
            used += size * len(pods)
        else:
            name = f"infer-{j:05d}"
            size = rng.choices(SIZES[:3], (0.5, 0.3, 0.2))[0]
            groups = rng.randint(1, 4)
            owner = ("workload.serving.volcano.sh/v1alpha1", "ModelServing", name)
            placed_any = False
            for g in range(groups):
                pg = f"{name}-{g}"
                pods = []
                for role in ("entry", "worker"):
                    n = placer.place("infer", size, 2 * size, 16 * size)
                    if n is None:
                        break
                    pods.append(_pod(f"{pg}-{role}", "serving", n, size, 2 * size, 16 * size, owner, group=pg,
                                     labels={**labels, "modelserving.volcano.sh/name": name,
                                             "modelserving.volcano.sh/group-name": pg}, pool="infer"))
                if not pods:
                    break
                placed_any = True
                objs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                             "metadata": {"name": pg, "namespace": "serving", "labels": labels,
                                          "ownerReferences": [{"apiVersion": owner[0], "kind": "ModelServing",
                                                               "name": name, "uid": f"serving-{name}", "controller": True}]},
                             "spec": {"minMember": len(pods), "queue": "default"}})
                objs += pods
                used += size * len(pods)
            if not placed_any:
                failures += 1
                continue
            objs.append({"apiVersion": "workload.serving.volcano.sh/v1alpha1", "kind": "ModelServing",
                         "metadata": {"name": name, "namespace": "serving", "labels": labels},
                         "spec": {"schedulerName": "volcano", "replicas": groups,
                                  "recoveryPolicy": rng.choice(("ServingGroupRecreate", "RoleRecreate"))}})
    return objs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--utilisation", type=float, default=None, help="card utilisation target (default 0.60-0.85)")
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": generate(args.nodes, args.seed, args.utilisation)}
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="utf-8")
    try:
        json.dump(doc, out, separators=(",", ":") if args.nodes > 500 else (",", ": "),
                  indent=None if args.nodes > 500 else 1)
        out.write("\n")
    finally:
        if out is not sys.stdout:
            out.close()


if __name__ == "__main__":
    main()
