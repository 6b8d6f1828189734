"""The replay: events, the pending queue, and a Volcano-style allocate over the planner's own filters.

Scheduler model (Volcano's allocate where it matters here): jobs are tried in queue order (priority,
then creation time); a job binds only if at least minAvailable of its pods can be placed at once
(gang all-or-nothing; a placement that falls short is rolled back), later pods of a started job bind
one by one (backfill of what fits: a job that does not fit never holds up the jobs behind it). A
node is feasible for a pod when every filter of `planner.filters` passes on the replay's state (the
static ones once per node and pod signature, the dynamic ones per placement), so the replay and the
planner share one copy of every scheduling rule. Among feasible nodes: binpack on the GPU resource
(the fullest after placement first, as Volcano's binpack plugin with the GPU weight dominant) or
least-allocated (the emptiest first). Allocation runs once per event time (a scheduling session).

Evictions follow a gang's restart semantics: when an eviction leaves a job below minAvailable the
whole gang restarts (every pod leaves after the grace period and is re-created pending) and loses
its progress since its last checkpoint (`checkpoint_s`, default 30 min); above minAvailable only the
evicted pod's work since the checkpoint is lost. A re-created pod nominated to a node (the
coordinator's placement of a relocation) tries that node first; a reservation (a targeted run's
placements, reserve-backfill's held nodes) keeps other jobs' pods off a node until it expires, as
kube-scheduler treats nominated pods.
"""
from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass, replace

from planner.filters import DYNAMIC_FILTERS, STATIC_FILTERS, run_filters
from planner.frag import frag_percent, theoretical_min
from planner.model import (GROUP_ANNOTATIONS, ClusterSnapshot, Node, NodeSelectorTerm, OwnerRef, Pod, PodGroup,
                           Requirement)

GPU = "nvidia.com/gpu"
MODEL_LABEL = "nvidia.com/gpu.product"
NAMESPACE = "replay"
MIB = 2 ** 20
BINPACK, LEAST_ALLOCATED = "binpack", "least-allocated"
_OWNER_API = "batch.volcano.sh/v1alpha1"


@dataclass(frozen=True)
class EngineSettings:
    node_order: str = BINPACK
    checkpoint_s: float = 1800.0
    grace_s: float = 30.0
    sample_s: float = 3600.0
    frag_every_samples: int = 6          # fragmentation (planner.frag) every 6th sample

    def describe(self) -> dict:
        return {"node_order": self.node_order, "checkpoint_s": self.checkpoint_s, "grace_s": self.grace_s,
                "sample_s": self.sample_s}


class Job:
    """One job's replay state (its spec is a trace.JobSpec)."""
    __slots__ = ("spec", "key", "pods", "bound", "first_start", "running_since", "progress", "end_token",
                 "done", "restarts", "failed_epoch", "nominated", "order", "gpus_total", "max_gpus", "queued", "leaving")

    def __init__(self, spec, pods, resource):
        self.spec = spec
        self.key = f"{pods[0].namespace}/{pods[0].group_name or spec.name}"
        self.pods = pods
        self.bound = {}               # pod key -> node
        self.first_start = None       # first time minAvailable pods were bound
        self.running_since = None
        self.progress = 0.0
        self.end_token = 0
        self.done = False
        self.restarts = 0
        self.failed_epoch = -1
        self.nominated = {}           # pod key -> node the coordinator nominated
        self.order = (0, spec.submit, spec.name)     # queue order: priority (all equal), creation time
        self.gpus_total = sum(p.requests.get(resource, 0) for p in pods)
        self.max_gpus = max(p.requests.get(resource, 0) for p in pods)
        self.queued = False
        self.leaving = set()          # pod keys evicted, still in their grace period

    @property
    def large(self) -> bool:
        return self.gpus_total >= 8

    def unbound_pods(self):
        return [p for p in self.pods if p.key not in self.bound and p.key not in self.leaving]


def make_node(spec, resource=GPU) -> Node:
    return Node(spec.name, {MODEL_LABEL: spec.model, "kubernetes.io/hostname": spec.name},
                {"cpu": spec.cpu_m, "memory": spec.mem_mib * MIB, resource: spec.gpus, "pods": 110})


