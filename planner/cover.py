"""Freed capacity counted by who can use it (RELIEF-4, PLAN-2 rule 1 amended).

A plan that fills an idle node I and frees a node F trades I for F. That trade is only neutral for
the jobs that wait when every pod that could have used I can use F: F *covers* I when

- F's NoSchedule/NoExecute taints are a subset of I's (a pod that tolerates I's taints tolerates F's),
- allocatable[R](F) >= allocatable[R](I) (a pod that fits on an empty I fits on an empty F), and
- every node selection (nodeSelector and required node affinity) of a pod requesting R that picks I
  also picks F: for labels, F carries each label of I such a pod selects on, with the same value.

Only pods that request R count: they are the ones the freed R capacity is for. (A DaemonSet-like pod
pinned by `kubernetes.io/hostname`, requesting no R, would otherwise make every node unique and no
idle node coverable; the e2e cluster has such pods.) And it is each selection that must follow, not
each selected key: one R pod pinned to node X constrains nodes X only, not the hostname of every node.

A plan may re-occupy idle nodes only when its freed nodes cover them one for one: a matching that
gives every re-occupied idle node its own covering freed node (`Cover.uncovered` counts the idle
nodes no such matching can serve; 0 means the plan may stand). Without it, emptying two tainted
nodes into the only untainted idle one looks like one node won, while an untolerating 8-card job has
just lost the only node it could use.

Nodes that no part of the rule can tell apart share a class; the matching runs over classes with
multiplicities (an augmenting-path max flow: the graphs are a handful of classes, so a library
would buy nothing here).
"""
from .filters import node_affinity
from .plan_types import Capacity

HARD_EFFECTS = ("NoSchedule", "NoExecute")


def _selections(snapshot, resource) -> list:
    """One pod per distinct node selection (nodeSelector, required node affinity) among the
    non-terminal pods requesting `resource`; pods that select no node are left out (they pick all)."""
    seen, out = set(), []
    for p in snapshot.pods:
        if p.terminal or p.requests.get(resource, 0) <= 0 or (not p.node_selector and p.affinity_terms is None):
            continue
        key = (tuple(sorted(p.node_selector.items())), p.affinity_terms)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out


def _picks(selections, nodes, snapshot) -> dict:
    """node -> frozenset of the selections (indexes) that pick it. A nodeSelector alone is looked up
    through a (label, value) -> nodes index (one pinned pod costs one lookup, not a pass over every
    node); affinity terms are checked node by node with the scheduler filter's own code."""
    index = {}
    for name in nodes:
        for kv in snapshot.node_by_name[name].labels.items():
            index.setdefault(kv, set()).add(name)
    picked = {name: [] for name in nodes}
    everyone = set(nodes)
    for i, p in enumerate(selections):
        hit = everyone
        for kv in p.node_selector.items():
            hit = hit & index.get(kv, set())
            if not hit:
                break
        if p.affinity_terms is not None:
            hit = {n for n in hit if node_affinity(p, snapshot.node_by_name[n], None, None) is None}
        for n in hit:
            picked[n].append(i)
    return {n: frozenset(v) for n, v in picked.items()}


def selected_label_keys(selections) -> list:
    """Label keys the selections select on (what the plan's 'Can host' shows of a node they pick)."""
    keys = set()
    for p in selections:
        keys.update(p.node_selector)
        for t in p.affinity_terms or ():
            keys.update(r.key for r in t.match_expressions)
    return sorted(keys)


