"""Synthetic accelerator clusters, seeded, written as Kubernetes List files the CLI reads.

Nodes with 8 or 16 cards in pools with labels and taints; training gangs of 1-64 pods with
minAvailable (VCJobs and their PodGroups); inference ModelServings whose ServingGroups each have
a PodGroup (entry + worker pods); pod sizes 1/2/4/8 cards skewed towards small; ~10 % protected
workloads; a DaemonSet pod on every node; CPU and memory that sometimes run out before cards do;
60-85 % card utilisation, placed the way a busy scheduler leaves it: scattered.

Two more profiles widen the quality benchmark; the default `base` profile is unchanged,
so its clusters (the 40 original quality instances, the scale clusters) stay the same:

- `gangs`: mostly training gangs of 2-8 pods spread over several nodes, minAvailable often below
  replicas, some RestartJob/RestartTask policies, 45-80 % utilisation;
- `split`: the 16-card pool split by taints into teams of 2-4 nodes whose pods tolerate only
  their own team's taint, plus untainted spare nodes added later (idle at the start), 40-75 %
  utilisation.

    python -m bench.generate --nodes 200 --seed 7 -o examples/cluster-200.json
    python -m bench.generate --nodes 48 --seed 8001 --profile split
"""
import argparse
import json
import random
import sys

from bench.common import R, base_objects, node_object, pod_object

POOLS = (  # name, cards per node, cpu, memory Gi, taint
    ("train-a", 16, 192, 1536, None),
    ("train-b", 8, 96, 768, {"key": "dedicated", "value": "train-b", "effect": "NoSchedule"}),
    ("infer", 8, 64, 512, None),
)
SIZES = (1, 2, 4, 8)
SIZE_WEIGHTS = (0.45, 0.25, 0.2, 0.1)


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


PROFILES = ("base", "gangs", "split")


