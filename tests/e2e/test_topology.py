"""Network topology (TOPO-1 to TOPO-4) on the real vc-scheduler v1.14.1 with its network-topology-aware
plugin (tests/harness/controlplane.py SCHEDULER_CONF) and HyperNode objects for the fake NPU nodes.

Every test makes its own tree: four 8-card nodes, two tier-1 HyperNodes of two nodes each
(`<tag>-s0` = n0, n1 and `<tag>-s1` = n2, n3, exactMatch members) under one tier-2 HyperNode
(`<tag>-top`), and deletes the HyperNodes when it ends. Its nodes carry their own
accelerator-pool label, which the runs' scope selects, so nothing of another test counts.

1. The foundation: vc-scheduler itself keeps a `networkTopology: {mode: hard, highestTierAllowed: 1}`
   VCJob needing two whole nodes Pending while the two free nodes sit in different tier-1
   HyperNodes, and runs it once two nodes of one tier-1 HyperNode are free.
2-4. The product as a user runs it: `kubectl apply` of an Execute RepackRun, carried out by the
   controller `kubectl repack install` put on the real node (as tests/e2e/test_installed.py does;
   `apply --local` would leave out the installed webhook and coordinator, which place the
   replacements):
   - a run with `networkTopology: {hyperNodeTier: 1, nodeBlockSize: 2, requiredNodeBlocks: 1}` frees
     two nodes in one HyperNode and the pending hard-topology job runs there;
   - a running hard-topology gang whose pod sits on the node being vacated stays inside one tier-1
     HyperNode, its replacement bound (vc-scheduler v1.14.1 binds a nominated node without checking
     the HyperNode, so a wrong plan would split the gang: the scheduler is no safety net);
   - an unreachable requiredNodeBlocks ends Succeeded, RequiredNodeBlocksNotMet, nothing evicted.
"""
from __future__ import annotations

import json
import time
import uuid

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.e2e.execute_helpers import (ELIGIBLE, GROUP, PROTECTED, SCHEDULE_TIMEOUT, VERSION, delete_runs,
                                       get_run, reason_of, running_on)
from tests.e2e.helpers import absent, built_image, repack, vcjob, wait_for
from tests.harness import NPU_RESOURCE, npu_node
from tests.harness.realnode import NODE_LABEL
from tests.e2e.test_installed import audit_evictions, pod_logs

pytestmark = pytest.mark.e2e

TOPOLOGY = ("topology.volcano.sh", "v1alpha1", "hypernodes")
NAMESPACE = "repack-system"
# How long a job must stay unscheduled to count as Pending: vc-scheduler runs a session every
# 500 ms (the harness's --schedule-period), so this is a few dozen sessions.
HOLD_SECONDS = 8.0
FIGURES: dict = {}


