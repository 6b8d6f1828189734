"""Freed capacity counted by who can use it (RELIEF-4, PLAN-2 rule 1 amended).

A plan that fills an idle node I and frees a node F trades I for F. That trade is only neutral for
the jobs that wait when every pod that could have used I can use F: F *covers* I when

- F's NoSchedule/NoExecute taints are a subset of I's (a pod that tolerates I's taints tolerates F's),
- allocatable[R](F) >= allocatable[R](I) (a pod that fits on an empty I fits on an empty F), and
- F carries every label of I whose key some pod in the snapshot selects on (nodeSelector or a
  required node-affinity term), with the same value (a pod steered to I can be steered to F).

A plan may re-occupy idle nodes only when its freed nodes cover them one for one: a matching that
gives every re-occupied idle node its own covering freed node (`Cover.uncovered` counts the idle
nodes no such matching can serve; 0 means the plan may stand). Without it, emptying two tainted
nodes into the only untainted idle one looks like one node won, while an untolerating 8-card job has
just lost the only node it could use.

Nodes that no part of the rule can tell apart share a class; the matching runs over classes with
multiplicities (an augmenting-path max flow: the graphs are a handful of classes, so a library
would buy nothing here).
"""
from .plan_types import Capacity

HARD_EFFECTS = ("NoSchedule", "NoExecute")


def selected_label_keys(snapshot) -> list:
    """Label keys some pod of the snapshot selects nodes by (nodeSelector, required node affinity)."""
    keys = set()
    for p in snapshot.pods:
        keys.update(p.node_selector)
        for t in p.affinity_terms or ():
            keys.update(r.key for r in t.match_expressions)
    return sorted(keys)


class Cover:
    """The cover relation over the provider nodes of one snapshot and resource."""

    def __init__(self, snapshot, resource, nodes):
        self.keys = selected_label_keys(snapshot)
        self.class_of = {}
        self.shapes = []                 # class id -> (hard taints, allocatable R, selected labels)
        ids = {}
        for name in sorted(nodes):
            node = snapshot.node_by_name[name]
            shape = (frozenset((t.key, t.value, t.effect) for t in node.taints if t.effect in HARD_EFFECTS),
                     node.allocatable.get(resource, 0),
                     tuple((k, node.labels[k]) for k in self.keys if k in node.labels))
            cid = ids.get(shape)
            if cid is None:
                cid = ids[shape] = len(self.shapes)
                self.shapes.append(shape)
            self.class_of[name] = cid
        n = len(self.shapes)
        # covering[i]: the classes whose nodes cover a node of class i
        self.covering = [[j for j in range(n) if self._covers(self.shapes[j], self.shapes[i])] for i in range(n)]
        # classes every class covers: the common case (one pool, no taints) needs no matching
        self.universal = {i for i in range(n) if len(self.covering[i]) == n}

    @staticmethod
    def _covers(f, i) -> bool:
        f_taints, f_alloc, f_labels = f
        i_taints, i_alloc, i_labels = i
        return f_taints <= i_taints and f_alloc >= i_alloc and set(i_labels) <= set(f_labels)

    def covers(self, freed_node, idle_node) -> bool:
        """Does `freed_node` cover `idle_node`?"""
        return self.class_of[freed_node] in self.covering[self.class_of[idle_node]]

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
        if all(c in self.universal for c in need):
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
            taints, alloc, labels = self.shapes[c]
            out.append(Capacity(k, alloc, tuple(f"{key}={value}:{effect}" if value else f"{key}:{effect}"
                                                for key, value, effect in sorted(taints)), labels))
        return tuple(out)

    def describe(self, nodes, resource) -> list:
        """`capacity` as lines: '2 node(s) with 8 R, tainted dedicated=train:NoSchedule, labelled pool=a'."""
        return [c.text(resource) for c in self.capacity(nodes)]


def _max_flow(need, cap, covering) -> int:
    """Most units of `need` (class -> count) served by `cap` (class -> count), a unit of class i
    only by a class in covering[i]: augmenting paths, one unit at a time."""
    flow = {}                                  # (i, j) -> units of i served by j
    used = dict.fromkeys(cap, 0)
    served_by = {}                             # j -> {i: units}

    def augment(i, seen):
        for j in covering[i]:
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
