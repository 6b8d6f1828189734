"""Scheduler filters (FEAS-1/2), each with passing and failing cases and kube-scheduler's own reason."""
import pytest

from planner import load_objects
from planner.filters import (inter_pod_affinity, node_affinity, node_ports, node_resources_fit, node_unschedulable,
                             pod_topology_spread, run_filters, taint_toleration, volume_binding)
from planner.state import SimulatedState
from tests.builders import R, node, pod

INCOMING = "incoming"


def run(f, objs, to, name=INCOMING):
    """Filter `f` for pod `name` (taken off its node first, as a move does) against node `to`."""
    snap = load_objects(objs)
    state = SimulatedState(snap)
    p = next(p for p in snap.pods if p.name == name)
    if p.key in state.node_of:
        state.unbind(p)
    return f(p, snap.node_by_name[to], state, {})


def taint(key, effect, value=None):
    t = {"key": key, "effect": effect}
    if value is not None:
        t["value"] = value
    return t


def tol(key=None, operator=None, value=None, effect=None):
    return {k: v for k, v in (("key", key), ("operator", operator), ("value", value), ("effect", effect)) if v is not None}


# -- NodeUnschedulable ------------------------------------------------------------------------------

UNSCHEDULABLE = [
    ("schedulable-node", False, [], None),
    ("cordoned-node", True, [], "node(s) were unschedulable"),
    ("tolerates-unschedulable-taint", True, [tol("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule")], None),
    ("tolerates-everything", True, [tol(operator="Exists")], None),
    ("equal-empty-value-tolerates", True, [tol("node.kubernetes.io/unschedulable", "Equal", "")], None),
    ("wrong-effect", True, [tol("node.kubernetes.io/unschedulable", "Exists", effect="NoExecute")],
     "node(s) were unschedulable"),
    ("other-key", True, [tol("gpu", "Exists")], "node(s) were unschedulable"),
]


@pytest.mark.parametrize("cordoned,tols,want", [c[1:] for c in UNSCHEDULABLE], ids=[c[0] for c in UNSCHEDULABLE])
def test_node_unschedulable(cordoned, tols, want):
    assert run(node_unschedulable, [node("n1", unschedulable=cordoned), pod(INCOMING, tolerations=tols)], "n1") == want


# -- TaintToleration --------------------------------------------------------------------------------

BROKEN = "node(s) had untolerated taint {gpu: broken}"
TAINTS = [
    ("no-taints", [], [], None),
    ("noschedule-untolerated", [taint("gpu", "NoSchedule", "broken")], [], BROKEN),
    ("noexecute-untolerated", [taint("gpu", "NoExecute", "broken")], [], BROKEN),
    ("prefernoschedule-ignored", [taint("gpu", "PreferNoSchedule", "broken")], [], None),
    ("empty-value-in-reason", [taint("dedicated", "NoSchedule")], [], "node(s) had untolerated taint {dedicated: }"),
    ("equal-same-value", [taint("gpu", "NoSchedule", "broken")], [tol("gpu", "Equal", "broken", "NoSchedule")], None),
    ("operator-omitted-means-equal", [taint("gpu", "NoSchedule", "broken")], [tol("gpu", value="broken")], None),
    ("equal-value-mismatch", [taint("gpu", "NoSchedule", "broken")], [tol("gpu", "Equal", "ok", "NoSchedule")], BROKEN),
    ("exists-any-value", [taint("gpu", "NoExecute", "broken")], [tol("gpu", "Exists")], None),
    ("key-mismatch", [taint("gpu", "NoSchedule", "broken")], [tol("npu", "Exists")], BROKEN),
    ("empty-key-equal-compares-value-only", [taint("gpu", "NoSchedule", "broken")], [tol(operator="Equal", value="broken")],
     None),
    ("empty-key-exists-tolerates-all", [taint("gpu", "NoSchedule", "broken"), taint("x", "NoExecute")],
     [tol(operator="Exists")], None),
    ("empty-effect-matches-noexecute", [taint("gpu", "NoExecute", "broken")], [tol("gpu", "Equal", "broken")], None),
    ("effect-mismatch", [taint("gpu", "NoExecute", "broken")], [tol("gpu", "Exists", effect="NoSchedule")], BROKEN),
    ("empty-key-exists-with-effect", [taint("gpu", "NoExecute", "broken")], [tol(operator="Exists", effect="NoSchedule")],
     BROKEN),
    ("second-taint-reported", [taint("a", "NoSchedule", "1"), taint("gpu", "NoSchedule", "broken")], [tol("a", "Exists")],
     BROKEN),
    ("prefer-untolerated-noschedule-tolerated", [taint("p", "PreferNoSchedule"), taint("gpu", "NoSchedule", "broken")],
     [tol("gpu", "Exists")], None),
    ("unknown-operator-never", [taint("gpu", "NoSchedule", "broken")], [tol("gpu", "Matches", "broken")], BROKEN),
    ("lt-taint-below", [taint("gpu", "NoSchedule", "3")], [tol("gpu", "Lt", "5")], None),
    ("lt-taint-not-below", [taint("gpu", "NoSchedule", "5")], [tol("gpu", "Lt", "5")],
     "node(s) had untolerated taint {gpu: 5}"),
    ("gt-taint-above", [taint("gpu", "NoSchedule", "9")], [tol("gpu", "Gt", "5")], None),
    ("gt-non-integer", [taint("gpu", "NoSchedule", "broken")], [tol("gpu", "Gt", "5")], BROKEN),
]