def generate(nodes=200, seed=1, utilisation=None, profile="base"):
    """Objects of a synthetic cluster (Namespaces, Nodes, Pods, PodGroups, VCJobs, ModelServings)."""
    if profile == "gangs":
        return _generate_gangs(nodes, seed, utilisation)
    if profile == "split":
        return _generate_split(nodes, seed, utilisation)
    if profile != "base":
        raise ValueError(f"unknown profile {profile!r}; one of {', '.join(PROFILES)}")
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
        objs.append(node_object(name, pname, cards, cpu, mem, taint, f"zone-{i % 4}"))
        by_pool.setdefault(pname, []).append([name, cards, cpu - 2, mem - 4])
        total_cards += cards
        objs.append(pod_object(f"node-exporter-{name}", "kube-system", name, 0, 1, 2,
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
                pods.append(pod_object(f"{name}-worker-{w}", "training", n, size, cpu, mem, owner, group=name,
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
                    pods.append(pod_object(f"{pg}-{role}", "serving", n, size, 2 * size, 16 * size, owner, group=pg,
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


def _training_job(rng, placer, j, pool, replicas, labels, sizes=SIZES, min_ratios=(1.0, 0.75, 0.5),
                  tolerations=None, selector=None, restart_p=0.05):
    """A VCJob, its PodGroup and its workers placed by `placer` in `pool` (None when nothing fits)."""
    size = rng.choices(sizes, SIZE_WEIGHTS[:len(sizes)])[0]
    cpu = rng.choice((4, 8, 16)) * size if rng.random() < 0.15 else 2 * size
    mem = 16 * size
    name = f"train-{j:05d}"
    owner = ("batch.volcano.sh/v1alpha1", "Job", name)
    tasks = ("worker",) if rng.random() < 0.7 else ("ps", "worker")
    pods = []
    for w in range(replicas):
        n = placer.place(pool, size, cpu, mem)
        if n is None:
            break
        task = tasks[0] if w == 0 else tasks[-1]
        p = pod_object(f"{name}-{task}-{w}", "training", n, size, cpu, mem, owner, group=name,
                 labels={**labels, "volcano.sh/job-name": name},
                 annotations={"volcano.sh/task-spec": task, "volcano.sh/job-name": name},
                 pool=selector or pool)
        if tolerations:
            p["spec"]["tolerations"] = [dict(t) for t in tolerations]
        pods.append(p)
    if not pods:
        return None, 0
    r = rng.random()
    policies = ([{"event": "PodEvicted", "action": "RestartJob"}] if r < restart_p else
                [{"event": "PodEvicted", "action": "RestartTask"}] if r < 2 * restart_p else [])
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
           "metadata": {"name": name, "namespace": "training", "labels": labels},
           "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": len(pods), "policies": policies,
                    "tasks": [{"name": t, "replicas": sum(1 for p in pods if p["metadata"]["annotations"]
                                                          ["volcano.sh/task-spec"] == t)} for t in tasks]}}
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": name, "namespace": "training", "labels": labels,
                       "ownerReferences": [{"apiVersion": owner[0], "kind": "Job", "name": name,
                                            "uid": f"training-{name}", "controller": True}]},
          "spec": {"minMember": max(1, int(len(pods) * rng.choice(min_ratios))), "queue": "default"},
          "status": {"phase": "Running", "running": len(pods)}}
    return [job, pg, *pods], size * len(pods)


def _labels(rng):
    protected = rng.random() < 0.10
    return {"repack.volcano.sh/eligible": "true", "repack.volcano.sh/protected": "true" if protected else "false"}


def _add_node(objs, by_pool, name, pool, cards, cpu, mem, taint, zone, pool_key=None):
    objs.append(node_object(name, pool, cards, cpu, mem, taint, zone))
    by_pool.setdefault(pool_key or pool, []).append([name, cards, cpu - 2, mem - 4])
    objs.append(pod_object(f"node-exporter-{name}", "kube-system", name, 0, 1, 2,
                     ("apps/v1", "DaemonSet", "node-exporter"), scheduler="default-scheduler"))
    return cards


def _generate_gangs(nodes, seed, utilisation):
    """Gangs spread over several nodes, minAvailable often below replicas, restart policies."""
    rng = random.Random(seed)
    target = utilisation if utilisation is not None else rng.uniform(0.45, 0.80)
    objs, by_pool, total = base_objects(), {}, 0
    for i in range(nodes):
        pool_i = 0 if i < nodes * 0.6 else (1 if i < nodes * 0.8 else 2)
        pname, cards, cpu, mem, taint = POOLS[pool_i]
        total += _add_node(objs, by_pool, f"{pname}-{i:05d}", pname, cards, cpu, mem, taint, f"zone-{i % 4}")
    placer = _Placer(rng, by_pool)
    used, j, failures = 0, 0, 0
    tol_b = [{"key": "dedicated", "operator": "Equal", "value": "train-b", "effect": "NoSchedule"}]
    while used < target * total and failures < 200:
        j += 1
        pool = rng.choice(("train-a", "train-a", "train-b", "infer"))
        made, cards = _training_job(rng, placer, j, pool, rng.randint(2, 8), _labels(rng), sizes=(1, 2, 4),
                                    min_ratios=(1.0, 0.75, 0.5, 0.25), restart_p=0.08,
                                    tolerations=tol_b if pool == "train-b" else None)
        if made is None:
            failures += 1
            continue
        objs += made
        used += cards
    return objs


def _generate_split(nodes, seed, utilisation):
    """A 16-card pool split by taints into small teams, spare untainted nodes idle at the start."""
    rng = random.Random(seed)
    target = utilisation if utilisation is not None else rng.uniform(0.40, 0.75)
    objs, by_pool, total = base_objects(), {}, 0
    n_train = int(nodes * 0.75)
    n_spare = max(2, n_train // 6)
    i, teams = 0, []
    while i < n_train - n_spare:
        size = min(rng.randint(2, 4), n_train - n_spare - i)
        team = f"team-{len(teams)}"
        taint = {"key": "team", "value": team, "effect": "NoSchedule"}
        for _ in range(size):
            _, cards, cpu, mem, _ = POOLS[0]
            total += _add_node(objs, by_pool, f"train-a-{i:05d}", "train-a", cards, cpu, mem, taint,
                               f"zone-{i % 4}", pool_key=team)
            i += 1
        teams.append(team)
    for _ in range(n_spare):       # capacity added later: untainted, nothing placed on it yet
        _, cards, cpu, mem, _ = POOLS[0]
        objs.append(node_object(f"train-a-{i:05d}", "train-a", cards, cpu, mem, None, f"zone-{i % 4}"))
        objs.append(pod_object(f"node-exporter-train-a-{i:05d}", "kube-system", f"train-a-{i:05d}", 0, 1, 2,
                         ("apps/v1", "DaemonSet", "node-exporter"), scheduler="default-scheduler"))
        i += 1
    for k in range(nodes - n_train):
        pname, cards, cpu, mem, taint = POOLS[2]
        total += _add_node(objs, by_pool, f"infer-{i:05d}", pname, cards, cpu, mem, taint, f"zone-{i % 4}")
        i += 1
    placer = _Placer(rng, by_pool)
    used, j, failures = 0, 0, 0
    while used < target * total and failures < 200:
        j += 1
        if rng.random() < 0.8:
            team = rng.choice(teams)
            tol = [{"key": "team", "operator": "Equal", "value": team, "effect": "NoSchedule"}]
            made, cards = _training_job(rng, placer, j, team, min(8, max(1, int(rng.paretovariate(1.5)))), _labels(rng),
                                        tolerations=tol, selector="train-a")
        else:
            made, cards = _training_job(rng, placer, j, "infer", rng.randint(1, 3), _labels(rng), sizes=(1, 2, 4))
        if made is None:
            failures += 1
            continue
        objs += made
        used += cards
    return objs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--utilisation", type=float, default=None, help="card utilisation target (default 0.60-0.85)")
    ap.add_argument("--profile", choices=PROFILES, default="base")
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)
    write_list(generate(args.nodes, args.seed, args.utilisation, args.profile), args.output,
               compact=args.nodes > 500)


def write_list(items, output, compact=False):
    """`items` as one `v1 List` (what `kubectl repack snapshot` writes) to the file `output` ("-":
    stdout); `compact` drops the indentation large clusters do not need."""
    doc = {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}
    out = sys.stdout if output == "-" else open(output, "w", encoding="utf-8")
    try:
        json.dump(doc, out, separators=(",", ":") if compact else (",", ": "), indent=None if compact else 1)
        out.write("\n")
    finally:
        if out is not sys.stdout:
            out.close()


if __name__ == "__main__":
    main()
