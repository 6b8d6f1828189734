"""Synthetic clusters with a Volcano HyperNode tree and hard-topology gangs (TOPO-1 to TOPO-4), seeded.

A cluster of N nodes in racks (tier-1 HyperNodes of 2-8 nodes, one pool per rack: 16-card `train-a`
or 8-card `infer`), racks grouped under one tier-2 root, or under tier-2 spines of 2-4 racks with
one tier-3 root; sometimes one or two nodes in no HyperNode at all. `topology.volcano.sh/v1alpha1`
HyperNode objects select their members by `exactMatch` (nodes by name, HyperNodes by name).

Workloads are VCJobs with their PodGroups, 45-80 % card utilisation, ~10 % protected:

- about a third are **hard-topology gangs** (`spec.networkTopology: {mode: hard, highestTierAllowed:
  1 or 2}` on the VCJob and on its PodGroup), placed inside one HyperNode of the allowed tier (a
  random rack for tier 1, a random spine or the root for tier 2), as vc-scheduler placed them;
- some soft ones (`mode: soft`: a preference, no constraint) placed anywhere;
- the rest plain gangs of 1-6 pods scattered over their pool, some with RestartJob/RestartTask.

A few nodes are left idle at the start (spares), so blocks can be made of idle and freed nodes.

The existing generator (`bench.generate`) and its profiles are untouched: these clusters are a
separate family, used by `bench.topology` only.

    python -m bench.hypernodes --nodes 40 --seed 21000 -o /tmp/hn.json
"""
import argparse
import random

from bench.common import R, base_objects, node_object, pod_object
from bench.generate import write_list

HN_API = "topology.volcano.sh/v1alpha1"
RACK_POOLS = (  # name, cards per node, cpu, memory Gi, taint
    ("train-a", 16, 192, 1536, None),
    ("infer", 8, 64, 512, None),
)
SIZES = (1, 2, 4, 8)
SIZE_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
TIER_NAMES = {1: "leaf", 2: "spine", 3: "superspine"}


