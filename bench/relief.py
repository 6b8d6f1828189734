"""Runs aimed at a pending gang (RELIEF-2) against an exact optimum (MILP), on small clusters.

For each instance (a seeded `bench.generate` cluster of 16-60 nodes plus one pending VCJob and its
PodGroup of 1-4 pods of 2, 4 or 8 cards, sometimes held to one pool by a nodeSelector, sometimes
tolerating a taint; some runs with a maxPerRun budget or a scope) this computes:

- the planner's targeted plan (`planner.plan` with spec.target): its outcome, moves and where it
  says the target's pods go (plan.target.placements);
- an independent check of that claim from the raw objects: the moves applied, then the target's
  pods bound where the plan says, with every scheduler filter (`planner.filters.run_filters`, the
  scheduler's filter semantics) on a fresh SimulatedState of a freshly loaded snapshot, plus its own
  capacity sum over every resource from the raw objects, and the count placed against
  minMember - bound. A plan that says "fits" and fails this is a **false fit claim**;
- the exact optimum: bench.quality's MILP (candidates vacated whole, receivers, capacities,
  static filters, movability, scope, budget, GANG-3 terms) plus an assignment of every pod the target
  needs to a node, minimising GANG-3 weighted disruption (bench.quality's stage-2 objective).

    python -m bench.relief                        # 60 instances, writes bench/out/relief.{json,md}
    python -m bench.relief --ids r003 r017 --time-limit 30
    python -m bench.relief --diagnose r011    # planner and MILP side by side; the planner held to the MILP's nodes

Not a test: it prints figures. Needs the `bench` extra (highspy).
"""
import argparse
import json
import random
import re
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import planner  # noqa: E402
from planner.filters import STATIC_FILTERS, run_filters  # noqa: E402
from planner.plan import RunSpec  # noqa: E402
from planner.state import SimulatedState  # noqa: E402

from bench import quality  # noqa: E402
from bench.common import git_head, pod_object, write_results  # noqa: E402
from bench.generate import PROFILES, R, generate  # noqa: E402

OUT = ROOT / "bench" / "out"
COUNT = 60
SEED0 = 9000
SIZES = tuple(range(16, 61, 4))
DISRUPTION_TARGET = 1.05
NS = "training"
TOL_B = {"key": "dedicated", "operator": "Equal", "value": "train-b", "effect": "NoSchedule"}
VARIANTS = {   # name -> the RepackRun's other fields (target added per instance)
    "none": {},
    "pg2": {"maxPerRun": {"podGroups": 2}},
    "cards16": {"maxPerRun": {"resources": {R: "16"}}},
    "scoped": {"scope": quality.SCOPE},
    "pg1+cards8": {"maxPerRun": {"podGroups": 1, "resources": {R: "8"}}},
}
CYCLE = ("none", "pg2", "none", "cards16", "scoped", "none", "pg1+cards8", "none")
# split's idle spare nodes take almost any small gang now: few split instances
PROFILE_WEIGHTS = (0.45, 0.45, 0.10)      # base, gangs, split
UTILISATION = (0.85, 0.95)                # card utilisation drawn per instance: little room left
OUTCOMES = ("RepackRecommended", "TargetAlreadyFits", "TargetCannotFit")


def instances(n=None):
    """(id, nodes, seed, profile, variant) of every instance, seeds fixed (9000 + i)."""
    out = []
    for i in range(COUNT):
        seed = SEED0 + i
        rng = random.Random(seed)
        out.append((f"r{i:03d}", rng.choice(SIZES), seed, rng.choices(PROFILES, PROFILE_WEIGHTS)[0],
                    CYCLE[i % len(CYCLE)]))
    return out if n is None else out[:n]


def _draw(rng, profile, teams):
    """(pods, cards, nodeSelector pool or None, tolerations) of a pending gang."""
    k = rng.randint(1, 4)
    cards = rng.choice((2, 4, 8))
    kind = rng.choice(("any", "any", "selector", "toleration"))
    selector, tols = None, []
    if profile == "split":
        if kind == "selector":
            selector = rng.choice(("train-a", "infer"))
        elif kind == "toleration" and teams:
            selector = "train-a"
            tols = [{"key": "team", "operator": "Equal", "value": rng.choice(teams), "effect": "NoSchedule"}]
    elif kind == "selector":
        selector = rng.choice(("train-a", "infer", "train-b"))
        if selector == "train-b":
            tols = [dict(TOL_B)]
    elif kind == "toleration":
        tols = [dict(TOL_B)]
    return k, cards, selector, tols


