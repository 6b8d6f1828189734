"""Plan quality against an exact optimum (MILP) and two peer-style baselines, on small clusters.

For each instance (a seeded `bench.generate` cluster of at most 40 nodes and one RepackRun spec:
no budget, a typical budget, a scope that excludes protected workloads, or both) this computes:

- the planner's plan (`planner.plan`): nodes freed and idle nodes newly occupied;
- the exact optimum of (nodes freed - idle nodes newly occupied) under the same scope, budget and
  filters, by a MILP solved with HiGHS (highspy), with any node as a receiver, idle ones included
  when the freed nodes cover them one for one (planner.cover);
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
import random
import sys
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner  # noqa: E402
import planner.cost  # noqa: E402
from planner.cost import gang_infos, plan_dimensions  # noqa: E402
from planner.cover import Cover  # noqa: E402
from planner.filters import STATIC_FILTERS, run_filters  # noqa: E402
from planner.frag import usage  # noqa: E402
from planner.plan import RunSpec  # noqa: E402
from planner.rules import check_movable  # noqa: E402
from planner.state import SimulatedState  # noqa: E402

from bench.common import git_head, write_results  # noqa: E402
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


# The wider set: budgets of 1-5 PodGroups and of cards, and scopes on PodGroups and nodes.
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
        self.pod_by_key = {p.key: p for p in snap.pods}
        self.cover = Cover(snap, R, self.providers)

    def movable(self, pod):
        return check_movable(pod, self.ctx) is None

    def metrics(self, moves, freed, state, unplaced=0, extra=None):
        """Common figures of a strategy: moves are (pod, from, to-or-None) evictions."""
        groups, evicted = {}, {}
        for p, _, _ in moves:
            g = f"{p.namespace}/{p.group_name}"
            groups.setdefault(g, set()).add(p.key)
            evicted[p.key] = p
        idle_nodes = [n for n in sorted(self.idle) if state.amount(n, R) > 0]
        idle_used = len(idle_nodes)
        dims, weighted, _ = dimensions(self, list(evicted))
        out = {"freed": len(freed), "idle_occupied": idle_used, "net": len(freed) - idle_used,
               # idle nodes filled that the freed nodes do not cover (RELIEF-4): the peers' passes ignore the rule
               "idle_uncovered": self.cover.uncovered(list(freed), idle_nodes),
               "cards_moved": sum(p.requests[R] for p, _, _ in moves), "evictions": len(moves),
               "podgroups": len(groups), "below_min": dims[1], "unplaced": unplaced,
               "dims": list(dims), "weighted": weighted}
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
WEIGHTS = planner.cost.DEFAULT_WEIGHTS     # GANG-3's, never retuned here


def dimensions(setting, moved_keys):
    """GANG-3 dimensions of a whole plan (GANG-5 widening included) and their weighted sum.

    `moved_keys`: every evicted pod key. Returns (affected workloads, PodGroups below minAvailable,
    affected R, moved R, moved pods), the weighted sum, and the number of PodGroups disrupted.
    """
    by_group = {}
    for pk in moved_keys:
        pod = setting.pod_by_key[pk]
        by_group.setdefault(f"{pod.namespace}/{pod.group_name}", set()).add(pk)
    dims = plan_dimensions(setting.gangs, by_group)
    return dims, round(sum(w * d for w, d in zip(WEIGHTS, dims)), 6), len(by_group)


class Model:
    """The MILP over one instance; stage 1 maximises net nodes freed, stage 2 minimises disruption
    (GANG-3 weighted, or PodGroups disrupted) with net freed held at stage 1's value."""

    def __init__(self, setting, time_limit):
        import highspy
        self.hs, self.setting = highspy, setting
        snap = setting.snap
        base = SimulatedState(snap)
        cands = setting.candidates
        receivers = list(setting.providers)
        h = self.h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.setOptionValue("threads", 1)
        h.setOptionValue("time_limit", float(time_limit))
        h.setOptionValue("mip_rel_gap", 0.0)
        self.inf = inf = highspy.kHighsInf
        self.ncol = 0
        self.rows = 0
        y = self.y = {n: self._col(0.0, 1.0, True) for n in cands}
        z = self.z = {m: self._col(0.0, 1.0, True) for m in receivers if m in setting.idle}
        x = self.x = {}                      # (pod key, receiver) -> col
        pods = self.pods = {}                # pod key -> (pod, its node)
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
                        x[(p.key, m)] = self._col(0.0, 1.0, True)
        incoming, outgoing = {}, {}
        for (pk, m), j in x.items():
            incoming.setdefault(m, []).append((pk, j))
            outgoing.setdefault(pk, []).append(j)
        for pk, (p, n) in pods.items():          # sum_m x[p,m] = y[node(p)]
            cols = outgoing.get(pk, [])
            self._row(0.0, 0.0, cols + [y[n]], [1.0] * len(cols) + [-1.0])
        for m, lst in incoming.items():
            node = snap.node_by_name[m]
            if m in y:                           # never onto a vacated node: x[p,m] <= 1 - y[m]
                for _, j in lst:
                    self._row(-inf, 1.0, [j, y[m]], [1.0, 1.0])
            if m in z:                           # an idle receiver counts: z[m] >= x[p,m]
                for _, j in lst:
                    self._row(-inf, 0.0, [j, z[m]], [1.0, -1.0])
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
                    self._row(-inf, float(free), idx + [y[m]], val + [float(free)])
                else:
                    self._row(-inf, float(free), idx, val)
        self._cover()
        self._disruption()
        run = setting.run
        if run.max_podgroups is not None and self.a:
            self._row(-inf, float(run.max_podgroups), list(self.a.values()), [1.0] * len(self.a))
        if run.max_resource is not None and cands:
            self._row(-inf, float(run.max_resource), [y[n] for n in cands],
                      [float(sum(p.requests[R] for p in setting.r_pods[n])) for n in cands])

    def _cover(self):
        """RELIEF-4: the freed nodes cover the idle nodes filled one for one. A transportation
        problem over the cover classes (planner.cover): w[f, i] idle nodes of class i covered by
        freed nodes of class f; sum_f w[f, i] = sum z over class i; sum_i w[f, i] <= sum y over class f
        (integral flows are exactly the matchings of nodes)."""
        s, inf = self.setting, self.inf
        cover = s.cover
        idle_by, cand_by = {}, {}
        for m, j in self.z.items():
            idle_by.setdefault(cover.class_of[m], []).append(j)
        for n, j in self.y.items():
            cand_by.setdefault(cover.class_of[n], []).append(j)
        out = {f: [] for f in cand_by}
        for i, zs in sorted(idle_by.items()):
            ws = []
            for f in cover.covering(i):
                if f in cand_by:
                    w = self._col(0.0, float(len(zs)), True)
                    ws.append(w)
                    out[f].append(w)
            self._row(0.0, 0.0, ws + zs, [1.0] * len(ws) + [-1.0] * len(zs))
        for f, ws in sorted(out.items()):
            if ws:
                ys = cand_by[f]
                self._row(-inf, 0.0, ws + ys, [1.0] * len(ws) + [-1.0] * len(ys))

    def _col(self, lo, hi, integer):
        self.h.addCol(0.0, lo, hi, 0, [], [])
        j = self.ncol
        self.ncol += 1
        if integer:
            self.h.changeColIntegrality(j, self.hs.HighsVarType.kInteger)
        return j

    def _row(self, lo, hi, idx, val):
        self.h.addRow(lo, hi, len(idx), idx, val)
        self.rows += 1

    def _disruption(self):
        """Variables for the five GANG-3 dimensions (GANG-5 widening included), as planner.cost counts them.

        a[g]: PodGroup g disrupted; u[w]: workload w affected; b[g]: g below minAvailable;
        mr[g], mp[g]: R and pods that restart; ar[g] >= mr[g], >= total R * b[g] (affected R).
        """
        s, inf, y = self.setting, self.inf, self.y
        nodes_of = {}                            # group -> {pod key: node} over candidate nodes
        for pk, (p, n) in self.pods.items():
            nodes_of.setdefault(f"{p.namespace}/{p.group_name}", {})[pk] = n
        self.a, self.u, self.b, self.terms = {}, {}, {}, []
        for g, members in sorted(nodes_of.items()):
            info = s.gangs[g]
            a = self.a[g] = self._col(0.0, 1.0, True)
            for n in sorted(set(members.values())):
                self._row(-inf, 0.0, [y[n], a], [1.0, -1.0])
            u = self.u.get(info.workload)
            if u is None:
                u = self.u[info.workload] = self._col(0.0, 1.0, True)
                self.terms.append((u, WEIGHTS[0]))
            self._row(-inf, 0.0, [a, u], [1.0, -1.0])
            # restarting pods and R as linear expressions: {col: (pods, R)}
            expr = {}
            if info.restart == "job":
                expr[a] = (len(info.pod_amounts), info.resource_total)
            elif info.restart == "task":
                for t in sorted({info.tasks.get(k) for k in members}):
                    keys = [k for k, tt in info.tasks.items() if tt == t]
                    bt = self._col(0.0, 1.0, True)
                    for k in keys:
                        if k in members:
                            self._row(-inf, 0.0, [y[members[k]], bt], [1.0, -1.0])
                    expr[bt] = (len(keys), sum(info.pod_amounts.get(k, 0) for k in keys))
            else:
                for k, n in members.items():
                    pods, r = expr.get(y[n], (0, 0))
                    expr[y[n]] = (pods + 1, r + info.pod_amounts.get(k, 0))
            cols = sorted(expr)
            mp = self._col(0.0, inf, False)
            self._row(0.0, 0.0, cols + [mp], [float(expr[c][0]) for c in cols] + [-1.0])
            mr = self._col(0.0, inf, False)
            self._row(0.0, 0.0, cols + [mr], [float(expr[c][1]) for c in cols] + [-1.0])
            ar = self._col(0.0, inf, False)
            self._row(0.0, inf, [ar, mr], [1.0, -1.0])
            most = sum(expr[c][0] for c in cols)
            if info.min_available > 0 and most > info.safe:
                b = self.b[g] = self._col(0.0, 1.0, True)
                # pods restarting beyond safe -> below: mp - safe <= most * b
                self._row(-inf, float(info.safe), [mp, b], [1.0, -float(most)])
                self._row(0.0, inf, [ar, b], [1.0, -float(info.resource_total)])
                self.terms.append((b, WEIGHTS[1]))
            self.terms += [(ar, WEIGHTS[2]), (mr, WEIGHTS[3]), (mp, WEIGHTS[4])]

    def _set_objective(self, costs, sense):
        h = self.h
        h.changeColsCost(self.ncol, list(range(self.ncol)), [costs.get(j, 0.0) for j in range(self.ncol)])
        h.changeObjectiveSense(sense)

    def _solve(self):
        h = self.h
        t0 = time.perf_counter()
        h.run()
        secs = time.perf_counter() - t0
        status = h.modelStatusToString(h.getModelStatus())
        info = h.getInfo()
        sol = list(h.getSolution().col_value) if info.primal_solution_status else []
        return status, sol, info.objective_function_value, info.mip_dual_bound, secs

    def _solution(self, sol):
        s = self.setting
        freed = [n for n in s.candidates if sol and sol[self.y[n]] > 0.5]
        idle = [m for m in self.z if sol and sol[self.z[m]] > 0.5]
        moves = sorted((pk, m) for (pk, m), j in self.x.items() if sol and sol[j] > 0.5)
        verify(s, freed, moves, self.pods)
        dims, weighted, pgs = dimensions(s, [pk for pk, _ in moves])
        return {"freed": len(freed), "idle_occupied": len(idle), "net": len(freed) - len(idle),
                "freed_nodes": freed, "idle_nodes": idle, "dims": list(dims), "weighted": weighted,
                "podgroups": pgs}

    def stage1(self):
        """max net nodes freed = sum(y) - sum(z)."""
        if not self.y:
            return {"value": 0, "proven": True, "status": "Optimal", "bound": 0, "seconds": 0.0,
                    "cols": self.ncol, "rows": self.rows, **self._solution([])}
        self.h.setOptionValue("mip_abs_gap", 0.999)      # the objective is an integer
        self._set_objective({**{j: 1.0 for j in self.y.values()}, **{j: -1.0 for j in self.z.values()}},
                            self.hs.ObjSense.kMaximize)
        status, sol, obj, bound, secs = self._solve()
        out = self._solution(sol)
        proven = status == "Optimal"
        return {"value": out["net"], "proven": proven, "status": status,
                "bound": out["net"] if proven else int(bound + 1e-6), "seconds": round(secs, 3),
                "cols": self.ncol, "rows": self.rows, **out}

    def stage2(self, net, objective):
        """min disruption with net nodes freed >= `net`; objective "weighted" (GANG-3) or "podgroups"."""
        if not self.y or net <= 0:
            return {"value": 0.0 if objective == "weighted" else 0, "proven": True, "status": "Optimal", "bound": 0.0, "seconds": 0.0,
                    **self._solution([])}
        if not getattr(self, "_net_row", False):
            self._row(float(net), self.inf, list(self.y.values()) + list(self.z.values()),
                      [1.0] * len(self.y) + [-1.0] * len(self.z))
            self._net_row = True
        self.h.setOptionValue("mip_abs_gap", 1e-6)
        costs = dict(self.terms) if objective == "weighted" else {j: 1.0 for j in self.a.values()}
        self._set_objective(costs, self.hs.ObjSense.kMinimize)
        status, sol, obj, bound, secs = self._solve()
        out = self._solution(sol)
        value = out["weighted"] if objective == "weighted" else out["podgroups"]
        proven = status == "Optimal"
        if sol:
            # The replayed plan's own cost is the figure. Proven optimal, the model must agree with it
            # exactly; a time-limited incumbent may carry slack (an indicator set without need).
            assert value <= obj + 1e-4 and (not proven or abs(value - obj) < 1e-4), \
                f"MILP stage 2 objective {obj} != replayed disruption {value}"
        return {"value": value, "proven": proven, "status": status,
                "bound": value if proven else round(max(bound, 0.0), 6), "seconds": round(secs, 3), **out}