@pytest.mark.parametrize("taints,tols,want", [c[1:] for c in TAINTS], ids=[c[0] for c in TAINTS])
def test_taint_toleration(taints, tols, want):
    assert run(taint_toleration, [node("n1", taints=taints), pod(INCOMING, tolerations=tols)], "n1") == want


# -- NodeAffinity -----------------------------------------------------------------------------------

NA = "node(s) didn't match Pod's node affinity/selector"


def required(*terms):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key, op, *values):
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


AFFINITY = [
    ("nothing-asked", {}, None, None),
    ("selector-match", {"zone": "a"}, None, None),
    ("selector-mismatch", {"zone": "b"}, None, NA),
    ("selector-missing-label", {"rack": "r1"}, None, NA),
    ("selector-empty-value-needs-label", {"rack": ""}, None, NA),
    ("selector-and", {"zone": "a", "gpu": "910b"}, None, NA),
    ("term-in", None, required({"matchExpressions": [expr("zone", "In", "a", "b")]}), None),
    ("term-notin", None, required({"matchExpressions": [expr("zone", "NotIn", "a")]}), NA),
    ("term-exists", None, required({"matchExpressions": [expr("cards", "Exists")]}), None),
    ("term-doesnotexist", None, required({"matchExpressions": [expr("cards", "DoesNotExist")]}), NA),
    ("term-gt", None, required({"matchExpressions": [expr("cards", "Gt", "7")]}), None),
    ("term-lt", None, required({"matchExpressions": [expr("cards", "Lt", "8")]}), NA),
    ("terms-or", None, required({"matchExpressions": [expr("zone", "In", "b")]},
                                {"matchExpressions": [expr("zone", "In", "a")]}), None),
    ("term-and", None, required({"matchExpressions": [expr("zone", "In", "a"), expr("cards", "Gt", "8")]}), NA),
    ("match-fields-name", None, required({"matchFields": [expr("metadata.name", "In", "n1")]}), None),
    ("match-fields-other-name", None, required({"matchFields": [expr("metadata.name", "In", "n2")]}), NA),
    ("empty-term-matches-nothing", None, required({}), NA),
    ("selector-and-affinity-both-needed", {"zone": "b"}, required({"matchExpressions": [expr("zone", "In", "a")]}), NA),
    ("selector-and-affinity-both-hold", {"zone": "a"}, required({"matchFields": [expr("metadata.name", "NotIn", "n9")]}),
     None),
]


@pytest.mark.parametrize("selector,affinity,want", [c[1:] for c in AFFINITY], ids=[c[0] for c in AFFINITY])
def test_node_affinity(selector, affinity, want):
    n = node("n1", labels={"zone": "a", "cards": "8"})
    assert run(node_affinity, [n, pod(INCOMING, node_selector=selector, affinity=affinity)], "n1") == want


# -- NodeResourcesFit -------------------------------------------------------------------------------

