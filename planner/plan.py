"""The incremental, gang-aware planner (PLAN-1..3, BUDGET-1..2, OUT-1..3).

Rounds: evaluate every remaining candidate node on a fork of the simulated state (can all its R
pods be placed, cumulatively, with the scheduler's filters?), drop those over budget, score the
rest over the complete plan, commit the best, repeat. Every occupied provider node in scope ends
with a verdict.

Re-evaluating after a round redoes only what the round could have changed: a cached evaluation
stays valid unless one of its receivers was touched or a touched node moved ahead of one of its
receivers in the receiver order (pods with inter-pod constraints are always re-evaluated). The
`optimized=False` path re-evaluates everything by brute force; tests hold the two identical.
"""
import bisect
import dataclasses
import gc
import heapq
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Optional

from .cost import DEFAULT_WEIGHTS, PlanCost, gang_infos, scores
from .errors import SpecError
from .filters import FILTERS, STATIC_FILTERS, DYNAMIC_FILTERS, has_interpod_constraints, run_filters
from .frag import frag_percent, percent_int, theoretical_min, usage
from .quantity import scaled
from .receivers import ReceiverIndex, receiver_key
from .rules import check_movable
from .scope import Scope
from .selectors import selector_matches
from .state import SimulatedState

REASON_RECOMMENDED = "RepackRecommended"
_END = ("end",)   # a start key after every receiver: only changed nodes can take the pod
REASON_NO_FRAGMENTATION = "NoFragmentation"
REASON_INSUFFICIENT = "InsufficientImprovement"


@dataclass(frozen=True)
class PodMove:
    pod: object
    from_node: str
    to_node: str
    cards: int
    round: int


@dataclass(frozen=True)
class NodeVerdict:
    """Why a candidate node was vacated or not (an UNSET reason would be a bug)."""
    node: str
    vacated: bool
    reason: str
    message: str
    pod: str = ""
    filter: str = ""
    round: int = 0


@dataclass(frozen=True)
class RunSpec:
    """The parts of a RepackRun spec the planner acts on."""
    resource: str
    min_improvement: int = 0
    scope: Scope = Scope()
    max_podgroups: Optional[int] = None
    max_resource: Optional[int] = None

    @classmethod
    def from_spec(cls, spec) -> "RunSpec":
        if not isinstance(spec, dict):
            raise SpecError("spec: expected an object")
        goals = spec.get("goals") or []
        if not goals:
            raise SpecError("spec.goals: one goal naming the resource to defragment is required")
        if len(goals) > 1:
            raise SpecError("spec.goals: at most one goal per run")
        goal = goals[0]
        resource = goal.get("resource") if isinstance(goal, dict) else None
        if not isinstance(resource, str) or "/" not in resource:
            raise SpecError("spec.goals[0].resource: a fully-qualified extended resource (e.g. nvidia.com/gpu) is required")
        mi = goal.get("minFragImprovementPercent") or 0
        if not isinstance(mi, int) or not 0 <= mi <= 100:
            raise SpecError("spec.goals[0].minFragImprovementPercent: an integer from 0 to 100 is required")
        mpr = spec.get("maxPerRun") or {}
        max_pg = mpr.get("podGroups")
        if max_pg is not None and (not isinstance(max_pg, int) or max_pg < 0):
            raise SpecError("spec.maxPerRun.podGroups: a non-negative integer is required")
        max_r = None
        res = mpr.get("resources") or {}
        if resource in res:
            try:
                max_r = scaled(resource, res[resource])
            except ValueError as e:
                raise SpecError(f"spec.maxPerRun.resources.{resource}: {e}") from e
        return cls(resource, mi, Scope.from_spec(spec.get("scope")), max_pg, max_r)