# ---- the tree ---------------------------------------------------------------------------------
class Tree:
    """Four nodes n0..n3 of a pool of their own, and the HyperNodes s0 = {n0, n1}, s1 = {n2, n3}
    (tier 1) under top (tier 2). Nodes are added by the test (when it needs them: the order in
    which nodes appear is how a test steers where vc-scheduler first puts a pod)."""

    def __init__(self, api, fake_nodes, prefix):
        self.tag = f"{prefix}-{uuid.uuid4().hex[:4]}"
        self.pool = f"topo-{self.tag}"
        self.nodes = tuple(f"{self.tag}-n{i}" for i in range(4))
        self.s0, self.s1, self.top = f"{self.tag}-s0", f"{self.tag}-s1", f"{self.tag}-top"
        self.tier1 = {self.s0: set(self.nodes[:2]), self.s1: set(self.nodes[2:])}
        self._api, self._fake_nodes = api, fake_nodes
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.made: list[str] = []

    def add_nodes(self, *indexes):
        self._fake_nodes(*(npu_node(self.nodes[i], cards=8, pool=self.pool) for i in indexes))

    def create_hypernodes(self):
        def hypernode(name, tier, kind, members):
            return {"apiVersion": "/".join(TOPOLOGY[:2]), "kind": "HyperNode", "metadata": {"name": name},
                    "spec": {"tier": tier, "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}}
                                                       for m in members]}}
        for body in (hypernode(self.s0, 1, "Node", self.nodes[:2]), hypernode(self.s1, 1, "Node", self.nodes[2:]),
                     hypernode(self.top, 2, "HyperNode", (self.s0, self.s1))):
            self.custom.create_cluster_custom_object(*TOPOLOGY, body)
            self.made.append(body["metadata"]["name"])
        # vc-scheduler learns HyperNodes from its informer; every test creates its pods after this
        # and waits for them for seconds, so the tree is in its cache long before (and a job
        # scheduled without it would run where this test expects it Pending: a failure, never a pass).
        time.sleep(1)

    def delete_hypernodes(self):
        for name in reversed(self.made):
            try:
                self.custom.delete_cluster_custom_object(*TOPOLOGY, name)
            except ApiException as e:
                if e.status != 404:
                    raise
        wait_for("this test's HyperNodes gone", lambda: not [
            h for h in self.custom.list_cluster_custom_object(*TOPOLOGY)["items"]
            if h["metadata"]["name"] in self.made] or None, timeout=30)
        self.made.clear()

    def hypernode_of(self, node):
        return next(h for h, members in self.tier1.items() if node in members)

    def job(self, ns, name, labels, tasks, pin=None, hard_tier=None):
        """A VCJob of this pool ([(task, replicas, cards)]), pinned to node index `pin` by hostname
        if given, with `networkTopology: {mode: hard, highestTierAllowed: hard_tier}` if given."""
        selector = {"kubernetes.io/hostname": self.nodes[pin]} if pin is not None else {"accelerator-pool": self.pool}
        body = vcjob(name, labels, tasks, selector)
        if hard_tier is not None:
            body["spec"]["networkTopology"] = {"mode": "hard", "highestTierAllowed": hard_tier}
        self.custom.create_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", body)
        return name

    def running(self, ns, job, timeout=SCHEDULE_TIMEOUT):
        """{pod: (node, uid)} once every pod of `job` runs."""
        return wait_for(f"{job} Running", lambda: running_on(self.core, ns, job), timeout=timeout)

    def delete_job(self, ns, job):
        self.custom.delete_namespaced_custom_object("batch.volcano.sh", "v1alpha1", ns, "jobs", job)
        wait_for(f"{job}'s pods gone", lambda: not self.core.list_namespaced_pod(
            ns, label_selector=f"volcano.sh/job-name={job}").items or None, timeout=60)

    def podgroup(self, ns, job):
        groups = [g for g in self.custom.list_namespaced_custom_object(
            "scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]
            if any(r.get("name") == job for r in g["metadata"].get("ownerReferences") or ())]
        return groups[0] if len(groups) == 1 else None

    def assert_pending(self, ns, job, replicas, why):
        """`job`'s `replicas` pods exist and none is bound for HOLD_SECONDS."""
        wait_for(f"{job}'s {replicas} pods created", lambda: len(self.core.list_namespaced_pod(
            ns, label_selector=f"volcano.sh/job-name={job}").items) == replicas or None, timeout=SCHEDULE_TIMEOUT)
        deadline = time.monotonic() + HOLD_SECONDS
        while time.monotonic() < deadline:
            bound = {p.metadata.name: p.spec.node_name for p in self.core.list_namespaced_pod(
                ns, label_selector=f"volcano.sh/job-name={job}").items if p.spec.node_name}
            assert not bound, f"{job} was scheduled although {why}: {bound}"
            time.sleep(0.5)
        return self.podgroup(ns, job)

    def gang_domain(self, placed):
        """The one tier-1 HyperNode holding every node of `placed` ({pod: (node, uid)}), or fail."""
        domains = {self.hypernode_of(node) for node, _ in placed.values()}
        assert len(domains) == 1, f"the gang is split across tier-1 HyperNodes {sorted(domains)}: {placed}"
        return domains.pop()


@pytest.fixture
def tree(control_plane, fake_nodes):
    """tree(prefix) -> a new Tree; its HyperNodes are deleted when the test ends."""
    made = []

    def make(prefix):
        t = Tree(control_plane.api_client, fake_nodes, prefix)
        made.append(t)
        return t
    yield make
    for t in made:
        t.delete_hypernodes()


# ---- 1. vc-scheduler enforces hard network topology ---------------------------------------------
def test_scheduler_keeps_a_hard_topology_job_pending_until_one_hypernode_has_room(
        control_plane, tree, make_namespace):
    t0 = time.monotonic()
    t = tree("hn-sched")
    t.create_hypernodes()
    ns = make_namespace("topo-sched")
    t.add_nodes(0, 1, 2, 3)
    # n1 and n3 hold one card each: the free nodes are n0 (s0) and n2 (s1).
    fillers = {i: t.job(ns, f"filler-{i}", PROTECTED, [("worker", 1, 1)], pin=i) for i in (1, 3)}
    for job in fillers.values():
        t.running(ns, job)
    big = t.job(ns, "hard-2x8", {"workload-type": "training"}, [("worker", 2, 8)], hard_tier=1)
    group = t.assert_pending(ns, big, 2, f"the free nodes {t.nodes[0]} ({t.s0}) and {t.nodes[2]} ({t.s1}) "
                             "are in different tier-1 HyperNodes")
    # The VCJob's networkTopology reached its PodGroup (the job controller copies it at creation).
    assert group["spec"].get("networkTopology") == {"mode": "hard", "highestTierAllowed": 1}, group["spec"]
    pending_status = group.get("status") or {}
    t.delete_job(ns, fillers[1])                 # n0 and n1 free: a whole s0
    placed = t.running(ns, big)
    assert {node for node, _ in placed.values()} == set(t.nodes[:2]), placed
    FIGURES["scheduler_seconds"] = round(time.monotonic() - t0, 1)
    print(f"\n{big} Pending while the free nodes were split (PodGroup status: "
          f"{json.dumps(pending_status.get('conditions') or pending_status.get('phase'))}); "
          f"ran on {sorted(n for n, _ in placed.values())} in {t.s0} once it was free; "
          f"{FIGURES['scheduler_seconds']}s")


# ---- the installed product ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def installed(real_node, control_plane, request):
    """`kubectl repack install --image <the built image> --node-selector <the real node>` (as
    test_installed.py does), uninstalled when the module ends."""
    t0 = time.monotonic()
    out = repack(control_plane.kubeconfig, "install", "--namespace", NAMESPACE, "--image", built_image(),
                 "--node-selector", f"{NODE_LABEL}=true", "--timeout", "240s")
    FIGURES["install_seconds"] = round(time.monotonic() - t0, 1)
    assert out.returncode == 0, out.stdout + out.stderr
    failed_before = request.session.testsfailed
    try:
        yield
    finally:
        if request.session.testsfailed > failed_before:
            print(pod_logs(control_plane))
        out = repack(control_plane.kubeconfig, "uninstall", "--namespace", NAMESPACE)
        assert out.returncode == 0, out.stdout + out.stderr
        # The modules after this one install into the same namespace: it must be gone, not Terminating.
        core = client.CoreV1Api(control_plane.api_client)
        wait_for(f"namespace {NAMESPACE} gone", lambda: absent(lambda: core.read_namespace(NAMESPACE)), timeout=120)


def execute(control_plane, tmp_path, name, tree, network_topology=None):
    """`kubectl apply` of an Execute run over the tree's pool (eligible PodGroups only, 4 cards and one
    PodGroup at most, no fragmentation threshold, no cooldown); waits for it to end."""
    spec = {
        "mode": "Execute",
        "scope": {"podGroups": {"include": {"selector": {"matchLabels": {"repack.volcano.sh/eligible": "true"}}},
                                "exclude": {"selector": {"matchLabels": {"repack.volcano.sh/protected": "true"}}}},
                  "nodes": {"include": {"selector": {"matchLabels": {"accelerator-pool": tree.pool}}}}},
        "goals": [{"resource": NPU_RESOURCE, "minFragImprovementPercent": 0}],
        "maxPerRun": {"podGroups": 1, "resources": {NPU_RESOURCE: 4}},
        "eviction": {"gracePeriodSeconds": 0},
    }
    if network_topology is not None:
        spec["networkTopology"] = network_topology
    run = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "RepackRun",
           "metadata": {"name": name, "annotations": {"repack.volcano.sh/execute-cooldown": "0s"}}, "spec": spec}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(run))
    out = control_plane.kubectl("apply", "-f", str(path), check=False)
    assert out.returncode == 0, out.stdout + out.stderr

    def finished():
        r = get_run(control_plane.api_client, name)
        return r if (r.get("status") or {}).get("phase") in ("Succeeded", "Failed") else None
    return wait_for(f"RepackRun {name} to end", finished, timeout=300)


