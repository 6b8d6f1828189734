"""Freed capacity counted by who can use it (RELIEF-4, issue 22 item 4): a plan may fill an idle node
only when the nodes it frees cover it one for one (planner.cover). The tainted-idle case of the issue
and its variants, through the loader and `planner.plan`, and the matching itself."""
from kubectl_repack.api.status import plan_status
from planner import load_objects, plan
from planner.cover import Cover
from planner.plan_types import REASON_INSUFFICIENT, REASON_RECOMMENDED
from tests.builders import R, gang, node, pod, spec

TRAIN = [{"key": "dedicated", "value": "train", "effect": "NoSchedule"}]
TOLERATE = [{"key": "dedicated", "operator": "Equal", "value": "train", "effect": "NoSchedule"}]


def tainted_pair(spare=None, cards=6, **spare_kw):
    """worker-0 and worker-1, tainted dedicated=train, hold `cards` of 8 each (together more than
    one node holds); worker-2 is idle (by default untainted, 16 cards: it could take both)."""
    objs = [node("worker-0", taints=TRAIN), node("worker-1", taints=TRAIN),
            spare or node("worker-2", cards=16, **spare_kw)]
    objs += gang("a", workers=["worker-0"], cards=cards, tolerations=TOLERATE)
    objs += gang("b", workers=["worker-1"], cards=cards, tolerations=TOLERATE)
    return objs


def moved_to(p):
    return {m.to_node for m in p.moves}


def test_tainted_nodes_are_not_emptied_into_the_only_untainted_idle_node():
    # The case: emptying both tainted nodes into worker-2 reads 2 freed - 1 re-occupied, but
    # an 8-card job without the toleration just lost the only node it could use.
    p = plan(load_objects(tainted_pair()), spec())
    assert p.outcome == REASON_INSUFFICIENT
    assert not p.moves and not p.freed_nodes and not p.reoccupied
    assert "idle node(s) worker-2 kept free (1 node(s) with 16 huawei.com/ascend-1980, untainted)" in p.message
    assert "2 node(s) with 8 huawei.com/ascend-1980, tainted dedicated=train:NoSchedule" in p.message
    assert plan_status(p)["conditions"][0]["reason"] == REASON_INSUFFICIENT


def test_an_idle_node_with_the_same_taint_and_size_may_take_them():
    # worker-2 carries the same taint and 8 cards: every pod that could use it can use a freed node.
    spare = node("worker-2", cards=8, taints=TRAIN)
    objs = [node("worker-0", taints=TRAIN), node("worker-1", taints=TRAIN), spare]
    objs += gang("a", workers=["worker-0"], cards=3, tolerations=TOLERATE)
    objs += gang("b", workers=["worker-1"], cards=3, tolerations=TOLERATE)
    # each tainted node also runs a CPU hog (63 of 64 cores with its own pod), so neither can take the other's pod: only worker-2 can
    objs += [pod("hog-0", cards=0, on="worker-0", cpu="63"), pod("hog-1", cards=0, on="worker-1", cpu="63")]
    p = plan(load_objects(objs), spec())
    assert p.outcome == REASON_RECOMMENDED
    assert sorted(p.freed_nodes) == ["worker-0", "worker-1"] and p.reoccupied == ("worker-2",)
    assert moved_to(p) == {"worker-2"}
    assert [c.text(R) for c in p.freed_capacity] == [
        "2 node(s) with 8 huawei.com/ascend-1980, tainted dedicated=train:NoSchedule"]
    assert plan_status(p)["plan"]["summary"]["freedCapacity"] == [
        {"nodes": 2, "allocatable": 8, "taints": ["dedicated=train:NoSchedule"]}]


def test_an_idle_node_with_more_taints_than_the_freed_ones_may_take_them():
    # Freed untainted nodes cover a tainted idle node (a pod that tolerates its taint needs no toleration
    # on them); the reverse is the case.
    objs = [node("worker-0"), node("worker-1"), node("worker-2", cards=8, taints=TRAIN)]
    objs += gang("a", workers=["worker-0"], cards=3, tolerations=TOLERATE)
    objs += gang("b", workers=["worker-1"], cards=3, tolerations=TOLERATE)
    objs += [pod("hog-0", cards=0, on="worker-0", cpu="63"), pod("hog-1", cards=0, on="worker-1", cpu="63")]
    p = plan(load_objects(objs), spec())
    assert p.outcome == REASON_RECOMMENDED and p.reoccupied == ("worker-2",)
    assert sorted(p.freed_nodes) == ["worker-0", "worker-1"]


def test_a_larger_idle_node_is_not_spent_on_smaller_freed_ones():
    # Untainted everywhere, but worker-2 has 16 cards: a 16-card pod could use it, not a freed 8-card node.
    objs = [node("worker-0"), node("worker-1"), node("worker-2", cards=16)]
    objs += gang("a", workers=["worker-0"], cards=6)
    objs += gang("b", workers=["worker-1"], cards=6)
    p = plan(load_objects(objs), spec())
    assert not p.reoccupied and "worker-2" not in moved_to(p)
    assert p.outcome == REASON_INSUFFICIENT


