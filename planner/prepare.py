"""What every planning pass over one snapshot and spec starts from, computed once (`prepare`):
providers and occupancy, the exact minimum, candidate nodes and the verdicts of blocked ones, each
candidate's R pods and PodGroups, and the node equivalence classes of the receiver index.

Read-only once built, so the budget improvement phase can run several passes from it.
"""
from dataclasses import dataclass
from types import MappingProxyType

from .blocks import BlockCounter
from .cost import gang_infos
from .cover import Cover
from .filters import has_interpod_constraints
from .frag import theoretical_min, usage
from .plan_types import NodeVerdict, RunSpec
from .rules import RuleContext, check_movable
from .selectors import selector_matches
from .state import SimulatedState


@dataclass
class Prepared:
    snapshot: object
    run: object
    resource: str
    alloc: dict                  # provider node -> allocatable R
    used_before: dict            # node -> R in use at the start
    occupied: set
    idle: set                    # providers with no R in use at the start
    minimum: object              # frag.MinimumResult
    surely: set                  # occupied nodes that stay occupied (blocked or outside scope.nodes)
    candidates: list             # occupied, in scope.nodes, every R pod movable; sorted
    blocked: dict                # node -> NodeVerdict of an in-scope node that cannot be vacated
    r_pods: dict                 # occupied node -> its R pods, largest first
    interpod: set                # candidates with pods whose feasibility depends on other placements
    groups_of: dict              # candidate -> {PodGroup key: set of its pod keys on that node}
    group_r: dict                # candidate -> {PodGroup key: R its pods hold there}
    nodes_of_group: dict         # PodGroup key -> candidates holding its pods
    cards_of: dict               # candidate -> R it holds
    class_of: dict               # provider -> receiver equivalence class id
    class_rep: dict              # class id -> a node of that class
    resolved_nodes: int
    resolved_podgroups: int
    status_cost: dict = None     # candidate -> (pods it moves, bytes they take in the run's status)
    gangs: dict = None           # PodGroup key -> cost.GangInfo
    signatures: tuple = None     # (candidate -> shape id, stand-in pods per shape), built on first use
    not_evictable: object = None  # namespace -> why the run may not evict there (read-only; set by prepare)
    blocks: object = None        # blocks.BlockCounter of spec.networkTopology, None without a block goal
    # candidates holding pods of gangs with hard network topology: evaluated on their own (never by
    # a shared signature), re-evaluated when their gang moves or a node they may use changes
    topo: set = None
    cover: object = None         # cover.Cover: which freed nodes may stand in for a re-occupied idle one

    start: object = None         # state.SimulatedState of the snapshot, built on first use (`fresh_state`)
    # what every fast pass starts from, built by the first (pool.CandidatePool, candidates.CandidateEvaluator):
    # name -> value, each read-only once built
    shared: dict = None

    # check_movable reads `snapshot`, `scope` and `not_evictable`
    @property
    def scope(self):
        return self.run.scope

    def once(self, name, build):
        """`build()`, computed on the first call for `name` and shared by every later pass."""
        if self.shared is None:
            self.shared = {}
        value = self.shared.get(name)
        if value is None:
            value = self.shared[name] = build()
        return value

    def fresh_state(self):
        """A SimulatedState of the snapshot as it is, for one pass (a copy of one built once)."""
        if self.start is None:
            self.start = SimulatedState(self.snapshot)
        return self.start.copy()


# What one run's status can hold. A RepackRun is one etcd object (1.5 MiB by default) and its CRD
# caps the lists (relocations and plan pods 4096, freedNodes 2048). Every moved pod takes one entry
# in plan.moves and one relocation record, which the executor and the coordinator fill in as the
# run goes (replacement name and UID, selected and actual node, times, messages). Measured on full
# records: about STATUS_BYTES_FIXED bytes plus the names, counted as often as they are written.
# STATUS_BYTES_BUDGET (moves, records, freedNodes) leaves a third of the object to spec,
# conditions, summary, result, message and metadata (managedFields of the two status writers).
STATUS_MAX_PODS = 4096
STATUS_MAX_FREED = 2048
STATUS_BYTES_BUDGET = 1_000_000
STATUS_BYTES_FIXED = 700


def status_bytes(pod, longest_node: int) -> int:
    """Bytes one moved pod takes in a finished run's status, JSON-serialized (an upper estimate:
    field names, two UIDs, phases and a 200-character eviction message; node names at the longest
    provider's length five times (from, to, planned, selected, actual); the pod's name three times
    (move, victim, replacement), its PodGroup four (move, owner, record, replacement's group) and
    its namespace twice)."""
    return (STATUS_BYTES_FIXED + 3 * len(pod.name) + 2 * len(pod.namespace) + 4 * len(pod.group_name)
            + 5 * longest_node)


def _frozen(not_evictable) -> MappingProxyType:
    """{namespace: why} as a read-only mapping (empty reasons dropped)."""
    return MappingProxyType({str(ns): str(why) for ns, why in dict(not_evictable or {}).items() if why})