FIT = [
    ("fits-exactly", dict(cards=8, cpu="64", memory="512Gi"), None),
    ("insufficient-cards", dict(cards=9), f"Insufficient {R}"),
    ("insufficient-cpu", dict(cpu="64001m"), "Insufficient cpu"),
    ("insufficient-memory", dict(memory="513Gi"), "Insufficient memory"),
    ("insufficient-ephemeral", dict(extra={"ephemeral-storage": "101Gi"}), "Insufficient ephemeral-storage"),
    ("insufficient-hugepages", dict(extra={"hugepages-2Mi": "2Gi"}), "Insufficient hugepages-2Mi"),
    ("extended-absent-from-node", dict(extra={"example.com/fpga": "1"}), "Insufficient example.com/fpga"),
    ("zero-request-of-absent-resource", dict(extra={"example.com/fpga": "0"}), None),
    ("cpu-reported-before-memory-and-cards", dict(cpu="65", memory="600Gi", cards=9), "Insufficient cpu"),
    ("memory-before-extended", dict(memory="600Gi", cards=9), "Insufficient memory"),
    ("init-container-counts", dict(cards=1, init_containers=[{"name": "i", "resources": {"requests": {"cpu": "65"}}}]),
     "Insufficient cpu"),
    ("overhead-counts", dict(cpu="64", overhead={"cpu": "1m"}), "Insufficient cpu"),
]


def fit_node(**kw):
    n = node("n1", cards=8, cpu="64", memory="512Gi", **kw)
    n["status"]["allocatable"].update({"ephemeral-storage": "100Gi", "hugepages-2Mi": "1Gi"})
    return n


@pytest.mark.parametrize("kw,want", [c[1:] for c in FIT], ids=[c[0] for c in FIT])
def test_node_resources_fit(kw, want):
    assert run(node_resources_fit, [fit_node(), pod(INCOMING, **kw)], "n1") == want


EXISTING = [
    ("free-after-existing", [pod("a", cards=6, on="n1")], dict(cards=2), 110, None),
    ("short-after-existing", [pod("a", cards=6, on="n1")], dict(cards=3), 110, f"Insufficient {R}"),
    ("cpu-used-by-non-card-pod", [pod("ds", cards=0, cpu="63", on="n1")], dict(cards=1, cpu="2"), 110, "Insufficient cpu"),
    ("terminal-pods-free-their-share", [pod("done", cards=8, on="n1", phase="Succeeded"),
                                        pod("failed", cards=8, on="n1", phase="Failed")], dict(cards=8), 1, None),
    ("terminating-pods-still-count", [pod("going", cards=8, on="n1", deleting=True)], dict(cards=1), 110,
     f"Insufficient {R}"),
    ("pending-pods-do-not-count", [pod("pending", cards=8)], dict(cards=8), 1, None),
    ("too-many-pods", [pod("a", cards=0, on="n1"), pod("b", cards=0, on="n1")], dict(cards=0), 2, "Too many pods"),
    ("too-many-pods-before-resources", [pod("a", cards=8, on="n1")], dict(cards=1), 1, "Too many pods"),
    ("pod-limit-not-reached", [pod("a", cards=0, on="n1")], dict(cards=0), 2, None),
]


@pytest.mark.parametrize("others,kw,max_pods,want", [c[1:] for c in EXISTING], ids=[c[0] for c in EXISTING])
def test_node_resources_fit_counts_existing_pods(others, kw, max_pods, want):
    n = node("n1", cards=8, cpu="64", pods=max_pods)
    assert run(node_resources_fit, [n, pod(INCOMING, **kw), *others], "n1") == want


def test_pod_moving_off_its_own_node_frees_its_share():
    objs = [node("n1", cards=8), pod(INCOMING, cards=8, on="n1")]
    assert run(node_resources_fit, objs, "n1") is None


# -- cumulative simulation (FEAS-2) ---------------------------------------------------------------

def test_two_moves_that_together_overfill_a_node_are_caught():
    snap = load_objects([node("n1", cards=8), node("n3", cards=8), pod("a", cards=2, on="n1"),
                         pod("b", cards=3, on="n1"), pod("c", cards=4, on="n3")])
    state = SimulatedState(snap)
    a, b = (next(p for p in snap.pods if p.name == n) for n in "ab")
    n3 = snap.node_by_name["n3"]
    assert node_resources_fit(a, n3, state, {}) is None and node_resources_fit(b, n3, state, {}) is None
    mark = state.fork()
    state.move(a, "n3")
    assert state.free("n3", R) == 2
    assert node_resources_fit(b, n3, state, {}) == f"Insufficient {R}"
    state.revert(mark)
    assert node_resources_fit(b, n3, state, {}) is None and state.free("n3", R) == 4