def _fits_now(objs, k, cards, selector, tols):
    """Rough, for drawing instances only, on the free cards of the nodes the pods' selector and
    tolerations allow (cpu and memory ignored): "now" when k pods of `cards` fit them, "fragmented"
    when they do not but the free cards add up to k * cards, else "short"."""
    alloc, pods = raw(objs)
    used = {}
    for v in pods.values():
        if v["node"] and not v["terminal"]:
            used[v["node"]] = used.get(v["node"], 0) + v["req"].get(R, 0) // 1000
    tolerated = {(t["key"], t.get("value")) for t in tols}
    room = total = 0
    for o in objs:
        if o.get("kind") != "Node":
            continue
        md, spec = o["metadata"], o.get("spec") or {}
        if selector and md["labels"].get("accelerator-pool") != selector:
            continue
        if any((t["key"], t.get("value")) not in tolerated for t in spec.get("taints") or []
               if t.get("effect") in ("NoSchedule", "NoExecute")):
            continue
        free = alloc[md["name"]].get(R, 0) // 1000 - used.get(md["name"], 0)
        room += free // cards
        total += free
    return "now" if room >= k else ("fragmented" if total >= k * cards else "short")


def pending_gang(objs, seed, profile):
    """One pending VCJob, its PodGroup (phase Pending, minMember = replicas) and its unbound pods,
    drawn from the instance's seed: (objects, PodGroup key, description). The instance's seed picks
    a class, roughly judged on free cards (`_fits_now`): 80 % "fragmented" (does not fit now, enough
    free cards in all), 10 % "now", 10 % anything; draws are repeated until one is of that class;
    after 40 without one, the first "fragmented", else "short", else "now" draw is kept."""
    rng = random.Random(seed * 31 + 7)
    teams = sorted({t["value"] for o in objs if o.get("kind") == "Node"
                    for t in (o.get("spec") or {}).get("taints") or [] if t["key"] == "team"})
    u = rng.random()
    want = "now" if u < 0.10 else ("fragmented" if u < 0.90 else None)
    draws = []
    for _ in range(40):
        d = _draw(rng, profile, teams)
        draws.append((_fits_now(objs, *d), d))
        if want is None or draws[-1][0] == want:
            break
    else:        # none of that class: rather one that does not fit now
        draws.sort(key=lambda cd: ("fragmented", "short", "now").index(cd[0]))
    k, cards, selector, tols = (draws[-1] if want is None or draws[-1][0] == want else draws[0])[1]
    name = "pending-job"
    owner = ("batch.volcano.sh/v1alpha1", "Job", name)
    pods = []
    for w in range(k):
        p = pod_object(f"{name}-worker-{w}", NS, None, cards, 2 * cards, 16 * cards, owner, group=name,
                 labels={"volcano.sh/job-name": name},
                 annotations={"volcano.sh/task-spec": "worker", "volcano.sh/job-name": name}, pool=selector)
        del p["spec"]["nodeName"]
        if tols:
            p["spec"]["tolerations"] = [dict(t) for t in tols]
        p["status"] = {"phase": "Pending"}
        pods.append(p)
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name, "namespace": NS},
           "spec": {"schedulerName": "volcano", "queue": "default", "minAvailable": k,
                    "tasks": [{"name": "worker", "replicas": k}]}}
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": name, "namespace": NS,
                       "ownerReferences": [{"apiVersion": owner[0], "kind": "Job", "name": name,
                                            "uid": f"{NS}-{name}", "controller": True}]},
          "spec": {"minMember": k, "queue": "default"}, "status": {"phase": "Pending"}}
    desc = f"{k}x{cards}" + (f" sel={selector}" if selector else "") + \
           (f" tol={tols[0]['value']}" if tols else "")
    return [job, pg, *pods], f"{NS}/{name}", desc


def build(inst):
    """(objects, spec, PodGroup key, description) of one instance."""
    iid, nodes, seed, profile, variant = inst
    objs = generate(nodes, seed, utilisation=random.Random(seed + 1).uniform(*UTILISATION), profile=profile)
    extra, key, desc = pending_gang(objs, seed, profile)
    spec = {"goals": [{"resource": R}], **VARIANTS[variant], "target": {"podGroups": [key]}}
    return objs + extra, spec, key, desc


