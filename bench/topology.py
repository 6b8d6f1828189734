"""Plan quality with Volcano HyperNodes (TOPO-1 to TOPO-4): blocks freed against an exact optimum, hard
network topology checked independently, and the planner's time at 10,000 nodes with a 3-tier tree.

For each instance (a seeded `bench.hypernodes` cluster of 16-60 nodes with a 2-3 tier HyperNode
tree and hard-topology gangs, and a RepackRun spec with `spec.networkTopology`):

- the planner's plan (`planner.plan`); its blocks, net nodes freed and GANG-3 disruption are
  counted here from the final placement, not taken from the plan;
- the exact lexicographic optimum by a MILP (HiGHS via highspy), `bench.quality`'s model plus the
  hard topology constraint and block variables: (1) most blocks, (2) at that block count most net
  nodes freed, (3) at both, least GANG-3 weighted disruption; and, where the planner reaches the
  block optimum with fewer net nodes, the least disruption at the planner's own net count;
- an independent check of every planned move (and of every MILP solution): on the final placement,
  each hard gang (PodGroup `spec.networkTopology` mode hard with `highestTierAllowed` or a
  resolvable `highestTierName`) has all its pods inside one HyperNode of tier <= its tier, read
  from the raw objects with no planner code.

    python -m bench.topology                         # every instance -> bench/out/topology.{json,md}
    python -m bench.topology --instances 5 --time-limit 20
    python -m bench.topology --sanity 8              # the MILP without topology = bench.quality's optimum
    python -m bench.topology --scale                 # one run at 10,000 nodes with a 3-tier tree

Not a test: it prints figures. Needs the `bench` extra (highspy).
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner  # noqa: E402
from planner.filters import FILTERS, run_filters  # noqa: E402
from planner.plan import RunSpec  # noqa: E402
from planner.state import SimulatedState  # noqa: E402

from bench import quality  # noqa: E402
from bench.common import SCALE_SEED, cluster_file, git_head, write_results  # noqa: E402
from bench.generate import R  # noqa: E402
from bench.hypernodes import HN_API, generate, goal_spec, hypernode, tiers_of  # noqa: E402

OUT = ROOT / "bench" / "out"
SEED0 = 21000
COUNT = 120
SIZE_RANGE = (16, 60)
BLOCK_TARGET = 0.99          # instances with blocks = optimum
DISRUPTION_TARGET = 1.05     # GANG-3 weighted, planner / minimum at the same blocks (and net)
VIOLATION_TARGET = 0


def instances(n=None):
    """(id, nodes, seed) of every instance: t000-t119, seeds 21000-21119, size drawn from the seed."""
    out = []
    for i in range(COUNT):
        seed = SEED0 + i
        out.append((f"t{i:03d}", random.Random(seed).randint(*SIZE_RANGE), seed))
    return out if n is None else out[:n]


# -- the HyperNode tree and hard gangs, read from raw objects (no planner code) ---------------------
class Tree:
    """HyperNodes as vc-scheduler v1.14.1 resolves them, for the objects this bench generates and a
    little more: Node members by exactMatch (name, kept only if the node exists) or regexMatch
    (unanchored search); HyperNode members by exactMatch; labelMatch is not used here."""

    def __init__(self, objs):
        nodes = {o["metadata"]["name"] for o in objs if o.get("kind") == "Node"}
        hns = {o["metadata"]["name"]: o for o in objs if o.get("kind") == "HyperNode"
               and o.get("apiVersion") == HN_API}
        self.tier = {h: int(o["spec"]["tier"]) for h, o in hns.items()}
        self.tier_name = {h: o["spec"].get("tierName", "") for h, o in hns.items()}
        self.parent, direct, children = {}, {}, {}
        for h, o in hns.items():
            direct[h], children[h] = set(), []
            for m in o["spec"].get("members") or []:
                sel = m.get("selector") or {}
                if m.get("type") == "HyperNode":
                    c = (sel.get("exactMatch") or {}).get("name")
                    if c in hns:
                        assert c not in self.parent, f"HyperNode {c} has two parents"
                        self.parent[c] = h
                        children[h].append(c)
                elif "exactMatch" in sel:
                    if sel["exactMatch"]["name"] in nodes:
                        direct[h].add(sel["exactMatch"]["name"])
                elif "regexMatch" in sel:
                    pat = re.compile(sel["regexMatch"]["pattern"])
                    direct[h] |= {n for n in nodes if pat.search(n)}
        self.nodes = {}

        def real(h, seen=()):
            assert h not in seen, f"HyperNode cycle through {h}"
            if h not in self.nodes:
                s = set(direct[h])
                for c in children[h]:
                    s |= real(c, seen + (h,))
                self.nodes[h] = frozenset(s)
            return self.nodes[h]

        for h in hns:
            real(h)
        self.names = sorted(hns)
        self._dom = {}
        self.top = max(self.tier.values(), default=0) + 1      # ClusterTop's tier

    def at_tier(self, tier):
        """{hypernode: its nodes} of one tier."""
        return {h: self.nodes[h] for h in self.names if self.tier[h] == tier}

    def unconstrained(self, h):
        return h >= self.top

    def domain(self, node, h):
        """The highest HyperNode of tier <= h above `node`, walking up from the lowest HyperNode that
        holds it and stopping at the first ancestor above h (None: in no HyperNode of tier <= h)."""
        key = (node, h)
        if key not in self._dom:
            self._dom[key] = self._domain(node, h)
        return self._dom[key]

    def _domain(self, node, h):
        holders = [x for x in self.names if node in self.nodes[x]]
        if not holders:
            return None
        low = min(holders, key=lambda x: (self.tier[x], len(self.nodes[x]), x))
        best, cur = None, low
        while cur is not None and self.tier[cur] <= h:
            best, cur = cur, self.parent.get(cur)
        return best

    def inside_one(self, nodes, h):
        """Some HyperNode of tier <= h holds every node of `nodes` (or h reaches ClusterTop)."""
        if self.unconstrained(h):
            return True
        return any(self.tier[x] <= h and set(nodes) <= self.nodes[x] for x in self.names)

    def tier_of_name(self, name):
        tiers = {self.tier[h] for h in self.names if self.tier_name[h] == name}
        return min(tiers) if tiers else None


def hard_gangs(objs, tree):
    """{PodGroup key: highest tier allowed} of every gang with hard network topology."""
    out = {}
    for o in objs:
        if o.get("kind") != "PodGroup":
            continue
        nt = (o.get("spec") or {}).get("networkTopology")
        if not nt or (nt.get("mode") or "hard") != "hard":
            continue
        h = nt.get("highestTierAllowed")
        if h is None and nt.get("highestTierName"):
            h = tree.tier_of_name(nt["highestTierName"])
        if h is not None:
            out[f"{o['metadata']['namespace']}/{o['metadata']['name']}"] = int(h)
    return out


def raw_pods(objs):
    """{pod key: (group key or None, node, R request)} of the non-terminal bound pods."""
    out = {}
    for o in objs:
        if o.get("kind") != "Pod" or (o.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        md, spec = o["metadata"], o.get("spec") or {}
        if not spec.get("nodeName"):
            continue
        g = (md.get("annotations") or {}).get("scheduling.k8s.io/group-name")
        req = 0
        for c in spec.get("containers") or []:
            req += int(((c.get("resources") or {}).get("requests") or {}).get(R, 0))
        out[f"{md['namespace']}/{md['name']}"] = (f"{md['namespace']}/{g}" if g else None, spec["nodeName"], req)
    return out


def check(objs, moves, tree=None):
    """Independent check of a plan's moves [(pod key, to node)] against hard network topology, on the
    final placement. Returns {"violations": moves of pods whose hard gang ends outside every allowed
    HyperNode, "gangs": such gangs, "before": gangs already outside before the plan, "details": [...]}."""
    tree = tree or Tree(objs)
    gangs = hard_gangs(objs, tree)
    pods = raw_pods(objs)
    final = {k: n for k, (_, n, _) in pods.items()}
    moved = {}
    for pk, to in moves:
        assert pk in final, f"move of unknown pod {pk}"
        final[pk] = to
        moved.setdefault(pk, to)
    members = {}
    for pk, (g, n, _) in pods.items():
        if g in gangs:
            members.setdefault(g, []).append(pk)
    bad, before, viol, details = [], [], 0, []
    for g, h in sorted(gangs.items()):
        ks = members.get(g, [])
        if not tree.inside_one([pods[k][1] for k in ks], h):
            before.append(g)
        if not tree.inside_one([final[k] for k in ks], h):
            bad.append(g)
            mv = [k for k in ks if k in moved]
            viol += len(mv)
            details.append(f"{g} (tier {h}): " + ", ".join(f"{k} -> {final[k]}" for k in mv)
                           + f"; all nodes: {sorted({final[k] for k in ks})}")
    return {"violations": viol, "gangs": bad, "before": before, "details": details}


def free_after(objs, moves):
    """{node: R in use} after the moves (raw objects)."""
    pods = raw_pods(objs)
    used = {}
    final = {k: n for k, (_, n, _) in pods.items()}
    for pk, to in moves:
        final[pk] = to
    for pk, (_, _, r) in pods.items():
        used[final[pk]] = used.get(final[pk], 0) + r
    return used


def providers(objs):
    return sorted(o["metadata"]["name"] for o in objs if o.get("kind") == "Node"
                  and int((o.get("status") or {}).get("allocatable", {}).get(R, 0)) > 0)


def blocks(objs, tree, tier, size, moves=()):
    """(total blocks, {hypernode: free providers}) of one tier after `moves`."""
    used = free_after(objs, moves)
    prov = set(providers(objs))
    per = {h: sum(1 for n in ns if n in prov and used.get(n, 0) == 0) for h, ns in tree.at_tier(tier).items()}
    return sum(v // size for v in per.values()), per


# -- the MILP with blocks and hard topology ----------------------------------------------------------
class TopoModel(quality.Model):
    """bench.quality's model (capacities, static filters, movability, scope, budget, GANG-3 terms) plus:

    hard topology: for each hard gang g of tier h below ClusterTop, w[g,d] (binary) over the domains
    d = highest HyperNodes of tier <= h; sum_d w[g,d] = 1; a pod that stays (fixed, or y[its node] = 0)
    forces w[g, d(its node)]; x[p,m] <= w[g, d(m)], and x[p,m] = 0 when m is in no such domain;
    blocks: b[H] integer for every HyperNode H of the goal tier, size * b[H] <= sum_{n in H, candidate}
    y[n] + sum_{m in H, idle} (1 - z[m]).
    """

    def __init__(self, setting, tree, gangs, goal, time_limit):
        super().__init__(setting, time_limit)
        inf = self.inf
        self.tree, self.goal = tree, goal
        h = self.h
        pod_gang = {}
        for pk, (p, _) in self.pods.items():
            g = f"{p.namespace}/{p.group_name}"
            if g in gangs:
                pod_gang[pk] = g
        self.w = {}
        self.infeasible = []
        for g, tier in sorted(gangs.items()):
            if tree.unconstrained(tier):
                continue
            doms = sorted({d for d in (tree.domain(n, tier) for n in setting.providers) if d is not None})
            w = {d: self._col(0.0, 1.0, True) for d in doms}
            self.w[g] = w
            if not w:
                self.infeasible.append(g)
                continue
            self._row(1.0, 1.0, list(w.values()), [1.0] * len(w))
            for pod in setting.snap.pods:                 # fixed pods of g pin its domain
                if f"{pod.namespace}/{pod.group_name}" != g or pod.terminal or not pod.node_name:
                    continue
                if pod.key in self.pods:
                    continue
                d = tree.domain(pod.node_name, tier)
                if d is None:
                    self.infeasible.append(g)
                else:
                    h.changeColBounds(w[d], 1.0, 1.0)
        for pk, g in pod_gang.items():
            w = self.w.get(g)
            if w is None:
                continue
            tier = gangs[g]
            _, n = self.pods[pk]
            d = tree.domain(n, tier)
            if d is not None and w:
                self._row(1.0, inf, [w[d], self.y[n]], [1.0, 1.0])   # stays -> its domain
        for (pk, m), j in self.x.items():
            g = pod_gang.get(pk)
            if g is None or g not in self.w:
                continue
            d = self.tree.domain(m, gangs[g])
            if d is None:
                h.changeColBounds(j, 0.0, 0.0)
            else:
                self._row(-inf, 0.0, [j, self.w[g][d]], [1.0, -1.0])
        self.b = {}
        if goal is not None:
            prov = set(setting.providers)
            for H, ns in sorted(tree.at_tier(goal["tier"]).items()):
                members = [n for n in ns if n in prov]
                cap = len(members) // goal["size"]
                if cap == 0:
                    continue
                b = self.b[H] = self._col(0.0, float(cap), True)
                ys = [self.y[n] for n in members if n in self.y]
                zs = [self.z[n] for n in members if n in self.z]
                idle = sum(1 for n in members if n in setting.idle)
                self._row(-inf, float(idle), [b] + ys + zs, [float(goal["size"])] + [-1.0] * len(ys) + [1.0] * len(zs))

    def _solution(self, sol):
        """bench.quality's, replayed without the planner's NetworkTopology filter (hard topology is
        checked by `check`, independently of the planner, on every solution)."""
        s = self.setting
        freed = [n for n in s.candidates if sol and sol[self.y[n]] > 0.5]
        idle = [m for m in self.z if sol and sol[self.z[m]] > 0.5]
        moves = sorted((pk, m) for (pk, m), j in self.x.items() if sol and sol[j] > 0.5)
        _verify(s, freed, moves, self.pods)
        dims, weighted, pgs = quality.dimensions(s, [pk for pk, _ in moves])
        return {"freed": len(freed), "idle_occupied": len(idle), "net": len(freed) - len(idle),
                "freed_nodes": freed, "idle_nodes": idle, "dims": list(dims), "weighted": weighted,
                "podgroups": pgs, "moves": moves}

    def stage_blocks(self):
        """max sum_H b[H]; the blocks are recounted from the solution's placement."""
        if not self.b:
            return {"value": 0, "proven": True, "status": "no HyperNode can hold a block", "bound": 0,
                    "seconds": 0.0, **self._solution([])}
        self.h.setOptionValue("mip_abs_gap", 0.999)
        self._set_objective({j: 1.0 for j in self.b.values()}, self.hs.ObjSense.kMaximize)
        status, sol, obj, bound, secs = self._solve()
        out = self._solution(sol)
        proven = status == "Optimal"
        value = int(round(sum(sol[j] for j in self.b.values()))) if sol else 0
        return {"value": value, "proven": proven, "status": status,
                "bound": value if proven else int(bound + 1e-6), "seconds": round(secs, 3),
                "cols": self.ncol, "rows": self.rows, **out}

    def hold_blocks(self, value):
        if self.b and value > 0:
            self._row(float(value), self.inf, list(self.b.values()), [1.0] * len(self.b))
            self.held = True

    def stage2(self, net, objective):
        """bench.quality's stage 2, without its shortcut for net <= 0 when blocks are held (making a
        block may need moves that free no net node, or occupy more idle nodes than they free)."""
        if not getattr(self, "held", False) or not self.y:
            return super().stage2(net, objective)
        if not getattr(self, "_net_row", False):
            self._row(float(net), self.inf, list(self.y.values()) + list(self.z.values()),
                      [1.0] * len(self.y) + [-1.0] * len(self.z))
            self._net_row = True
        return super().stage2(max(net, 1), objective)