def make_pods(spec, resource=GPU) -> list:
    """The job's pods as the planner models them: scheduled by volcano, owned by a Volcano Job of
    the job's name, in the PodGroup of that name (so every rule of planner.rules lets them move)."""
    if spec.source_pods:
        return [replace(p, node_name="", phase="Pending") for p in spec.source_pods]
    terms = (NodeSelectorTerm((Requirement(MODEL_LABEL, "In", spec.models),)),) if spec.models else None
    owner = OwnerRef(_OWNER_API, "Job", spec.name, True)
    shapes = spec.pod_shapes or ((spec.gpus, spec.cpu_m, spec.mem_mib),) * spec.pods
    return [Pod(NAMESPACE, f"{spec.name}-{i}", f"uid-{spec.name}-{i}", "", "Pending", dict(spec.labels),
                {GROUP_ANNOTATIONS[0]: spec.name}, "volcano",
                {"cpu": cpu, "memory": mem * MIB, resource: cards, "pods": 1}, owner,
                node_selector=dict(spec.node_selector), affinity_terms=terms)
            for i, (cards, cpu, mem) in enumerate(shapes)]


class FilterState:
    """The replay's state in the shape planner.filters reads (a planner.state.SimulatedState's fields)."""

    def __init__(self, snapshot):
        self.snapshot = snapshot
        self.node_of = {}
        self.pods_on = {n.name: {} for n in snapshot.nodes}
        self.used = {n.name: {} for n in snapshot.nodes}
        self.ports = {n.name: {} for n in snapshot.nodes}
        self.anti_affinity_pods = ()
        self.domains = {}
        self.leaving = frozenset()
        self.home = {}

    def all_pods(self):
        for name, pods in self.pods_on.items():
            for p in pods.values():
                yield p, name