def _status(run) -> str:
    return json.dumps(run.get("status"), indent=1)


def seed_block_layout(t, ns):
    """s0: n0 idle, n1 holds the movable `mover` (1 card); s1: n2 idle, n3 holds a protected job of 6
    cards. Free nodes: n0 and n2, one in each tier-1 HyperNode: no block of two. Moving `mover` onto
    n3 frees n1, and with it all of s0. Returns mover's {pod: (node, uid)}."""
    t.add_nodes(1)                               # alone first: vc-scheduler must put mover there
    mover = t.job(ns, "mover", ELIGIBLE, [("worker", 1, 1)])
    placed = t.running(ns, mover)
    assert {n for n, _ in placed.values()} == {t.nodes[1]}, placed
    t.add_nodes(0, 2, 3)
    t.running(ns, t.job(ns, "protected-n3", PROTECTED, [("worker", 1, 6)], pin=3))
    wait_for("the PodGroups of both jobs", lambda: len(t.custom.list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]) >= 2)
    return placed


# ---- 2. a block goal frees one HyperNode for a pending hard-topology job -----------------------
def test_block_goal_frees_a_hypernode_and_the_pending_hard_job_runs_there(
        installed, real_node, control_plane, tree, make_namespace, tmp_path):
    t0 = time.monotonic()
    api = control_plane.api_client
    t = tree("hn-block")
    t.create_hypernodes()
    ns = make_namespace("topo-block")
    mover = seed_block_layout(t, ns)
    big = t.job(ns, "hard-2x8", {"workload-type": "training", "repack.volcano.sh/protected": "true"},
                [("worker", 2, 8)], hard_tier=1)
    t.assert_pending(ns, big, 2, f"the free nodes {t.nodes[0]} and {t.nodes[2]} are in different tier-1 HyperNodes")
    name = f"topo-block-{uuid.uuid4().hex[:6]}"
    try:
        run = execute(control_plane, tmp_path, name, t,
                      {"hyperNodeTier": 1, "nodeBlockSize": 2, "requiredNodeBlocks": 1})
        st = run["status"]
        # The job first: where it runs is what the block was for (and explains a failed verification).
        placed = t.running(ns, big)
        assert {node for node, _ in placed.values()} == set(t.nodes[:2]), placed
        assert reason_of(run, "Complete") == ("True", "ExecutionCompleted"), _status(run)
        assert st["plan"]["summary"].get("nodeBlocks") == {"tier": 1, "nodeBlockSize": 2, "before": 0, "after": 1}, \
            st["plan"]["summary"]
        assert st["plan"]["freedNodes"] == [t.nodes[1]], st["plan"]
        for rec in st["relocations"]:
            assert rec["placement"]["phase"] == "Placed", rec
            assert rec["placement"]["actualNodeName"] == rec["plannedNodeName"] != t.nodes[1], rec
        assert {r["victimPodName"] for r in st["relocations"]} == set(mover)
        FIGURES["block_seconds"] = round(time.monotonic() - t0, 1)
        print(f"\nplan: {json.dumps(st['plan']['moves'])}; nodeBlocks {st['plan']['summary']['nodeBlocks']}; "
              f"result: {json.dumps(st.get('result'))}; {big} then ran on {sorted(n for n, _ in placed.values())}; "
              f"{FIGURES['block_seconds']}s")
    finally:
        delete_runs(api, [name])