def test_host_ports_are_cumulative_too():
    snap = load_objects([node("n1"), node("n2"), pod("a", on="n1", host_ports=[80]), pod("b", on="n1", host_ports=[80])])
    state = SimulatedState(snap)
    a, b = snap.pods
    n2 = snap.node_by_name["n2"]
    state.move(a, "n2")
    assert node_ports(b, n2, state, {}) == "node(s) didn't have free ports for the requested pod ports"


# -- NodePorts ------------------------------------------------------------------------------------

NP = "node(s) didn't have free ports for the requested pod ports"


def port_pod(name, port, protocol=None, host_ip=None, on=None):
    p = pod(name, on=on)
    entry = {"containerPort": port, "hostPort": port}
    if protocol:
        entry["protocol"] = protocol
    if host_ip:
        entry["hostIP"] = host_ip
    p["spec"]["containers"][0]["ports"] = [entry]
    return p


PORTS = [
    ("no-host-ports", None, (8080,), None),
    ("free-port", (8080,), (9090,), None),
    ("same-port-same-protocol", (8080,), (8080,), NP),
    ("protocol-defaults-to-tcp", (8080, "TCP"), (8080,), NP),
    ("same-port-other-protocol", (8080, "UDP"), (8080, "TCP"), None),
    ("sctp-vs-sctp", (8080, "SCTP"), (8080, "SCTP"), NP),
    ("wildcard-wanted-specific-taken", (8080, "TCP", "10.0.0.1"), (8080, "TCP"), NP),
    ("specific-wanted-wildcard-taken", (8080, "TCP", "10.0.0.1"), (8080, "TCP", "0.0.0.0", "existing"), NP),
    ("same-specific-ip", (8080, "TCP", "10.0.0.1"), (8080, "TCP", "10.0.0.1", "existing"), NP),
    ("different-specific-ips", (8080, "TCP", "10.0.0.1"), (8080, "TCP", "10.0.0.2", "existing"), None),
]


@pytest.mark.parametrize("want_port,taken,want", [c[1:] for c in PORTS], ids=[c[0] for c in PORTS])
def test_node_ports(want_port, taken, want):
    objs = [node("n1")]
    if want_port is None:
        objs.append(pod(INCOMING))
    else:
        objs.append(port_pod(INCOMING, *want_port))
    if taken[-1] == "existing":
        taken = taken[:-1]
    objs.append(port_pod("holder", *taken, on="n1"))
    assert run(node_ports, objs, "n1") == want


def test_sidecar_host_port_blocks():
    holder = pod("holder", on="n1", init_containers=[
        {"name": "s", "restartPolicy": "Always", "ports": [{"containerPort": 53, "hostPort": 53, "protocol": "UDP"}]}])
    assert run(node_ports, [node("n1"), holder, port_pod(INCOMING, 53, "UDP")], "n1") == NP


# -- InterPodAffinity -----------------------------------------------------------------------------

AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXIST_ANTI = "node(s) didn't satisfy existing pods anti-affinity rules"
HOST = "kubernetes.io/hostname"


def ipa_nodes():
    return [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "a"}), node("n3", labels={"zone": "b"}),
            node("n4")]


def term(key, topology, ns=None, ns_selector=None, selector="set"):
    t = {"topologyKey": topology}
    if selector == "set":
        t["labelSelector"] = {"matchLabels": {"app": key}}
    if ns is not None:
        t["namespaces"] = ns
    if ns_selector is not None:
        t["namespaceSelector"] = ns_selector
    return t


def aff(*terms):
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def anti(*terms):
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


DB_N1 = pod("db", on="n1", labels={"app": "db"})
DB_OTHER_NS = pod("db", on="n1", labels={"app": "db"}, ns="other")
OTHER_NS = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other", "labels": {"team": "x"}}}