class Replay:
    """One arm's replay of a job stream on a cluster (see the module doc)."""

    def __init__(self, node_specs, job_specs, settings: EngineSettings, warmup_s: float, horizon_s: float,
                 resource: str = GPU, extras=None):
        self.settings = settings
        self.resource = resource
        # trace.NodeSpec rows, or planner Nodes (a user's snapshot)
        self.nodes = [n if isinstance(n, Node) else make_node(n, resource) for n in node_specs]
        self.nodes = [n for n in self.nodes if n.allocatable.get(resource, 0) > 0]
        self.extras = dict(extras or {})     # other snapshot objects (PDBs, VCJobs, namespaces...)
        self.base = ClusterSnapshot.build(nodes=self.nodes)
        self.job_of = {}                     # pod key -> Job
        self.live = {}                       # jobs not done, by key
        self._bound_copies = {}              # (pod key, node) -> the pod as bound there (snapshot)
        self.node_by_name = self.base.node_by_name
        self.state = FilterState(self.base)
        self.cap = {n.name: n.allocatable[resource] for n in self.nodes}
        self.capacity = sum(self.cap.values())
        self.free = dict(self.cap)
        self.buckets = {}                 # (cap, free) -> sorted node names
        for n in sorted(self.cap):
            self.buckets.setdefault((self.cap[n], self.free[n]), []).append(n)
        self.free_hist = {}
        for f in self.free.values():
            self.free_hist[f] = self.free_hist.get(f, 0) + 1
        self.job_specs = job_specs
        self.jobs = {}
        self.pending = []                 # sorted Job.order of jobs with pods to place
        self.pending_jobs = {}
        self.new_jobs = False
        self.epoch = 0                    # bumped whenever room appears (release, reservation change)
        self.last_epoch = -1
        self.static_ok = {}               # pod signature -> frozenset of node names
        self.reserved = {}                # node -> (job key, until)
        self.events = []
        self.seq = 0
        self.now = 0.0
        self.warmup_s, self.horizon_s = warmup_s, horizon_s
        self.used_gpus = 0
        self.alloc_integral = 0.0
        self.last_change = warmup_s
        self.samples = []                 # (t, allocation ratio, frag percent or None, pending jobs)
        self.evicted_pods = 0
        self.evicted_podgroups = 0
        self.gpu_seconds_lost = 0.0
        self.on_started = []              # callbacks(job) when a job reaches minAvailable
        self.sessions = 0

    # -- events ---------------------------------------------------------------------------------
    def at(self, t, fn, *args):
        self.seq += 1
        heapq.heappush(self.events, (t, self.seq, fn, args))

    def run(self, progress=None):
        for spec in self.job_specs:
            self.at(spec.submit, self._arrive, spec)
        t = self.warmup_s
        k = 0
        while t <= self.horizon_s:
            self.at(t, self._sample, k)
            t += self.settings.sample_s
            k += 1
        while self.events:
            t = self.events[0][0]
            if t > self.horizon_s:
                break
            self.now = t
            while self.events and self.events[0][0] == t:
                _, _, fn, args = heapq.heappop(self.events)
                fn(*args)
            self.allocate()
            if progress is not None:
                progress(t)
        self.now = self.horizon_s
        self._account(self.horizon_s)

    def _arrive(self, spec):
        job = Job(spec, make_pods(spec, self.resource), self.resource)
        self.jobs[job.key] = job
        self.live[job.key] = job
        for pod in job.pods:
            self.job_of[pod.key] = job
        if spec.initial_nodes and all(n in self.cap for n in spec.initial_nodes):
            for pod, node in zip(job.pods, spec.initial_nodes):
                self.bind(pod, node)
                job.bound[pod.key] = node
            self._start(job)
            return
        self._enqueue(job)

    def _enqueue(self, job):
        if not job.queued:
            job.queued = True
            bisect.insort(self.pending, job.order)
            self.pending_jobs[job.order] = job
            self.new_jobs = True

    def _dequeue(self, job):
        if job.queued:
            job.queued = False
            self.pending.pop(bisect.bisect_left(self.pending, job.order))
            del self.pending_jobs[job.order]

    # -- card accounting --------------------------------------------------------------------------
    def _account(self, t):
        if t > self.warmup_s:
            start = max(self.last_change, self.warmup_s)
            self.alloc_integral += self.used_gpus * (min(t, self.horizon_s) - start)
            self.last_change = min(t, self.horizon_s)

    def _set_free(self, node, new):
        cap, old = self.cap[node], self.free[node]
        if old == new:
            return
        names = self.buckets[(cap, old)]
        names.pop(bisect.bisect_left(names, node))
        if not names:
            del self.buckets[(cap, old)]
        bisect.insort(self.buckets.setdefault((cap, new), []), node)
        self.free_hist[old] -= 1
        if not self.free_hist[old]:
            del self.free_hist[old]
        self.free_hist[new] = self.free_hist.get(new, 0) + 1
        self.free[node] = new
        self._account(self.now)
        self.used_gpus += old - new

    def bind(self, pod, node):
        st = self.state
        st.node_of[pod.key] = node
        st.pods_on[node][pod.key] = pod
        used = st.used[node]
        for r, v in pod.requests.items():
            used[r] = used.get(r, 0) + v
        self._set_free(node, self.free[node] - self.cards(pod))

    def unbind(self, pod):
        st = self.state
        node = st.node_of.pop(pod.key)
        del st.pods_on[node][pod.key]
        used = st.used[node]
        for r, v in pod.requests.items():
            used[r] -= v
        self._set_free(node, self.free[node] + self.cards(pod))
        return node

    def cards(self, pod) -> int:
        return pod.requests.get(self.resource, 0)

    @property
    def max_free(self) -> int:
        return max(self.free_hist)

    # -- placement --------------------------------------------------------------------------------
    def _static(self, pod):
        sig = pod.affinity_terms
        ok = self.static_ok.get(sig)
        if ok is None:
            ok = self.static_ok[sig] = frozenset(
                n.name for n in self.nodes if run_filters(pod, n, self.state, {}, STATIC_FILTERS) is None)
        return ok

    def _reserved_for_other(self, node, job):
        r = self.reserved.get(node)
        return r is not None and r[0] != job.key and r[1] > self.now

    def feasible(self, pod, node, job=None) -> bool:
        """Every planner filter passes for `pod` on `node` now (and no other job holds the node)."""
        if job is not None and self._reserved_for_other(node, job):
            return False
        return node in self._static(pod) and run_filters(
            pod, self.node_by_name[node], self.state, {}, DYNAMIC_FILTERS) is None

    def candidates(self, gpus):
        """Node names in the order the scheduler scores them for a pod of `gpus` cards."""
        keys = [k for k in self.buckets if k[1] >= gpus]
        if self.settings.node_order == BINPACK:
            keys.sort(key=lambda k: (-(k[0] - k[1] + gpus) / k[0], k[0], k[1]))
        else:
            keys.sort(key=lambda k: ((k[0] - k[1] + gpus) / k[0], -k[0], k[1]))
        for k in keys:
            yield from list(self.buckets.get(k, ()))

    def place(self, pod, job):
        static = self._static(pod)
        nominated = job.nominated.get(pod.key)
        if nominated is not None and self.free[nominated] >= self.cards(pod) and self.feasible(pod, nominated, job):
            return nominated
        reserved = self.reserved
        dynamic_state = self.state
        for name in self.candidates(self.cards(pod)):
            if name not in static:
                continue
            r = reserved.get(name)
            if r is not None and r[0] != job.key and r[1] > self.now:
                continue
            if run_filters(pod, self.node_by_name[name], dynamic_state, {}, DYNAMIC_FILTERS) is None:
                return name
        return None

    def try_job(self, job) -> bool:
        """Place what the job's gang rule allows; True when something bound."""
        todo = job.unbound_pods()
        if not todo:
            return False
        spec = job.spec
        placed = []
        for pod in todo:
            node = self.place(pod, job)
            if node is None:
                break
            self.bind(pod, node)
            placed.append(pod)
        if len(job.bound) + len(placed) < spec.min_available:
            for pod in placed:
                self.unbind(pod)
            return False
        for pod in placed:
            job.bound[pod.key] = self.state.node_of[pod.key]
            job.nominated.pop(pod.key, None)
        if job.running_since is None and len(job.bound) >= spec.min_available:
            self._start(job)
        return bool(placed)

    def allocate(self):
        """One scheduling session: try pending jobs in queue order (only new ones if no room appeared)."""
        if not self.pending:
            return
        if self.epoch == self.last_epoch and not self.new_jobs:
            return
        self.sessions += 1
        self.last_epoch = self.epoch
        self.new_jobs = False
        failed_shapes = {}
        max_free = self.max_free
        free_total = self.capacity - self.used_gpus
        for order in list(self.pending):
            job = self.pending_jobs.get(order)
            if job is None:
                continue
            if job.failed_epoch == self.epoch:
                continue
            spec = job.spec
            left = job.unbound_pods()
            if not left:
                if not job.leaving:
                    self._dequeue(job)
                continue
            if job.max_gpus > max_free or (job.running_since is None and sum(
                    self.cards(p) for p in left[:spec.min_available]) > free_total):
                job.failed_epoch = self.epoch
                continue
            shape = (spec.gpus, spec.pod_shapes, len(left), spec.models, spec.node_selector,
                     spec.min_available - len(job.bound))
            special = bool(job.nominated) or any(r[0] == job.key for r in self.reserved.values())
            seen = failed_shapes.get(shape)
            if not special and seen is not None and spec.cpu_m >= seen[0] and spec.mem_mib >= seen[1]:
                job.failed_epoch = self.epoch
                continue
            self.try_job(job)
            if job.unbound_pods():
                job.failed_epoch = self.epoch
                if not special and job.running_since is None:
                    failed_shapes[shape] = min(seen or (spec.cpu_m, spec.mem_mib), (spec.cpu_m, spec.mem_mib))
            elif not job.leaving:
                self._dequeue(job)
            max_free = self.max_free
            free_total = self.capacity - self.used_gpus

    # -- running, ending, evicting ---------------------------------------------------------------
    def _start(self, job):
        job.running_since = self.now
        if job.first_start is None:
            job.first_start = self.now
            for cb in self.on_started:
                cb(job)
        job.end_token += 1
        self.at(self.now + max(job.spec.duration - job.progress, 0.0), self._end, job, job.end_token)

    def _end(self, job, token):
        if token != job.end_token or job.done:
            return
        job.done = True
        self.live.pop(job.key, None)
        for pod in job.pods:
            if pod.key in job.bound:
                self.unbind(pod)
        job.bound.clear()
        job.running_since = None
        self._dequeue(job)
        self.room()

    def room(self):
        """Something may fit now that did not: the next session tries every pending job."""
        self.epoch += 1

    def evict(self, pods, nominate=None) -> int:
        """Evict `pods` (planner Pods bound now): their gangs restart or lose the pods' work (module
        doc); they leave after the grace period and come back pending, nominated per `nominate`
        ({pod key: node}). Returns how many pods were evicted in all (gang restarts included)."""
        nominate = nominate or {}
        by_job = {}
        for pod in pods:
            job = self.job_of[pod.key]
            if pod.key in job.bound:
                by_job.setdefault(job.key, (job, []))[1].append(pod)
        count = 0
        for job, evicted in by_job.values():
            ck = self.settings.checkpoint_s
            done = job.progress + (self.now - job.running_since if job.running_since is not None else 0.0)
            since_ckpt = done - math.floor(done / ck) * ck if ck > 0 else done
            if len(job.bound) - len(evicted) < job.spec.min_available:
                evicted = [p for p in job.pods if p.key in job.bound]
                if job.running_since is not None:
                    self.gpu_seconds_lost += since_ckpt * sum(self.cards(p) for p in evicted)
                    job.progress = done - since_ckpt
                    job.running_since = None
                    job.end_token += 1
                job.restarts += 1
                self.evicted_podgroups += 1
            else:
                self.gpu_seconds_lost += since_ckpt * sum(self.cards(p) for p in evicted)
            for pod in evicted:
                del job.bound[pod.key]
                job.leaving.add(pod.key)
                if pod.key in nominate:
                    job.nominated[pod.key] = nominate[pod.key]
            count += len(evicted)
            self.at(self.now + self.settings.grace_s, self._leave, job, evicted)
        self.evicted_pods += count
        return count

    def _leave(self, job, pods):
        for pod in pods:
            self.unbind(pod)
            job.leaving.discard(pod.key)
        self._enqueue(job)
        self.room()

    def reserve(self, nodes, job, until):
        for n in nodes:
            self.reserved[n] = (job.key, until)
        self.at(until, self._unreserve, tuple(nodes), job.key, until)
        self.room()

    def _unreserve(self, nodes, key, until):
        for n in nodes:
            if self.reserved.get(n) == (key, until):
                del self.reserved[n]
        self.room()

    # -- views ------------------------------------------------------------------------------------
    def snapshot(self) -> ClusterSnapshot:
        """The replay's state as the planner reads a cluster: nodes, bound and pending pods, PodGroups."""
        pods, groups = [], []
        cache, fresh = self._bound_copies, {}
        for job in self.live.values():
            spec = job.spec
            if spec.source_pods:
                if spec.source_podgroup is not None:
                    groups.append(spec.source_podgroup)
            else:
                groups.append(PodGroup(NAMESPACE, spec.name, dict(spec.labels), spec.min_available,
                                       OwnerRef(_OWNER_API, "Job", spec.name, True)))
            for p in job.pods:
                node = job.bound.get(p.key)
                if node is not None:
                    # a bound pod's copy is made once per (pod, node): most stay put between snapshots
                    copy = cache.get((p.key, node)) or replace(p, node_name=node, phase="Running")
                    fresh[(p.key, node)] = copy
                    pods.append(copy)
                elif p.key not in job.leaving:
                    pods.append(p)
        self._bound_copies = fresh
        return ClusterSnapshot.build(nodes=self.nodes, pods=pods, podgroups=groups, **self.extras)

    def frag(self) -> float:
        """Fragmentation of the replayed resource now (planner.frag: FRAG-1), in percent."""
        items = [self.cards(p) for node in self.state.pods_on.values() for p in node.values()]
        occupied = sum(1 for n, f in self.free.items() if f < self.cap[n])
        minimum = theoretical_min(items, list(self.cap.values())).value
        return float(frag_percent(occupied, minimum, len(self.cap)))

    def _sample(self, k):
        frag = self.frag() if k % self.settings.frag_every_samples == 0 else None
        self.samples.append((self.now, self.used_gpus / self.capacity, frag, len(self.pending)))
