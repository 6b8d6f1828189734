"""Gang-aware disruption cost (GANG-1..6), always over the complete plan, never one node alone.

Per PodGroup: safe = max(running - minAvailable, 0). Moves beyond `safe` put the group below
minAvailable and count its whole R usage as affected. Workload policies widen the cost to every
pod that will really restart: a VCJob mapping PodEvicted to RestartJob/RestartTask, a ModelServing
with ServingGroupRecreate.
"""
from dataclasses import dataclass

DEFAULT_WEIGHTS = (1.0, 0.8, 0.6, 0.3, 0.1)


@dataclass(frozen=True)
class GangInfo:
    """What the cost needs to know about one PodGroup, read once from the snapshot."""
    key: str
    workload: str                 # the user-facing workload id (owner kind/name, or the PodGroup)
    running: int
    min_available: int
    resource_total: int           # R of all its bound non-terminal pods
    pod_amounts: dict             # pod key -> R
    restart: str = ""             # "", "job", "task"
    tasks: dict = None            # pod key -> task name (for RestartTask)
    restart_note: str = ""

    @property
    def safe(self) -> int:
        return max(self.running - self.min_available, 0)

    def restarted(self, moved_keys):
        """Pod keys that restart when `moved_keys` are evicted."""
        if not moved_keys:
            return frozenset()
        if self.restart == "job":
            return frozenset(self.pod_amounts) | frozenset(moved_keys)
        if self.restart == "task":
            tasks = {self.tasks.get(k) for k in moved_keys}
            return frozenset(k for k, t in self.tasks.items() if t in tasks) | frozenset(moved_keys)
        return frozenset(moved_keys)


def gang_infos(snapshot, resource):
    """GangInfo for every PodGroup that has pods, keyed by namespace/name."""
    members = {}
    for p in snapshot.pods:
        g = p.group_name
        if g and not p.terminal:
            members.setdefault(f"{p.namespace}/{g}", []).append(p)
    out = {}
    for key, pods in members.items():
        pg = snapshot.podgroup_by_key.get(key)
        if pg is None:
            continue
        owner = pg.owner
        workload = f"{pg.namespace}/{owner.kind}/{owner.name}" if owner else f"{pg.namespace}/PodGroup/{pg.name}"
        amounts = {p.key: p.requests.get(resource, 0) for p in pods if p.node_name}
        running = sum(1 for p in pods if p.phase == "Running" and not p.terminating)
        restart, tasks, note = "", None, ""
        if owner is not None and owner.kind == "Job" and owner.api_version.startswith("batch.volcano.sh"):
            job = snapshot.vcjob_by_key.get(f"{pg.namespace}/{owner.name}")
            if job is not None:
                tasks = {p.key: p.annotations.get("volcano.sh/task-spec", "") for p in pods if p.node_name}
                if job.job_action == "RestartJob":
                    restart, note = "job", f"VCJob {job.namespace}/{job.name} maps PodEvicted to RestartJob: every pod of the job restarts"
                elif job.job_action == "RestartTask" or any(a in ("RestartJob", "RestartTask") for a in job.task_actions.values()):
                    if any(a == "RestartJob" for a in job.task_actions.values()):
                        restart, note = "job", f"VCJob {job.namespace}/{job.name} maps PodEvicted to RestartJob in a task: every pod of the job restarts"
                    else:
                        restart, note = "task", f"VCJob {job.namespace}/{job.name} maps PodEvicted to RestartTask: every pod of an affected task restarts"
        elif owner is not None and owner.kind == "ModelServing":
            ms = snapshot.modelserving_by_key.get(f"{pg.namespace}/{owner.name}")
            if ms is not None and ms.recovery_policy == "ServingGroupRecreate":
                restart, note = "job", f"ModelServing {ms.namespace}/{ms.name} uses ServingGroupRecreate: the whole ServingGroup {pg.name} is re-created"
        out[key] = GangInfo(key, workload, running, pg.min_member, sum(amounts.values()), amounts, restart, tasks, note)
    return out


def plan_dimensions(gangs, moved_by_group):
    """The five cost dimensions of a complete plan: {podgroup key: set of moved pod keys}."""
    # A whole plan costs what it adds to an empty one: one implementation, PlanCost's.
    return PlanCost(gangs).with_candidate({k: set(v) for k, v in moved_by_group.items() if v})