# -- the independent checker --------------------------------------------------------------------------
_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
           "Ti": 2**40}


def qty(s):
    """A Kubernetes quantity as an exact number in milli-units (int)."""
    m = re.fullmatch(r"([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?", str(s).strip())
    assert m, f"quantity {s!r}"
    num, suf = m.group(1), m.group(2) or ""
    from fractions import Fraction
    v = Fraction(num)
    return int(v if suf == "m" else v * _SUFFIX[suf] * 1000)


def raw(objs):
    """From the raw objects: allocatable per node, and per pod (requests, node or None, group key,
    terminal)."""
    alloc = {o["metadata"]["name"]: {r: qty(v) for r, v in ((o.get("status") or {}).get("allocatable") or {}).items()}
             for o in objs if o.get("kind") == "Node"}
    pods = {}
    for o in objs:
        if o.get("kind") != "Pod":
            continue
        md, spec = o["metadata"], o.get("spec") or {}
        req = {}
        for c in spec.get("containers") or []:
            for r, v in ((c.get("resources") or {}).get("requests") or {}).items():
                req[r] = req.get(r, 0) + qty(v)
        req["pods"] = 1000
        g = (md.get("annotations") or {}).get("scheduling.k8s.io/group-name")
        pods[f"{md['namespace']}/{md['name']}"] = {
            "req": req, "node": spec.get("nodeName") or None, "group": f"{md['namespace']}/{g}" if g else None,
            "terminal": (o.get("status") or {}).get("phase") in ("Succeeded", "Failed")}
    return alloc, pods


def check(objs, targets, moves, placements):
    """Whether `placements` [(pod key, node)] of the target gangs' pending pods hold after `moves`
    [(pod key, to node)], from the raw objects only: every filter on a fresh SimulatedState of a
    fresh snapshot, a capacity sum over every requested resource, and minMember - bound pods placed
    per target. Returns a list of problems ([] when the fit holds)."""
    alloc, pods = raw(objs)
    snap = planner.load_objects(objs)
    by_key = {p.key: p for p in snap.pods}
    state = SimulatedState(snap)
    problems = []
    final = {k: v["node"] for k, v in pods.items() if not v["terminal"]}
    for pk, to in moves:
        if pk not in final or final[pk] is None:
            problems.append(f"move of unknown or unbound pod {pk}")
            continue
        state.unbind(by_key[pk])
    for pk, to in moves:
        if pk not in final or final[pk] is None:
            continue
        why = run_filters(by_key[pk], snap.node_by_name[to], state, {})
        if why is not None:
            problems.append(f"move {pk} -> {to}: {why}")
        state.bind(by_key[pk], to)
        final[pk] = to
    need = {}
    for g in targets:
        ns, name = g.split("/", 1)
        pg = next(o for o in objs if o.get("kind") == "PodGroup" and o["metadata"]["namespace"] == ns
                  and o["metadata"]["name"] == name)
        bound = sum(1 for v in pods.values() if v["group"] == g and v["node"] and not v["terminal"])
        need[g] = int(pg["spec"].get("minMember", 1)) - bound
    placed = {g: 0 for g in targets}
    seen = set()
    for pk, n in placements:
        v = pods.get(pk)
        if v is None or v["group"] not in need or v["node"] is not None or v["terminal"] or pk in seen:
            problems.append(f"placement of {pk}: not a pending pod of a target, or placed twice")
            continue
        seen.add(pk)
        if n not in alloc:
            problems.append(f"placement of {pk} on unknown node {n}")
            continue
        why = run_filters(by_key[pk], snap.node_by_name[n], state, {})
        if why is not None:
            problems.append(f"placement {pk} -> {n}: {why}")
        state.bind(by_key[pk], n)
        final[pk] = n
        placed[v["group"]] += 1
    for g in targets:
        if placed[g] != need[g]:
            problems.append(f"{g}: {placed[g]} pod(s) placed, minMember - bound = {need[g]}")
    used = {}
    for pk, n in final.items():
        if n is None:
            continue
        u = used.setdefault(n, {})
        for r, v in pods[pk]["req"].items():
            u[r] = u.get(r, 0) + v
    for n, u in sorted(used.items()):
        for r, v in sorted(u.items()):
            if v > alloc.get(n, {}).get(r, 0):
                problems.append(f"node {n}: {r} requested {v / 1000:g} > allocatable {alloc.get(n, {}).get(r, 0) / 1000:g}")
    return problems


