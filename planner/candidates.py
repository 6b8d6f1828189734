"""Candidate evaluation: can every R pod of a node be placed elsewhere, cumulatively, by the
scheduler's filters (FEAS-1/2), and onto which receivers in PLAN-2 order?

`CandidateEvaluator` owns the simulated state and the receiver side: which nodes may receive, the
receiver order (with the future vacate cost priced on the plan so far), the receiver index used at
scale, and the traces that place a candidate's pods one by one on a fork (the round loop decides
which cached traces a round made stale and traces them again).
"""
import dataclasses
from dataclasses import dataclass, field

from .filters import DYNAMIC_FILTERS, FILTERS, STATIC_FILTERS, run_filters, topology_domain
from .receivers import IDLE, MAYBE, OPENED, SURE, ReceiverIndex, receiver_key

# HyperNodes one trace tries for a wholly vacated hard-topology gang (TOPO-2), lowest tier first
MAX_DOMAINS_TRIED = 32
# A pod whose HyperNode holds at most this many nodes takes its receivers from their keys directly
DIRECT_DOMAIN = 512


class OwnKeys(dict):
    """{node: key} of the re-priced receivers a candidate sees at keys of its own
    (`CandidateEvaluator.repriced_keys`), with those keys sorted once for the whole trace."""
    __slots__ = ("ordered",)

    def __init__(self, keys):
        super().__init__(keys)
        self.ordered = sorted(self.values())


@dataclass
class Evaluation:
    """A candidate's trace: its moves (pod, receiver, receiver key at choice) or where it failed."""
    feasible: bool
    moves: list = field(default_factory=list)
    fail: tuple = ()                                 # (pod key, filter, message)
    interpod: bool = False


