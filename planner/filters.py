"""Scheduler filters (FEAS-1) as small named units, worded like kube-scheduler's own reasons.

Volcano's `predicates` plugin runs these same upstream filters, so a move that passes all of them
here would pass there on the same state. Each filter is `f(pod, node, state, cache) -> str | None`:
None when the node fits, else the scheduler's reason. `cache` lives for one placement attempt
(state unchanged), so cluster-wide counts for inter-pod constraints are computed once per attempt.
"""
from .selectors import parse_int64, selector_matches, terms_match

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"


def tolerates(toleration, key, value, effect) -> bool:
    """corev1 Toleration.ToleratesTaint: empty effect = all effects, empty key = all keys,
    Exists = any value, Equal (or "") = same value, Lt/Gt = integer comparison of the values."""
    if toleration.effect and toleration.effect != effect:
        return False
    if toleration.key and toleration.key != key:
        return False
    op = toleration.operator
    if op in ("Equal", ""):
        return toleration.value == value
    if op == "Exists":
        return True
    if op in ("Lt", "Gt"):
        want, have = parse_int64(toleration.value), parse_int64(value)
        if want is None or have is None:
            return False
        return have < want if op == "Lt" else have > want
    return False


def node_unschedulable(pod, node, state, cache):
    if node.unschedulable and not any(tolerates(t, UNSCHEDULABLE_TAINT, "", "NoSchedule") for t in pod.tolerations):
        return "node(s) were unschedulable"


def taint_toleration(pod, node, state, cache):
    for taint in node.taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(tolerates(t, taint.key, taint.value, taint.effect) for t in pod.tolerations):
            return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def node_affinity(pod, node, state, cache):
    for k, v in pod.node_selector.items():
        if node.labels.get(k) != v:
            return "node(s) didn't match Pod's node affinity/selector"
    if not terms_match(pod.affinity_terms, node):
        return "node(s) didn't match Pod's node affinity/selector"


def volume_binding(pod, node, state, cache):
    snap = state.snapshot
    for claim in pod.pvc_names:
        pvc = snap.pvc_by_key.get(f"{pod.namespace}/{claim}")
        if pvc is None:
            return f'persistentvolumeclaim "{claim}" not found'
        if not pvc.volume_name:
            continue        # unbound: provisioning is not simulated (needs StorageClasses)
        pv = snap.pv_by_name.get(pvc.volume_name)
        if pv is None:
            return "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
        if not terms_match(pv.node_terms, node, match_fields=False):
            # Worded as since Kubernetes 1.33 (kubernetes#129887); older releases said
            # "node(s) had volume node affinity conflict".
            return "node(s) didn't match PersistentVolume's node affinity"


_CORE_ORDER = {"cpu": 0, "memory": 1, "ephemeral-storage": 2}


def node_resources_fit(pod, node, state, cache):
    alloc = node.allocatable
    used = state.used[node.name]
    if len(state.pods_on[node.name]) + 1 > alloc.get("pods", 0):
        return "Too many pods"
    short = [r for r, v in pod.requests.items()
             if r != "pods" and v > alloc.get(r, 0) - used.get(r, 0)]
    if short:
        short.sort(key=lambda r: (_CORE_ORDER.get(r, 3), r))
        return f"Insufficient {short[0]}"


def _ports_conflict(a, b) -> bool:
    return (a.port == b.port and a.protocol == b.protocol
            and (a.host_ip == b.host_ip or "0.0.0.0" in (a.host_ip, b.host_ip)))


def node_ports(pod, node, state, cache):
    if not pod.host_ports:
        return None
    taken = state.ports[node.name]
    for want in pod.host_ports:
        if any(_ports_conflict(want, have) for have in taken):
            return "node(s) didn't have free ports for the requested pod ports"


def _term_namespaces(term, owner_ns, snapshot):
    """The namespaces a pod-affinity term reaches: explicit list ∪ selector; neither = owner's own."""
    if not term.namespaces and term.namespace_selector is None:
        return frozenset({owner_ns})
    names = set(term.namespaces)
    if term.namespace_selector is not None:
        for ns, labels in snapshot.namespace_labels.items():
            if selector_matches(term.namespace_selector, labels):
                names.add(ns)
    return frozenset(names)


