"""Plan quality against an exact optimum (MILP) and two peer-style baselines, on small clusters.

For each instance (a seeded `bench.generate` cluster of at most 40 nodes and one RepackRun spec:
no budget, a typical budget, a scope that excludes protected workloads, or both) this computes:

- the planner's plan (`planner.plan`): nodes freed; it never occupies an idle node;
- the exact optimum of (nodes freed - idle nodes newly occupied) under the same scope, budget and
  filters, by a MILP solved with HiGHS (highspy), with any node as a receiver, idle ones included;
  and the same optimum with receivers restricted to occupied nodes, as the planner restricts them;
- a cluster-autoscaler-style pass (nodes by ascending R utilisation; remove one if all its R pods
  fit elsewhere, first fit in name order, every filter, cumulative);
- a descheduler HighNodeUtilization-style pass (evict the movable R pods of nodes under 50 % R
  utilisation; place each on the remaining nodes, first fit, every filter, cumulative; count the
  evicted pods that have no feasible place).

    python -m bench.quality                       # 40 instances, writes bench/out/quality.{json,md}
    python -m bench.quality --instances 8 --time-limit 30

Not a test: it prints figures. Needs the `bench` extra (highspy).
"""
import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner  # noqa: E402
from planner.cost import gang_infos  # noqa: E402
from planner.filters import STATIC_FILTERS, run_filters  # noqa: E402
from planner.frag import usage  # noqa: E402
from planner.plan import RunSpec  # noqa: E402
from planner.rules import check_movable  # noqa: E402
from planner.state import SimulatedState  # noqa: E402

from bench.generate import PROFILES, R, generate  # noqa: E402

OUT = ROOT / "bench" / "out"
PROTECTED = {"repack.volcano.sh/protected": "true"}
BUDGET = {"podGroups": 3, "resources": {R: "16"}}
SCOPE = {"podGroups": {"exclude": {"selector": {"matchLabels": PROTECTED}}}}
VARIANTS = {   # name -> RepackRun spec
    "none": {"goals": [{"resource": R}]},
    "budget": {"goals": [{"resource": R}], "maxPerRun": BUDGET},
    "scoped": {"goals": [{"resource": R}], "scope": SCOPE},
    "scoped+budget": {"goals": [{"resource": R}], "scope": SCOPE, "maxPerRun": BUDGET},
}
SIZES = (16, 24, 32, 40)
SEED0 = 7000
DESCHEDULER_THRESHOLD = 0.5   # HighNodeUtilization: nodes under 50 % of R are underutilised


def _budget(podgroups=None, cards=None):
    out = {}
    if podgroups is not None:
        out["podGroups"] = podgroups
    if cards is not None:
        out["resources"] = {R: str(cards)}
    return out