# -- the exact optimum ----------------------------------------------------------------------------------
class ReliefModel(quality.Model):
    """bench.quality's model (candidates vacated whole, receivers, capacities, static filters,
    movability, scope, budget, GANG-3 terms) plus the target:

    v[t,m] (binary) for every pending pod t of a target and node m that t's static filters allow;
    sum_m v[t,m] <= 1; sum_{t of g, m} v[t,m] = minMember_g - bound_g; and on every node m, for every
    resource r: sum_p x[p,m] req_p[r] + sum_t v[t,m] req_t[r] <= free_m[r] + own_m[r] * y[m], own_m the
    requests of m's R pods (which leave when m is vacated; its other pods stay). Objective: GANG-3
    weighted disruption, bench.quality's stage 2(a) terms.
    """

    def __init__(self, setting, targets, time_limit):
        super().__init__(setting, time_limit)
        snap, inf = setting.snap, self.inf
        base = SimulatedState(snap)
        own = {n: {} for n in self.y}
        for n in self.y:
            for p in setting.r_pods[n]:
                for r, v in p.requests.items():
                    own[n][r] = own[n].get(r, 0) + v
        self.v, self.need, self.tpods = {}, {}, {}
        for g in targets:
            ns, name = g.split("/", 1)
            members = [p for p in snap.pods if p.namespace == ns and p.group_name == name and not p.terminal]
            pending = sorted((p for p in members if not p.node_name), key=lambda p: p.name)
            self.need[g] = snap.podgroup_by_key[g].min_member - (len(members) - len(pending))
            cols_g = []
            for t in pending:
                self.tpods[t.key] = t
                cols_t = []
                for node in snap.nodes:
                    m = node.name
                    room = {r: node.allocatable.get(r, 0) - base.used[m].get(r, 0) + own.get(m, {}).get(r, 0)
                            for r in t.requests}
                    if any(v > room[r] for r, v in t.requests.items()):
                        continue
                    if run_filters(t, node, base, {}, STATIC_FILTERS) is not None:
                        continue
                    j = self.v[(t.key, m)] = self._col(0.0, 1.0, True)
                    cols_t.append(j)
                if cols_t:
                    self._row(-inf, 1.0, cols_t, [1.0] * len(cols_t))
                cols_g += cols_t
            self._row(float(self.need[g]), float(self.need[g]), cols_g, [1.0] * len(cols_g))
        incoming = {}
        for (pk, m), j in self.x.items():
            incoming.setdefault(m, []).append((self.pods[pk][0].requests, j))
        for (tk, m), j in self.v.items():
            incoming.setdefault(m, []).append((self.tpods[tk].requests, j))
        for m, lst in incoming.items():
            if not any(tk_m == m for (_, tk_m) in self.v):
                continue                     # only moved pods: bench.quality's rows hold
            node = snap.node_by_name[m]
            for r in sorted({r for req, _ in lst for r in req}):
                free = node.allocatable.get(r, 0) - base.used[m].get(r, 0)
                idx = [j for req, j in lst if req.get(r, 0)]
                val = [float(req[r]) for req, j in lst if req.get(r, 0)]
                if m in self.y and own[m].get(r, 0):
                    idx.append(self.y[m])
                    val.append(-float(own[m][r]))
                self._row(-inf, float(free), idx, val)

    def solve(self):
        """min GANG-3 weighted disruption with every target fitting."""
        self.h.setOptionValue("mip_abs_gap", 1e-6)
        self._set_objective(dict(self.terms), self.hs.ObjSense.kMinimize)
        status, sol, obj, bound, secs = self._solve()
        proven = status in ("Optimal", "Infeasible")
        if not sol:
            fits = False if status == "Infeasible" else None
            return {"fits": fits, "proven": proven, "status": status, "value": None,
                    "bound": None if fits is None else 0.0, "seconds": round(secs, 3)}
        s = self.setting
        freed = [n for n in s.candidates if sol[self.y[n]] > 0.5]
        moves = sorted((pk, m) for (pk, m), j in self.x.items() if sol[j] > 0.5)
        placements = sorted((tk, m) for (tk, m), j in self.v.items() if sol[j] > 0.5)
        quality.verify(s, freed, moves, self.pods)       # every filter, budget
        dims, weighted, pgs = quality.dimensions(s, [pk for pk, _ in moves])
        assert weighted <= obj + 1e-4 and (not proven or abs(weighted - obj) < 1e-4), \
            f"MILP objective {obj} != replayed disruption {weighted}"
        return {"fits": True, "proven": proven, "status": status, "value": weighted,
                "bound": weighted if proven else round(max(bound, 0.0), 6), "seconds": round(secs, 3),
                "freed_nodes": freed, "moves": moves, "placements": placements, "dims": list(dims),
                "podgroups": pgs}