def movable_namespaces(snapshot, spec) -> list:
    """The namespaces, sorted, of the pods a plan for `spec` (as planner.plan takes it) could move:
    bound, not finished, requesting the run's resource, on a provider node in scope.nodes, and
    movable by every rule (planner.rules) but the caller's own `not_evictable`. What a caller asks
    about before planning when the run may evict only where someone allows it (one pass)."""
    from .relief import resolve_resource   # relief builds on this module
    run = resolve_resource(snapshot, spec if isinstance(spec, RunSpec) else RunSpec.from_spec(spec))
    R, scope = run.resource, run.scope
    alloc, _, _ = usage(snapshot, R)
    ctx = RuleContext(snapshot, scope)
    out = set()
    for node in alloc:
        if not scope.node_in_scope(snapshot.node_by_name[node]):
            continue
        for p in snapshot.pods_by_node.get(node, ()):
            if p.namespace not in out and not p.terminal and p.requests.get(R, 0) > 0 \
                    and check_movable(p, ctx) is None:
                out.add(p.namespace)
    return sorted(out)


def prepare(snapshot, run, not_evictable=None) -> Prepared:
    """Everything the passes share; `not_evictable` ({namespace: why}) pins the pods of those
    namespaces (rules.not_evictable), so nodes holding them are blocked, not candidates."""
    R, scope = run.resource, run.scope
    alloc, used, items = usage(snapshot, R)
    occupied = {n for n in alloc if used.get(n, 0) > 0}
    in_scope_nodes = {n for n in alloc if scope.node_in_scope(snapshot.node_by_name[n])}
    consuming = set()
    for p in snapshot.pods:
        if p.node_name and not p.terminal and p.requests.get(R, 0) > 0 and p.group_name:
            consuming.add(f"{p.namespace}/{p.group_name}")
    prep = Prepared(snapshot, run, R, alloc, dict(used), occupied, set(alloc) - occupied,
                    theoretical_min(items, alloc.values()), set(), [], {}, {}, set(), {}, {}, {}, {}, {}, {},
                    len(in_scope_nodes),
                    sum(1 for k in consuming if k in snapshot.podgroup_by_key
                        and scope.podgroup_in_scope(snapshot.podgroup_by_key[k])))
    prep.not_evictable = _frozen(not_evictable)
    prep.topo = set()
    if run.network_topology is not None:
        prep.blocks = BlockCounter(prep, run.network_topology)
    prep.gangs = gang_infos(snapshot, R)
    prep.cover = Cover(snapshot, R, alloc)
    for node in sorted(occupied):
        pods = [p for p in snapshot.pods_by_node.get(node, ()) if not p.terminal and p.requests.get(R, 0) > 0]
        pods.sort(key=lambda p: (-p.requests[R], p.key))
        prep.r_pods[node] = pods
        blocked = None
        for p in pods:
            b = check_movable(p, prep)
            if b is not None:
                blocked = (p, b)
                break
        if blocked is not None:
            prep.surely.add(node)
        if node not in in_scope_nodes:
            prep.surely.add(node)
            continue
        if blocked is not None:
            p, b = blocked
            prep.blocked[node] = NodeVerdict(node, False, b.reason, b.message, p.key)
            continue
        prep.candidates.append(node)
    anti_terms = [(p, t) for p in snapshot.pods for t in p.pod_anti_affinity]
    for c in prep.candidates:
        groups, rs = {}, {}
        for p in prep.r_pods[c]:
            g = f"{p.namespace}/{p.group_name}"
            groups.setdefault(g, set()).add(p.key)
            rs[g] = rs.get(g, 0) + p.requests[R]
            prep.nodes_of_group.setdefault(g, set()).add(c)
            if p.key in snapshot.constraints:
                prep.topo.add(c)
            if has_interpod_constraints(p) or any(
                    t.label_selector is not None and selector_matches(t.label_selector, p.labels)
                    for _, t in anti_terms):
                prep.interpod.add(c)
        prep.groups_of[c], prep.group_r[c] = groups, rs
        prep.cards_of[c] = sum(rs.values())
    longest_node = max((len(n) for n in alloc), default=0)
    # A vacated node also takes its name in plan.freedNodes (quoted, with a comma).
    prep.status_cost = {c: (len(prep.r_pods[c]),
                            longest_node + 3 + sum(status_bytes(p, longest_node) for p in prep.r_pods[c]))
                        for c in prep.candidates}
    _classes(prep)      # the receiver index and the consolidation phase both use them
    return prep


def _classes(prep):
    """Providers that no static filter can tell apart (same labels a pod or volume looks at, same
    taints and schedulability) share a class; a pod's static filters are checked once per class."""
    snap = prep.snapshot
    keys = set()
    fields = False
    for p in snap.pods:
        keys.update(p.node_selector)
        for t in p.affinity_terms or ():
            keys.update(r.key for r in t.match_expressions)
            fields = fields or bool(t.match_fields)
    for pv in snap.pvs:
        for t in pv.node_terms or ():
            keys.update(r.key for r in t.match_expressions)
            fields = fields or bool(t.match_fields)
    keys = sorted(keys)
    # With hard network topology, no class straddles a HyperNode: a class's node then answers for
    # the whole class whether a pod's HyperNode holds it (CandidateEvaluator._ordered).
    tiers = [snap.topology.at_tier(t) for t in snap.topology.tiers] if snap.constraints else []
    ids = {}
    for name in sorted(prep.alloc):
        n = snap.node_by_name[name]
        sig = (tuple((k, n.labels.get(k)) for k in keys), n.taints, n.unschedulable, name if fields else "",
               tuple(where.get(name) for where in tiers))
        cid = ids.setdefault(sig, len(ids))
        prep.class_of[name] = cid
        prep.class_rep.setdefault(cid, name)