IPA = [
    ("affinity-same-zone", [DB_N1], dict(affinity=aff(term("db", "zone"))), "n2", None),
    ("affinity-other-zone", [DB_N1], dict(affinity=aff(term("db", "zone"))), "n3", AFF),
    ("affinity-hostname-same-node", [DB_N1], dict(affinity=aff(term("db", HOST))), "n1", None),
    ("affinity-hostname-other-node", [DB_N1], dict(affinity=aff(term("db", HOST))), "n2", AFF),
    ("affinity-node-missing-topology-key", [DB_N1], dict(affinity=aff(term("db", "zone"))), "n4", AFF),
    ("affinity-all-terms-one-pod", [DB_N1, pod("cache", on="n3", labels={"app": "cache"})],
     dict(affinity=aff(term("db", "zone"), term("cache", "zone"))), "n3", AFF),
    ("first-of-series-self-match", [], dict(labels={"app": "db"}, affinity=aff(term("db", "zone"))), "n3", None),
    ("first-of-series-still-needs-topology-key", [], dict(labels={"app": "db"}, affinity=aff(term("db", "zone"))), "n4",
     AFF),
    ("first-of-series-self-match-via-namespace-selector", [OTHER_NS],
     dict(ns="other", labels={"app": "db"}, affinity=aff(term("db", "zone", ns_selector={"matchLabels": {"team": "x"}}))),
     "n3", None),
    ("first-of-series-own-namespace-not-selected", [OTHER_NS],
     dict(labels={"app": "db"}, affinity=aff(term("db", "zone", ns_selector={"matchLabels": {"team": "x"}}))),
     "n3", AFF),
    ("first-of-series-without-self-match", [], dict(labels={"app": "web"}, affinity=aff(term("db", "zone"))), "n3", AFF),
    ("series-rule-off-once-a-match-exists", [DB_N1], dict(labels={"app": "db"}, affinity=aff(term("db", "zone"))), "n3",
     AFF),
    ("affinity-other-namespace-not-seen", [DB_OTHER_NS], dict(affinity=aff(term("db", "zone"))), "n1", AFF),
    ("affinity-namespaces-list", [DB_OTHER_NS], dict(affinity=aff(term("db", "zone", ns=["other"]))), "n2", None),
    ("affinity-namespace-selector", [DB_OTHER_NS, OTHER_NS],
     dict(affinity=aff(term("db", "zone", ns_selector={"matchLabels": {"team": "x"}}))), "n2", None),
    ("affinity-namespace-selector-miss", [DB_OTHER_NS, OTHER_NS],
     dict(affinity=aff(term("db", "zone", ns_selector={"matchLabels": {"team": "y"}}))), "n2", AFF),
    ("affinity-empty-namespace-selector-all", [DB_OTHER_NS], dict(affinity=aff(term("db", "zone", ns_selector={}))),
     "n2", None),
    ("affinity-nil-label-selector-matches-nothing", [DB_N1], dict(affinity=aff(term("db", "zone", selector=None))),
     "n1", AFF),
    ("anti-affinity-same-zone", [DB_N1], dict(affinity=anti(term("db", "zone"))), "n2", ANTI),
    ("anti-affinity-other-zone", [DB_N1], dict(affinity=anti(term("db", "zone"))), "n3", None),
    ("anti-affinity-node-missing-key", [DB_N1], dict(affinity=anti(term("db", "zone"))), "n4", None),
    ("anti-affinity-hostname", [DB_N1], dict(affinity=anti(term("db", HOST))), "n2", None),
    ("anti-affinity-other-namespace", [DB_OTHER_NS], dict(affinity=anti(term("db", "zone"))), "n1", None),
    ("anti-affinity-namespaces-list", [DB_OTHER_NS], dict(affinity=anti(term("db", "zone", ns=["other"]))), "n1", ANTI),
    ("existing-anti-affinity-same-zone", [pod("guard", on="n1", affinity=anti(term("web", "zone")))],
     dict(labels={"app": "web"}), "n2", EXIST_ANTI),
    ("existing-anti-affinity-other-zone", [pod("guard", on="n1", affinity=anti(term("web", "zone")))],
     dict(labels={"app": "web"}), "n3", None),
    ("existing-anti-affinity-not-matching", [pod("guard", on="n1", affinity=anti(term("web", "zone")))],
     dict(labels={"app": "api"}), "n1", None),
    ("existing-anti-affinity-own-namespace-only", [pod("guard", ns="other", on="n1", affinity=anti(term("web", "zone")))],
     dict(labels={"app": "web"}), "n1", None),
    ("existing-anti-affinity-namespace-selector", [OTHER_NS, pod("guard", ns="other", on="n1",
                                                                 affinity=anti(term("web", HOST, ns_selector={})))],
     dict(labels={"app": "web"}), "n1", EXIST_ANTI),
    ("affinity-checked-before-anti", [DB_N1], dict(affinity={**aff(term("db", "zone")), **anti(term("db", "zone"))}),
     "n3", AFF),
]