def scores(dimension_rows, weights=DEFAULT_WEIGHTS):
    """Min-max normalise each dimension across this round's candidates, then weight and sum."""
    if not dimension_rows:
        return []
    cols = list(zip(*dimension_rows))
    lo = [min(c) for c in cols]
    hi = [max(c) for c in cols]
    out = []
    for row in dimension_rows:
        s = 0.0
        for i, v in enumerate(row):
            if hi[i] > lo[i]:
                s += weights[i] * (v - lo[i]) / (hi[i] - lo[i])
        out.append(round(s, 9))
    return out


def group_contribution(g, moved):
    """(below minAvailable?, affected R, moved R, moved pods) of one PodGroup with `moved` pod keys."""
    if not moved:
        return (0, 0, 0, 0)
    amounts = g.pod_amounts
    if g.restart == "job":
        # every pod of the job restarts: counted without building the set (this runs per candidate
        # per round at scale); `restarted` says the same
        n = len(amounts) + sum(1 for k in moved if k not in amounts)
        r = g.resource_total
    else:
        restarted = g.restarted(moved)
        n = len(restarted)
        r = sum(amounts.get(k, 0) for k in restarted)
    below = 1 if n > g.safe and g.min_available > 0 else 0
    return (below, g.resource_total if below else r, r, n)


class PlanCost:
    """The committed plan's moves per PodGroup and each PodGroup's contribution, so a candidate's
    complete-plan cost touches only its own groups."""

    def __init__(self, gangs):
        self.gangs = gangs
        self.moved = {}          # podgroup key -> set of moved pod keys
        self.contrib = {}        # podgroup key -> its contribution tuple
        self.workloads = {}      # workload -> number of moved groups

    def with_candidate(self, groups):
        """How much a candidate's {podgroup: moved pod keys} adds to each of the five dimensions.

        The complete plan's cost is the committed plan's plus this; min-max normalisation across one
        round's candidates is blind to the common totals, so scoring uses the increase alone, and
        it stays valid until a round touches one of the candidate's groups or workloads.
        """
        totals = [0, 0, 0, 0]
        for key, keys in groups.items():
            delta = self.delta(key, keys)
            for i in range(4):
                totals[i] += delta[i]
        return (self.new_workloads(groups), totals[0], totals[1], totals[2], totals[3])

    def delta(self, key, keys):
        """What moving pod keys `keys` of PodGroup `key` adds to dimensions 1-4 (integers: a
        candidate's increase is the sum of its groups', in any order)."""
        old = self.contrib.get(key)
        moved = self.moved.get(key)
        g = self.gangs[key]
        if not g.restart and old is not None and moved.isdisjoint(keys):
            # only the moved pods restart: the committed pods' count and R plus these (what
            # group_contribution gives for the union, without walking the committed pods again)
            amounts = g.pod_amounts
            n = old[3] + len(keys)
            r = old[2] + sum(amounts.get(k, 0) for k in keys)
            below = 1 if n > g.safe and g.min_available > 0 else 0
            return (below - old[0], (g.resource_total if below else r) - old[1], r - old[2], n - old[3])
        new = group_contribution(g, moved | keys if moved else keys)
        if old is None:
            return new
        return (new[0] - old[0], new[1] - old[1], new[2] - old[2], new[3] - old[3])

    def new_workloads(self, groups):
        """Dimension 0: the workloads of `groups` the committed plan does not disrupt yet."""
        return self.undisrupted({self.gangs[key].workload for key in groups})

    def undisrupted(self, workloads) -> int:
        """How many of `workloads` (distinct) the committed plan does not disrupt yet."""
        n = 0
        for w in workloads:
            if w not in self.workloads:
                n += 1
        return n

    def add(self, groups):
        """Commit a candidate's {podgroup: moved pod keys} to the plan; returns the workloads it
        disrupts first."""
        first = set()
        for key, keys in groups.items():
            g = self.gangs[key]
            if key not in self.moved:
                if g.workload not in self.workloads:
                    first.add(g.workload)
                self.workloads[g.workload] = self.workloads.get(g.workload, 0) + 1
            merged = self.moved.setdefault(key, set())
            merged |= keys
            self.contrib[key] = group_contribution(g, merged)
        return first
