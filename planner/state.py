"""Cumulative scheduling state on a fork (FEAS-2): every planned move updates it.

`fork()` returns a mark, `revert(mark)` undoes everything after it, `commit()` keeps it; the inputs
are never touched (cluster-autoscaler's Fork/Revert/Commit, done with an undo log).
"""
from functools import cached_property


class SimulatedState:
    """Where each non-terminal bound pod sits, and what every node has left."""

    def __init__(self, snapshot):
        self.snapshot = snapshot
        self.node_of = {}
        self.pods_on = {n.name: {} for n in snapshot.nodes}
        self.used = {n.name: {} for n in snapshot.nodes}
        self.ports = {n.name: {} for n in snapshot.nodes}
        self._log = []
        # planner.topology.Constraint -> HyperNode a trace places that gang in while none of it is
        # bound (vc-scheduler places such a gang as one unit in one HyperNode)
        self.domains = {}
        # pods the plan moves in any case (a pass realising a known placement) and where each bound
        # pod started: planner.filters.topology_domain does not let them anchor their gang at home
        self.leaving = frozenset()
        self.home = {}
        for p in snapshot.pods:
            if p.node_name and not p.terminal and p.node_name in self.pods_on:
                self._add(p, p.node_name)
                self.home[p.key] = p.node_name

    def copy(self) -> "SimulatedState":
        """An independent state equal to this committed one (what each planning pass starts from:
        copying the tables is several times cheaper than placing every pod again)."""
        if self._log:
            raise AssertionError("planner bug: copy of a state with uncommitted changes")
        new = object.__new__(SimulatedState)
        new.snapshot = self.snapshot
        new.node_of = dict(self.node_of)
        new.pods_on = {n: dict(pods) for n, pods in self.pods_on.items()}
        new.used = {n: dict(used) for n, used in self.used.items()}
        new.ports = {n: dict(ports) if ports else {} for n, ports in self.ports.items()}
        new._log = []
        new.domains = dict(self.domains)
        new.leaving = self.leaving
        new.home = self.home          # where each pod started: never changed after construction
        return new

    # -- primitive changes -------------------------------------------------------------------
    def _add(self, pod, node):
        self.node_of[pod.key] = node
        self.pods_on[node][pod.key] = pod
        used = self.used[node]
        for r, v in pod.requests.items():
            used[r] = used.get(r, 0) + v
        ports = self.ports[node]
        for hp in pod.host_ports:
            ports[hp] = ports.get(hp, 0) + 1

    def _remove(self, pod):
        node = self.node_of.pop(pod.key)
        del self.pods_on[node][pod.key]
        used = self.used[node]
        for r, v in pod.requests.items():
            used[r] -= v
        ports = self.ports[node]
        for hp in pod.host_ports:
            ports[hp] -= 1
            if not ports[hp]:
                del ports[hp]
        return node

    # -- public API ----------------------------------------------------------------------------
    def move(self, pod, to_node):
        """Simulate evicting `pod` and binding its replacement on `to_node`."""
        src = self._remove(pod)
        self._add(pod, to_node)
        self._log.append((pod, src, to_node))

    def unbind(self, pod):
        """Take `pod` off its node (the first half of a move, while its receiver is searched)."""
        src = self._remove(pod)
        self._log.append((pod, src, None))
        return src

    def bind(self, pod, node):
        """Put an unbound pod on `node` (the second half of a move)."""
        self._add(pod, node)
        self._log.append((pod, None, node))

    def fork(self) -> int:
        return len(self._log)

    def revert(self, mark: int):
        while len(self._log) > mark:
            pod, src, dst = self._log.pop()
            if dst is not None:
                self._remove(pod)
            if src is not None:
                self._add(pod, src)

    def commit(self):
        self._log.clear()

    def free(self, node, resource) -> int:
        alloc = self.snapshot.node_by_name[node].allocatable.get(resource, 0)
        return alloc - self.used[node].get(resource, 0)

    def amount(self, node, resource) -> int:
        return self.used[node].get(resource, 0)

    @cached_property
    def anti_affinity_pods(self) -> list:
        """The snapshot's pods that carry required anti-affinity terms (listed once per state; where
        each sits is `node_of`)."""
        return [p for p in self.snapshot.pods if p.pod_anti_affinity]

    def all_pods(self):
        for node, pods in self.pods_on.items():
            for p in pods.values():
                yield p, node
