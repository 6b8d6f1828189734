"""Network topology (issue 21 part 6) on the real vc-scheduler v1.14.1 with its network-topology-aware
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
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.e2e.execute_helpers import PROTECTED, SCHEDULE_TIMEOUT, running_on
from tests.e2e.helpers import vcjob, wait_for
from tests.harness import npu_node

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
        group = self.podgroup(ns, job)
        return group

    def gang_domain(self, placed):
        """The one tier-1 HyperNode holding every node of `placed` ({pod: (node, uid)}), or fail."""
        domains = {self.hypernode_of(node) for node, _ in placed.values()}
        assert len(domains) == 1, f"the gang is split across tier-1 HyperNodes {sorted(domains)}: {placed}"
        return domains.pop()


@pytest.fixture
def tree(control_plane, fake_nodes, request):
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