def optimum(setting, time_limit=120.0):
    """Stage 1: max net nodes freed; stage 2: least GANG-3 disruption, and fewest PodGroups
    disrupted, at that net (HiGHS); see docs/benchmarks.md for the model."""
    m = Model(setting, time_limit)
    s1 = m.stage1()
    return s1, m.stage2(s1["value"], "weighted"), m.stage2(s1["value"], "podgroups")


def verify(setting, freed, moves, pods):
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
    filled = {m for _, m in moves if m in setting.idle}
    assert not setting.cover.uncovered(freed, filled), f"MILP: idle {sorted(filled)} not covered by {sorted(freed)}"
    run = setting.run
    groups = {f"{pods[pk][0].namespace}/{pods[pk][0].group_name}" for pk, _ in moves}
    assert run.max_podgroups is None or len(groups) <= run.max_podgroups
    assert run.max_resource is None or sum(pods[pk][0].requests[R] for pk, _ in moves) <= run.max_resource


# -- driver ---------------------------------------------------------------------------------------
def evaluate(inst, time_limit, milp=None):
    """Every strategy on one instance; `milp`: this instance's MILP results from an earlier run
    (they depend only on the instance and the model, not on the planner)."""
    iid, nodes, seed, profile, variant = inst
    snap = planner.load_objects(generate(nodes, seed, profile=profile))
    run = RunSpec.from_spec(ALL_VARIANTS[variant])
    s = Setting(snap, run)
    t0 = time.perf_counter()
    pl = run_planner(s)
    pl["seconds"] = round(time.perf_counter() - t0, 3)
    if milp is not None:
        opt, least, fewest = milp["optimum"], milp["least_disruption"], milp["fewest_podgroups"]
    else:
        opt, least, fewest = optimum(s, time_limit)
    return {"id": iid, "nodes": nodes, "seed": seed, "profile": profile, "variant": variant,
            "providers": len(s.providers), "occupied": len(s.occupied), "idle": len(s.idle),
            "candidates": len(s.candidates), "r_pods": sum(len(s.r_pods[n]) for n in s.providers),
            "planner": pl, "optimum": opt, "least_disruption": least, "fewest_podgroups": fewest,
            "autoscaler": run_autoscaler(s), "descheduler": run_descheduler(s)}


