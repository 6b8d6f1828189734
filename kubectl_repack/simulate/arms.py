"""The arms: what acts on the replay besides the scheduler, each with its settings stated.

- `none`: nothing (Volcano's allocate and backfill with GPU binpack, the model every arm runs on).
- `repack-cron`, `repack-threshold`, `repack-pending`: a RepackPolicy as the controller runs it
  (docs/policies.md): its trigger decides when; the run is `planner.plan` on the replay's snapshot
  with the template's spec (budget included) or, for onPendingBlocked, the targeted run
  (`spec.target`, what `kubectl repack plan --for` makes) at a gang `planner.gauge` says waits for
  fragmentation; the executor's semantics: one Execute at a time, the cooldown after it
  (kubectl_repack.engine.mutex's default), pods evicted together, replacements nominated to their
  planned node, a targeted run's planned nodes held for its target until the placement lease ends.
- peer-style arms, simplified to the rule each is known by: `descheduler-hnu` (HighNodeUtilization:
  evict every pod from nodes under a GPU utilisation threshold, when it fits elsewhere; no gang
  awareness), `volcano-rescheduling` (lowNodeUtilization: evict from nodes above the target
  threshold while some node is under the low one), `consolidate-on-pending` (KAI-style: for a gang
  that waits, evict the fewest pods that make it fit, ignoring PDBs, and hold the nodes for it),
  `reserve-backfill` (no eviction: hold the nodes with the most free cards for the head-of-line
  large job; other jobs backfill the rest).
"""
from __future__ import annotations

import time

from planner import plan as planner_plan
from planner.gauge import blocked_by_fragmentation
from planner.plan_types import REASON_RECOMMENDED

from kubectl_repack.engine.mutex import DEFAULT_COOLDOWN

from .engine import GPU

REPACK_ARMS = ("repack-cron", "repack-threshold", "repack-pending")
PEER_ARMS = ("descheduler-hnu", "volcano-rescheduling", "consolidate-on-pending", "reserve-backfill")
ARMS = ("none",) + REPACK_ARMS + PEER_ARMS
MAX_EXPLAINED = 4            # gangs explained per policy evaluation (the controller's limit)


class Arm:
    name = "none"

    def __init__(self, **settings):
        self.settings = settings
        self.runs = 0
        self.planner_cpu_s = 0.0
        self.planned_moves = 0
        self.evicted = 0

    def attach(self, replay):
        self.replay = replay

    def stats(self) -> dict:
        return {"settings": dict(self.settings), "runs": self.runs, "planner_cpu_s": round(self.planner_cpu_s, 2),
                "over_eviction": round(self.evicted / self.planned_moves, 3) if self.planned_moves else None}

    def every(self, interval, fn):
        def tick():
            fn()
            self.replay.at(self.replay.now + interval, tick)
        self.replay.at(interval, tick)


def _waiting_gangs(replay):
    """Jobs of more than one pod, or of 8+ cards, not started, in queue order."""
    return [replay.pending_jobs[o] for o in replay.pending
            if replay.pending_jobs[o].running_since is None and replay.pending_jobs[o].first_start is None
            and (replay.pending_jobs[o].spec.pods > 1 or replay.pending_jobs[o].large)]


def _room_but_no_fit(replay, job) -> bool:
    """Cheap screen before asking the planner: enough cards free on nodes the job may use, yet it
    does not fit (the planner's explain decides whether that is fragmentation)."""
    pod = job.pods[0]
    static = replay._static(pod)
    free = sum(replay.free[n] for n in static if replay.cap[n] >= job.spec.gpus)
    return free >= job.gpus_total