# ---- 3. a hard-topology gang is moved only inside its HyperNode --------------------------------
def test_hard_gang_on_a_vacated_node_stays_inside_its_hypernode(
        installed, real_node, control_plane, tree, make_namespace, tmp_path):
    """The gang (2 pods x 2 cards, hard tier 1) has a pod on n0 and one on n1 (both s0). n1 has 3
    cards of room, n2 and n3 (s1) 2 each: a best fit that ignores topology would take n2 or n3, and
    vc-scheduler v1.14.1 would bind the nominated replacement there, splitting the gang."""
    t0 = time.monotonic()
    api = control_plane.api_client
    t = tree("hn-gang")
    t.create_hypernodes()
    ns = make_namespace("topo-gang")
    t.add_nodes(0, 1)                            # s1's nodes come later: the gang must go to s0
    temp = {i: t.job(ns, f"temp-{i}", PROTECTED, [("worker", 1, 6)], pin=i) for i in (0, 1)}
    for job in temp.values():
        t.running(ns, job)
    # 2 cards of room on each of n0 and n1: one pod on each.
    gang = t.job(ns, "hard-gang", ELIGIBLE, [("worker", 2, 2)], hard_tier=1)
    before = t.running(ns, gang)
    assert sorted(n for n, _ in before.values()) == list(t.nodes[:2]), before
    for job in temp.values():
        t.delete_job(ns, job)
    t.running(ns, t.job(ns, "protected-n1", PROTECTED, [("worker", 1, 3)], pin=1))
    t.add_nodes(2, 3)
    for i in (2, 3):
        t.running(ns, t.job(ns, f"protected-n{i}", PROTECTED, [("worker", 1, 6)], pin=i))
    wait_for("the PodGroups", lambda: len(t.custom.list_namespaced_custom_object(
        "scheduling.volcano.sh", "v1beta1", ns, "podgroups")["items"]) == 4)
    name = f"topo-gang-{uuid.uuid4().hex[:6]}"
    try:
        run = execute(control_plane, tmp_path, name, t)
        st = run["status"]
        assert run["status"]["phase"] == "Succeeded", _status(run)
        after = t.running(ns, gang, timeout=60)
        domain = t.gang_domain(after)
        for rec in st.get("relocations") or ():
            assert rec["placement"]["phase"] == "Placed", rec       # bound, never left Pending
            assert rec["placement"]["actualNodeName"] == rec["plannedNodeName"], rec
            assert t.hypernode_of(rec["plannedNodeName"]) == domain, rec
        pending = [p.metadata.name for p in t.core.list_namespaced_pod(ns).items
                   if not p.spec.node_name and p.metadata.deletion_timestamp is None]
        assert not pending, pending
        if st.get("relocations"):
            assert reason_of(run, "Complete") == ("True", "ExecutionCompleted"), _status(run)
            assert t.nodes[0] in st["result"]["freedNodes"], st["result"]
        FIGURES["gang_seconds"] = round(time.monotonic() - t0, 1)
        print(f"\nrun {reason_of(run, 'Complete')}: moves {json.dumps(st['plan'].get('moves'))}; gang before "
              f"{sorted(n for n, _ in before.values())}, after {sorted(n for n, _ in after.values())} (all in "
              f"{domain}); {FIGURES['gang_seconds']}s")
    finally:
        delete_runs(api, [name])