@dataclass(frozen=True)
class Plan:
    """The outcome of one planning pass; `status()` renders the RepackRun status (API-3)."""
    resource: str
    outcome: str
    message: str
    providers: int
    occupied_before: int
    occupied_after: int
    minimum: int
    minimum_exact: bool
    frag_before: Fraction
    frag_after: Fraction
    moves: tuple
    freed_nodes: tuple
    verdicts: tuple
    rounds: int
    resolved_podgroups: int
    resolved_nodes: int
    notes: tuple
    owners: dict = field(default_factory=dict)        # podgroup key -> OwnerRef | None
    cards: dict = field(default_factory=dict)         # node -> (allocatable, used before, used after)

    @property
    def moved_cards(self) -> int:
        return sum(m.cards for m in self.moves)

    def summary(self) -> dict:
        return {
            "fragBeforePercent": percent_int(self.frag_before),
            "fragAfterPercent": percent_int(self.frag_after),
            "freedNodeCount": len(self.freed_nodes),
            "movedCardCount": self.moved_cards,
            "resolvedScope": {"podGroupCount": self.resolved_podgroups, "nodeCount": self.resolved_nodes},
        }

    def moves_by_group(self) -> list:
        """plan.moves[]: one entry per PodGroup, in the order the plan first touches it."""
        groups = {}
        for m in self.moves:
            key = f"{m.pod.namespace}/{m.pod.group_name}"
            groups.setdefault(key, []).append(m)
        out = []
        for key, ms in groups.items():
            ns, name = key.split("/", 1)
            entry = {"namespace": ns, "podGroupName": name}
            owner = self.owners.get(key)
            if owner is not None:
                entry["owner"] = {"apiVersion": owner.api_version, "kind": owner.kind, "name": owner.name}
            entry["cards"] = sum(m.cards for m in ms)
            entry["pods"] = [{"name": m.pod.name, "fromNode": m.from_node, "toNode": m.to_node, "cards": m.cards}
                             for m in ms]
            out.append(entry)
        return out

    def status(self, now: Optional[str] = None) -> dict:
        """The RepackRun status of a finished DryRun evaluation (phase Succeeded)."""
        cond = {"type": "Complete", "status": "True", "reason": self.outcome, "message": self.message}
        if now:
            cond["lastTransitionTime"] = now
        plan = {"summary": self.summary()}
        moves = self.moves_by_group()
        if moves:
            plan["moves"] = moves
        if self.freed_nodes:
            plan["freedNodes"] = list(self.freed_nodes)
        st = {"phase": "Succeeded", "conditions": [cond], "message": self.message, "plan": plan}
        if now:
            st["startTime"] = now
            st["completionTime"] = now
        return st


@dataclass
class _Eval:
    feasible: bool
    moves: list = field(default_factory=list)        # (pod, to_node, key at choice)
    fail: tuple = ()                                 # (pod key, filter, message)
    interpod: bool = False