class Cover:
    """The cover relation over the provider nodes of one snapshot and resource."""

    def __init__(self, snapshot, resource, nodes):
        selections = _selections(snapshot, resource)
        picks = _picks(selections, sorted(nodes), snapshot)
        self.class_of = {}
        self.shapes = []                 # class id -> (hard taints, allocatable R, selections that pick it)
        self.labels = []                 # class id -> (key, value) the selections picking it select on (shown)
        ids = {}
        for name in sorted(nodes):
            node = snapshot.node_by_name[name]
            shape = (frozenset((t.key, t.value, t.effect) for t in node.taints if t.effect in HARD_EFFECTS),
                     node.allocatable.get(resource, 0), picks[name])
            cid = ids.get(shape)
            if cid is None:
                cid = ids[shape] = len(self.shapes)
                self.shapes.append(shape)
                # shown: the labels the selections that pick this node select on
                keys = selected_label_keys(selections[i] for i in picks[name])
                self.labels.append(tuple((k, node.labels[k]) for k in keys if k in node.labels))
            self.class_of[name] = cid
        self._covering = {}              # class i -> the classes whose nodes cover a node of class i

    @staticmethod
    def _covers(f, i) -> bool:
        f_taints, f_alloc, f_picks = f
        i_taints, i_alloc, i_picks = i
        return f_taints <= i_taints and f_alloc >= i_alloc and i_picks <= f_picks

    def covering(self, i) -> list:
        """The classes whose nodes cover a node of class `i` (computed once per class asked about:
        only idle nodes' classes are)."""
        out = self._covering.get(i)
        if out is None:
            shape = self.shapes[i]
            out = self._covering[i] = [j for j, f in enumerate(self.shapes) if self._covers(f, shape)]
        return out

    def universal(self, i) -> bool:
        """Does every class cover class `i` (the common case: one pool, no taints; no matching needed)?"""
        return len(self.covering(i)) == len(self.shapes)

    def covers(self, freed_node, idle_node) -> bool:
        """Does `freed_node` cover `idle_node`?"""
        return self.class_of[freed_node] in self.covering(self.class_of[idle_node])

    def uncovered(self, freed, reoccupied) -> int:
        """How many of the `reoccupied` idle nodes no matching to distinct covering `freed` nodes
        can serve (0: the freed nodes cover them one for one)."""
        if not reoccupied:
            return 0
        class_of = self.class_of
        need = {}
        for m in reoccupied:
            c = class_of[m]
            need[c] = need.get(c, 0) + 1
        if all(self.universal(c) for c in need):
            return max(0, len(reoccupied) - len(freed))
        cap = {}
        for f in freed:
            c = class_of[f]
            cap[c] = cap.get(c, 0) + 1
        return sum(need.values()) - _max_flow(need, cap, self.covering)

    def capacity(self, nodes) -> tuple:
        """What `nodes` can host: one plan_types.Capacity per class (count, allocatable R, hard
        taints, the labels pods select on), most nodes first."""
        counts = {}
        for n in nodes:
            c = self.class_of[n]
            counts[c] = counts.get(c, 0) + 1
        out = []
        for c, k in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
            taints, alloc, _ = self.shapes[c]
            out.append(Capacity(k, alloc, tuple(f"{key}={value}:{effect}" if value else f"{key}:{effect}"
                                                for key, value, effect in sorted(taints)), self.labels[c]))
        return tuple(out)

    def describe(self, nodes, resource) -> list:
        """`capacity` as lines: '2 node(s) with 8 R, tainted dedicated=train:NoSchedule, labelled pool=a'."""
        return [c.text(resource) for c in self.capacity(nodes)]


def _max_flow(need, cap, covering) -> int:
    """Most units of `need` (class -> count) served by `cap` (class -> count), a unit of class i
    only by a class in covering(i): augmenting paths, one unit at a time."""
    flow = {}                                  # (i, j) -> units of i served by j
    used = dict.fromkeys(cap, 0)
    served_by = {}                             # j -> {i: units}

    def augment(i, seen):
        for j in covering(i):
            if j not in cap or j in seen:
                continue
            seen.add(j)
            if used[j] < cap[j]:
                used[j] += 1
                _add(i, j, 1)
                return True
            for i2, units in list(served_by.get(j, {}).items()):
                if units and augment(i2, seen):
                    _add(i2, j, -1)
                    _add(i, j, 1)
                    return True
        return False

    def _add(i, j, d):
        flow[(i, j)] = flow.get((i, j), 0) + d
        s = served_by.setdefault(j, {})
        s[i] = s.get(i, 0) + d

    total = 0
    for i, k in sorted(need.items()):
        for _ in range(k):
            if not augment(i, set()):
                break
            total += 1
    return total