@pytest.mark.parametrize("others,kw,to,want", [c[1:] for c in IPA], ids=[c[0] for c in IPA])
def test_inter_pod_affinity(others, kw, to, want):
    assert run(inter_pod_affinity, [*ipa_nodes(), *others, pod(INCOMING, **kw)], to) == want


def test_affinity_follows_simulated_moves():
    snap = load_objects([*ipa_nodes(), DB_N1, pod(INCOMING, affinity=aff(term("db", "zone")))])
    state = SimulatedState(snap)
    db, incoming = snap.pods[0], snap.pods[1]
    n3 = snap.node_by_name["n3"]
    assert inter_pod_affinity(incoming, n3, state, {}) == AFF
    state.move(db, "n3")
    assert inter_pod_affinity(incoming, n3, state, {}) is None


# -- PodTopologySpread ----------------------------------------------------------------------------

PTS = "node(s) didn't match pod topology spread constraints"


def spread(max_skew=1, key="zone", selector=None, **extra):
    c = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
         "labelSelector": {"matchLabels": {"app": "x"}} if selector is None else selector}
    c.update(extra)
    return c


def x_pods(*nodes, **kw):
    return [pod(f"x{i}", on=n, labels={"app": "x"}, **kw) for i, n in enumerate(nodes)]


def pts_nodes(*extra):
    return [node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "a"}), node("n3", labels={"zone": "b"}),
            node("n4"), *extra]


TAINTED_C = node("n5", labels={"zone": "c"}, taints=[taint("gpu", "NoSchedule", "broken")])
ZONE_AB = required({"matchExpressions": [expr("zone", "In", "a", "b")]})

SPREAD = [
    ("empty-zone-ok", x_pods("n1", "n3"), dict(spread=[spread()]), "n5", None),
    ("zone-above-empty-zone", x_pods("n1", "n3"), dict(spread=[spread()]), "n3", PTS),
    ("skew-too-high", x_pods("n1", "n2"), dict(spread=[spread()]), "n1", PTS),
    ("skew-ok-in-empty-zone", x_pods("n1", "n2"), dict(spread=[spread()]), "n3", None),
    ("max-skew-2", x_pods("n1"), dict(spread=[spread(2)]), "n2", None),
    ("missing-label", x_pods("n1"), dict(spread=[spread()]), "n4", PTS + " (missing required label)"),
    ("self-not-matching-selector", x_pods("n1"), dict(labels={"app": "y"}, spread=[spread()]), "n2", None),
    ("other-namespace-not-counted", x_pods("n1", "n2", ns="other"), dict(spread=[spread()]), "n1", None),
    ("terminating-not-counted", x_pods("n1", "n2", deleting=True), dict(spread=[spread()]), "n1", None),
    ("min-domains-unmet-global-min-zero", x_pods("n1", "n3"), dict(affinity=ZONE_AB, spread=[spread(minDomains=3)]),
     "n1", PTS),
    ("min-domains-met", x_pods("n1", "n3"), dict(affinity=ZONE_AB, spread=[spread(minDomains=2)]), "n1", None),
    ("node-affinity-honor-drops-zone-c", x_pods("n1", "n3"), dict(affinity=ZONE_AB, spread=[spread()]), "n1", None),
    ("node-affinity-ignore-keeps-zone-c", x_pods("n1", "n3"),
     dict(affinity=ZONE_AB, spread=[spread(nodeAffinityPolicy="Ignore")]), "n1", PTS),
    ("node-taints-ignore-by-default", x_pods("n1", "n3"), dict(spread=[spread()]), "n1", PTS),
    ("node-taints-honor-drops-tainted-zone", x_pods("n1", "n3"), dict(spread=[spread(nodeTaintsPolicy="Honor")]),
     "n1", None),
    ("empty-selector-counts-nothing", x_pods("n1", "n2"), dict(spread=[spread(selector={})]), "n1", None),
    ("schedule-anyway-never-filters", x_pods("n1", "n2"), dict(spread=[spread(whenUnsatisfiable="ScheduleAnyway")]),
     "n1", None),
    ("second-constraint-fails", x_pods("n1", "n2"), dict(spread=[spread(5), spread(1, "kubernetes.io/hostname")]),
     "n1", PTS),
]