def ratio(a, b):
    return 1.0 if b == 0 else a / b


STRATEGIES = ("planner", "autoscaler", "descheduler")
FAMILIES = {   # name -> predicate over an instance row
    "original 40": lambda r: r["id"].startswith("q"),
    "wider: base profile": lambda r: r["id"].startswith("w") and r["profile"] == "base",
    "wider: gangs profile": lambda r: r["id"].startswith("w") and r["profile"] == "gangs",
    "wider: split profile": lambda r: r["id"].startswith("w") and r["profile"] == "split",
    "no limit": lambda r: r["variant"] == "none",
    "PodGroup budget": lambda r: "pg" in r["variant"] or r["variant"] in ("budget", "scoped+budget"),
    "card budget": lambda r: "cards" in r["variant"] or r["variant"] in ("budget", "scoped+budget"),
    "scoped": lambda r: "scoped" in r["variant"],
}


def aggregate(rows):
    """Totals per strategy against the optimum, and disruption against the stage-2 minima."""
    def agg(rs):
        opt = sum(r["optimum"]["value"] for r in rs)
        out = {"instances": len(rs), "optimum": opt, "proven": sum(r["optimum"]["proven"] for r in rs),
               "stage2_proven": sum(r["least_disruption"]["proven"] and r["fewest_podgroups"]["proven"] for r in rs)}
        for k in STRATEGIES:
            tot = {m: sum(r[k][m] for r in rs) for m in ("freed", "idle_occupied", "net", "cards_moved", "evictions",
                                                         "podgroups", "below_min", "unplaced", "weighted")}
            tot["idle_uncovered"] = sum(r[k].get("idle_uncovered", 0) for r in rs)
            tot["dims"] = [sum(r[k]["dims"][i] for r in rs) for i in range(5)]
            tot["weighted"] = round(tot["weighted"], 3)
            tot["of_optimum"] = ratio(tot["net"], opt)
            tot["at_optimum"] = sum(r[k]["net"] >= r["optimum"]["value"] for r in rs)
            out[k] = tot
        out["descheduler"]["emptied"] = sum(r["descheduler"]["emptied"] for r in rs)
        pl = out["planner"]
        pl["mean_instance_ratio"] = sum(ratio(r["planner"]["net"], r["optimum"]["value"]) for r in rs) / max(len(rs), 1)
        pl["worse_than_ca"] = [r["id"] for r in rs if r["planner"]["net"] < r["autoscaler"]["net"]]
        pl["better_than_ca"] = sum(r["planner"]["net"] > r["autoscaler"]["net"] for r in rs)
        pl["ca_uncovered"] = [r["id"] for r in rs if r["planner"]["net"] < r["autoscaler"]["net"]
                              and r["autoscaler"].get("idle_uncovered")]
        # at the same net freed: the planner at stage 1's value, and both stage-2 solves with a
        # solution at that value (a solve that hit its time limit before any incumbent has none)
        at_opt = [r for r in rs if r["planner"]["net"] == r["optimum"]["value"]]
        same = [r for r in at_opt if r["least_disruption"]["net"] >= r["optimum"]["value"]
                and r["fewest_podgroups"]["net"] >= r["optimum"]["value"]]
        out["same_freed"] = {
            "instances": len(same),
            "no_stage2_solution": [r["id"] for r in at_opt if r not in same],
            "least_podgroups": sum(r["least_disruption"]["podgroups"] for r in same),
            "planner_weighted": round(sum(r["planner"]["weighted"] for r in same), 3),
            "least_weighted": round(sum(r["least_disruption"]["value"] for r in same), 3),
            "least_weighted_bound": round(sum(r["least_disruption"]["bound"] for r in same), 3),
            "planner_podgroups": sum(r["planner"]["podgroups"] for r in same),
            "fewest_podgroups": sum(r["fewest_podgroups"]["value"] for r in same),
            "fewest_podgroups_bound": sum(r["fewest_podgroups"]["bound"] for r in same),
            "planner_dims": [sum(r["planner"]["dims"][i] for r in same) for i in range(5)],
            "least_dims": [sum(r["least_disruption"]["dims"][i] for r in same) for i in range(5)],
            "ca_same": sum(1 for r in rs if r["autoscaler"]["net"] == r["optimum"]["value"]),
            "ca_podgroups": sum(r["autoscaler"]["podgroups"] for r in rs if r["autoscaler"]["net"] == r["optimum"]["value"]),
            "ca_fewest": sum(r["fewest_podgroups"]["value"] for r in rs if r["autoscaler"]["net"] == r["optimum"]["value"]),
        }
        out["time_limit_hits"] = [f"{r['id']}:{st}" for r in rs for st, key in
                                  (("1", "optimum"), ("2w", "least_disruption"), ("2p", "fewest_podgroups"))
                                  if not r[key]["proven"]]
        return out

    res = {"all": agg(rows)}
    for name, pred in FAMILIES.items():
        sub = [r for r in rows if pred(r)]
        if sub:
            res[name] = agg(sub)
    return res