class RepackArm(Arm):
    """A RepackPolicy's runs, carried out as the executor does (see the module doc)."""

    def __init__(self, name, trigger, template, interval_s, cooldown_s=DEFAULT_COOLDOWN.total_seconds(),
                 lease_s=300.0):
        super().__init__(trigger=trigger, runTemplate={"spec": template}, evaluation_interval_s=interval_s,
                         execute_cooldown_s=cooldown_s, placement_lease_s=lease_s)
        self.name = name
        self.trigger, self.template = trigger, template
        self.interval, self.cooldown, self.lease = interval_s, cooldown_s, lease_s
        self.busy_until = -1.0
        self.last_end = -1e18
        self.last_fruitless_frag = None
        self.blocked_since = {}
        self.outcomes = {}

    def attach(self, replay):
        super().attach(replay)
        if "cronSchedule" in self.trigger:
            self.every(self.trigger["cronSchedule"], self.cron)
        else:
            self.every(self.interval, self.evaluate)

    def stats(self):
        out = super().stats()
        out["outcomes"] = dict(sorted(self.outcomes.items()))
        return out

    def _free(self) -> bool:
        now = self.replay.now
        return now >= self.busy_until and now >= self.last_end + self.cooldown

    def cron(self):
        if self._free():
            self.execute(self.template)

    def evaluate(self):
        if not self._free():
            return
        r = self.replay
        if "onFragAbovePercent" in self.trigger:
            frag = r.frag()
            if frag > self.trigger["onFragAbovePercent"] and frag != self.last_fruitless_frag:
                if not self.execute(self.template):
                    self.last_fruitless_frag = frag
            return
        blocked = self.trigger["onPendingBlocked"]
        waiting = [j for j in _waiting_gangs(r) if _room_but_no_fit(r, j)]
        keys = {j.key for j in waiting}
        for k in list(self.blocked_since):
            if k not in keys:
                del self.blocked_since[k]
        if not waiting:
            return
        snap = None
        for job in waiting[:MAX_EXPLAINED]:
            if job.key not in self.blocked_since:
                snap = snap or r.snapshot()
                cpu = time.process_time()
                if blocked_by_fragmentation(snap, job.key, GPU):
                    self.blocked_since[job.key] = r.now
                self.planner_cpu_s += time.process_time() - cpu
        due = [j for j in waiting if j.key in self.blocked_since
               and r.now - self.blocked_since[j.key] >= blocked["forSeconds"]]
        if due:
            job = due[0]
            spec = dict(self.template)
            spec.pop("networkTopology", None)
            spec.pop("goals", None)
            spec["goals"] = [{"resource": GPU}]
            spec["target"] = {"podGroups": [job.key]}
            if not self.execute(spec, target=job, snap=snap):
                self.blocked_since[job.key] = r.now       # TargetCannotFit: the gang's clock restarts

    def execute(self, spec, target=None, snap=None) -> bool:
        """One run: plan on the replay's state, evict, nominate; True when it moved something."""
        r = self.replay
        self.runs += 1
        cpu = time.process_time()
        result = planner_plan(snap or r.snapshot(), spec)
        self.planner_cpu_s += time.process_time() - cpu
        outcome = result.outcome
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if outcome != REASON_RECOMMENDED or not result.moves:
            return False
        nominate = {m.pod.key: m.to_node for m in result.moves}
        self.planned_moves += len(result.moves)
        self.evicted += r.evict([m.pod for m in result.moves], nominate)
        end = r.now + r.settings.grace_s + self.lease
        if target is not None and result.target is not None:
            for key, node in result.target.placements:
                target.nominated[key] = node
            r.reserve(sorted({n for _, n in result.target.placements}), target, end)
        self.busy_until = end
        self.last_end = end
        return True


class DeschedulerHNU(Arm):
    name = "descheduler-hnu"

    def __init__(self, threshold_percent=20, interval_s=300.0):
        super().__init__(threshold_percent=threshold_percent, interval_s=interval_s, node_fit=True,
                         gang_aware=False)
        self.threshold, self.interval = threshold_percent, interval_s

    def attach(self, replay):
        super().attach(replay)
        self.every(self.interval, self.tick)

    def tick(self):
        r = self.replay
        under = [n for n in sorted(r.cap) if 0 < (r.cap[n] - r.free[n]) * 100 < self.threshold * r.cap[n]]
        if not under:
            return
        under_set = set(under)
        room = sorted((r.free[n] for n in r.cap if n not in under_set and r.free[n] < r.cap[n]), reverse=True)
        pods = []
        for n in under:
            for pod in list(r.state.pods_on[n].values()):
                g = pod.requests[GPU]
                i = next((k for k, f in enumerate(room) if f >= g), None)   # NodeFit: somewhere else
                if i is None:
                    continue
                room[i] -= g
                pods.append(pod)
        if pods:
            self.runs += 1
            self.planned_moves += len(pods)
            self.evicted += r.evict(pods)