REPLAY_FILTERS = tuple(f for f in FILTERS if f[0] != "NetworkTopology")


def _verify(setting, freed, moves, pods):
    """bench.quality.verify with every scheduler filter but the planner's NetworkTopology."""
    state = SimulatedState(setting.snap)
    vacated = set(freed)
    for n in freed:
        for p in setting.r_pods[n]:
            state.unbind(p)
    assert len(moves) == sum(len(setting.r_pods[n]) for n in freed), "MILP: a pod of a vacated node has no receiver"
    for pk, m in moves:
        p, n = pods[pk]
        assert n in vacated and m not in vacated, f"MILP: {pk} moved from {n} to {m}"
        why = run_filters(p, setting.snap.node_by_name[m], state, {}, REPLAY_FILTERS)
        assert why is None, f"MILP solution infeasible: {pk} -> {m}: {why}"
        state.bind(p, m)
    run = setting.run
    groups = {f"{pods[pk][0].namespace}/{pods[pk][0].group_name}" for pk, _ in moves}
    assert run.max_podgroups is None or len(groups) <= run.max_podgroups
    assert run.max_resource is None or sum(pods[pk][0].requests[R] for pk, _ in moves) <= run.max_resource


def _goal(run, tree):
    nt = run.network_topology
    if nt is None:
        return None
    tier = nt.tier if nt.tier is not None else tree.tier_of_name(nt.tier_name)
    return {"tier": tier, "size": nt.size, "required": nt.required, "mode": nt.mode}