def hypernode(name, tier, members, member_type):
    """A HyperNode selecting `members` (node or HyperNode names) by exactMatch."""
    return {"apiVersion": HN_API, "kind": "HyperNode",
            "metadata": {"name": name, "labels": {}},
            "spec": {"tier": tier, "tierName": TIER_NAMES.get(tier, f"tier{tier}"),
                     "members": [{"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in members]}}


def tree(rng, node_names):
    """HyperNode objects over `node_names` (in order): racks of 2-8, a tier-2 root or spines + a tier-3
    root; returns (objects, racks: [(rack, [nodes])], domains: {tier: [(hypernode, [nodes])]})."""
    names = list(node_names)
    outside = []
    if len(names) >= 16 and rng.random() < 0.3:
        outside = [names.pop() for _ in range(rng.randint(1, 2))]
    racks, i = [], 0
    while i < len(names):
        k = rng.randint(2, 8)
        if len(names) - i - k == 1:
            k += 1
        k = min(k, len(names) - i)
        racks.append((f"leaf-{len(racks)}", names[i:i + k]))
        i += k
    objs = [hypernode(r, 1, ns, "Node") for r, ns in racks]
    domains = {1: list(racks)}
    three = len(racks) >= 4 and rng.random() < 0.5
    if three:
        spines, j = [], 0
        while j < len(racks):
            k = min(rng.randint(2, 4), len(racks) - j)
            if len(racks) - j - k == 1:
                k += 1
            spines.append((f"spine-{len(spines)}", racks[j:j + k]))
            j += k
        objs += [hypernode(s, 2, [r for r, _ in rs], "HyperNode") for s, rs in spines]
        objs.append(hypernode("root", 3, [s for s, _ in spines], "HyperNode"))
        domains[2] = [(s, [n for _, ns in rs for n in ns]) for s, rs in spines]
        domains[3] = [("root", list(names))]
    else:
        objs.append(hypernode("root", 2, [r for r, _ in racks], "HyperNode"))
        domains[2] = [("root", list(names))]
    return objs, racks, domains, outside


def _place(rng, free, nodes, cards, cpu, mem, tries=None):
    """Scattered first fit: random nodes of `nodes` (all of them in random order when `tries` is None)."""
    if tries is None:
        order = list(nodes)
        rng.shuffle(order)
    else:
        order = [nodes[rng.randrange(len(nodes))] for _ in range(tries)]
    for n in order:
        f = free[n]
        if f[0] >= cards and f[1] >= cpu and f[2] >= mem:
            f[0] -= cards
            f[1] -= cpu
            f[2] -= mem
            return n
    return None


def generate(nodes=40, seed=1, utilisation=None):
    """Objects of a cluster with a HyperNode tree (Namespaces, Nodes, HyperNodes, Pods, PodGroups, VCJobs)."""
    rng = random.Random(seed)
    target = utilisation if utilisation is not None else rng.uniform(0.45, 0.80)
    objs = base_objects()
    names = [f"node-{i:05d}" for i in range(nodes)]
    hn_objs, racks, domains, outside = tree(rng, names)
    pool_of, free, total = {}, {}, 0
    rack_pools = []
    for r, ns in racks:
        p = 0 if rng.random() < 0.7 else 1
        rack_pools.append(p)
        for n in ns:
            pool_of[n] = p
    for n in outside:
        pool_of[n] = 0
    for i, n in enumerate(names):
        pname, cards, cpu, mem, taint = RACK_POOLS[pool_of[n]]
        objs.append(node_object(n, pname, cards, cpu, mem, taint, f"zone-{i % 4}"))
        objs.append(pod_object(f"node-exporter-{n}", "kube-system", n, 0, 1, 2, ("apps/v1", "DaemonSet", "node-exporter"),
                         scheduler="default-scheduler"))
        free[n] = [cards, cpu - 2, mem - 4]
        total += cards
    objs += hn_objs
    spares = set(rng.sample(names, rng.randint(0, max(1, nodes // 10))))
    by_pool = {p: [n for n in names if pool_of[n] == p and n not in spares] for p in (0, 1)}
    used, j, failures = 0, 0, 0
    while used < target * total and failures < 200:
        j += 1
        protected = rng.random() < 0.10
        labels = {"repack.volcano.sh/eligible": "true", "repack.volcano.sh/protected": "true" if protected else "false"}
        kind = rng.random()
        pool = 0 if rng.random() < 0.7 else 1
        if not by_pool[pool]:
            pool = 1 - pool
        size = rng.choices(SIZES, SIZE_WEIGHTS)[0]
        cpu = rng.choice((4, 8, 16)) * size if rng.random() < 0.15 else 2 * size
        mem = 16 * size
        nt = None
        if kind < 0.35:                                   # hard gang inside one domain of its tier
            h = 1 if rng.random() < 0.6 else 2
            doms = [(d, [n for n in ns if pool_of[n] == pool and n not in spares]) for d, ns in domains[h]]
            doms = [(d, ns) for d, ns in doms if ns]
            if not doms:
                failures += 1
                continue
            _, dom = rng.choice(doms)
            replicas = rng.randint(1, min(6, 2 * len(dom)))
            place = lambda: _place(rng, free, dom, size, cpu, mem)  # noqa: E731
            nt = {"mode": "hard", "highestTierAllowed": h}
        else:
            replicas = rng.randint(1, 6)
            place = lambda: _place(rng, free, by_pool[pool], size, cpu, mem, tries=24)  # noqa: E731
            if kind < 0.45:
                nt = {"mode": "soft", "highestTierAllowed": 1}
        name = f"train-{j:05d}"
        owner = ("batch.volcano.sh/v1alpha1", "Job", name)
        pods = []
        for w in range(replicas):
            n = place()
            if n is None:
                break
            pods.append(pod_object(f"{name}-worker-{w}", "training", n, size, cpu, mem, owner, group=name,
                             labels={**labels, "volcano.sh/job-name": name},
                             annotations={"volcano.sh/task-spec": "worker", "volcano.sh/job-name": name},
                             pool=RACK_POOLS[pool][0]))
        if not pods:
            failures += 1
            continue
        r = rng.random()
        policies = ([{"event": "PodEvicted", "action": "RestartJob"}] if r < 0.05 else
                    [{"event": "PodEvicted", "action": "RestartTask"}] if r < 0.10 else [])
        job_spec = {"schedulerName": "volcano", "queue": "default", "minAvailable": len(pods), "policies": policies,
                    "tasks": [{"name": "worker", "replicas": len(pods)}]}
        pg_spec = {"minMember": max(1, int(len(pods) * rng.choice((1.0, 0.75, 0.5)))), "queue": "default"}
        if nt is not None:
            job_spec["networkTopology"] = dict(nt)
            pg_spec["networkTopology"] = dict(nt)
        objs.append({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                     "metadata": {"name": name, "namespace": "training", "labels": labels}, "spec": job_spec})
        objs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                     "metadata": {"name": name, "namespace": "training", "labels": labels,
                                  "ownerReferences": [{"apiVersion": owner[0], "kind": "Job", "name": name,
                                                       "uid": f"training-{name}", "controller": True}]},
                     "spec": pg_spec, "status": {"phase": "Running", "running": len(pods)}})
        objs += pods
        used += size * len(pods)
    return objs


def goal_spec(seed, tiers):
    """The RepackRun spec of a topology instance, drawn from its seed: a block goal on tier 1 (or 2,
    when the tree has a tier below the root there), size 2-4, 0-3 blocks required (0 most often), a mode; sometimes
    a budget or a scope. `tiers`: the tree's tiers."""
    rng = random.Random(seed * 7919 + 21)
    tier = 2 if (3 in tiers and rng.random() < 0.3) else 1
    goal = {"hyperNodeTier": tier, "nodeBlockSize": rng.randint(2, 4),
            "requiredNodeBlocks": rng.choices((0, 1, 2, 3), (0.4, 0.3, 0.2, 0.1))[0]}
    mode = rng.choice(("binpack", "spread", ""))
    if mode:
        goal["mode"] = mode
    spec = {"goals": [{"resource": R}], "networkTopology": goal}
    r = rng.random()
    if r < 0.15:
        spec["maxPerRun"] = {"podGroups": rng.randint(2, 5)}
    elif r < 0.25:
        spec["maxPerRun"] = {"resources": {R: str(rng.choice((16, 32, 48)))}}
    if rng.random() < 0.15:
        spec["scope"] = {"podGroups": {"exclude": {"selector": {"matchLabels": {"repack.volcano.sh/protected": "true"}}}}}
    return spec


def tiers_of(objs):
    return sorted({o["spec"]["tier"] for o in objs if o.get("kind") == "HyperNode"})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--utilisation", type=float, default=None)
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)
    write_list(generate(args.nodes, args.seed, args.utilisation), args.output)


if __name__ == "__main__":
    main()