# ---- 4. an unreachable block goal evicts nothing -----------------------------------------------
def test_unreachable_required_node_blocks_evicts_nothing(
        installed, real_node, control_plane, tree, make_namespace, tmp_path):
    t0 = time.monotonic()
    api = control_plane.api_client
    t = tree("hn-unreachable")
    t.create_hypernodes()
    ns = make_namespace("topo-unreachable")
    mover = seed_block_layout(t, ns)
    name = f"topo-unreachable-{uuid.uuid4().hex[:6]}"
    try:
        # Two tier-1 HyperNodes of two nodes: two blocks of two at most, three asked for.
        run = execute(control_plane, tmp_path, name, t,
                      {"hyperNodeTier": 1, "nodeBlockSize": 2, "requiredNodeBlocks": 3})
        st = run["status"]
        assert st["phase"] == "Succeeded", _status(run)
        assert reason_of(run, "Complete") == ("True", "RequiredNodeBlocksNotMet"), _status(run)
        assert not st.get("relocations"), st["relocations"]
        assert not (st.get("plan") or {}).get("moves"), st["plan"]
        counts = audit_evictions(control_plane, {uid for _, uid in mover.values()})
        assert all(codes == [] for codes in counts.values()), counts
        assert running_on(t.core, ns, "mover") == mover          # the same pod, never evicted
        FIGURES["unreachable_seconds"] = round(time.monotonic() - t0, 1)
        print(f"\n{st['conditions']}\nmessage: {st.get('message')}; {FIGURES['unreachable_seconds']}s")
    finally:
        delete_runs(api, [name])