def solve(setting, tree, gangs, goal, time_limit, planner_net=None):
    """Lexicographic optimum: blocks, then net at those blocks, then least GANG-3 weighted at both;
    `planner_net` (the planner's net at the optimal block count, when below the optimum's): also the
    least disruption at (blocks, planner_net), on a fresh model."""
    m = TopoModel(setting, tree, gangs, goal, time_limit)
    s1 = m.stage_blocks() if goal else {"value": 0, "proven": True, "seconds": 0.0}
    m.hold_blocks(s1["value"])
    s2 = m.stage1()
    s3 = m.stage2(s2["value"], "weighted")
    return m, s1, s2, s3


def least_at(setting, tree, gangs, goal, time_limit, blocks_value, net):
    m = TopoModel(setting, tree, gangs, goal, time_limit)
    m.hold_blocks(blocks_value)
    return m.stage2(net, "weighted")


def _strip(sol):
    return {k: v for k, v in sol.items() if k not in ("moves", "cols", "rows")}


def instance(nodes, seed):
    """One instance read every way the bench looks at it: (objects, spec, tree, hard gangs, snapshot,
    RunSpec, quality.Setting, goal)."""
    objs = generate(nodes, seed)
    spec = goal_spec(seed, tiers_of(objs))
    tree = Tree(objs)
    snap = planner.load_objects(objs)
    run = RunSpec.from_spec(spec)
    return objs, spec, tree, hard_gangs(objs, tree), snap, run, quality.Setting(snap, run), _goal(run, tree)


# tests/unit/planner/test_incremental_identity.py (another owner's file) still imports this name.
_instance = instance