class CandidateEvaluator:
    """The receiver side of planning and the placement of one candidate's pods."""

    def __init__(self, prep, state, optimized, closed=frozenset(), opened=frozenset(), pins=None):
        self.prep = prep
        # pod key -> the only receiver it may take (a pass realising a `setsearch` state)
        self.pins = pins or {}
        self.snap = prep.snapshot
        self.R = prep.resource
        self.state = state
        self.optimized = optimized
        self.brute = not optimized          # walk a freshly sorted receiver list instead of the index
        self.receivers = (set(prep.occupied) - set(closed)) | set(opened)
        self.receiving = set()
        # Idle nodes (no R yet): receivers only while a consolidation tries them, except those an
        # improvement pass opens from the start (`opened`: receivers after every occupied node).
        self.opened = set(opened)
        self.idle = set(prep.idle) - set(closed) - self.opened
        self.plan_groups = set()            # PodGroups the committed plan disrupts
        self.overlay = set()                # receivers whose index key is stale (see _ordered)
        R = self.R
        self.sigs = prep.once("evaluator.pod_sig", dict)          # pod key -> pod_sig
        # PodGroup -> ((candidate holding its pods, their R there), ...)
        self.members_r = prep.once("evaluator.members_r", lambda: {
            g: tuple((n, prep.group_r[n][g]) for n in nodes) for g, nodes in prep.nodes_of_group.items()})
        self.alloc_r = prep.once("evaluator.alloc_r", lambda: {n.name: n.allocatable.get(R, 0) for n in self.snap.nodes})
        # Future vacate cost of a MAYBE node: its R held by PodGroups the plan does not disrupt yet.
        self.cost_now = dict(prep.once("evaluator.cost_now", lambda: {n: sum(rs.values())
                                                                       for n, rs in prep.group_r.items()}))
        if optimized:
            self.index = self._start_index(closed)
            self.static_ok = {}

    def _start_index(self, closed):
        """The receiver index of a pass's start (the evaluator is made on a fresh state: see
        rounds.Planner): the occupied nodes' keys are then the same in every pass, so each pass
        copies one index of them, takes out its closed nodes and adds its opened ones."""
        occupied = self.prep.occupied
        if self.opened & occupied:
            index = ReceiverIndex(self.prep.class_of)
            for name in self.receivers:
                index.add(self.key(name))
            return index

        def build():
            index = ReceiverIndex(self.prep.class_of)
            for name in occupied:
                index.add(self.key(name))
            return index
        index = self.prep.once("evaluator.index", build).copy()
        for name in closed:
            index.remove(name)
        for name in self.opened:
            index.add(self.key(name))
        return index

    # -- receiver order ---------------------------------------------------------------------------
    def key(self, node, extra=()):
        """PLAN-2 key of `node` for a candidate whose PodGroups are `extra` (their pods leave too).

        The planner's hottest function (a 1,000-node plan asks for 100,000 keys): free R read from
        the state's tables directly (as state.free), the re-pricing summed in a loop."""
        free = self.alloc_r[node] - self.state.used[node].get(self.R, 0)
        if node in self.receiving or node in self.prep.surely:
            return receiver_key(node, free, SURE)
        if node in self.idle:
            return receiver_key(node, free, IDLE)
        if node in self.opened:
            return receiver_key(node, free, OPENED)
        cost = self.cost_now.get(node, 0)
        if extra:
            cost -= self._own_discount(node, extra)
        return receiver_key(node, free, MAYBE, cost)

    def _own_discount(self, node, extra) -> int:
        """R on `node` held by PodGroups among `extra` the plan does not disrupt yet: how much
        cheaper the node is for the candidate whose pods those are."""
        rs = self.prep.group_r.get(node)
        sub = 0
        if rs:
            plan_groups = self.plan_groups
            for g, r in rs.items():
                if g in extra and g not in plan_groups:
                    sub += r
        return sub

    def repriced_keys(self, extra, vacating=None):
        """{node: key} of the MAYBE receivers a candidate with PodGroups `extra` sees at a key of
        its own; constant during one trace except for nodes the trace itself touches."""
        if not extra or self.brute:
            return OwnKeys({})
        # From the index's key where it is current (the committed state's, as key(n) would give):
        # only the re-pricing differs; nodes an enclosing fork touched (overlay) are keyed afresh.
        key_of, overlay = self.index.key_of, self.overlay
        out = {}
        for n, sub in self._repriced(extra, vacating).items():
            k = key_of.get(n)
            if k is None or n in overlay:
                out[n] = self.key(n, extra)
            elif k[0] != MAYBE:
                out[n] = k
            else:
                if sub is None:
                    sub = self._own_discount(n, extra)
                out[n] = (MAYBE, k[1] + sub, k[2], n) if sub else k
        return OwnKeys(out)

    def repriced_by(self, extra, vacating=None):
        """MAYBE receivers whose key for a candidate with PodGroups `extra` differs from the index key."""
        return set(self._repriced(extra, vacating))

    def _repriced(self, extra, vacating):
        """{node: its discount for the candidate (None: not worked out)} of the receivers `repriced_by`
        names. For a candidate's own PodGroups both come from `members_r`, as _own_discount gives them."""
        plan_groups, receivers, receiving, idle, opened = (self.plan_groups, self.receivers, self.receiving,
                                                           self.idle, self.opened)
        out = {}
        if vacating is not None and extra is self.prep.groups_of.get(vacating):
            # the other nodes of its PodGroups the plan does not disrupt yet, each with the R those
            # groups hold there (what _own_discount gives)
            members_r, subs = self.members_r, {}
            for g in extra:
                if g not in plan_groups:
                    for n, r in members_r[g]:
                        subs[n] = subs.get(n, 0) + r
            subs.pop(vacating, None)
            for n, sub in subs.items():
                if n in receivers and n not in receiving and n not in idle and n not in opened:
                    out[n] = sub
            return out
        nodes = set()
        for g in extra:
            if g not in plan_groups:
                nodes |= self.prep.nodes_of_group.get(g, set())
        nodes.discard(vacating)
        for n in nodes:
            if n in receivers and n not in receiving and n not in idle and n not in opened:
                out[n] = None
        return out

    def disrupt(self, groups):
        """The committed plan now disrupts `groups`: re-price their nodes. Returns {node: old key}."""
        changed = {}
        for g in groups:
            if g in self.plan_groups:
                continue
            self.plan_groups.add(g)
            for n in self.prep.nodes_of_group.get(g, ()):
                r = self.prep.group_r[n][g]
                if n in self.receivers and n not in self.receiving and n not in changed:
                    changed[n] = self.key(n)
                self.cost_now[n] -= r
        if self.optimized:
            for n in changed:
                self.index.remove(n)
                self.index.add(self.key(n))
        return changed

    def pod_sig(self, pod):
        """What the static filters read of `pod` (memoised per pod key for the Prepared snapshot)."""
        sig = self.sigs.get(pod.key)
        if sig is None:
            sig = self.sigs[pod.key] = (tuple(sorted(pod.node_selector.items())), pod.affinity_terms, pod.tolerations,
                                        pod.namespace if pod.pvc_names else "", pod.pvc_names)
        return sig

    def shape(self, pod):
        """Everything placement reads of a pod without inter-pod or topology constraints: two such
        pods of one shape are accepted by the same receivers."""
        return (pod.requests[self.R], tuple(sorted(pod.requests.items())), self.pod_sig(pod), pod.host_ports)

    def _ordered(self, pod, vacating, fork_nodes, extra=(), repriced=None):
        """Receiver keys for `pod` in PLAN-2 order (nodes touched in the fork carry fork keys);
        yields (key, static filters already checked). `repriced`: the candidate's own keys of
        re-priced nodes (`repriced_keys`), computed when None.

        Nodes whose index key is stale (`overlay`: touched by an enclosing fork, or receivers not
        in the index such as an idle node being tried) are merged in at their current keys."""
        need = pod.requests[self.R]
        if self.brute:
            keys = sorted(self.key(n, extra) for n in self.receivers if n != vacating)
            for k in keys:
                if k[2] >= need:
                    yield k, False
            return
        sig = self.pod_sig(pod)
        domain = self._domain(pod)

        def class_ok(cid):
            ck = (sig, cid)
            ok = self.static_ok.get(ck)
            if ok is None:
                node = self.snap.node_by_name[self.prep.class_rep[cid]]
                ok = self.static_ok[ck] = run_filters(pod, node, self.state, {}, STATIC_FILTERS) is None
            # classes never straddle a HyperNode (prepare._classes), so one node answers for its class
            return ok and (domain is None or self.prep.class_rep[cid] in domain)

        if repriced is None:
            repriced = self.repriced_keys(extra, vacating)
        stale = fork_nodes | self.overlay
        ordered = repriced.ordered
        own = [k for k in ordered if k[2] >= need and k[3] not in stale]
        fresh = [k for k in (self.key(n, extra) for n in stale if n in self.receivers and n != vacating)
                 if k[2] >= need]
        if fresh:
            own = sorted(own + fresh)
        if domain is not None and len(domain) <= DIRECT_DOMAIN:
            # a pod held to a small HyperNode: its receivers in order, straight from the index's keys
            # (the same keys the walk yields, without visiting every class of every bucket)
            key_of, class_of = self.index.key_of, self.prep.class_of
            walk = sorted(k for k in (key_of.get(n) for n in domain)
                          if k is not None and k[2] >= need and class_ok(class_of[k[3]]))
        else:
            walk = self.index.walk(need, class_ok)
        fi = 0
        for k in walk:
            while fi < len(own) and own[fi] < k:
                yield own[fi], False
                fi += 1
            n = k[3]
            if n in stale or n == vacating or n in repriced:
                continue
            yield k, True
        for k in own[fi:]:
            yield k, False

    def _domain(self, pod):
        """The nodes hard network topology leaves `pod` on the current state (None: unrestricted)."""
        cons = self.snap.constraints.get(pod.key)
        if not cons:
            return None
        out = None
        for c in cons:
            allowed = topology_domain(c, pod.key, self.state)[1]
            out = allowed if out is None else out & allowed
        return out

    def place(self, pod, vacating, fork_nodes, extra=(), repriced=None):
        """First receiver in order that accepts `pod`."""
        cache = {}
        pinned = self.pins.get(pod.key)
        if pinned is not None:
            if pinned == vacating or pinned not in self.receivers or \
                    run_filters(pod, self.snap.node_by_name[pinned], self.state, cache) is not None:
                return None, None
            return pinned, self.key(pinned, extra)
        for key, static_checked in self._ordered(pod, vacating, fork_nodes, extra, repriced):
            node = key[3]
            if node == vacating or node not in self.receivers:
                continue
            filters = DYNAMIC_FILTERS if static_checked else FILTERS
            if run_filters(pod, self.snap.node_by_name[node], self.state, cache, filters) is None:
                return node, key
        return None, None

    def diagnose(self, pod, vacating, fork_nodes, extra=()):
        """Mode-independent reason: the first receiver in order with room in R, and the filter it fails."""
        need = pod.requests[self.R]
        if self.brute:
            ordered = [k for k in sorted(self.key(n, extra) for n in self.receivers if n != vacating) if k[2] >= need]
        else:
            stale = fork_nodes | self.overlay
            repriced = self.repriced_by(extra, vacating) if extra else set()
            walk = next((k for k in self.index.walk(need)
                         if k[3] not in stale and k[3] != vacating and k[3] not in repriced), None)
            own = [k for k in (self.key(n, extra) for n in (stale | repriced) if n in self.receivers and n != vacating)
                   if k[2] >= need]
            ordered = sorted(([walk] if walk else []) + own)
        first = ordered[0] if ordered else None
        if first is not None:
            node = first[3]
            f, reason = run_filters(pod, self.snap.node_by_name[node], self.state, {}) or ("", "fits")
            return f, (f"pod {pod.key} ({need} {self.R}) has no feasible receiver; "
                       f"first receiver with room, {node}: {reason}")
        return "NodeResourcesFit", (f"pod {pod.key} ({need} {self.R}) has no feasible receiver: "
                                    f"no receiver has {need} free {self.R}")

    # -- one candidate ----------------------------------------------------------------------------
    def trace(self, pods, vacating, unbind, interpod=False, diagnose=False, extra=()) -> Evaluation:
        """Greedy placement of `pods` in order on a fork; the fork is reverted before returning.

        A gang with hard network topology none of whose pods stays bound is placed by vc-scheduler
        as one unit inside one HyperNode of an allowed tier (TOPO-2); when the greedy placement
        fails on a pod of such a gang, each HyperNode it may use is tried in turn, lowest tier first."""
        ev = self._trace(pods, vacating, unbind, interpod, diagnose, extra)
        if ev.feasible or not unbind or not self.snap.constraints:
            return ev
        st = self.state
        leaving = {p.key for p in pods}
        # Pinning helps only a gang of two or more pods that all leave, and only when one of them failed.
        for c in self.snap.constraints.get(ev.fail[0], ()):
            if c in st.domains or any(k in st.node_of and k not in leaving for k in c.members) \
                    or sum(1 for k in c.members if k in leaving) < 2:
                continue
            for h in self.snap.topology.domains(c.tier)[:MAX_DOMAINS_TRIED]:
                st.domains[c] = h
                try:
                    tried = self._trace(pods, vacating, unbind, interpod, False, extra)
                finally:
                    del st.domains[c]
                if tried.feasible:
                    return tried
            break
        return ev

    def topo_scope(self, node) -> frozenset:
        """Nodes whose change can change the evaluation of candidate `node` through hard network
        topology (TOPO-2): for each gang of its pods, the HyperNode its pods elsewhere anchor it to,
        or, for a gang of two or more pods that all sit here (placed as one unit, trying HyperNodes
        in turn), every node such a gang may use. A single pod of its own gang on this node meets
        a fixed node set, which the usual receiver bookkeeping covers."""
        st, topo = self.state, self.snap.topology
        here = {p.key for p in self.prep.r_pods[node]}
        out = set()
        for key in here:
            for c in self.snap.constraints.get(key, ()):
                elsewhere = {st.node_of[k] for k in c.members if k not in here and k in st.node_of}
                if elsewhere:
                    out |= topo.anchor_domain(elsewhere, c.tier)[1]
                elif sum(1 for k in c.members if k in here) > 1:
                    out |= topo.reachable(c.tier)
        return frozenset(out)

    def _trace(self, pods, vacating, unbind, interpod, diagnose, extra) -> Evaluation:
        st = self.state
        mark = st.fork()
        if unbind:
            for p in pods:
                st.unbind(p)
        ev = Evaluation(True, interpod=interpod)
        fork_nodes = set()
        repriced = self.repriced_keys(extra, vacating)
        saved_receiving = self.receiving
        self.receiving = set(self.receiving)
        try:
            for p in pods:
                to, key = self.place(p, vacating, fork_nodes, extra=extra, repriced=repriced)
                if to is None:
                    f, msg = self.diagnose(p, vacating, fork_nodes, extra) if diagnose else ("", "")
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

    def evaluate(self, node, diagnose=False) -> Evaluation:
        """Can every R pod of `node` be placed elsewhere, cumulatively, by the scheduler's filters?"""
        prep = self.prep
        return self.trace(prep.r_pods[node], node, True, node in prep.interpod, diagnose, prep.groups_of[node])

    def evaluate_unit(self, unit) -> Evaluation:
        """Evaluate a candidate node ("node", name) or a shared pod-shape signature ("sig", id)."""
        if unit[0] == "node":
            return self.evaluate(unit[1])
        return self.trace(self.sig_pods[unit[1]], None, False)

    def build_signatures(self, candidates):
        """Candidates whose R pods have identical scheduling shapes, in order, share one evaluation.

        Placement of such pods depends only on their shapes and on the receivers, so one trace
        with stand-in pods serves every candidate with that signature, except a candidate whose
        own node, or a node its PodGroups re-price, the trace chose (it is then evaluated on its own).
        Computed once per Prepared snapshot; every pass over it shares them.
        """
        cached = self.prep.signatures
        if cached is None:
            sig_of, sig_pods, ids = {}, [], {}
            for c in candidates:
                if c in self.prep.interpod or c in self.prep.topo:
                    continue
                sig = tuple(self.shape(p) for p in self.prep.r_pods[c])
                if sig not in ids:
                    ids[sig] = n = len(sig_pods)
                    sig_pods.append([dataclasses.replace(p, name=f"~shape{n}-{i}", uid="")
                                     for i, p in enumerate(self.prep.r_pods[c])])
                sig_of[c] = ids[sig]
            cached = self.prep.signatures = (sig_of, sig_pods)
        self.sig_of, self.sig_pods = cached

    def hosts(self, node, pod):
        """Would `node` accept `pod` on the committed state (R fit and every filter)?"""
        if self.state.free(node, self.R) < pod.requests[self.R]:
            return False
        return run_filters(pod, self.snap.node_by_name[node], self.state, {}) is None