@pytest.mark.parametrize("others,kw,to,want", [c[1:] for c in SPREAD], ids=[c[0] for c in SPREAD])
def test_pod_topology_spread(others, kw, to, want):
    kw.setdefault("labels", {"app": "x"})
    # Zone c's only node is tainted: it still counts as a domain unless nodeTaintsPolicy is Honor.
    assert run(pod_topology_spread, [*pts_nodes(TAINTED_C), *others, pod(INCOMING, **kw)], to) == want


def test_spread_counts_only_nodes_with_every_constraints_key():
    # n6 has a zone but no rack: its pods count for neither constraint, so zone b looks empty.
    nodes = [node("n1", labels={"zone": "a", "rack": "r1"}), node("n3", labels={"zone": "b", "rack": "r2"}),
             node("n6", labels={"zone": "b"})]
    objs = [*nodes, *x_pods("n6", "n6"), pod(INCOMING, labels={"app": "x"}, spread=[spread(), spread(9, "rack")])]
    assert run(pod_topology_spread, objs, "n3") is None


# -- VolumeBinding --------------------------------------------------------------------------------

def pvc(name, volume=""):
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"volumeName": volume} if volume else {}}


def pv(name, nodes=None, fields=False):
    spec = {"csi": {"driver": "d"}}
    if nodes is not None:
        key = "matchFields" if fields else "matchExpressions"
        k = "metadata.name" if fields else HOST
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{key: [expr(k, "In", *nodes)]}]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


VOL = [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
VOLUMES = [
    ("no-volumes", [], None, "n2", None),
    ("missing-pvc", [], VOL, "n1", 'persistentvolumeclaim "data" not found'),
    ("pv-affinity-match", [pvc("data", "v1"), pv("v1", ["n1"])], VOL, "n1", None),
    ("pv-affinity-conflict", [pvc("data", "v1"), pv("v1", ["n1"])], VOL, "n2",
     "node(s) didn't match PersistentVolume's node affinity"),
    ("pv-pinned-to-absent-node", [pvc("data", "v1"), pv("v1", ["n9"])], VOL, "n1",
     "node(s) didn't match PersistentVolume's node affinity"),
    ("bound-to-missing-pv", [pvc("data", "v1")], VOL, "n1",
     "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"),
    ("pv-unrestricted", [pvc("data", "v1"), pv("v1")], VOL, "n2", None),
    ("pvc-unbound", [pvc("data")], VOL, "n2", None),
    ("pv-match-fields-ignored", [pvc("data", "v1"), pv("v1", ["n1"], fields=True)], VOL, "n2", None),
    ("non-pvc-volume", [], [{"name": "tmp", "emptyDir": {}}], "n2", None),
]


@pytest.mark.parametrize("objs,volumes,to,want", [c[1:] for c in VOLUMES], ids=[c[0] for c in VOLUMES])
def test_volume_binding(objs, volumes, to, want):
    assert run(volume_binding, [node("n1"), node("n2"), *objs, pod(INCOMING, volumes=volumes)], to) == want


# -- all filters ----------------------------------------------------------------------------------

RUN = [
    ("fits", node("n1"), {}, None),
    ("unschedulable-first", node("n1", unschedulable=True, taints=[taint("a", "NoSchedule")]), {},
     ("NodeUnschedulable", "node(s) were unschedulable")),
    ("taint-before-resources", node("n1", cards=0, taints=[taint("a", "NoSchedule", "b")]), {},
     ("TaintToleration", "node(s) had untolerated taint {a: b}")),
    ("resources", node("n1", cards=0), {}, ("NodeResourcesFit", f"Insufficient {R}")),
    ("affinity", node("n1"), dict(node_selector={"zone": "z"}), ("NodeAffinity", NA)),
]


@pytest.mark.parametrize("n,kw,want", [c[1:] for c in RUN], ids=[c[0] for c in RUN])
def test_run_filters_names_the_first_failing_filter(n, kw, want):
    assert run(lambda p, nd, st, c: run_filters(p, nd, st, c), [n, pod(INCOMING, **kw)], "n1") == want