def evaluate(inst, time_limit, milp=None):
    iid, nodes, seed = inst
    objs, spec, tree, gangs, snap, run, s, goal = instance(nodes, seed)
    row = {"id": iid, "nodes": nodes, "seed": seed, "spec": spec, "tiers": sorted(set(tree.tier.values())),
           "hypernodes": len(tree.names), "hard_gangs": len(gangs), "providers": len(s.providers),
           "occupied": len(s.occupied), "idle": len(s.idle), "candidates": len(s.candidates),
           "goal": goal}
    before_blocks, before_free = blocks(objs, tree, goal["tier"], goal["size"])
    row["blocks_before"] = before_blocks
    # the planner
    t0 = time.perf_counter()
    try:
        p = planner.plan(snap, run)
        err = None
    except Exception as e:   # the planner side may not have landed; record and go on
        p, err = None, f"{type(e).__name__}: {e}"
        row["planner_traceback"] = traceback.format_exc(limit=-6)
    secs = time.perf_counter() - t0
    if p is not None:
        moves = [(m.pod.key, m.to_node) for m in p.moves]
        pb, pfree = blocks(objs, tree, goal["tier"], goal["size"], moves)
        ck = check(objs, moves, tree)
        state = SimulatedState(snap)
        for m in p.moves:
            state.move(m.pod, m.to_node)
        used = free_after(objs, moves)        # freed = occupied providers left with no R, counted here
        freed = sorted(n for n in s.occupied if used.get(n, 0) == 0)
        claimed = sorted(n for n in p.freed_nodes if used.get(n, 0) > 0)
        met = s.metrics([(m.pod, m.from_node, m.to_node) for m in p.moves], freed, state)
        nb = p.node_blocks
        row["planner"] = {"outcome": p.outcome, "message": p.message, "moves": moves, "blocks": pb, "free": pfree,
                          "reported_blocks": None if nb is None else {"before": nb.before, "after": nb.after},
                          "net": met["net"], "freed": met["freed"], "idle_occupied": met["idle_occupied"],
                          "weighted": met["weighted"], "dims": met["dims"], "podgroups": met["podgroups"],
                          "claimed_not_free": {n: used[n] for n in claimed},
                          "violations": ck["violations"], "violating_gangs": ck["gangs"], "violation_details": ck["details"],
                          "seconds": round(secs, 3)}
        row["gangs_outside_before"] = ck["before"]
    else:
        row["planner"] = {"error": err, "seconds": round(secs, 3)}
    # the MILP (it depends only on the instance and the model: `milp` reuses an earlier run's)
    if milp is not None:
        for k in ("optimum_blocks", "optimum_net", "least", "milp_infeasible_gangs"):
            row[k] = milp[k]
        s1 = row["optimum_blocks"]
    else:
        model, s1, s2, s3 = solve(s, tree, gangs, goal, time_limit)
        for name, sol in (("blocks", s1), ("net", s2), ("least", s3)):
            mv = sol.get("moves", [])
            ck = check(objs, mv, tree)
            assert ck["violations"] == 0, f"{iid}: MILP stage {name} breaks hard topology: {ck['details']}"
            b, free = blocks(objs, tree, goal["tier"], goal["size"], mv)
            assert b >= s1["value"] or not sol["proven"], f"{iid}: MILP stage {name} recounted {b} blocks < {s1['value']}"
            sol["recount_blocks"], sol["free"] = b, free
        row["optimum_blocks"] = _strip(s1)
        row["optimum_net"] = _strip(s2)
        row["least"] = _strip(s3)
        row["milp_infeasible_gangs"] = model.infeasible
    pl = row["planner"]
    if "blocks" in pl and pl["blocks"] == s1["value"] and pl["net"] < row["optimum_net"]["value"]:
        row["least_at_planner_net"] = _strip(least_at(s, tree, gangs, goal, time_limit, s1["value"], pl["net"]))
    return row


# -- aggregate and markdown ---------------------------------------------------------------------------
def verdict_row(r):
    """How the planner did on one instance: `ok`, or why not (a string)."""
    pl, b = r["planner"], r["optimum_blocks"]
    req = r["goal"]["required"]
    if "error" in pl:
        return f"planner error: {pl['error']}"
    if b["value"] < req:        # the gate cannot be met: the planner must say so and move nothing
        if pl["outcome"] != "RequiredNodeBlocksNotMet" or pl["moves"]:
            return (f"optimum {b['value']} < requiredNodeBlocks {req}, but the planner answered {pl['outcome']} "
                    f"with {len(pl['moves'])} moves ({pl['blocks']} blocks)")
        return "ok"
    if pl["blocks"] < b["value"]:
        return f"blocks {pl['blocks']} < optimum {b['value']}" + (f" ({pl['outcome']})" if not pl["moves"] else "")
    return "ok"


def aggregate(rows):
    done = [r for r in rows if "error" not in r["planner"]]
    at_opt = [r for r in done if verdict_row(r) == "ok"]
    gate = [r for r in done if r["optimum_blocks"]["value"] < r["goal"]["required"]]
    reach = [r for r in done if r not in gate]
    same = [r for r in reach if r["planner"]["blocks"] == r["optimum_blocks"]["value"]]
    disr, no_least = [], []
    for r in same:
        pl = r["planner"]
        if pl["net"] == r["optimum_net"]["value"]:
            ref = r["least"]
        elif "least_at_planner_net" in r:
            ref = r["least_at_planner_net"]
        elif pl["net"] <= 0 and not pl["moves"]:
            ref = {"value": 0.0, "proven": True}
        else:
            continue
        if not ref.get("proven", True) and ref.get("net", pl["net"]) < pl["net"]:
            no_least.append(r["id"])   # the solve hit its time limit before any plan at that net: no minimum
            continue
        disr.append((r, ref))
    pw = round(sum(r["planner"]["weighted"] for r, _ in disr), 3)
    mw = round(sum(ref["value"] for _, ref in disr), 3)
    return {
        "instances": len(rows), "planner_errors": [r["id"] for r in rows if "error" in r["planner"]],
        "at_optimum": len(at_opt), "misses": [r["id"] for r in done if r not in at_opt],
        "gate_instances": len(gate), "gate_ok": sum(1 for r in gate if verdict_row(r) == "ok"),
        "reach_instances": len(reach), "reach_ok": sum(1 for r in reach if verdict_row(r) == "ok"),
        "blocks_planner": sum(r["planner"]["blocks"] for r in reach), "blocks_optimum": sum(r["optimum_blocks"]["value"] for r in reach),
        "blocks_before": sum(r["blocks_before"] for r in reach),
        "net_short": [r["id"] for r in same if r["planner"]["net"] < r["optimum_net"]["value"]],
        "net_planner": sum(r["planner"]["net"] for r in same), "net_optimum": sum(r["optimum_net"]["value"] for r in same),
        "disruption_instances": len(disr), "planner_weighted": pw, "least_weighted": mw, "no_least_solution": no_least,
        "disruption_over": [r["id"] for r, ref in disr if r["planner"]["weighted"] > DISRUPTION_TARGET * ref["value"] + 1e-6],
        "violations": sum(r["planner"].get("violations", 0) for r in done),
        "violating": [r["id"] for r in done if r["planner"].get("violations")],
        "claimed_not_free": [r["id"] for r in done if r["planner"].get("claimed_not_free")],
        "reported_mismatch": [r["id"] for r in done if r["planner"].get("reported_blocks")
                              and r["planner"]["reported_blocks"]["after"] != r["planner"]["blocks"]
                              and r["planner"]["moves"]],
        "hard_gangs": sum(r["hard_gangs"] for r in rows),
        "moves_checked": sum(len(r["planner"].get("moves", [])) for r in done),
        "hard_moves": sum(1 for r in done for _ in r["planner"].get("moves", [])),
        "proven": sum(r["optimum_blocks"]["proven"] and r["optimum_net"]["proven"] and r["least"]["proven"] for r in rows),
        "limit_hits": [f"{r['id']}:{st}" for r in rows for st, k in (("blocks", "optimum_blocks"), ("net", "optimum_net"),
                                                                      ("least", "least"))
                       if not r[k]["proven"]],
    }