def _term_matches(term, term_ns, pod):
    return pod.namespace in term_ns and term.label_selector is not None and selector_matches(term.label_selector, pod.labels)


def _anti_affinity_holders(state):
    """Pods in the simulated state that carry required anti-affinity terms, each with its node."""
    return [(p, state.node_of[p.key]) for p in state.anti_affinity_pods if p.key in state.node_of]


def inter_pod_affinity(pod, node, state, cache):
    if not pod.pod_affinity and not pod.pod_anti_affinity and not state.anti_affinity_pods:
        return None     # no term of its own and none of any pod's: nothing below can refuse
    snap = state.snapshot
    if "ipa" not in cache:
        # Existing pods whose anti-affinity the incoming pod would violate, by topology pair.
        forbidden = set()
        for other, onode in _anti_affinity_holders(state):
            if other.key == pod.key:
                continue
            for term in other.pod_anti_affinity:
                if _term_matches(term, _term_namespaces(term, other.namespace, snap), pod):
                    v = snap.node_by_name[onode].labels.get(term.topology_key)
                    if v is not None:
                        forbidden.add((term.topology_key, v))
        aff_terms = [(t, _term_namespaces(t, pod.namespace, snap)) for t in pod.pod_affinity]
        anti_terms = [(t, _term_namespaces(t, pod.namespace, snap)) for t in pod.pod_anti_affinity]
        aff_counts, anti_pairs = {}, set()
        if aff_terms or anti_terms:
            for other, onode in state.all_pods():
                if other.key == pod.key:
                    continue
                labels = snap.node_by_name[onode].labels
                if aff_terms and all(_term_matches(t, ns, other) for t, ns in aff_terms):
                    for t, _ in aff_terms:
                        v = labels.get(t.topology_key)
                        if v is not None:
                            aff_counts[(t.topology_key, v)] = aff_counts.get((t.topology_key, v), 0) + 1
                for t, ns in anti_terms:
                    if _term_matches(t, ns, other):
                        v = labels.get(t.topology_key)
                        if v is not None:
                            anti_pairs.add((t.topology_key, v))
        # Upstream merges the incoming pod's namespace selectors into its namespace lists before
        # podMatchesAllAffinityTerms, so the resolved namespace sets are the right test here.
        self_match = bool(aff_terms) and all(_term_matches(t, ns, pod) for t, ns in aff_terms)
        cache["ipa"] = (forbidden, aff_terms, aff_counts, anti_terms, anti_pairs, self_match)
    forbidden, aff_terms, aff_counts, anti_terms, anti_pairs, self_match = cache["ipa"]
    labels = node.labels
    if aff_terms:
        exist = True
        for t, _ in aff_terms:
            v = labels.get(t.topology_key)
            if v is None:
                return "node(s) didn't match pod affinity rules"
            if aff_counts.get((t.topology_key, v), 0) <= 0:
                exist = False
        if not exist and not (not aff_counts and self_match):
            return "node(s) didn't match pod affinity rules"
    for t, _ in anti_terms:
        v = labels.get(t.topology_key)
        if v is not None and (t.topology_key, v) in anti_pairs:
            return "node(s) didn't match pod anti-affinity rules"
    for key, v in forbidden:
        if labels.get(key) == v:
            return "node(s) didn't satisfy existing pods anti-affinity rules"


def _spread_eligible(pod, c, node):
    # A node counts for no constraint unless it carries every constraint's topology key.
    if any(other.topology_key not in node.labels for other in pod.spread):
        return False
    if c.node_affinity_policy == "Honor" and node_affinity(pod, node, None, None) is not None:
        return False
    if c.node_taints_policy == "Honor" and taint_toleration(pod, node, None, None) is not None:
        return False
    return True