class VolcanoRescheduling(Arm):
    name = "volcano-rescheduling"

    def __init__(self, low_percent=20, high_percent=80, interval_s=300.0):
        super().__init__(strategy="lowNodeUtilization", low_percent=low_percent, high_percent=high_percent,
                         interval_s=interval_s)
        self.low, self.high, self.interval = low_percent, high_percent, interval_s

    def attach(self, replay):
        super().attach(replay)
        self.every(self.interval, self.tick)

    def tick(self):
        r = self.replay
        util = {n: (r.cap[n] - r.free[n]) * 100 / r.cap[n] for n in r.cap}
        low = [n for n in sorted(r.cap) if util[n] < self.low]
        if not low:
            return
        room = sum(r.cap[n] * self.high // 100 - (r.cap[n] - r.free[n]) for n in low)
        pods = []
        for n in sorted(r.cap, key=lambda n: (-util[n], n)):
            if util[n] <= self.high or room <= 0:
                break
            used = r.cap[n] - r.free[n]
            for pod in sorted(r.state.pods_on[n].values(), key=lambda p: p.key):
                if used * 100 <= self.high * r.cap[n] or room < pod.requests[GPU]:
                    break
                pods.append(pod)
                used -= pod.requests[GPU]
                room -= pod.requests[GPU]
        if pods:
            self.runs += 1
            self.planned_moves += len(pods)
            self.evicted += r.evict(pods)


class ConsolidateOnPending(Arm):
    name = "consolidate-on-pending"

    def __init__(self, wait_s=60.0, interval_s=60.0, hold_s=300.0):
        super().__init__(wait_s=wait_s, interval_s=interval_s, hold_s=hold_s, respects_pdb=False)
        self.wait, self.interval, self.hold = wait_s, interval_s, hold_s
        self.busy_until = -1.0

    def attach(self, replay):
        super().attach(replay)
        self.every(self.interval, self.tick)

    def tick(self):
        r = self.replay
        if r.now < self.busy_until:
            return
        for job in _waiting_gangs(r):
            if r.now - job.spec.submit < self.wait or not _room_but_no_fit(r, job):
                continue
            chosen = self._fewest(job)
            if chosen is None:
                continue
            nodes, pods = chosen
            self.runs += 1
            self.planned_moves += len(pods)
            self.evicted += r.evict(pods)
            until = r.now + r.settings.grace_s + self.hold
            for pod, node in zip(job.unbound_pods(), nodes):
                job.nominated[pod.key] = node
            r.reserve(nodes, job, until)
            self.busy_until = until
            return

    def _fewest(self, job):
        """Per pod of the job a node (that it may use) freed by evicting the fewest pods, largest first."""
        r = self.replay
        pod0 = job.pods[0]
        g = job.spec.gpus
        options = []
        for n in r._static(pod0):
            if r.cap[n] < g or (n in r.reserved and r.reserved[n][1] > r.now):
                continue
            need = g - r.free[n]
            victims = []
            for p in sorted(r.state.pods_on[n].values(), key=lambda p: (-p.requests[GPU], p.key)):
                if need <= 0:
                    break
                victims.append(p)
                need -= p.requests[GPU]
            if need <= 0:
                options.append((len(victims), n, victims))
        options.sort(key=lambda o: (o[0], o[1]))
        k = len(job.unbound_pods())
        if len(options) < k:
            return None
        picked = options[:k]
        return [n for _, n, _ in picked], [p for _, _, vs in picked for p in vs]


class ReserveBackfill(Arm):
    name = "reserve-backfill"

    def __init__(self, interval_s=60.0):
        super().__init__(interval_s=interval_s, head_of_line="oldest waiting job of >= 8 cards or > 1 pod",
                         evicts=False)
        self.interval = interval_s

    def attach(self, replay):
        super().attach(replay)
        self.every(self.interval, self.tick)

    def tick(self):
        r = self.replay
        waiting = _waiting_gangs(r)
        if not waiting:
            return
        job = waiting[0]
        g = job.spec.gpus
        nodes = sorted((n for n in r._static(job.pods[0]) if r.cap[n] >= g
                        and not (n in r.reserved and r.reserved[n][0] != job.key and r.reserved[n][1] > r.now)),
                       key=lambda n: (-r.free[n], n))[:len(job.unbound_pods())]
        if nodes:
            self.runs += 1
            r.reserve(nodes, job, r.now + self.interval)


def make_arm(name, **overrides):
    """The arm `name` at its stated settings (overrides: the arm's constructor keywords)."""
    template = {"mode": "Execute", "goals": [{"resource": GPU}], "maxPerRun": {"podGroups": 8}}
    if name == "none":
        return Arm()
    if name == "repack-cron":
        return RepackArm(name, {"cronSchedule": overrides.get("every_s", 1800.0)}, template, 1800.0)
    if name == "repack-threshold":
        return RepackArm(name, {"onFragAbovePercent": overrides.get("threshold", 10)}, template,
                         overrides.get("interval_s", 300.0))
    if name == "repack-pending":
        return RepackArm(name, {"onPendingBlocked": {"forSeconds": overrides.get("for_s", 300),
                                                     "podGroupSelector": {}}},
                         {"mode": "Execute", "goals": [{"resource": GPU}], "maxPerRun": {"podGroups": 16}},
                         overrides.get("interval_s", 60.0))
    classes = {c.name: c for c in (DeschedulerHNU, VolcanoRescheduling, ConsolidateOnPending, ReserveBackfill)}
    return classes[name](**overrides)