# -- driver -------------------------------------------------------------------------------------------
def evaluate(inst, time_limit):
    iid, nodes, seed, profile, variant = inst
    objs, spec, key, desc = build(inst)
    snap = planner.load_objects(objs)
    run = RunSpec.from_spec(spec)
    s = quality.Setting(snap, run)
    row = {"id": iid, "nodes": nodes, "seed": seed, "profile": profile, "variant": variant, "target": desc,
           "providers": len(s.providers), "candidates": len(s.candidates)}
    t0 = time.perf_counter()
    try:
        p = planner.plan(snap, spec)
        err = None
    except Exception as e:       # recorded, counted as a miss
        p, err = None, f"{type(e).__name__}: {e}"
        row["planner_traceback"] = traceback.format_exc(limit=-6)
    secs = time.perf_counter() - t0
    if p is None:
        row["planner"] = {"outcome": "error", "error": err, "seconds": round(secs, 3)}
    else:
        moves = [(m.pod.key, m.to_node) for m in p.moves]
        placements = [tuple(x) for x in (p.target.placements if p.target else ())]
        fits = bool(p.target and p.target.fits)
        dims, weighted, pgs = quality.dimensions(s, [pk for pk, _ in moves])
        problems = check(objs, [key], moves, placements) if fits else []
        row["planner"] = {"outcome": p.outcome, "fits": fits, "moves": moves, "placements": placements,
                          "freed_nodes": list(p.freed_nodes), "weighted": weighted, "dims": list(dims),
                          "podgroups": pgs, "check": problems, "message": p.message[:400],
                          "seconds": round(secs, 3)}
    m = ReliefModel(s, [key], time_limit)
    opt = m.solve()
    if opt["fits"]:
        problems = check(objs, [key], opt["moves"], opt["placements"])
        assert not problems, f"{iid}: the MILP's plan fails the checker: {problems}"
    row["milp"] = opt
    row["milp"]["cols"], row["milp"]["rows"] = m.ncol, m.rows
    return row


def verdict(r):
    """One instance: 'ok', or what is wrong (a string)."""
    pl, o = r["planner"], r["milp"]
    if pl["outcome"] == "error":
        return f"planner error: {pl['error']}"
    if pl["fits"] and pl["check"]:
        return "FALSE FIT CLAIM: " + "; ".join(pl["check"][:3])
    if pl["fits"] and o["fits"] is False:
        return "planner fits but the MILP proves no fit (model or checker slip)"
    if not pl["fits"] and o["fits"]:
        return f"miss: planner {pl['outcome']}, MILP fits at weighted {o['value']:.1f}"
    if pl["fits"] and o["fits"] and pl["weighted"] > DISRUPTION_TARGET * o["value"] + 1e-6:
        return f"disruption {pl['weighted']:.1f} > 105 % of {o['value']:.1f}"
    return "ok"


def pct(a, b):
    return "—" if not b else f"{100.0 * a / b:.1f} %"