def test_a_pool_label_some_pod_selects_on_must_be_carried_by_the_freed_nodes():
    fast = {"pool": "fast"}
    pending = pod("waiting", cards=8, on=None, phase="Pending", node_selector=fast)

    def cluster(with_selector):
        objs = [node("worker-0"), node("worker-1"), node("worker-2", cards=8, labels=fast)]
        objs += gang("a", workers=["worker-0"], cards=3)
        objs += gang("b", workers=["worker-1"], cards=3)
        objs += [pod("hog-0", cards=0, on="worker-0", cpu="63"), pod("hog-1", cards=0, on="worker-1", cpu="63")]
        return objs + ([pending] if with_selector else [])

    # no pod selects on `pool`: the label tells no job apart, worker-2 may be filled
    p = plan(load_objects(cluster(False)), spec())
    assert p.reoccupied == ("worker-2",) and sorted(p.freed_nodes) == ["worker-0", "worker-1"]
    assert [c.text(R) for c in p.freed_capacity] == ["2 node(s) with 8 huawei.com/ascend-1980, untainted"]
    assert plan_status(p)["plan"]["summary"]["freedCapacity"] == [{"nodes": 2, "allocatable": 8}]
    # a pod selects pool=fast: only worker-2 can host it, the freed nodes cannot
    p = plan(load_objects(cluster(True)), spec())
    assert not p.reoccupied and "worker-2" not in moved_to(p)
    assert "labelled pool=fast" in p.message and not p.freed_nodes and p.freed_capacity == ()


def test_the_same_tainted_nodes_still_pack_onto_each_other():
    # Nothing is lost when the tainted nodes take each other's pods: one of them is freed.
    p = plan(load_objects(tainted_pair(cards=4)), spec())
    assert p.outcome == REASON_RECOMMENDED
    assert len(p.freed_nodes) == 1 and not p.reoccupied and "worker-2" not in moved_to(p)


def test_matching_is_one_for_one_and_finds_the_assignment_a_greedy_one_misses():
    objs = [node("free-plain"), node("free-tainted", taints=TRAIN),
            node("idle-plain"), node("idle-tainted", taints=TRAIN), node("idle-big", cards=16)]
    cover = Cover(load_objects(objs), R, ["free-plain", "free-tainted", "idle-plain", "idle-tainted", "idle-big"])
    assert cover.covers("free-plain", "idle-tainted") and cover.covers("free-plain", "idle-plain")
    assert not cover.covers("free-tainted", "idle-plain")
    assert cover.covers("free-tainted", "idle-tainted")
    assert not cover.covers("free-plain", "idle-big")
    # free-plain must go to idle-plain and free-tainted to idle-tainted (the other way round fails)
    assert cover.uncovered(["free-tainted", "free-plain"], ["idle-tainted", "idle-plain"]) == 0
    assert cover.uncovered(["free-plain"], ["idle-tainted", "idle-plain"]) == 1
    assert cover.uncovered(["free-tainted"], ["idle-plain"]) == 1
    assert cover.uncovered(["free-plain", "free-tainted"], ["idle-big"]) == 1
    assert cover.uncovered([], []) == 0 and cover.uncovered(["free-plain"], []) == 0


def test_only_pods_requesting_the_resource_count_and_each_selection_only_where_it_picks():
    def cluster(*extra):
        objs = [node("worker-0"), node("worker-1"), node("worker-2", cards=8), node("worker-3", cards=8)]
        objs += gang("a", workers=["worker-0"], cards=3)
        objs += gang("b", workers=["worker-1"], cards=3)
        objs += [pod("hog-0", cards=0, on="worker-0", cpu="63"), pod("hog-1", cards=0, on="worker-1", cpu="63")]
        # worker-3 is busy with a pod pinned to it: only worker-2 is idle
        objs += [pod("pinned-busy", cards=8, on="worker-3", node_selector={"kubernetes.io/hostname": "worker-3"})]
        return objs + list(extra)

    # a DaemonSet-like pod pinned to worker-2 by hostname, requesting no cards: not a user of the cards
    agent = pod("agent", cards=0, on="worker-2", node_selector={"kubernetes.io/hostname": "worker-2"})
    p = plan(load_objects(cluster(agent)), spec())
    assert p.reoccupied == ("worker-2",) and sorted(p.freed_nodes) == ["worker-0", "worker-1"]
    # the card pod pinned to worker-3 by hostname constrains worker-3 only, not every node's hostname
    p = plan(load_objects(cluster()), spec())
    assert p.reoccupied == ("worker-2",)
    # a pending card pod pinned to worker-2 itself: only worker-2 can take it, so it stays free
    waiting = pod("waiting", cards=8, phase="Pending", node_selector={"kubernetes.io/hostname": "worker-2"})
    p = plan(load_objects(cluster(waiting)), spec())
    assert not p.reoccupied and "worker-2" not in moved_to(p)
