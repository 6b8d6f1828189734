"""Receiver order (PLAN-2) and an index that walks it quickly at scale.

Order for one pod: (1) never the node being vacated; an idle node (no R at all) only in the
consolidation phase, where more donors than idle nodes must vacate onto them to count (tier IDLE,
after every occupied node), or when an improvement pass opens it from the start (tier OPENED, after
the occupied nodes that may be vacated: the pass counts only if it frees more net nodes); (2) nodes that will surely stay occupied first (tier SURE: non-movable R pods,
outside scope.nodes, already receiving moves); (3) among nodes that may be vacated later (tier
MAYBE), the ones with the higher future vacate cost first, priced on the plan so far: the R held
by pods of PodGroups the plan (this candidate included) does not already disrupt; (4) best fit:
least R left after the move; then node name. The key does not depend on the pod beyond "free R >=
its request", so one sorted structure serves every pod; `ReceiverIndex` keeps it bucketed by
(tier, cost, free) and by node equivalence class, so pods skip whole classes their static filters
reject.
"""
import bisect
import heapq

SURE, MAYBE, OPENED, IDLE = 0, 1, 2, 3


def receiver_key(node, free, tier, cost=0):
    """Sort key of a receiver; lower is tried first. `cost`: future vacate cost (MAYBE tier only)."""
    return (tier, -cost, free, node)


class ReceiverIndex:
    """Receivers of the committed state grouped as bucket (tier, -cost, free) -> class -> names."""

    def __init__(self, class_of):
        self.class_of = class_of          # node name -> equivalence class id
        self.buckets = {}                 # bucket -> {class: sorted [names]}
        self.order = []                   # sorted bucket keys
        self.key_of = {}

    def add(self, key):
        node = key[3]
        bucket = key[:3]
        classes = self.buckets.get(bucket)
        if classes is None:
            classes = self.buckets[bucket] = {}
            bisect.insort(self.order, bucket)
        bisect.insort(classes.setdefault(self.class_of[node], []), node)
        self.key_of[node] = key

    def copy(self) -> "ReceiverIndex":
        """An independent index with the same receivers."""
        new = ReceiverIndex(self.class_of)
        new.buckets = {b: {c: list(names) for c, names in classes.items()} for b, classes in self.buckets.items()}
        new.order = list(self.order)
        new.key_of = dict(self.key_of)
        return new

    def remove(self, node):
        key = self.key_of.pop(node, None)
        if key is None:
            return
        bucket = key[:3]
        classes = self.buckets[bucket]
        names = classes[self.class_of[node]]
        names.pop(bisect.bisect_left(names, node))
        if not names:
            del classes[self.class_of[node]]
        if not classes:
            del self.buckets[bucket]
            self.order.pop(bisect.bisect_left(self.order, bucket))

    def walk(self, min_free, class_ok=None):
        """Keys in order among receivers with free >= min_free (and an accepted class, if given)."""
        for bucket in self.order:
            if bucket[2] < min_free:
                continue
            classes = self.buckets[bucket]
            lists = [names for c, names in classes.items() if class_ok is None or class_ok(c)]
            if not lists:
                continue
            names = lists[0] if len(lists) == 1 else heapq.merge(*lists)
            for name in names:
                yield bucket + (name,)