def aggregate(rows):
    a = {"instances": len(rows)}
    a["outcomes"] = {k: sum(1 for r in rows if r["planner"]["outcome"] == k) for k in OUTCOMES + ("error",)}
    a["milp_fits"] = sum(1 for r in rows if r["milp"]["fits"])
    a["milp_no_fit"] = sum(1 for r in rows if r["milp"]["fits"] is False)
    a["milp_unknown"] = [r["id"] for r in rows if r["milp"]["fits"] is None]
    a["planner_fits"] = sum(1 for r in rows if r["planner"].get("fits") and not r["planner"]["check"])
    a["false_claims"] = [r["id"] for r in rows if r["planner"].get("fits") and r["planner"]["check"]]
    a["misses"] = [r["id"] for r in rows if r["milp"]["fits"] and not r["planner"].get("fits")]
    a["contradictions"] = [r["id"] for r in rows if r["planner"].get("fits") and r["milp"]["fits"] is False]
    both = [r for r in rows if r["planner"].get("fits") and not r["planner"]["check"] and r["milp"]["fits"]]
    a["disruption_instances"] = len(both)
    a["planner_weighted"] = round(sum(r["planner"]["weighted"] for r in both), 6)
    a["milp_weighted"] = round(sum(r["milp"]["value"] for r in both), 6)
    a["milp_bound"] = round(sum(r["milp"]["bound"] for r in both), 6)
    a["worse"] = [r["id"] for r in both if r["planner"]["weighted"] > r["milp"]["value"] + 1e-6]
    a["better"] = [r["id"] for r in both if r["planner"]["weighted"] < r["milp"]["value"] - 1e-6]
    a["at_minimum"] = sum(1 for r in both if abs(r["planner"]["weighted"] - r["milp"]["value"]) <= 1e-6)
    a["over_target"] = [r["id"] for r in both if r["planner"]["weighted"] > DISRUPTION_TARGET * r["milp"]["value"] + 1e-6]
    a["limit_hits"] = [r["id"] for r in rows if not r["milp"]["proven"]]
    a["agree_outcome"] = sum(1 for r in rows if r["planner"].get("fits", False) == bool(r["milp"]["fits"]))
    a["planner_seconds"] = round(sum(r["planner"]["seconds"] for r in rows), 1)
    a["milp_seconds"] = round(sum(r["milp"]["seconds"] for r in rows), 1)
    return a


def markdown(doc):
    rows, a = doc["instances"], doc["aggregate"]
    n = a["instances"]

    def v(ok):
        return "met" if ok else "**not met**"

    lines = ["| target | measured | status |", "|---|---|---|"]
    lines.append(f"| every target the MILP fits, the planner fits | planner {a['planner_fits']}, MILP {a['milp_fits']} "
                 f"of {n}; misses (MILP fits, planner TargetCannotFit): {len(a['misses'])}"
                 f"{' (' + ', '.join(a['misses']) + ')' if a['misses'] else ''} | {v(not a['misses'])} |")
    lines.append(f"| GANG-3 weighted disruption ≤ 105 % of the MILP minimum, in total | "
                 f"{a['planner_weighted']:.1f} / {a['milp_weighted']:.1f} = {pct(a['planner_weighted'], a['milp_weighted'])} "
                 f"over {a['disruption_instances']} instances both fit | "
                 f"{v(a['planner_weighted'] <= DISRUPTION_TARGET * a['milp_weighted'] + 1e-6)} |")
    lines.append(f"| 0 false fit claims (planner says it fits, the checker refutes) | {len(a['false_claims'])}"
                 f"{' (' + ', '.join(a['false_claims']) + ')' if a['false_claims'] else ''} | "
                 f"{v(not a['false_claims'])} |")
    lines.append("")
    oc = a["outcomes"]
    lines.append(
        f"**{n} instances** (r000–r{n - 1:03d}). Planner outcomes: RepackRecommended {oc['RepackRecommended']}, "
        f"TargetAlreadyFits {oc['TargetAlreadyFits']}, TargetCannotFit {oc['TargetCannotFit']}"
        + (f", errors {oc['error']}" if oc["error"] else "")
        + f". The MILP fits the target on {a['milp_fits']}, proves it cannot on {a['milp_no_fit']}"
        + (f", and found neither within its time limit on {len(a['milp_unknown'])} ({', '.join(a['milp_unknown'])})"
           if a["milp_unknown"] else "")
        + f"; planner and MILP agree on fit / no fit on {a['agree_outcome']} of {n}. "
        f"On the {a['disruption_instances']} instances where both fit, GANG-3 weighted disruption is "
        f"{a['planner_weighted']:.1f} against the MILP's {a['milp_weighted']:.1f} "
        f"({pct(a['planner_weighted'], a['milp_weighted'])}; the MILP's bound in total {a['milp_bound']:.1f}); "
        f"the planner is at the minimum on {a['at_minimum']}, above it on {len(a['worse'])}"
        f"{' (' + ', '.join(a['worse']) + ')' if a['worse'] else ''}, below it on {len(a['better'])}"
        f"{' (' + ', '.join(a['better']) + ', where the MILP stopped at its time limit)' if a['better'] else ''}. "
        f"Every planner fit claim was replayed by the checker: {len(a['false_claims'])} false. "
        f"MILP proven on {n - len(a['limit_hits'])} of {n}"
        + (f"; time-limit hits (`*`): {', '.join(a['limit_hits'])}." if a["limit_hits"] else "."))
    lines += ["", "Per instance. target: pods × cards, `sel=` its nodeSelector's pool, `tol=` the taint value it "
              "tolerates; spec: the run's budget or scope; weighted: GANG-3 weighted disruption, planner / MILP "
              "minimum (`*`: MILP time limit, its incumbent; bound in brackets); nodes vacated, planner / MILP.", "",
              "| id | nodes | profile | spec | target | planner outcome | MILP | weighted | vacated | PGs disrupted | "
              "verdict | planner s | MILP s |",
              "|---|---:|---|---|---|---|---|---:|---:|---:|---|---:|---:|"]
    for r in rows:
        pl, o = r["planner"], r["milp"]
        star = "" if o["proven"] else "*"
        milp = {True: "fits", False: "cannot fit", None: "unknown"}[o["fits"]] + star
        w = "—"
        if o["fits"]:
            mine = f"{pl['weighted']:.1f}" if pl.get("fits") else "—"
            w = f"{mine} / {o['value']:.1f}{star}" + (f" (≥ {o['bound']:.1f})" if not o["proven"] else "")
        vac = f"{len(pl.get('freed_nodes', []))} / {len(o.get('freed_nodes', [])) if o['fits'] else '—'}"
        pgs = f"{pl.get('podgroups', 0)} / {o.get('podgroups', '—') if o['fits'] else '—'}"
        lines.append(f"| {r['id']} | {r['nodes']} | {r['profile']} | {r['variant']} | {r['target']} | {pl['outcome']} | "
                     f"{milp} | {w} | {vac} | {pgs} | {verdict(r)} | {pl['seconds']:.1f} | {o['seconds']:.1f} |")
    lines += ["", f"Generated {doc['generated']} in {doc['seconds']:.0f} s (planner {doc['commit']}; MILP time limit "
              f"{doc['time_limit']:g} s per solve; planner {a['planner_seconds']:.0f} s and MILP {a['milp_seconds']:.0f} s "
              f"in all)."]
    return "\n".join(lines) + "\n"