# The wider set (issue 15): budgets of 1-5 PodGroups and of cards, and scopes on PodGroups and nodes.
WIDE_VARIANTS = {
    "none": VARIANTS["none"],
    **{f"pg{k}": {"goals": [{"resource": R}], "maxPerRun": _budget(podgroups=k)} for k in range(1, 6)},
    **{f"cards{c}": {"goals": [{"resource": R}], "maxPerRun": _budget(cards=c)} for c in (8, 16, 32)},
    "pg2+cards16": {"goals": [{"resource": R}], "maxPerRun": _budget(2, 16)},
    "pg4+cards24": {"goals": [{"resource": R}], "maxPerRun": _budget(4, 24)},
    "scoped": VARIANTS["scoped"],
    "scoped-nodes": {"goals": [{"resource": R}], "scope": {"nodes": {"include": {"selector": {"matchExpressions": [
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-0", "zone-1", "zone-2"]}]}}}}},
    "scoped+pg3": {"goals": [{"resource": R}], "scope": SCOPE, "maxPerRun": _budget(podgroups=3)},
    "scoped+cards16": {"goals": [{"resource": R}], "scope": SCOPE, "maxPerRun": _budget(cards=16)},
}
ALL_VARIANTS = {**VARIANTS, **WIDE_VARIANTS}
WIDE_SIZES = (16, 24, 32, 40, 48, 56, 64, 72, 80)
WIDE_SEED0 = 8000
WIDE_COUNT = 200


def instances(n=None):
    """(id, nodes, seed, profile, variant) of every instance, seeds fixed.

    q00-q39: the original 40 (the generator's base profile; every variant of VARIANTS meets every
    size of SIZES ten times). w000-w199: the wider set, 16-80 nodes; variants cycle through
    WIDE_VARIANTS, size and profile (base, gangs, split) are drawn from the instance's own seed.
    `n` keeps only the first n.
    """
    names = list(VARIANTS)
    out = []
    for i in range(40):
        out.append((f"q{i:02d}", SIZES[(i // len(names)) % len(SIZES)], SEED0 + i, "base", names[i % len(names)]))
    wide = list(WIDE_VARIANTS)
    for i in range(WIDE_COUNT):
        seed = WIDE_SEED0 + i
        rng = random.Random(seed)
        out.append((f"w{i:03d}", rng.choice(WIDE_SIZES), seed, rng.choice(PROFILES), wide[i % len(wide)]))
    return out if n is None else out[:n]


# -- the setting shared by every strategy ---------------------------------------------------------
class Setting:
    """What every strategy sees: providers, occupancy, candidates (movable, in scope), gangs."""

    def __init__(self, snap, run):
        self.snap, self.run = snap, run
        for p in snap.pods:
            # The MILP models static filters and resources only; the generator must not emit the rest.
            assert not (p.host_ports or p.pod_affinity or p.pod_anti_affinity or p.spread or p.pvc_names), \
                f"pod {p.key}: host ports / inter-pod terms / volumes are not modelled by the MILP"
        self.alloc, used, _ = usage(snap, R)
        self.used = used
        self.providers = sorted(self.alloc)
        self.occupied = {n for n in self.providers if used.get(n, 0) > 0}
        self.idle = set(self.providers) - self.occupied
        self.ctx = SimpleNamespace(snapshot=snap, scope=run.scope)
        self.r_pods = {n: sorted((p for p in snap.pods_by_node.get(n, ()) if not p.terminal and p.requests.get(R, 0) > 0),
                                 key=lambda p: (-p.requests[R], p.key)) for n in self.providers}
        self.in_scope = {n for n in self.providers if run.scope.node_in_scope(snap.node_by_name[n])}
        self.candidates = sorted(n for n in self.occupied & self.in_scope
                                 if all(check_movable(p, self.ctx) is None for p in self.r_pods[n]))
        self.gangs = gang_infos(snap, R)

    def movable(self, pod):
        return check_movable(pod, self.ctx) is None

    def metrics(self, moves, freed, state, unplaced=0, extra=None):
        """Common figures of a strategy: moves are (pod, from, to-or-None) evictions."""
        groups, evicted = {}, {}
        for p, _, _ in moves:
            g = f"{p.namespace}/{p.group_name}"
            groups.setdefault(g, set()).add(p.key)
            evicted[p.key] = p
        below = sum(1 for g, keys in groups.items() if g in self.gangs and len(keys) > self.gangs[g].safe)
        idle_used = sum(1 for n in self.idle if state.amount(n, R) > 0)
        out = {"freed": len(freed), "idle_occupied": idle_used, "net": len(freed) - idle_used,
               "cards_moved": sum(p.requests[R] for p, _, _ in moves), "evictions": len(moves),
               "podgroups": len(groups), "below_min": below, "unplaced": unplaced}
        out.update(extra or {})
        return out


def _budget_ok(setting, groups, cards, pods):
    run = setting.run
    if run.max_podgroups is not None:
        if len(groups | {f"{p.namespace}/{p.group_name}" for p in pods}) > run.max_podgroups:
            return False
    if run.max_resource is not None and cards + sum(p.requests[R] for p in pods) > run.max_resource:
        return False
    return True


# -- strategies ---------------------------------------------------------------------------------
def run_planner(setting):
    p = planner.plan(setting.snap, setting.run)
    state = SimulatedState(setting.snap)
    moves = []
    for m in p.moves:
        state.move(m.pod, m.to_node)
        moves.append((m.pod, m.from_node, m.to_node))
    return setting.metrics(moves, p.freed_nodes, state, extra={"rounds": p.rounds, "freed_nodes": list(p.freed_nodes)})


def run_autoscaler(setting):
    """cluster-autoscaler-style scale-down simulation (cumulative, first fit, every filter).

    Candidates are the occupied nodes in scope.nodes by ascending R utilisation (then name), in
    the order fixed at the start. A candidate is removed when all R pods it holds now (received
    ones included) are movable, the budget allows them, and each fits another node that has not
    been removed, trying nodes in name order, idle ones included; the placements persist.
    """
    snap, state = setting.snap, SimulatedState(setting.snap)
    order = sorted(setting.occupied & setting.in_scope, key=lambda n: (setting.used[n] / setting.alloc[n], n))
    names = [n.name for n in snap.nodes]
    removed, moves, groups, cards = [], [], set(), 0
    for n in order:
        pods = sorted((p for p in state.pods_on[n].values() if p.requests.get(R, 0) > 0),
                      key=lambda p: (-p.requests[R], p.key))
        if not pods or not all(setting.movable(p) for p in pods) or not _budget_ok(setting, groups, cards, pods):
            continue
        mark = state.fork()
        placed = []
        for p in pods:
            state.unbind(p)
            to = next((m for m in names if m != n and m not in removed
                       and run_filters(p, snap.node_by_name[m], state, {}) is None), None)
            if to is None:
                break
            state.bind(p, to)
            placed.append((p, n, to))
        if len(placed) < len(pods):
            state.revert(mark)
            continue
        state.commit()
        removed.append(n)
        moves += placed
        groups |= {f"{p.namespace}/{p.group_name}" for p in pods}
        cards += sum(p.requests[R] for p in pods)
    return setting.metrics(moves, removed, state)


def run_descheduler(setting):
    """descheduler HighNodeUtilization-style pass.

    Nodes in scope.nodes under the threshold of R utilisation are underutilised (ascending, then
    name); their movable R pods are evicted (budget permitting, pod by pod) and each is placed on
    the first node in name order among the nodes that were not underutilised, every filter,
    cumulative. A pod with no feasible place stays evicted (pending; the scheduler may well put
    it back on an underutilised node). A node is `emptied` when every R pod on it was evicted, and
    freed when, in addition, each of them found a place.
    """
    snap, state = setting.snap, SimulatedState(setting.snap)
    util = {n: setting.used.get(n, 0) / setting.alloc[n] for n in setting.providers}
    under = sorted((n for n in setting.occupied & setting.in_scope if util[n] < DESCHEDULER_THRESHOLD),
                   key=lambda n: (util[n], n))
    targets = [n for n in setting.providers if util[n] >= DESCHEDULER_THRESHOLD]
    moves, groups, cards, unplaced = [], set(), 0, 0
    freed, emptied = [], 0
    for n in under:
        all_evicted, all_placed = True, True
        for p in list(setting.r_pods[n]):
            if not setting.movable(p) or not _budget_ok(setting, groups, cards, [p]):
                all_evicted = False
                continue
            state.unbind(p)
            groups.add(f"{p.namespace}/{p.group_name}")
            cards += p.requests[R]
            to = next((m for m in targets if run_filters(p, snap.node_by_name[m], state, {}) is None), None)
            if to is None:
                unplaced += 1
                all_placed = False
            else:
                state.bind(p, to)
            moves.append((p, n, to))
        if all_evicted:
            emptied += 1
            if all_placed:
                freed.append(n)
    state.commit()
    return setting.metrics(moves, freed, state, unplaced, {"emptied": emptied, "underutilised": len(under)})


# -- the exact optimum ----------------------------------------------------------------------------
def optimum(setting, idle_receivers=True, time_limit=120.0):
    """max sum(y) - sum(z) by MILP (HiGHS); see docs/benchmarks.md for the model."""
    import highspy
    snap = setting.snap
    base = SimulatedState(snap)
    cands = setting.candidates
    receivers = [m for m in setting.providers if idle_receivers or m in setting.occupied]
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)
    h.setOptionValue("time_limit", float(time_limit))
    h.setOptionValue("mip_abs_gap", 0.999)     # the objective is an integer
    h.setOptionValue("mip_rel_gap", 0.0)
    inf = highspy.kHighsInf
    ncol = [0]

    def binary(cost):
        h.addCol(cost, 0.0, 1.0, 0, [], [])
        j = ncol[0]
        ncol[0] += 1
        return j

    y = {n: binary(1.0) for n in cands}
    z = {m: binary(-1.0) for m in receivers if m in setting.idle}
    x = {}                      # (pod key, receiver) -> col
    pods = {}                   # pod key -> (pod, its node)
    static = {}
    for n in cands:
        for p in setting.r_pods[n]:
            pods[p.key] = (p, n)
            for m in receivers:
                if m == n:
                    continue
                node = snap.node_by_name[m]
                alloc, used = node.allocatable, base.used[m]
                # Fits the receiver as it is now in every requested resource (it receives only
                # while not vacated, so its own pods stay), and passes every static filter.
                if any(used.get(r, 0) + v > alloc.get(r, 0) for r, v in p.requests.items()):
                    continue
                sk = (p.key, m)
                if sk not in static:
                    static[sk] = run_filters(p, node, base, {}, STATIC_FILTERS) is None
                if static[sk]:
                    x[(p.key, m)] = binary(0.0)
    integrality = [highspy.HighsVarType.kInteger] * ncol[0]
    h.changeColsIntegrality(ncol[0], list(range(ncol[0])), integrality)
    rows = 0

    def row(lo, hi, idx, val):
        nonlocal rows
        h.addRow(lo, hi, len(idx), idx, val)
        rows += 1

    incoming, outgoing = {}, {}
    for (pk, m), j in x.items():
        incoming.setdefault(m, []).append((pk, j))
        outgoing.setdefault(pk, []).append(j)
    for pk, (p, n) in pods.items():          # sum_m x[p,m] = y[node(p)]
        cols = outgoing.get(pk, [])
        row(0.0, 0.0, cols + [y[n]], [1.0] * len(cols) + [-1.0])
    for m, lst in incoming.items():
        node = snap.node_by_name[m]
        if m in y:                           # never onto a vacated node: x[p,m] <= 1 - y[m]
            for _, j in lst:
                row(-inf, 1.0, [j, y[m]], [1.0, 1.0])
        if m in z:                           # an idle receiver counts: z[m] >= x[p,m]
            for _, j in lst:
                row(-inf, 0.0, [j, z[m]], [1.0, -1.0])
        resources = sorted({r for pk, _ in lst for r in pods[pk][0].requests})
        for r in resources:
            free = node.allocatable.get(r, 0) - base.used[m].get(r, 0)
            need = [(j, pods[pk][0].requests.get(r, 0)) for pk, j in lst if pods[pk][0].requests.get(r, 0)]
            if sum(v for _, v in need) <= free:
                continue                     # can never bind
            # used + sum x*req <= alloc; with y[m] (its own R pods leave) the receiving side is
            # empty anyway (x <= 1 - y), so the tighter form sum x*req <= free*(1 - y) is used.
            idx, val = [j for j, _ in need], [float(v) for _, v in need]
            if m in y:
                row(-inf, float(free), idx + [y[m]], val + [float(free)])
            else:
                row(-inf, float(free), idx, val)
    run = setting.run
    if run.max_podgroups is not None:
        w = {}
        for n in cands:
            for p in setting.r_pods[n]:
                g = f"{p.namespace}/{p.group_name}"
                if g not in w:
                    w[g] = ncol[0]
                    h.addCol(0.0, 0.0, 1.0, 0, [], [])
                    h.changeColIntegrality(ncol[0], highspy.HighsVarType.kInteger)
                    ncol[0] += 1
                row(-inf, 0.0, [y[n], w[g]], [1.0, -1.0])
        if w:
            row(-inf, float(run.max_podgroups), list(w.values()), [1.0] * len(w))
    if run.max_resource is not None and cands:
        row(-inf, float(run.max_resource), [y[n] for n in cands],
            [float(sum(p.requests[R] for p in setting.r_pods[n])) for n in cands])
    h.changeObjectiveSense(highspy.ObjSense.kMaximize)
    t0 = time.perf_counter()
    if ncol[0]:
        h.run()
        status = h.modelStatusToString(h.getModelStatus())
        info = h.getInfo()
        sol = h.getSolution().col_value
        value = round(info.objective_function_value) if status in ("Optimal", "Time limit reached") else 0
        bound = info.mip_dual_bound
    else:
        status, sol, value, bound = "Optimal", [], 0, 0.0
    secs = time.perf_counter() - t0
    freed = [n for n in cands if sol and sol[y[n]] > 0.5]
    idle_used = [m for m in z if sol and sol[z[m]] > 0.5]
    moves = sorted((pk, m) for (pk, m), j in x.items() if sol and sol[j] > 0.5)
    _verify(setting, freed, moves, pods)
    proven = status == "Optimal"
    return {"value": value, "proven": proven, "status": status,
            "bound": value if proven else int(bound + 1e-6), "freed": len(freed), "idle_occupied": len(idle_used),
            "freed_nodes": freed, "idle_nodes": idle_used,
            "seconds": round(secs, 3), "cols": ncol[0], "rows": rows}


def _verify(setting, freed, moves, pods):
    """Replay a MILP solution with every scheduler filter on a fresh state: it must be a real plan."""
    state = SimulatedState(setting.snap)
    vacated = set(freed)
    for n in freed:
        for p in setting.r_pods[n]:
            state.unbind(p)
    assert len(moves) == sum(len(setting.r_pods[n]) for n in freed), "MILP: a pod of a vacated node has no receiver"
    for pk, m in moves:
        p, n = pods[pk]
        assert n in vacated and m not in vacated, f"MILP: {pk} moved from {n} to {m}"
        why = run_filters(p, setting.snap.node_by_name[m], state, {})
        assert why is None, f"MILP solution infeasible: {pk} -> {m}: {why}"
        state.bind(p, m)
    run = setting.run
    groups = {f"{pods[pk][0].namespace}/{pods[pk][0].group_name}" for pk, _ in moves}
    assert run.max_podgroups is None or len(groups) <= run.max_podgroups
    assert run.max_resource is None or sum(pods[pk][0].requests[R] for pk, _ in moves) <= run.max_resource


# -- driver ---------------------------------------------------------------------------------------
def evaluate(inst, time_limit):
    iid, nodes, seed, profile, variant = inst
    snap = planner.load_objects(generate(nodes, seed, profile=profile))
    run = RunSpec.from_spec(ALL_VARIANTS[variant])
    s = Setting(snap, run)
    t0 = time.perf_counter()
    pl = run_planner(s)
    pl["seconds"] = round(time.perf_counter() - t0, 3)
    opt = optimum(s, True, time_limit)
    occ = optimum(s, False, time_limit)
    return {"id": iid, "nodes": nodes, "seed": seed, "profile": profile, "variant": variant, "providers": len(s.providers),
            "occupied": len(s.occupied), "idle": len(s.idle), "candidates": len(s.candidates),
            "r_pods": sum(len(s.r_pods[n]) for n in s.providers),
            "planner": pl, "optimum": opt, "optimum_occupied": occ,
            "autoscaler": run_autoscaler(s), "descheduler": run_descheduler(s)}


def ratio(a, b):
    return 1.0 if b == 0 else a / b


def aggregate(rows):
    """Totals per strategy and planner/optimum, overall and per variant."""
    def agg(rs):
        opt = sum(r["optimum"]["value"] for r in rs)
        occ = sum(r["optimum_occupied"]["value"] for r in rs)
        out = {"instances": len(rs), "optimum": opt, "optimum_occupied": occ,
               "proven": sum(r["optimum"]["proven"] and r["optimum_occupied"]["proven"] for r in rs)}
        for k in ("planner", "autoscaler", "descheduler"):
            tot = {m: sum(r[k][m] for r in rs) for m in ("freed", "idle_occupied", "net", "cards_moved", "evictions",
                                                         "podgroups", "below_min", "unplaced")}
            tot["of_optimum"] = ratio(tot["net"], opt)
            tot["at_optimum"] = sum(r[k]["net"] >= r["optimum"]["value"] for r in rs)
            out[k] = tot
        out["descheduler"]["emptied"] = sum(r["descheduler"]["emptied"] for r in rs)
        out["planner"]["of_optimum_occupied"] = ratio(out["planner"]["net"], occ)
        out["planner"]["mean_instance_ratio"] = sum(ratio(r["planner"]["net"], r["optimum"]["value"]) for r in rs) / len(rs)
        return out

    res = {"all": agg(rows)}
    for v in VARIANTS:
        sub = [r for r in rows if r["variant"] == v]
        if sub:
            res[v] = agg(sub)
    return res


def pct(v):
    return f"{100 * v:.1f} %"


def markdown(result):
    """The per-instance and per-strategy tables, as docs/benchmarks.md shows them."""
    rows, agg = result["instances"], result["aggregate"]
    a = agg["all"]
    lines = [
        f"Planner / optimum, all {a['instances']} instances: **{a['planner']['net']} / {a['optimum']} = "
        f"{pct(a['planner']['of_optimum'])}** (mean per-instance ratio {pct(a['planner']['mean_instance_ratio'])}; "
        f"planner at the optimum on {a['planner']['at_optimum']} of {a['instances']}; "
        f"optimum proven on {a['proven']} of {a['instances']}). Against the optimum restricted to occupied "
        f"receivers, as the planner restricts itself: {a['planner']['net']} / {a['optimum_occupied']} = "
        f"{pct(a['planner']['of_optimum_occupied'])}.",
        "",
        "| spec | instances | optimum | optimum, occupied receivers | planner | planner / optimum |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for v in [*VARIANTS, "all"]:
        if v in agg:
            g = agg[v]
            lines.append(f"| {v} | {g['instances']} | {g['optimum']} | {g['optimum_occupied']} | {g['planner']['net']} | "
                         f"{pct(g['planner']['of_optimum'])} |")
    lines += [
        "",
        "Per strategy, totals over all instances (net = nodes freed - idle nodes newly occupied):",
        "",
        "| strategy | nodes freed | idle nodes newly occupied | net | net / optimum | instances at optimum | cards moved "
        "| pods evicted | PodGroups affected | PodGroups below minAvailable | evicted pods with no feasible place |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    labels = {"planner": "kubectl-repack planner", "autoscaler": "cluster-autoscaler-style",
              "descheduler": "descheduler HighNodeUtilization-style"}
    for k in ("planner", "autoscaler", "descheduler"):
        t = a[k]
        freed = f"{t['freed']}" + (f" ({t['emptied']} emptied)" if k == "descheduler" else "")
        lines.append(f"| {labels[k]} | {freed} | {t['idle_occupied']} | {t['net']} | {pct(t['of_optimum'])} | "
                     f"{t['at_optimum']} / {a['instances']} | {t['cards_moved']} | {t['evictions']} | {t['podgroups']} | "
                     f"{t['below_min']} | {t['unplaced']} |")
    lines.append(f"| exact optimum (MILP) | {sum(r['optimum']['freed'] for r in rows)} | "
                 f"{sum(r['optimum']['idle_occupied'] for r in rows)} | {a['optimum']} | 100.0 % | — | — | — | — | — | — |")
    lines += [
        "",
        "Per instance. optimum: net (nodes freed / idle nodes occupied by that solution), `*` when only bounded "
        "within the time limit; CA: cluster-autoscaler-style net (freed / idle occupied); DS: descheduler-style "
        "freed (emptied / evicted pods with no place); MILP s: both solves.",
        "",
        "| id | nodes | seed | spec | occupied | candidates | R pods | optimum | optimum, occupied receivers "
        "| planner | planner / optimum | CA | DS | MILP s |",
        "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        o, oo = r["optimum"], r["optimum_occupied"]
        mark = "" if o["proven"] else f"* (≤ {o['bound']})"
        mark2 = "" if oo["proven"] else f"* (≤ {oo['bound']})"
        ca, ds = r["autoscaler"], r["descheduler"]
        lines.append(
            f"| {r['id']} | {r['nodes']} | {r['seed']} | {r['variant']} | {r['occupied']} | {r['candidates']} | {r['r_pods']} | "
            f"{o['value']}{mark} ({o['freed']}/{o['idle_occupied']}) | {oo['value']}{mark2} | {r['planner']['net']} | "
            f"{pct(ratio(r['planner']['net'], o['value']))} | {ca['net']} ({ca['freed']}/{ca['idle_occupied']}) | "
            f"{ds['freed']} ({ds['emptied']}/{ds['unplaced']}) | {o['seconds'] + oo['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=None, help="only the first N instances")
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds per MILP solve")
    ap.add_argument("-o", "--output", default=str(OUT / "quality.json"))
    ap.add_argument("--markdown", default=str(OUT / "quality.md"))
    args = ap.parse_args(argv)
    rows = []
    t0 = time.perf_counter()
    for inst in instances(args.instances):
        r = evaluate(inst, args.time_limit)
        rows.append(r)
        o = r["optimum"]
        print(f"{r['id']} nodes={r['nodes']:>2} {r['variant']:<13} cand={r['candidates']:>2} "
              f"planner={r['planner']['net']:>2} opt={o['value']:>2}{'' if o['proven'] else '*'} "
              f"opt_occ={r['optimum_occupied']['value']:>2} CA={r['autoscaler']['net']:>3} "
              f"DS={r['descheduler']['freed']:>2}/{r['descheduler']['unplaced']} "
              f"milp={o['seconds'] + r['optimum_occupied']['seconds']:.1f}s", flush=True)
    from bench.scale import _git_head
    result = {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": _git_head(),
              "seconds": round(time.perf_counter() - t0, 1),
              "time_limit": args.time_limit, "descheduler_threshold": DESCHEDULER_THRESHOLD,
              "variants": VARIANTS, "instances": rows}
    result["aggregate"] = aggregate(rows)
    md = markdown(result)
    print()
    print(md)
    for path, text in ((args.output, json.dumps(result, indent=1) + "\n"), (args.markdown, md)):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    print(f"wrote {args.output} and {args.markdown}")


if __name__ == "__main__":
    main()