def pct(v):
    return f"{100 * v:.1f} %"


def _dims(d):
    return " / ".join(f"{v:g}" if isinstance(v, int) else f"{v:.0f}" for v in d)


def markdown(result):
    """The summary, per-family, per-strategy and per-instance tables, as docs/benchmarks.md shows them."""
    rows, agg = result["instances"], result["aggregate"]
    a = agg["all"]
    pl, sf = a["planner"], a["same_freed"]
    hits = a["time_limit_hits"]
    lines = [
        f"**{a['instances']} instances.** Net nodes freed, planner / optimum: **{pl['net']} / {a['optimum']} = "
        f"{pct(pl['of_optimum'])}** in total; planner at the optimum on **{pl['at_optimum']} of {a['instances']} "
        f"= {pct(pl['at_optimum'] / a['instances'])}** (mean per-instance ratio {pct(pl['mean_instance_ratio'])}). "
        f"Stage 1 proven optimal on {a['proven']} of {a['instances']}.",
        "",
        f"Disruption on the {sf['instances']} instances where the planner frees the optimal net count and stage 2 "
        f"has a plan at that count: PodGroups disrupted **{sf['planner_podgroups']} against "
        f"{sf['least_podgroups']} in the MILP's least-disruption plan (stage 2a, GANG-3 weighted) = "
        f"{pct(ratio(sf['planner_podgroups'], sf['least_podgroups']))}**, and against the fewest PodGroups any plan "
        f"at that count disrupts (stage 2b, an objective GANG-3 does not have) {sf['fewest_podgroups']} = "
        f"{pct(ratio(sf['planner_podgroups'], sf['fewest_podgroups']))}; GANG-3 weighted "
        f"disruption {sf['planner_weighted']:.1f} against a minimum of {sf['least_weighted']:.1f} = "
        f"{pct(ratio(sf['planner_weighted'], sf['least_weighted']))}. Stage 2 proven on {a['stage2_proven']} of "
        f"{a['instances']} instances (both objectives)"
        + (f"; left out: {', '.join(sf['no_stage2_solution'])} (a stage-2 solve hit its time limit before any plan)"
           if sf["no_stage2_solution"] else "")
        + (f"; where a solve hit its time limit, its incumbent is the figure and its bound is "
           f"{sf['fewest_podgroups_bound']} PodGroups / {sf['least_weighted_bound']:.1f} weighted." if hits else ".")
        + (f" Time-limit hits: {', '.join(hits)}." if hits else " No MILP solve hit its time limit."),
        "",
        f"Against cluster-autoscaler-style: the planner frees fewer net nodes on "
        f"**{len(pl['worse_than_ca'])}** instances{' (' + ', '.join(pl['worse_than_ca']) + ')' if pl['worse_than_ca'] else ''}"
        f", more on {pl['better_than_ca']}"
        + (f" (on {len(pl['ca_uncovered'])} of those {len(pl['worse_than_ca'])} the autoscaler-style pass fills idle nodes "
           "that its freed nodes do not cover — tainted team nodes emptied into untainted spares, say — which the "
           "planner and the MILP may not do)" if pl.get("ca_uncovered") else "") + ".",
        "",
        "| instances | n | optimum (net) | planner | planner / optimum | at optimum | CA-style | PodGroups disrupted: planner / 2a / 2b | weighted: planner / min | MILP limit hits |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in ["all", *FAMILIES]:
        if name not in agg:
            continue
        g = agg[name]
        gs = g["same_freed"]
        lines.append(
            f"| {name} | {g['instances']} | {g['optimum']} | {g['planner']['net']} | {pct(g['planner']['of_optimum'])} | "
            f"{g['planner']['at_optimum']} | {g['autoscaler']['net']} | {gs['planner_podgroups']} / {gs['least_podgroups']} / {gs['fewest_podgroups']} | "
            f"{gs['planner_weighted']:.1f} / {gs['least_weighted']:.1f} | {len(g['time_limit_hits'])} |")
    lines += [
        "",
        "Per strategy, totals over all instances (net = nodes freed − idle nodes newly occupied; GANG-3 dimensions "
        "of each whole plan: affected workloads / PodGroups below minAvailable / affected R / moved R / moved pods, "
        "GANG-5 widening included; weighted = 1.0, 0.8, 0.6, 0.3, 0.1). The planner and the MILP fill an idle node "
        "only when the freed nodes cover it one for one (taints, size, selected labels); the cluster-autoscaler-style "
        "pass does not, so its net counts idle nodes it filled that no freed node can stand in for (\"not covered\"):",
        "",
        "| strategy | nodes freed | idle nodes newly occupied | net | net / optimum | instances at optimum | cards moved "
        "| pods evicted | PodGroups disrupted | GANG-3 dimensions | weighted | evicted pods with no feasible place |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    labels = {"planner": "kubectl-repack planner", "autoscaler": "cluster-autoscaler-style",
              "descheduler": "descheduler HighNodeUtilization-style"}
    for k in STRATEGIES:
        t = a[k]
        freed = f"{t['freed']}" + (f" ({t['emptied']} emptied)" if k == "descheduler" else "")
        idle = f"{t['idle_occupied']}" + (f" ({t['idle_uncovered']} not covered)" if t.get("idle_uncovered") else "")
        lines.append(f"| {labels[k]} | {freed} | {idle} | {t['net']} | {pct(t['of_optimum'])} | "
                     f"{t['at_optimum']} / {a['instances']} | {t['cards_moved']} | {t['evictions']} | {t['podgroups']} | "
                     f"{_dims(t['dims'])} | {t['weighted']:.1f} | {t['unplaced']} |")
    lines.append(f"| exact optimum, stage 1 (MILP) | {sum(r['optimum']['freed'] for r in rows)} | "
                 f"{sum(r['optimum']['idle_occupied'] for r in rows)} | {a['optimum']} | 100.0 % | — | — | — | "
                 f"{sum(r['optimum']['podgroups'] for r in rows)} | {_dims([sum(r['optimum']['dims'][i] for r in rows) for i in range(5)])} | "
                 f"{sum(r['optimum']['weighted'] for r in rows):.1f} | — |")
    lines.append(f"| stage 2, least weighted disruption at the optimal net | — | — | {a['optimum']} | 100.0 % | — | — | — | "
                 f"{sum(r['least_disruption']['podgroups'] for r in rows)} | "
                 f"{_dims([sum(r['least_disruption']['dims'][i] for r in rows) for i in range(5)])} | "
                 f"{sum(r['least_disruption']['value'] for r in rows):.1f} | — |")
    lines.append(f"| stage 2, fewest PodGroups disrupted at the optimal net | — | — | {a['optimum']} | 100.0 % | — | — | — | "
                 f"{sum(r['fewest_podgroups']['value'] for r in rows)} | — | — | — |")
    lines += [
        "",
        "Per instance. optimum: stage-1 net (nodes freed / idle nodes occupied by that solution), `*` when only "
        "bounded within the time limit; PGs: PodGroups disrupted, planner / stage 2a (least GANG-3 disruption) / stage 2b (fewest PodGroups); weighted: GANG-3 "
        "weighted disruption, planner / stage-2 minimum (`*`: time limit, bound in brackets); CA: "
        "cluster-autoscaler-style net (freed / idle occupied); DS: descheduler-style freed (emptied / evicted pods "
        "with no place); MILP s: the three solves.",
        "",
        "| id | nodes | seed | profile | spec | occupied | candidates | R pods | optimum | planner | planner / optimum "
        "| PGs (2a / 2b) | weighted | CA | DS | MILP s |",
        "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        o, ld, fp = r["optimum"], r["least_disruption"], r["fewest_podgroups"]
        mark = "" if o["proven"] else f"* (≤ {o['bound']})"
        ca, ds, p = r["autoscaler"], r["descheduler"], r["planner"]
        fpm = "" if fp["proven"] else f"* (≥ {fp['bound']})"
        ldm = "" if ld["proven"] else f"* (≥ {ld['bound']:.1f})"
        lines.append(
            f"| {r['id']} | {r['nodes']} | {r['seed']} | {r['profile']} | {r['variant']} | {r['occupied']} | "
            f"{r['candidates']} | {r['r_pods']} | {o['value']}{mark} ({o['freed']}/{o['idle_occupied']}) | {p['net']} | "
            f"{pct(ratio(p['net'], o['value']))} | {p['podgroups']} / {ld['podgroups']} / {fp['value']}{fpm} | "
            f"{p['weighted']:.1f} / {ld['value']:.1f}{ldm} | {ca['net']} ({ca['freed']}/{ca['idle_occupied']}) | "
            f"{ds['freed']} ({ds['emptied']}/{ds['unplaced']}) | {o['seconds'] + ld['seconds'] + fp['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=None, help="only the first N instances")
    ap.add_argument("--ids", nargs="+", help="only these instance ids")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per MILP solve")
    ap.add_argument("--milp-from", help="reuse the MILP results of this earlier quality.json (same instances, "
                                        "same model and time limit); only the strategies are rerun")
    ap.add_argument("-o", "--output", default=str(OUT / "quality.json"))
    ap.add_argument("--markdown", default=str(OUT / "quality.md"))
    ap.add_argument("--rows", help="also append each instance's result to this JSON-lines file as it is done")
    args = ap.parse_args(argv)
    reuse, milp_meta = {}, None
    if args.milp_from:
        with open(args.milp_from, encoding="utf-8") as f:
            if args.milp_from.endswith(".jsonl"):      # rows written by --rows: one header line, then rows
                lines = [json.loads(line) for line in f if line.strip()]
                old, old_rows = lines[0], lines[1:]
            else:
                old = json.load(f)
                old_rows = old["instances"]
        args.time_limit = old["time_limit"]
        milp_meta = {"file": args.milp_from, "generated": old["generated"], "commit": old.get("milp_commit", old["commit"])}
        reuse = {(r["id"], r["seed"], r.get("profile", "base"), r["variant"]): r for r in old_rows}
    rows = []
    t0 = time.perf_counter()
    if args.rows:
        with open(args.rows, "w", encoding="utf-8") as f:
            f.write(json.dumps({"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": git_head(),
                                "time_limit": args.time_limit}) + "\n")
    for inst in instances(args.instances):
        if args.ids and inst[0] not in args.ids:
            continue
        r = evaluate(inst, args.time_limit, reuse.get((inst[0], inst[2], inst[3], inst[4])))
        rows.append(r)
        if args.rows:
            with open(args.rows, "a", encoding="utf-8") as f:
                f.write(json.dumps(r) + "\n")
        o, p = r["optimum"], r["planner"]
        print(f"{r['id']} nodes={r['nodes']:>2} {r['profile']:<5} {r['variant']:<14} cand={r['candidates']:>2} "
              f"planner={p['net']:>2} opt={o['value']:>2}{'' if o['proven'] else '*'} CA={r['autoscaler']['net']:>3} "
              f"DS={r['descheduler']['freed']:>2}/{r['descheduler']['unplaced']} "
              f"pg={p['podgroups']}/{r['fewest_podgroups']['value']}{'' if r['fewest_podgroups']['proven'] else '*'} "
              f"w={p['weighted']:.1f}/{r['least_disruption']['value']:.1f}{'' if r['least_disruption']['proven'] else '*'} "
              f"milp={o['seconds']:.1f}+{r['least_disruption']['seconds']:.1f}+{r['fewest_podgroups']['seconds']:.1f}s",
              flush=True)
    result = {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": git_head(),
              "seconds": round(time.perf_counter() - t0, 1),
              "milp_commit": (milp_meta or {}).get("commit") or git_head(), "milp_reused_from": milp_meta,
              "time_limit": args.time_limit, "descheduler_threshold": DESCHEDULER_THRESHOLD, "weights": list(WEIGHTS),
              "variants": ALL_VARIANTS, "instances": rows}
    result["aggregate"] = aggregate(rows)
    md = markdown(result)
    print()
    print(md)
    write_results(result, md, args.output, args.markdown)


if __name__ == "__main__":
    main()