def pct(a, b):
    return f"{100.0 * a / b:.1f} %" if b else "—"


def markdown(doc):
    rows, a = doc["instances"], doc["aggregate"]
    n = a["instances"]
    lines = []
    sc = doc.get("scale")
    tgt = ["| target | measured | status |", "|---|---|---|"]

    def v(ok):
        return "met" if ok else "**not met**"

    done = n - len(a["planner_errors"])
    tgt.append(f"| blocks = the MILP optimum on ≥ 99 % of instances | {a['at_optimum']} / {n} = {pct(a['at_optimum'], n)}"
               + (f" ({len(a['planner_errors'])} planner errors)" if a["planner_errors"] else "")
               + f" | {v(n and a['at_optimum'] >= BLOCK_TARGET * n)} |")
    tgt.append(f"| GANG-3 weighted disruption ≤ 105 % of the minimum at the same blocks (and net), in total | "
               f"{a['planner_weighted']:.1f} / {a['least_weighted']:.1f} = {pct(a['planner_weighted'], a['least_weighted'])} "
               f"over {a['disruption_instances']} instances | "
               f"{v(a['planner_weighted'] <= DISRUPTION_TARGET * a['least_weighted'] + 1e-6)} |")
    tgt.append(f"| 0 moves breaking a hard topology constraint | {a['violations']} in {a['moves_checked']} moves of "
               f"{done} plans | {v(done and a['violations'] == 0)} |")
    if sc:
        tgt.append(f"| 10,000 nodes with a 3-tier tree within the current figures (≤ 40 s load + plan; now ~10 s "
                   f"without topology) | {sc['total_s']:.1f} s (load {sc['load_s']:.1f} + plan {sc['plan_s']:.1f}), "
                   f"CPU {sc['total_cpu_s']:.1f} s, peak RSS {sc['peak_rss_mb']:.0f} MB | {v(sc['total_s'] <= 40.0)} |")
    lines += tgt + [""]
    lines.append(
        f"**{n} instances** (t000–t{n - 1:03d}), {a['hard_gangs']} hard-topology gangs in all. With the block goal "
        f"reachable ({a['reach_instances']} instances) the planner makes {a['blocks_planner']} blocks against an "
        f"optimum of {a['blocks_optimum']} ({a['blocks_before']} before); it reaches the optimum on "
        f"{a['reach_ok']} of them. On the {a['gate_instances']} instances where `requiredNodeBlocks` is above the "
        f"optimum it answers RequiredNodeBlocksNotMet with no moves on {a['gate_ok']}. At the optimal block count "
        f"the planner frees {a['net_planner']} net nodes against {a['net_optimum']} (short on "
        f"{len(a['net_short'])}: {', '.join(a['net_short']) or 'none'}). GANG-3 weighted disruption "
        f"{a['planner_weighted']:.1f} against a minimum of {a['least_weighted']:.1f} at the same blocks and net "
        f"({a['disruption_instances']} instances; above 105 % on {', '.join(a['disruption_over']) or 'none'}"
        + (f"; left out, the least-disruption solve found no plan at that net within its time limit: "
           f"{', '.join(a['no_least_solution'])}" if a.get("no_least_solution") else "") + "). "
        f"Hard-topology violations in the planner's moves, checked on the final placement from the raw "
        f"objects: **{a['violations']}**{' (' + ', '.join(a['violating']) + ')' if a['violating'] else ''}. "
        f"MILP proven optimal in all three stages on {a['proven']} of {n}"
        + (f"; time-limit hits: {', '.join(a['limit_hits'])}." if a["limit_hits"] else "."))
    if a["planner_errors"]:
        lines += ["", "Instances where `planner.plan` raised (counted as misses):", ""]
        for r in rows:
            if "error" in r["planner"]:
                where = r.get("planner_traceback", "").strip().splitlines()
                at = next((x.strip() for x in reversed(where) if x.strip().startswith("File ")), "")
                lines.append(f"- **{r['id']}** ({r['nodes']} nodes, seed {r['seed']}): {r['planner']['error']}"
                             + (f" at {at}" if at else ""))
    if a["claimed_not_free"]:
        lines += ["", "Plans that list a node as freed while, after their own moves, it still holds R (pods it "
                      "received earlier in the plan; blocks and net above are counted from the final placement, "
                      "so such a node counts as not freed):", ""]
        for r in rows:
            c = r["planner"].get("claimed_not_free")
            if c:
                lines.append(f"- **{r['id']}**: " + ", ".join(f"{n} ({v} R left)" for n, v in sorted(c.items())))
    if a["reported_mismatch"]:
        lines += ["", f"Plans whose `node_blocks.after` differs from the blocks counted on their final placement: "
                      f"{', '.join(a['reported_mismatch'])}."]
    if a["misses"]:
        lines += ["", "Instances where the planner misses (blocks per HyperNode of the goal tier: free nodes before → "
                      "planner → MILP):", ""]
        for r in rows:
            if r["id"] not in a["misses"]:
                continue
            pl, o = r["planner"], r["optimum_blocks"]
            hn = [f"{h}: {pb}→{pl['free'].get(h, 0)}→{o['free'].get(h, 0)}"
                  for h, pb in sorted(blocks_free_before(r).items()) if pl["free"].get(h, 0) != o["free"].get(h, 0)]
            lines.append(f"- **{r['id']}** ({r['nodes']} nodes, seed {r['seed']}, tier {r['goal']['tier']}, size "
                         f"{r['goal']['size']}, required {r['goal']['required']}, mode {r['goal']['mode'] or '—'}): "
                         f"{verdict_row(r)}; {'; '.join(hn) or 'same free counts'}")
    lines += ["", "Per instance: blocks before / planner / optimum (`*`: time limit), net freed planner / optimum at "
                  "those blocks, GANG-3 weighted disruption planner / minimum, hard-topology violations, planner outcome.",
              "", "| id | nodes | tiers | HyperNodes | hard gangs | goal (tier, size, required, mode) | budget / scope | "
                  "blocks | net | weighted | violations | outcome | MILP s |",
              "|---|---:|---|---:|---:|---|---|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        g, pl = r["goal"], r["planner"]
        o, on, ls = r["optimum_blocks"], r["optimum_net"], r["least"]
        extra = ", ".join(k for k in ("maxPerRun", "scope") if k in r["spec"]) or "—"
        ref = r.get("least_at_planner_net", ls)
        if "error" in pl:
            body = f"{r['blocks_before']} / — / {o['value']} | — / {on['value']} | — | — | error"
        else:
            body = (f"{r['blocks_before']} / {pl['blocks']} / {o['value']}{'' if o['proven'] else '*'} | "
                    f"{pl['net']} / {on['value']}{'' if on['proven'] else '*'} | "
                    f"{pl['weighted']:.1f} / {ref['value']:.1f}{'' if ref.get('proven', True) else '*'} | "
                    f"{pl['violations']} | {pl['outcome']}")
        lines.append(f"| {r['id']} | {r['nodes']} | {len(r['tiers'])} | {r['hypernodes']} | {r['hard_gangs']} | "
                     f"{g['tier']}, {g['size']}, {g['required']}, {g['mode'] or '—'} | {extra} | {body} | "
                     f"{o['seconds'] + on['seconds'] + ls['seconds']:.1f} |")
    if sc:
        lines += ["", f"Scale: {sc['nodes']:,} nodes, {sc['pods']:,} pods, {sc['hypernodes']} HyperNodes in 3 tiers, "
                      f"{sc['hard_gangs']} hard gangs; spec {json.dumps(sc['spec']['networkTopology'])}; one run "
                      f"(planner {sc.get('commit', '')}, load average {sc['loadavg_at_start'][0]:.1f} at start): "
                      f"load {sc['load_s']:.2f} s + plan {sc['plan_s']:.2f} s = **{sc['total_s']:.2f} s** wall "
                      f"({sc['total_cpu_s']:.2f} s CPU), peak RSS {sc['peak_rss_mb']:.0f} MB; {sc['moves']} moves, "
                      f"{sc['freed']} nodes listed as freed"
                      + (f" ({sc['claimed_not_free']} of them still holding R after the moves)" if sc.get("claimed_not_free") else "")
                      + f", blocks {sc.get('blocks_before')} → {sc.get('blocks_after')}, "
                      f"outcome {sc['outcome']}, hard-topology violations {sc.get('violations')}."]
    lines += ["", f"Generated {doc['generated']} in {doc['seconds']:.0f} s (planner {doc['commit']}; MILP time limit "
                  f"{doc['time_limit']:.0f} s per solve)."]
    return "\n".join(lines) + "\n"


def blocks_free_before(r):
    objs = generate(r["nodes"], r["seed"])
    return blocks(objs, Tree(objs), r["goal"]["tier"], r["goal"]["size"])[1]


# -- diagnosis of a miss -------------------------------------------------------------------------------
def diagnose(iid, time_limit):
    """For one instance: the planner's and the MILP's block-optimal plans side by side (free nodes
    per HyperNode of the goal tier, nodes vacated, idle nodes filled), and whether the planner's own
    filters (NetworkTopology included) accept the MILP's plan, replayed node by node."""
    inst = next(i for i in instances() if i[0] == iid)
    _, nodes, seed = inst
    objs, spec, tree, gangs, snap, run, s, goal = instance(nodes, seed)
    p = planner.plan(snap, run)
    pmoves = [(m.pod.key, m.to_node) for m in p.moves]
    m = TopoModel(s, tree, gangs, goal, time_limit)
    b = m.stage_blocks()
    _, before = blocks(objs, tree, goal["tier"], goal["size"])
    pb, pfree = blocks(objs, tree, goal["tier"], goal["size"], pmoves)
    mb, mfree = blocks(objs, tree, goal["tier"], goal["size"], b["moves"])
    print(f"{iid}: spec {json.dumps(spec)}")
    print(f"planner {p.outcome}: {pb} blocks, freed {sorted(p.freed_nodes)}, reoccupied {sorted(p.reoccupied)}; "
          f"{p.message}")
    print(f"MILP: {mb} blocks, freed {b['freed_nodes']}, idle filled {b['idle_nodes']}")
    relocated = []
    for g, h in sorted(gangs.items()):
        ks = [k for k, (gg, _, _) in raw_pods(objs).items() if gg == g]
        mv = dict(b["moves"])
        if ks and all(k in mv for k in ks):
            src = {tree.domain(m.pods[k][1], h) for k in ks}
            dst = {tree.domain(mv[k], h) for k in ks}
            if src != dst:
                relocated.append(f"{g} (tier {h}) {'/'.join(sorted(map(str, src)))} -> {'/'.join(sorted(map(str, dst)))}")
    print(f"  MILP relocates {len(relocated)} wholly vacated hard gang(s) to another HyperNode: "
          f"{'; '.join(relocated) or '-'}")
    used = free_after(objs, pmoves)
    print(f"  planner lists as freed but R still in use: {sorted(n for n in p.freed_nodes if used.get(n, 0) > 0) or '-'}")
    at = tree.at_tier(goal["tier"])
    for h in sorted(at):
        prov = [n for n in sorted(at[h]) if n in set(s.providers)]
        print(f"  {h}: {len(prov)} providers, free {before[h]} -> planner {pfree[h]} / MILP {mfree[h]}; "
              f"idle {sorted(n for n in prov if n in s.idle)}; candidates {sorted(n for n in prov if n in s.candidates)}")
    # every pod of the vacated nodes is evicted first, then the replacements bind (so a wholly
    # vacated gang has no anchor when its first replacement binds)
    state = SimulatedState(snap)
    for pk, _ in b["moves"]:
        state.unbind(m.pods[pk][0])
    rejected = 0
    for pk, to in sorted(b["moves"], key=lambda x: (m.pods[x[0]][0].group_name, x[0])):
        pod = m.pods[pk][0]
        why = run_filters(pod, snap.node_by_name[to], state, {})
        if why is not None:
            rejected += 1
            print(f"  planner filters reject the MILP's {pk} ({m.pods[pk][1]} -> {to}): {why}")
        state.bind(pod, to)
    print(f"  planner filters accept the MILP's {len(b['moves']) - rejected} of {len(b['moves'])} moves "
          f"(all evicted first, then bound PodGroup by PodGroup)")
    return p, b


# -- sanity: without topology the model is bench.quality's ------------------------------------------
def sanity(k, time_limit):
    """On the first k quality instances: no tree and no goal gives bench.quality's stage-1 optimum; one
    tier-1 HyperNode over every node with blocks of 1 gives that optimum + the idle nodes."""
    every = quality.instances()
    for inst in every[:k] + every[40:40 + k]:
        iid, nodes, seed, profile, variant = inst
        objs = quality.generate(nodes, seed, profile=profile)
        snap = planner.load_objects(objs)
        run = RunSpec.from_spec(quality.ALL_VARIANTS[variant])
        s = quality.Setting(snap, run)
        ref = quality.Model(s, time_limit).stage1()
        _, _, n1, _ = solve(s, Tree(objs), {}, None, time_limit)
        objs2 = objs + [hypernode("all", 1, [o["metadata"]["name"] for o in objs if o["kind"] == "Node"], "Node")]
        tree2 = Tree(objs2)
        m = TopoModel(s, tree2, {}, {"tier": 1, "size": 1, "required": 0, "mode": ""}, time_limit)
        b = m.stage_blocks()
        ok = n1["value"] == ref["value"] and b["value"] == ref["value"] + len(s.idle)
        print(f"{iid}: quality optimum {ref['value']}, topology model {n1['value']}, blocks of 1 in one HyperNode "
              f"{b['value']} = {ref['value']} + {len(s.idle)} idle: {'ok' if ok else 'MISMATCH'}", flush=True)
        assert ok
    checker_selftest()


def checker_selftest():
    """The checker flags a hard gang's pod moved out of its domain, and nothing else."""
    objs = generate(40, SEED0)
    tree = Tree(objs)
    gangs = hard_gangs(objs, tree)
    pods = raw_pods(objs)
    g, h = next((g, h) for g, h in sorted(gangs.items()) if h == 1)
    pk = next(k for k, (gg, _, _) in sorted(pods.items()) if gg == g)
    node = pods[pk][1]
    inside = sorted(tree.nodes[tree.domain(node, h)] - {node})
    outside = sorted(set(providers(objs)) - tree.nodes[tree.domain(node, h)])
    assert check(objs, [])["violations"] == 0
    assert inside and check(objs, [(pk, inside[0])])["violations"] == 0
    bad = check(objs, [(pk, outside[0])])
    assert bad["violations"] == 1 and bad["gangs"] == [g], bad
    print(f"checker: {pk} (hard tier {h}) to {inside[0]} passes, to {outside[0]} is flagged: ok", flush=True)


# -- scale: 10,000 nodes with a 3-tier tree -----------------------------------------------------------
SCALE_SPEC = {"goals": [{"resource": R}],
              "networkTopology": {"hyperNodeTier": 1, "nodeBlockSize": 4, "requiredNodeBlocks": 0, "mode": "binpack"}}


def scale_file(nodes=10000):
    """bench.scale's cluster (bench.generate, seed 1) with a 3-tier tree over the nodes in name order
    (racks of 8, spines of 8 racks, one root) and hard topology on gangs that already sit in one rack
    (tier 1, every other one) or one spine (tier 2, every other one)."""
    path = OUT / f"cluster-{nodes}-seed{SCALE_SEED}-hypernodes.json"
    if path.exists():
        return path
    with open(cluster_file(nodes), encoding="utf-8") as f:
        doc = json.load(f)
    items = doc["items"]
    names = [o["metadata"]["name"] for o in items if o["kind"] == "Node"]
    rack = {n: i // 8 for i, n in enumerate(names)}
    racks = {}
    for n in names:
        racks.setdefault(rack[n], []).append(n)
    hns = [hypernode(f"leaf-{r}", 1, ns, "Node") for r, ns in sorted(racks.items())]
    spines = {}
    for r in sorted(racks):
        spines.setdefault(r // 8, []).append(f"leaf-{r}")
    hns += [hypernode(f"spine-{s}", 2, rs, "HyperNode") for s, rs in sorted(spines.items())]
    hns.append(hypernode("root", 3, [f"spine-{s}" for s in sorted(spines)], "HyperNode"))
    nodes_of = {}
    for o in items:
        if o["kind"] == "Pod":
            g = o["metadata"].get("annotations", {}).get("scheduling.k8s.io/group-name")
            if g:
                nodes_of.setdefault(f"{o['metadata']['namespace']}/{g}", set()).add(o["spec"]["nodeName"])
    k = 0
    for o in items:
        if o["kind"] != "PodGroup":
            continue
        ns = nodes_of.get(f"{o['metadata']['namespace']}/{o['metadata']['name']}")
        if not ns:
            continue
        tier = 1 if len({rack[n] for n in ns}) == 1 else 2 if len({rack[n] // 8 for n in ns}) == 1 else None
        if tier is not None:
            k += 1
            if k % 2:
                o["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": tier}
    doc["items"] = items + hns
    tmp = path.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
    tmp.rename(path)
    return path


def scale_child(path):
    """One measured load + plan (in its own process); prints one JSON line."""
    import resource
    from planner.gcpause import paused_gc
    clock = time.perf_counter, time.process_time

    def timed(f):
        w, c = clock[0](), clock[1]()
        out = f()
        return out, clock[0]() - w, clock[1]() - c

    snap, t_load, c_load = timed(lambda: planner.load_file(str(path)))
    with paused_gc():
        p, t_plan, c_plan = timed(lambda: planner.plan(snap, SCALE_SPEC))
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"load_s": t_load, "plan_s": t_plan, "total_s": t_load + t_plan, "load_cpu_s": c_load,
                      "plan_cpu_s": c_plan, "total_cpu_s": c_load + c_plan, "peak_rss_mb": rss,
                      "nodes": len(snap.nodes), "pods": len(snap.pods), "outcome": p.outcome, "rounds": p.rounds,
                      "freed": len(p.freed_nodes), "freed_list": list(p.freed_nodes), "moves_list": [(m.pod.key, m.to_node) for m in p.moves],
                      "moves": len(p.moves),
                      "reported_blocks": None if p.node_blocks is None else
                      {"before": p.node_blocks.before, "after": p.node_blocks.after}}))


def run_scale():
    path = scale_file()
    load = os.getloadavg()
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.topology", "--scale-child", str(path)], cwd=ROOT,
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"scale child failed:\n{proc.stderr}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    with open(path, encoding="utf-8") as f:
        objs = json.load(f)["items"]
    tree = Tree(objs)
    moves = [tuple(m) for m in out.pop("moves_list")]
    ck = check(objs, moves, tree)
    used = free_after(objs, moves)
    out["claimed_not_free"] = len([n for n in out.pop("freed_list") if used.get(n, 0) > 0])
    g = SCALE_SPEC["networkTopology"]
    out.update({"process_s": wall, "loadavg_at_start": load, "commit": git_head(), "spec": SCALE_SPEC,
                "hypernodes": len(tree.names), "hard_gangs": len(hard_gangs(objs, tree)),
                "violations": ck["violations"], "violation_details": ck["details"][:20],
                "blocks_before": blocks(objs, tree, g["hyperNodeTier"], g["nodeBlockSize"])[0],
                "blocks_after": blocks(objs, tree, g["hyperNodeTier"], g["nodeBlockSize"], moves)[0],
                "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    print(json.dumps({k: v for k, v in out.items() if k != "violation_details"}), flush=True)
    return out


# -- driver -------------------------------------------------------------------------------------------
def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=None, help="only the first N instances")
    ap.add_argument("--ids", nargs="+", help="only these instance ids")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per MILP solve")
    ap.add_argument("--sanity", type=int, metavar="K", help="check the model against bench.quality on K instances")
    ap.add_argument("--scale", action="store_true", help="measure the planner at 10,000 nodes (one run) into the output")
    ap.add_argument("--scale-child", help=argparse.SUPPRESS)
    ap.add_argument("--diagnose", nargs="+", metavar="ID", help="the planner's and the MILP's plans side by side")
    ap.add_argument("--milp-from", help="reuse the MILP results of this earlier topology.json or --rows file "
                                        "(same instances and model); only the planner is rerun")
    ap.add_argument("--rows", help="also append each instance's result to this JSON-lines file as it is done")
    ap.add_argument("--no-instances", action="store_true", help="with --scale: keep the instances of the output file")
    ap.add_argument("-o", "--output", default=str(OUT / "topology.json"))
    ap.add_argument("--markdown", default=str(OUT / "topology.md"))
    args = ap.parse_args(argv)
    if args.scale_child:
        scale_child(args.scale_child)
        return
    if args.sanity:
        sanity(args.sanity, args.time_limit)
        return
    if args.diagnose:
        for iid in args.diagnose:
            diagnose(iid, args.time_limit)
        return
    if args.no_instances:
        with open(args.output, encoding="utf-8") as f:
            doc = json.load(f)
    else:
        reuse = {}
        if args.milp_from:
            with open(args.milp_from, encoding="utf-8") as f:
                if args.milp_from.endswith(".jsonl"):
                    lines = [json.loads(line) for line in f if line.strip()]
                    old, old_rows = lines[0], lines[1:]
                else:
                    old = json.load(f)
                    old_rows = old["instances"]
            args.time_limit = old["time_limit"]
            reuse = {(r["id"], r["nodes"], r["seed"]): r for r in old_rows}
        if args.rows:
            with open(args.rows, "w", encoding="utf-8") as f:
                f.write(json.dumps({"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "commit": git_head(), "time_limit": args.time_limit}) + "\n")
        rows, t0 = [], time.perf_counter()
        for inst in instances(args.instances):
            if args.ids and inst[0] not in args.ids:
                continue
            r = evaluate(inst, args.time_limit, reuse.get(inst))
            rows.append(r)
            if args.rows:
                with open(args.rows, "a", encoding="utf-8") as f:
                    f.write(json.dumps(r) + "\n")
            pl, o = r["planner"], r["optimum_blocks"]
            print(f"{r['id']} n={r['nodes']:>2} tiers={len(r['tiers'])} hard={r['hard_gangs']:>2} "
                  f"goal=t{r['goal']['tier']}x{r['goal']['size']} req={r['goal']['required']} "
                  f"blocks {r['blocks_before']}->{pl.get('blocks', '-')}/{o['value']}{'' if o['proven'] else '*'} "
                  f"net {pl.get('net', '-')}/{r['optimum_net']['value']} "
                  f"w {pl.get('weighted', 0):.1f}/{r.get('least_at_planner_net', r['least'])['value']:.1f} "
                  f"viol {pl.get('violations', '-')} {pl.get('outcome', pl.get('error', ''))[:60]} "
                  f"milp {o['seconds'] + r['optimum_net']['seconds'] + r['least']['seconds']:.1f}s -> {verdict_row(r)}",
                  flush=True)
        doc = {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": git_head(),
               "seconds": round(time.perf_counter() - t0, 1), "time_limit": args.time_limit, "instances": rows}
        doc["aggregate"] = aggregate(rows)
    if args.scale:
        doc["scale"] = run_scale()
    md = markdown(doc)
    print()
    print(md)
    write_results(doc, md, args.output, args.markdown)


if __name__ == "__main__":
    main()