def checker_selftest():
    """The checker accepts a real fit and flags an overfull node, a filtered node and a short count."""
    objs = [o for o in generate(16, SEED0, profile="base")]
    extra, key, _ = pending_gang(objs, 1, "base")
    objs += extra
    alloc, pods = raw(objs)
    pend = sorted(k for k, v in pods.items() if v["group"] == key and v["node"] is None)
    cards = pods[pend[0]]["req"][R] // 1000
    used = {}
    for k, v in pods.items():
        if v["node"]:
            used[v["node"]] = used.get(v["node"], 0) + v["req"].get(R, 0) // 1000
    full = next(n for n in sorted(alloc) if alloc[n].get(R, 0) // 1000 - used.get(n, 0) < cards and used.get(n, 0))
    # make room on `full` by moving nothing: an overfull node must be flagged
    bad = check(objs, [key], [], [(pk, full) for pk in pend])
    assert any("Insufficient" in x or "requested" in x for x in bad), bad
    short = check(objs, [key], [], [])
    assert any("placed, minMember - bound" in x for x in short), short
    tainted = next((n for n in sorted(alloc) if n.startswith("train-b")), None)
    if tainted and not any(t["value"] == "train-b" for o in extra if o.get("kind") == "Pod"
                           for t in o["spec"].get("tolerations", [])):
        # an empty train-b node (every pod moved off it elsewhere would be needed): test the taint alone
        bad_t = check(objs, [key], [], [(pend[0], tainted)])
        assert any("TaintToleration" in x for x in bad_t), bad_t
    # a genuine fit: vacate nothing, put each pod on a node with room that its filters allow
    snap = planner.load_objects(objs)
    state = SimulatedState(snap)
    by_key = {p.key: p for p in snap.pods}
    good = []
    for pk in pend:
        n = next((n.name for n in snap.nodes if run_filters(by_key[pk], n, state, {}) is None), None)
        if n is None:
            break
        state.bind(by_key[pk], n)
        good.append((pk, n))
    if len(good) == len(pend):
        assert check(objs, [key], [], good) == [], check(objs, [key], [], good)
    print("checker self-test: overfull node, short count" + (", taint" if tainted else "")
          + (" flagged; a real fit accepted: ok" if len(good) == len(pend) else " flagged: ok"), flush=True)
    return True


def diagnose(iid, time_limit):
    """The planner's and the MILP's plans side by side, and the planner rerun with scope.nodes set
    to the MILP's vacated nodes: when it then finds the MILP's plan, the gap is in its search of
    node sets, not in its filters or cost."""
    inst = next(i for i in instances() if i[0] == iid)
    objs, spec, key, desc = build(inst)
    r = evaluate(inst, time_limit)
    pl, o = r["planner"], r["milp"]
    print(f"{iid}: {desc} ({inst[3]}, {inst[4]}, {inst[1]} nodes) -> {verdict(r)}")
    print(f"  planner: {pl['outcome']}, vacates {pl.get('freed_nodes')}, {len(pl.get('moves', []))} moves, "
          f"{pl.get('podgroups')} PodGroups, dims {pl.get('dims')}, weighted {pl.get('weighted')}, "
          f"placements {pl.get('placements')}")
    if not o["fits"]:
        print(f"  MILP: {o['status']}")
        return r
    print(f"  MILP: vacates {o['freed_nodes']}, {len(o['moves'])} moves, {o['podgroups']} PodGroups, dims {o['dims']}, "
          f"weighted {o['value']}{'' if o['proven'] else '*'}, placements {o['placements']}")
    only = dict(spec, scope={**spec.get("scope", {}), "nodes": {"include": {"selector": {"matchExpressions": [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": o["freed_nodes"]}]}}}})
    snap = planner.load_objects(objs)
    p = planner.plan(snap, only)
    s = quality.Setting(snap, RunSpec.from_spec(spec))
    _, weighted, _ = quality.dimensions(s, [m.pod.key for m in p.moves])
    ck = check(objs, [key], [(m.pod.key, m.to_node) for m in p.moves], list(p.target.placements)) \
        if p.target and p.target.fits else ["does not fit"]
    print(f"  planner with scope.nodes = the MILP's nodes: {p.outcome}, vacates {list(p.freed_nodes)}, "
          f"weighted {weighted}, checker {'ok' if not ck else ck}")
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instances", type=int, default=None, help="only the first N instances")
    ap.add_argument("--ids", nargs="+", help="only these instance ids")
    ap.add_argument("--time-limit", type=float, default=40.0, help="seconds per MILP solve")
    ap.add_argument("--rows", help="also append each instance's result to this JSON-lines file")
    ap.add_argument("-o", "--output", default=str(OUT / "relief.json"))
    ap.add_argument("--markdown", default=str(OUT / "relief.md"))
    ap.add_argument("--diagnose", nargs="+", metavar="ID", help="the planner's and the MILP's plans side by side")
    args = ap.parse_args(argv)
    if args.diagnose:
        for iid in args.diagnose:
            diagnose(iid, args.time_limit)
        return
    checker_selftest()
    rows, t0 = [], time.perf_counter()
    for inst in instances(args.instances):
        if args.ids and inst[0] not in args.ids:
            continue
        r = evaluate(inst, args.time_limit)
        rows.append(r)
        if args.rows:
            with open(args.rows, "a", encoding="utf-8") as f:
                f.write(json.dumps(r) + "\n")
        pl, o = r["planner"], r["milp"]
        print(f"{r['id']} n={r['nodes']:>2} {r['profile']:<5} {r['variant']:<10} {r['target']:<22} "
              f"{pl['outcome']:<17} w {pl.get('weighted', 0):.1f} milp "
              f"{ {True: 'fits', False: 'no', None: '?'}[o['fits']] }{'' if o['proven'] else '*'} "
              f"{o['value'] if o['value'] is not None else '-'} {pl['seconds']:.1f}s/{o['seconds']:.1f}s -> {verdict(r)}",
              flush=True)
    doc = {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": git_head(),
           "seconds": round(time.perf_counter() - t0, 1), "time_limit": args.time_limit, "instances": rows}
    doc["aggregate"] = aggregate(rows)
    md = markdown(doc)
    print()
    print(md)
    write_results(doc, md, args.output, args.markdown)


if __name__ == "__main__":
    main()