class _Planner:
    def __init__(self, snapshot, run: RunSpec, weights, optimized):
        self.snap = snapshot
        self.run = run
        self.R = run.resource
        self.weights = weights
        self.optimized = optimized
        self.state = SimulatedState(snapshot)
        self.gangs = gang_infos(snapshot, self.R)

    # -- setup --------------------------------------------------------------------------------
    def prepare(self):
        R, snap, scope = self.R, self.snap, self.run.scope
        self.alloc, used, items = usage(snap, R)
        self.occupied = {n for n in self.alloc if used.get(n, 0) > 0}
        self.used_before = dict(used)
        self.minimum = theoretical_min(items, self.alloc.values())
        self.verdicts = {}
        self.r_pods = {}
        self.surely = set()
        self.candidates = []
        self.notes = []
        in_scope_nodes = {n for n in self.alloc if scope.node_in_scope(snap.node_by_name[n])}
        self.resolved_nodes = len(in_scope_nodes)
        consuming = set()
        for p in snap.pods:
            if p.node_name and not p.terminal and p.requests.get(R, 0) > 0 and p.group_name:
                consuming.add(f"{p.namespace}/{p.group_name}")
        self.resolved_podgroups = sum(1 for k in consuming if k in snap.podgroup_by_key
                                      and scope.podgroup_in_scope(snap.podgroup_by_key[k]))
        anti_terms = [(p, t) for p in snap.pods for t in p.pod_anti_affinity]
        ctx = self
        for node in sorted(self.occupied):
            pods = [p for p in snap.pods_by_node.get(node, ()) if not p.terminal and p.requests.get(R, 0) > 0]
            pods.sort(key=lambda p: (-p.requests[R], p.key))
            self.r_pods[node] = pods
            blocked = None
            for p in pods:
                b = check_movable(p, ctx)
                if b is not None:
                    blocked = (p, b)
                    break
            if blocked is not None:
                self.surely.add(node)
            if node not in in_scope_nodes:
                self.surely.add(node)
                continue
            if blocked is not None:
                p, b = blocked
                self.verdicts[node] = NodeVerdict(node, False, b.reason, b.message, p.key)
                continue
            self.candidates.append(node)
        # Pods whose feasibility depends on placements elsewhere: always re-evaluated.
        self.interpod = set()
        for node in self.candidates:
            for p in self.r_pods[node]:
                if has_interpod_constraints(p) or any(
                        t.label_selector is not None and selector_matches(t.label_selector, p.labels)
                        for _, t in anti_terms):
                    self.interpod.add(node)
        self.receivers = set(self.occupied)
        self.receiving = set()
        if self.optimized:
            self._build_index()

    @property
    def snapshot(self):
        return self.snap

    @property
    def scope(self):
        return self.run.scope

    # -- receiver search ------------------------------------------------------------------------
    def _build_index(self):
        keys = set()
        fields = False
        for p in self.snap.pods:
            keys.update(p.node_selector)
            for t in p.affinity_terms or ():
                keys.update(r.key for r in t.match_expressions)
                fields = fields or bool(t.match_fields)
        for pv in self.snap.pvs:
            for t in pv.node_terms or ():
                keys.update(r.key for r in t.match_expressions)
                fields = fields or bool(t.match_fields)
        keys = sorted(keys)
        class_of, self.class_rep = {}, {}
        ids = {}
        for name in self.receivers:
            n = self.snap.node_by_name[name]
            sig = (tuple((k, n.labels.get(k)) for k in keys), n.taints, n.unschedulable, name if fields else "")
            cid = ids.setdefault(sig, len(ids))
            class_of[name] = cid
            self.class_rep.setdefault(cid, name)
        self.index = ReceiverIndex(class_of)
        for name in self.receivers:
            self.index.add(self._key(name))
        self.static_ok = {}

    def _key(self, node):
        return receiver_key(node, self.state, self.R, self.surely, self.receiving)

    def _pod_sig(self, pod):
        return (tuple(sorted(pod.node_selector.items())), pod.affinity_terms, pod.tolerations,
                pod.namespace if pod.pvc_names else "", pod.pvc_names)

    def _ordered(self, pod, vacating, fork_nodes, start=None):
        """Receiver keys for `pod` in PLAN-2 order (nodes touched in the fork carry fork keys),
        from `start` on when given (optimized path only)."""
        need = pod.requests[self.R]
        if not self.optimized:
            keys = sorted(self._key(n) for n in self.receivers if n != vacating)
            for k in keys:
                if k[2] >= need:
                    yield k, False
            return
        sig = self._pod_sig(pod)

        def class_ok(cid):
            ck = (sig, cid)
            ok = self.static_ok.get(ck)
            if ok is None:
                node = self.snap.node_by_name[self.class_rep[cid]]
                ok = self.static_ok[ck] = run_filters(pod, node, self.state, {}, STATIC_FILTERS) is None
            return ok

        fork_keys = sorted(k for k in (self._key(n) for n in fork_nodes) if start is None or k >= start)
        fi = 0
        for k in self.index.walk(need, class_ok, start):
            while fi < len(fork_keys) and fork_keys[fi] < k:
                if fork_keys[fi][2] >= need:
                    yield fork_keys[fi], True
                fi += 1
            if k[3] in fork_nodes or k[3] == vacating:
                continue
            yield k, True
        for fk in fork_keys[fi:]:
            if fk[2] >= need:
                yield fk, True

    def _place(self, pod, vacating, fork_nodes, start=None, dirty=()):
        """First receiver in order that accepts `pod`. With `start`, nodes before it are known to
        reject the pod unless they are in `dirty` (their state changed since that was known)."""
        cache = {}
        if start is not None:
            need = pod.requests[self.R]
            before = sorted(k for k in (self._key(t) for t in dirty if t in self.receivers and t != vacating)
                            if (start == _END or k < start) and k[2] >= need)
            for key in before:
                if run_filters(pod, self.snap.node_by_name[key[3]], self.state, cache) is None:
                    return key[3], key
            if start == _END:
                return None, None
        for key, static_checked in self._ordered(pod, vacating, fork_nodes, start):
            node = key[3]
            if node == vacating or node not in self.receivers:
                continue
            filters = DYNAMIC_FILTERS if static_checked and node not in fork_nodes else FILTERS
            if run_filters(pod, self.snap.node_by_name[node], self.state, cache, filters) is None:
                return node, key
        return None, None

    def _diagnose(self, pod, vacating, fork_nodes):
        """Mode-independent reason: the first receiver in order with room in R, and the filter it fails."""
        need = pod.requests[self.R]
        if self.optimized:
            first = None
            for k in self.index.walk(need):
                if k[3] not in fork_nodes and k[3] != vacating:
                    first = k
                    break
            fork = [self._key(n) for n in fork_nodes if self._key(n)[2] >= need]
            ordered = sorted(([first] if first else []) + fork)
        else:
            ordered = [k for k in sorted(self._key(n) for n in self.receivers if n != vacating) if k[2] >= need]
        if ordered:
            node = ordered[0][3]
            f, reason = run_filters(pod, self.snap.node_by_name[node], self.state, {}) or ("", "fits")
            return f, (f"pod {pod.key} ({need} {self.R}) has no feasible receiver; "
                       f"first receiver with room, {node}: {reason}")
        return "NodeResourcesFit", (f"pod {pod.key} ({need} {self.R}) has no feasible receiver: "
                                    f"no receiver has {need} free {self.R}")

    # -- one candidate ---------------------------------------------------------------------------
    def _trace(self, pods, vacating, unbind, interpod=False, diagnose=False) -> _Eval:
        """Greedy placement of `pods` in order on a fork; the fork is reverted before returning."""
        st = self.state
        mark = st.fork()
        if unbind:
            for p in pods:
                st.unbind(p)
        ev = _Eval(True, interpod=interpod)
        fork_nodes = set()
        saved_receiving = self.receiving
        self.receiving = set(self.receiving)
        try:
            for p in pods:
                to, key = self._place(p, vacating, fork_nodes)
                if to is None:
                    f, msg = self._diagnose(p, vacating, fork_nodes) if diagnose else ("", "")
                    ev.feasible, ev.fail = False, (p.key, f, msg)
                    break
                st.bind(p, to)
                ev.moves.append((p, to, key))
                fork_nodes.add(to)
                self.receiving.add(to)
        finally:
            self.receiving = saved_receiving
            st.revert(mark)
        return ev

    def evaluate(self, node, diagnose=False) -> _Eval:
        """Can every R pod of `node` be placed elsewhere, cumulatively, by the scheduler's filters?"""
        return self._trace(self.r_pods[node], node, True, node in self.interpod, diagnose)

    def _evaluate_unit(self, unit) -> _Eval:
        """Evaluate a candidate node ("node", name) or a shared pod-shape signature ("sig", id)."""
        if unit[0] == "node":
            return self.evaluate(unit[1])
        return self._trace(self.sig_pods[unit[1]], None, False)

    def repair(self, unit, ev, changed):
        """Redo a cached evaluation after a round that changed the nodes in `changed`.

        Nodes outside `changed` before a pod's cached receiver rejected it then and still do
        (a round only takes capacity away), so each pod's search resumes at its cached receiver,
        after checking the changed nodes that now come before it. Nodes used by the cached or the
        new trace of earlier pods count as changed for later pods. Gives exactly what a fresh
        evaluation would give.
        """
        pods = self.r_pods[unit[1]] if unit[0] == "node" else self.sig_pods[unit[1]]
        vacating = unit[1] if unit[0] == "node" else None
        st = self.state
        mark = st.fork()
        if unit[0] == "node":
            for p in pods:
                st.unbind(p)
        out = _Eval(True, interpod=ev.interpod)
        fork_nodes = set()
        dirty = set(changed)
        saved_receiving = self.receiving
        self.receiving = set(self.receiving)
        try:
            for i, p in enumerate(pods):
                if i < len(ev.moves):
                    start = ev.moves[i][2]
                elif i == len(ev.moves) and not ev.feasible:
                    start = _END
                else:
                    start = None
                to, key = self._place(p, vacating, fork_nodes, start, dirty)
                if to is None:
                    out.feasible, out.fail = False, (p.key, "", "")
                    break
                st.bind(p, to)
                out.moves.append((p, to, key))
                fork_nodes.add(to)
                self.receiving.add(to)
                dirty.add(to)
                if i < len(ev.moves):
                    dirty.add(ev.moves[i][1])
            return out
        finally:
            self.receiving = saved_receiving
            st.revert(mark)

    def _signatures(self):
        """Candidates whose R pods have identical scheduling shapes, in order, share one evaluation.

        Placement of such pods depends only on their shapes and on the receivers, so one trace
        with stand-in pods serves every candidate with that signature, except a candidate whose
        own node the trace chose (it is then evaluated on its own).
        """
        self.sig_of, self.sig_pods, ids = {}, [], {}
        for c in self.candidates:
            if c in self.interpod:
                continue
            sig = tuple((p.requests[self.R], tuple(sorted(p.requests.items())), self._pod_sig(p), p.host_ports)
                        for p in self.r_pods[c])
            if sig not in ids:
                ids[sig] = n = len(self.sig_pods)
                self.sig_pods.append([dataclasses.replace(p, name=f"~shape{n}-{i}", uid="")
                                      for i, p in enumerate(self.r_pods[c])])
            self.sig_of[c] = ids[sig]

    # -- rounds ----------------------------------------------------------------------------------
    def _candidate_groups(self, c):
        out = {}
        for p in self.r_pods[c]:
            out.setdefault(f"{p.namespace}/{p.group_name}", set()).add(p.key)
        return out

    def run_rounds(self):
        R = self.R
        self.cost = PlanCost(self.gangs)
        self.moved_cards = 0
        self.moves, self.freed = [], []
        self.live = set(self.candidates)
        self.groups_of = {c: self._candidate_groups(c) for c in self.candidates}
        self.cards_of = {c: sum(p.requests[R] for p in self.r_pods[c]) for c in self.candidates}
        self.occupied_now = len(self.occupied)
        self.rnd = 0
        if self.optimized:
            self._signatures()
            self._init_cache()
            self._rounds_fast()
        else:
            self._rounds_reference()
        for c in sorted(self.live):
            if c in self.verdicts:
                continue
            over = self._over_budget(c)
            if over is not None:
                self.verdicts[c] = over
                continue
            ev = self.evaluate(c, diagnose=True)
            if not ev.feasible:
                pod, f, msg = ev.fail
                self.verdicts[c] = NodeVerdict(c, False, "NoFeasibleReceiver", msg, pod, f, self.rnd)
            else:
                self.verdicts[c] = NodeVerdict(c, False, "NotSelected", "feasible but planning stopped", round=self.rnd)
        self.rounds = self.rnd
        self.plan_groups = self.cost.moved

    # Both round loops share these steps, so they cannot drift apart.
    def _minimum_reached(self) -> bool:
        if self.occupied_now > self.minimum.value:
            return False
        for c in sorted(self.live):
            self.verdicts[c] = NodeVerdict(c, False, "MinimumReached",
                                           f"occupied nodes already equal the theoretical minimum ({self.minimum.value})")
        self.live.clear()
        return True

    def _new_podgroups(self, c) -> int:
        return sum(1 for g in self.groups_of[c] if g not in self.cost.moved)

    def _over_budget(self, c):
        """A BudgetExceeded verdict if vacating `c` would break maxPerRun now, else None. Once over,
        always over (the plan only grows); the verdict is given when planning ends."""
        R = self.R
        if self.run.max_podgroups is not None:
            n = len(self.cost.moved) + self._new_podgroups(c)
            if n > self.run.max_podgroups:
                return NodeVerdict(c, False, "BudgetExceeded",
                                   f"vacating {c} would affect {n} PodGroups in this run; maxPerRun.podGroups is {self.run.max_podgroups}",
                                   round=self.rnd)
        if self.run.max_resource is not None and self.moved_cards + self.cards_of[c] > self.run.max_resource:
            return NodeVerdict(c, False, "BudgetExceeded",
                               f"vacating {c} would move {self.moved_cards + self.cards_of[c]} {R} in this run; maxPerRun.resources[{R}] is {self.run.max_resource}",
                               round=self.rnd)
        return None

    def _commit(self, chosen):
        """Apply the chosen candidate's moves; returns the receivers it touched (with old keys)."""
        R = self.R
        ev = self.evaluate(chosen)
        if not ev.feasible:
            raise AssertionError(f"planner bug: {chosen} judged feasible but its own evaluation fails")
        touched = {}
        for p, to, _ in ev.moves:
            if to not in touched:
                touched[to] = self.index.key_of.get(to) if self.optimized else None
        for p, to, _ in ev.moves:
            self.state.move(p, to)
            self.moves.append(PodMove(p, chosen, to, p.requests[R], self.rnd))
            self.receiving.add(to)
        self.state.commit()
        self.cost.add(self.groups_of[chosen])
        self.moved_cards += self.cards_of[chosen]
        self.freed.append(chosen)
        self.occupied_now -= 1
        self.receivers.discard(chosen)
        self.verdicts[chosen] = NodeVerdict(chosen, True, "Vacated",
                                            f"{len(ev.moves)} pod(s), {self.cards_of[chosen]} {R} moved in round {self.rnd}",
                                            round=self.rnd)
        self.live.discard(chosen)
        for t in touched:
            if t in self.live:
                self.live.discard(t)
                self.verdicts[t] = NodeVerdict(t, False, "ReceivingMoves",
                                               f"{t} receives pods of {chosen} in round {self.rnd} and stays occupied",
                                               round=self.rnd)
        return touched

    def _pick(self, entries):
        """entries: (dimensions, candidate). Lowest weighted min-max score; ties: more R freed, then name."""
        sc = scores([d for d, _ in entries], self.weights)
        best = min(range(len(entries)), key=lambda i: (sc[i], -self.alloc[entries[i][1]], entries[i][1]))
        return entries[best][1]

    def _rounds_reference(self):
        """Brute force: every round evaluates every remaining candidate from scratch."""
        over_budget = set()
        while self.live and not self._minimum_reached():
            self.rnd += 1
            entries = []
            for c in sorted(self.live):
                if c in over_budget or not self.evaluate(c).feasible:
                    continue
                if self._over_budget(c) is not None:
                    over_budget.add(c)     # for good: the plan only grows; the verdict comes at the end
                    continue
                entries.append((self.cost.with_candidate(self.groups_of[c]), c))
            if not entries:
                break
            self._commit(self._pick(entries))

    # -- the optimized loop ---------------------------------------------------------------------
    def _init_cache(self):
        self.cache = {}              # evaluation unit -> _Eval
        self.by_receiver = {}        # node -> units whose cached moves use it
        self.choice_keys = []        # sorted (receiver key at choice, unit, pod index, pod R request)
        self.pending = {}            # unit -> nodes changed since its cached evaluation

    def _forget(self, u):
        ev = self.cache.pop(u, None)
        if ev is not None:
            for i, (p, to, key) in enumerate(ev.moves):
                self.by_receiver.get(to, set()).discard(u)
                entry = (key, u, i, p.requests[self.R])
                j = bisect.bisect_left(self.choice_keys, entry)
                if j < len(self.choice_keys) and self.choice_keys[j] == entry:
                    self.choice_keys.pop(j)

    def _remember(self, u, ev):
        self.cache[u] = ev
        # A failed evaluation keeps the choices made before its failing pod: the failure can
        # only change if those choices change (the failing pod's options never grow).
        for i, (p, to, key) in enumerate(ev.moves):
            self.by_receiver.setdefault(to, set()).add(u)
            bisect.insort(self.choice_keys, (key, u, i, p.requests[self.R]))

    def _evaluation(self, u):
        ev = self.cache.get(u)
        if ev is None or ev.interpod:
            self._forget(u)
            self.pending.pop(u, None)
            ev = self._evaluate_unit(u)
            self._remember(u, ev)
        elif u in self.pending:
            self._forget(u)
            ev = self.repair(u, ev, self.pending.pop(u))
            self._remember(u, ev)
        return ev

    def _feasible_now(self, c) -> bool:
        if c in self.interpod:
            return self._evaluation(("node", c)).feasible
        ev = self._evaluation(("sig", self.sig_of[c]))
        if any(to == c for _, to, _ in ev.moves):
            return self._evaluation(("node", c)).feasible
        return ev.feasible

    def _rounds_fast(self):
        """Same decisions as `_rounds_reference`, looking only at what can decide a round.

        A round needs, over the feasible candidates within budget: the lowest and highest value of
        each cost dimension (min-max normalisation) and the lowest score. Candidates sit in one
        sorted list per dimension, and their cost vectors in a heap by score (candidates with the
        same vector score the same); a candidate whose evaluation may have changed is only marked
        unknown, and verified when one of those searches reaches it. Searches stop at the first
        verified candidate, so most unknowns are never evaluated.
        """
        pool = set()                     # candidates that may be feasible: known (F) or unknown (U)
        status = {}                      # candidate -> "F" | "U" | "I" (infeasible) | "X" (over budget)
        dims = {}
        asc = [[] for _ in range(5)]     # per dimension: sorted (value, candidate) over the pool
        members = {}                     # cost vector -> sorted [(-allocatable R, candidate)] in the pool
        heap = []                        # (score, -alloc, candidate, vector) of each vector's best member
        scored = {}                      # vector -> score under the current bounds
        terms = None                     # the current bounds as (dimension, weight, low, span)
        by_group = {}
        for c in self.candidates:
            for g in self.groups_of[c]:
                by_group.setdefault(g, set()).add(c)
                by_group.setdefault(self.gangs[g].workload, set()).add(c)

        def score(d):
            # The arithmetic of cost.scores, term by term in the same order, so the same floats.
            sc = scored.get(d)
            if sc is None:
                total = 0.0
                for i, w, low, span in terms:
                    total += w * (d[i] - low) / span
                sc = scored[d] = round(total, 9)
            return sc

        def push_head(d):
            if terms is not None and d in members:
                na, c = members[d][0]
                heapq.heappush(heap, (score(d), na, c, d))

        def enter(c):
            d = dims[c] = self.cost.with_candidate(self.groups_of[c])
            for i in range(5):
                bisect.insort(asc[i], (d[i], c))
            pool.add(c)
            lst = members.setdefault(d, [])
            entry = (-self.alloc[c], c)
            bisect.insort(lst, entry)
            if lst[0] == entry:
                push_head(d)

        def leave(c):
            if c in pool:
                pool.discard(c)
                d = dims[c]
                for i in range(5):
                    lst = asc[i]
                    lst.pop(bisect.bisect_left(lst, (d[i], c)))
                lst = members[d]
                j = bisect.bisect_left(lst, (-self.alloc[c], c))
                lst.pop(j)
                if not lst:
                    del members[d]
                elif j == 0:
                    push_head(d)

        def unknown(c):
            if c not in self.live or status.get(c) == "X":
                return
            if c not in pool:
                enter(c)
            status[c] = "U"

        resolved = {}                    # evaluation unit -> candidates verified since it last changed

        def resolve(c):
            """Verify `c` now: F stays in the pool, anything else leaves it."""
            if self._over_budget(c) is not None:
                status[c] = "X"
            elif status[c] == "U":
                status[c] = "F" if self._feasible_now(c) else "I"
                resolved.setdefault(("node", c), set()).add(c)
                if c in self.sig_of:
                    resolved.setdefault(("sig", self.sig_of[c]), set()).add(c)
            if status[c] != "F":
                leave(c)
            return status[c]

        def extreme(i, lowest):
            lst = asc[i]
            while lst:
                v, c = lst[0] if lowest else lst[-1]
                if resolve(c) == "F":
                    return v
            return None

        def bounds():
            lo, hi = [], []
            for i in range(5):
                low = extreme(i, True)
                if low is None:
                    return None
                lo.append(low)
                hi.append(extreme(i, False))
            return tuple(lo), tuple(hi)

        for c in self.candidates:
            enter(c)
            status[c] = "U"
        epoch = None
        while self.live and not self._minimum_reached():
            self.rnd += 1
            for c in self.interpod & self.live:
                unknown(c)
            # Verifying extremes can drop candidates; the bounds hold once a pass changes nothing.
            b = bounds()
            while b is not None and b != (b2 := bounds()):
                b = b2
            if b is None:
                break
            if b != epoch:
                epoch, (lo, hi) = b, b
                terms = [(i, self.weights[i], lo[i], hi[i] - lo[i]) for i in range(5) if hi[i] > lo[i]]
                scored = {}
                heap = [(score(d), *lst[0], d) for d, lst in members.items()]
                heapq.heapify(heap)
            chosen = None
            while heap:
                _, na, c, d = heapq.heappop(heap)
                lst = members.get(d)
                if not lst or lst[0] != (na, c):
                    continue                  # stale: that vector's best member changed since
                if resolve(c) == "F":
                    chosen = c
                    break
            if chosen is None:
                break
            touched = self._commit(chosen)
            for c in [chosen, *touched]:
                leave(c)
                self._forget(("node", c))
            refresh = set()
            for g in self.groups_of[chosen]:
                for key in (g, self.gangs[g].workload):
                    refresh |= by_group.get(key, set())
            for c in refresh & pool:
                leave(c)
                enter(c)
            for u in self._invalidate(chosen, touched):
                for c in resolved.pop(u, ()):
                    if status.get(c) != "U":
                        unknown(c)

    def _hosts(self, node, pod):
        """Would `node` accept `pod` on the committed state (R fit and every filter)?"""
        if self.state.free(node, self.R) < pod.requests[self.R]:
            return False
        return run_filters(pod, self.snap.node_by_name[node], self.state, {}) is None

    def _invalidate(self, chosen, touched):
        """Mark cached evaluations this round may have changed; returns those units.

        Without inter-pod constraints a round only removes capacity (receivers fill up, the
        vacated node leaves), so a pod's options never grow; a cached evaluation changes only if
        one of its chosen receivers was touched, or a touched node now comes before a choice in
        the receiver order and would take that pod. They are repaired lazily, when a candidate
        next asks.
        """
        self.index.remove(chosen)
        replay = set(self.by_receiver.get(chosen, ()))
        for t, old in touched.items():
            self.index.remove(t)
            new = self._key(t)
            self.index.add(new)
            replay |= self.by_receiver.get(t, set())
            if old is not None and new < old:
                lo = bisect.bisect_right(self.choice_keys, (new, ("\uffff",)))
                hi = bisect.bisect_left(self.choice_keys, (old, ("",)))
                room = self.state.free(t, self.R)
                for _, u, i, need in self.choice_keys[lo:hi]:
                    if need <= room and u not in replay and self._hosts(t, self.cache[u].moves[i][0]):
                        replay.add(u)
        changed = set(touched) | {chosen}
        for u in replay:
            self.pending.setdefault(u, set()).update(changed)
        return replay

    def finish(self) -> Plan:
        R = self.R
        providers = len(self.alloc)
        fb = frag_percent(len(self.occupied), self.minimum.value, providers)
        occupied_after = len(self.occupied) - len(self.freed)
        fa = frag_percent(occupied_after, self.minimum.value, providers)
        improvement = fb - fa
        if fb == 0:
            outcome = REASON_NO_FRAGMENTATION
            msg = (f"{R}: {len(self.occupied)} of {providers} provider nodes occupied, equal to the theoretical minimum"
                   f" {self.minimum.value}; nothing to repack")
        elif not self.freed:
            reasons = {}
            for v in self.verdicts.values():
                reasons[v.reason] = reasons.get(v.reason, 0) + 1
            why = ", ".join(f"{n} {r}" for r, n in sorted(reasons.items())) or "no candidate node in scope"
            outcome = REASON_INSUFFICIENT
            msg = f"fragmentation {percent_int(fb)}% but no node can be vacated ({why})"
        elif improvement < self.run.min_improvement:
            outcome = REASON_INSUFFICIENT
            msg = (f"best plan frees {len(self.freed)} node(s): {percent_int(fb)}% -> {percent_int(fa)}%, "
                   f"{float(improvement):.1f} points, below the required {self.run.min_improvement}")
        else:
            outcome = REASON_RECOMMENDED
            msg = (f"frees {len(self.freed)} node(s) by moving {sum(m.cards for m in self.moves)} {R}: "
                   f"fragmentation {percent_int(fb)}% -> {percent_int(fa)}%")
        if not self.minimum.exact:
            self.notes.append(f"theoretical minimum not proven; the lower bound {self.minimum.value} was used")
        for key in sorted(self.plan_groups):
            g = self.gangs.get(key)
            if g is not None and g.restart_note:
                self.notes.append(g.restart_note)
        if self.notes and outcome != REASON_NO_FRAGMENTATION:
            msg += "; " + "; ".join(self.notes)
        owners = {}
        for m in self.moves:
            k = f"{m.pod.namespace}/{m.pod.group_name}"
            pg = self.snap.podgroup_by_key.get(k)
            owners[k] = pg.owner if pg else None
        cards = {}
        for n, a in self.alloc.items():
            cards[n] = (a, self.used_before.get(n, 0), self.state.amount(n, R))
        verdicts = tuple(self.verdicts[n] for n in sorted(self.verdicts))
        return Plan(R, outcome, msg, providers, len(self.occupied), occupied_after, self.minimum.value,
                    self.minimum.exact, fb, fa, tuple(self.moves), tuple(self.freed), verdicts, self.rounds,
                    self.resolved_podgroups, self.resolved_nodes, tuple(self.notes), owners, cards)


def plan(snapshot, spec, weights=DEFAULT_WEIGHTS, optimized=True) -> Plan:
    """Plan a repack of `snapshot` for a RepackRun `spec` (a dict as in the CRD, or a RunSpec)."""
    run = spec if isinstance(spec, RunSpec) else RunSpec.from_spec(spec)
    enabled = gc.isenabled()
    gc.disable()    # the planner makes many short-lived tuples and no cycles worth collecting
    try:
        return _plan(snapshot, run, weights, optimized)
    finally:
        if enabled:
            gc.enable()


def _plan(snapshot, run, weights, optimized) -> Plan:
    p = _Planner(snapshot, run, weights, optimized)
    p.prepare()
    if frag_percent(len(p.occupied), p.minimum.value, len(p.alloc)) > 0:
        p.run_rounds()
    else:
        p.moves, p.freed, p.rounds, p.plan_groups = [], [], 0, {}
        for c in p.candidates:
            p.verdicts[c] = NodeVerdict(c, False, "MinimumReached", "no fragmentation: nothing to vacate")
    return p.finish()