def pod_topology_spread(pod, node, state, cache):
    if not pod.spread:
        return None
    snap = state.snapshot
    if "pts" not in cache:
        computed = []
        for c in pod.spread:
            counts, eligible_nodes = {}, set()
            for n in snap.nodes:
                if _spread_eligible(pod, c, n):
                    eligible_nodes.add(n.name)
                    counts.setdefault(n.labels[c.topology_key], 0)
            for other, onode in state.all_pods():
                # An empty selector counts nothing upstream (countPodsMatchSelector), a nil one matches nothing.
                if (onode in eligible_nodes and other.key != pod.key and not other.terminating
                        and other.namespace == pod.namespace and c.label_selector is not None
                        and (c.label_selector.match_labels or c.label_selector.match_expressions)
                        and selector_matches(c.label_selector, other.labels)):
                    v = snap.node_by_name[onode].labels[c.topology_key]
                    counts[v] += 1
            min_match = min(counts.values()) if counts else 0
            if len(counts) < c.min_domains:
                min_match = 0
            self_match = 1 if c.label_selector is not None and selector_matches(c.label_selector, pod.labels) else 0
            computed.append((c, counts, min_match, self_match))
        cache["pts"] = computed
    for c, counts, min_match, self_match in cache["pts"]:
        v = node.labels.get(c.topology_key)
        if v is None:
            return "node(s) didn't match pod topology spread constraints (missing required label)"
        if counts.get(v, 0) + self_match - min_match > c.max_skew:
            return "node(s) didn't match pod topology spread constraints"


def network_topology(pod, node, state, cache):
    """Volcano's network-topology-aware plugin (TOPO-2): a pod of a gang with hard network topology
    binds only inside the HyperNode that holds the gang's bound pods (its highest ancestor within the
    allowed tier), or, when none is bound, inside one HyperNode of an allowed tier
    (planner.topology); `state.domains` may pin such a gang to one of them while a trace tries it."""
    cons = state.snapshot.constraints.get(pod.key)
    if not cons:
        return None
    for c in cons:
        got = cache.get(c)
        if got is None:
            got = cache[c] = topology_domain(c, pod.key, state)
        name, allowed, bound = got
        if node.name in allowed:
            continue
        if name:
            return f"receiver {node.name} is outside HyperNode {name} of {c.what} (tier {c.tier}, hard)"
        if bound:
            return (f"{c.what} (tier {c.tier}, hard) has pods outside any one HyperNode of tier <= {c.tier}: "
                    "vc-scheduler binds no further pod of it")
        return f"receiver {node.name} is in no HyperNode of tier <= {c.tier} ({c.what}, hard)"
    return None


def topology_domain(c, pod_key, state):
    """(HyperNode name or "", the nodes a pod of constraint `c` (planner.topology.Constraint) may take
    on `state` now, is any other pod of it bound?)."""
    topo = state.snapshot.topology
    node_of, leaving, home = state.node_of, state.leaving, state.home
    # a pod the plan moves anyway (a pass realising a known placement) does not anchor its gang while
    # it is still on its own node: the executor evicts a PodGroup's pods together
    bound = {node_of[k] for k in c.members
             if k != pod_key and k in node_of and not (k in leaving and node_of[k] == home.get(k))}
    if bound:
        name, allowed = topo.anchor_domain(bound, c.tier)
        return name, allowed, True
    pinned = state.domains.get(c)
    if pinned is not None:
        return pinned, topo.nodes[pinned], False
    return "", topo.reachable(c.tier), False


STATIC_FILTERS = (("NodeUnschedulable", node_unschedulable), ("TaintToleration", taint_toleration),
                  ("NodeAffinity", node_affinity), ("VolumeBinding", volume_binding))
DYNAMIC_FILTERS = (("NodeResourcesFit", node_resources_fit), ("NodePorts", node_ports),
                   ("NetworkTopology", network_topology),
                   ("InterPodAffinity", inter_pod_affinity), ("PodTopologySpread", pod_topology_spread))
FILTERS = STATIC_FILTERS + DYNAMIC_FILTERS


def run_filters(pod, node, state, cache, filters=FILTERS):
    """First failing filter as (name, reason), or None when the pod fits the node."""
    for name, f in filters:
        reason = f(pod, node, state, cache)
        if reason is not None:
            return name, reason
    return None


def has_interpod_constraints(pod) -> bool:
    """Pods whose feasibility depends on other pods' placement beyond their receiver's own state."""
    return bool(pod.pod_affinity or pod.pod_anti_affinity or pod.spread)
