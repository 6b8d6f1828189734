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

import datetime as dt

from planner import RepackError
from planner import plan as planner_plan
from planner.gauge import blocked_by_fragmentation
from planner.plan_types import REASON_RECOMMENDED

from kubectl_repack.api import policy as P
from kubectl_repack.api.control import COOLDOWN_ANNOTATION
from kubectl_repack.api.run import MODE_EXECUTE
from kubectl_repack.api.times import parse_duration, rfc3339
from kubectl_repack.engine.mutex import DEFAULT_COOLDOWN

from .engine import GPU

REPACK_ARMS = ("repack-cron", "repack-threshold", "repack-pending")
PEER_ARMS = ("descheduler-hnu", "volcano-rescheduling", "consolidate-on-pending", "reserve-backfill")
ARMS = ("none",) + REPACK_ARMS + PEER_ARMS
MAX_EXPLAINED = 4            # gangs explained per policy evaluation (the controller's limit)
DEFAULT_POLICY_INTERVAL = 60.0   # the controller's --policy-interval default
EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)     # replay time 0, for cron and windows


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
    free = sum(replay.free[n] for n in static if replay.cap[n] >= job.max_gpus)
    return free >= job.gpus_total


class RepackArm(Arm):
    """A RepackPolicy's runs, carried out as the executor does (see the module doc). The policy is
    parsed and its decisions made by kubectl_repack.api.policy (cron slots, windows, the run a
    trigger creates, the workloads minWorkloadInterval excludes); replay time 0 is EPOCH."""

    def __init__(self, name, policy_obj, interval_s=DEFAULT_POLICY_INTERVAL, lease_s=300.0):
        self.policy = P.parse_policy(policy_obj)
        self.policy_obj = policy_obj
        cooldown = self.policy.template_annotations.get(COOLDOWN_ANNOTATION)
        self.cooldown = (parse_duration(cooldown) if cooldown else DEFAULT_COOLDOWN).total_seconds()
        super().__init__(policy=policy_obj.get("spec"), evaluation_interval_s=interval_s,
                         execute_cooldown_s=self.cooldown, placement_lease_s=lease_s)
        self.name = name
        self.interval, self.lease = interval_s, lease_s
        self.busy_until = -1.0
        self.last_end = -1e18
        self.last_fruitless_frag = None
        self.last_frag_run = -1e18
        self.blocked_since = {}
        self.outcomes = {}
        self.cron_due = False
        self.moved = {}                   # PodGroup key -> when an Execute of this arm moved it

    def attach(self, replay):
        super().attach(replay)
        if self.policy.cron:
            self._next_slot(0.0)
        self.every(self.interval, self.evaluate)

    def stats(self):
        out = super().stats()
        out["outcomes"] = dict(sorted(self.outcomes.items()))
        return out

    def _dt(self, t):
        return EPOCH + dt.timedelta(seconds=t)

    def _next_slot(self, t):
        nxt = P.next_cron(self.policy, self._dt(t))
        if nxt is not None:
            self.replay.at((nxt - EPOCH).total_seconds(), self._slot)

    def _slot(self):
        self.cron_due = True
        self.evaluate()
        self._next_slot(self.replay.now)

    def _free(self) -> bool:
        now = self.replay.now
        return now >= self.busy_until and now >= self.last_end + self.cooldown

    def evaluate(self):
        r = self.replay
        if self.policy.suspend:
            return
        if not P.window_state(self.policy, self._dt(r.now)).open:
            self.cron_due = False              # a slot outside every window is consumed
            return
        if not self._free():
            return                             # a due slot waits for the unfinished run (and cooldown)
        if self.cron_due:
            self.cron_due = False
            self.execute(P.TRIGGER_CRON)
            return
        if self.policy.frag_above is not None and r.now - self.last_frag_run >= self.interval:
            frag = r.frag()
            if frag > self.policy.frag_above and frag != self.last_fruitless_frag:
                self.last_frag_run = r.now
                if not self.execute(P.TRIGGER_FRAG):
                    self.last_fruitless_frag = frag
                return
        if self.policy.blocked is not None:
            self.pending_blocked()

    def pending_blocked(self):
        r = self.replay
        selector = self.policy.blocked.selector
        waiting = [j for j in _waiting_gangs(r) if _room_but_no_fit(r, j) and _selected(selector, j)]
        keys = {j.key for j in waiting}
        for k in list(self.blocked_since):
            if k not in keys:
                del self.blocked_since[k]
        snap = None
        for job in [j for j in waiting if j.key not in self.blocked_since][:MAX_EXPLAINED]:
            snap = snap or r.snapshot()
            cpu = time.process_time()
            if blocked_by_fragmentation(snap, job.key, r.resource):
                self.blocked_since[job.key] = r.now
            self.planner_cpu_s += time.process_time() - cpu
        due = [j for j in waiting if j.key in self.blocked_since
               and r.now - self.blocked_since[j.key] >= self.policy.blocked.for_seconds]
        if due and not self.execute(P.TRIGGER_BLOCKED, target=due[0], snap=snap):
            self.blocked_since[due[0].key] = r.now       # TargetCannotFit: the gang's clock restarts

    def _excluded(self):
        if self.policy.min_interval is None:
            return []
        limit = self.replay.now - self.policy.min_interval.total_seconds()
        return sorted(k for k, t in self.moved.items() if t > limit)

    def execute(self, trigger, target=None, snap=None) -> bool:
        """One run: plan on the replay's state, evict, nominate; True when it moved something."""
        r = self.replay
        run = P.build_run(self.policy, self.policy_obj, trigger, self._dt(r.now), self._excluded(),
                          target=target.key if target is not None else None)
        spec = run["spec"]
        self.runs += 1
        cpu = time.process_time()
        try:
            result = planner_plan(snap or r.snapshot(), spec)
        except RepackError as e:
            self.outcomes[type(e).__name__] = self.outcomes.get(type(e).__name__, 0) + 1
            return False
        finally:
            self.planner_cpu_s += time.process_time() - cpu
        outcome = result.outcome
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        if outcome != REASON_RECOMMENDED or not result.moves or spec.get("mode") != MODE_EXECUTE:
            return False
        nominate = {m.pod.key: m.to_node for m in result.moves}
        self.planned_moves += len(result.moves)
        self.evicted += r.evict([m.pod for m in result.moves], nominate)
        for m in result.moves:
            self.moved[f"{m.pod.namespace}/{m.pod.group_name}"] = r.now
        end = r.now + r.settings.grace_s + self.lease
        if target is not None and result.target is not None:
            for key, node in result.target.placements:
                target.nominated[key] = node
            r.reserve(sorted({n for _, n in result.target.placements}), target, end)
        self.busy_until = end
        self.last_end = end
        return True


def _selected(selector, job) -> bool:
    """podGroupSelector against the job's PodGroup labels (matchLabels; {} selects every PodGroup)."""
    labels = dict(job.spec.labels)
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


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
                g = r.cards(pod)
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
                if used * 100 <= self.high * r.cap[n] or room < r.cards(pod):
                    break
                pods.append(pod)
                used -= r.cards(pod)
                room -= r.cards(pod)
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
        g = job.max_gpus
        options = []
        for n in r._static(pod0):
            if r.cap[n] < g or (n in r.reserved and r.reserved[n][1] > r.now):
                continue
            need = g - r.free[n]
            victims = []
            for p in sorted(r.state.pods_on[n].values(), key=lambda p: (-r.cards(p), p.key)):
                if need <= 0:
                    break
                victims.append(p)
                need -= r.cards(p)
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
        g = job.max_gpus
        nodes = sorted((n for n in r._static(job.pods[0]) if r.cap[n] >= g
                        and not (n in r.reserved and r.reserved[n][0] != job.key and r.reserved[n][1] > r.now)),
                       key=lambda n: (-r.free[n], n))[:len(job.unbound_pods())]
        if nodes:
            self.runs += 1
            r.reserve(nodes, job, r.now + self.interval)


def repack_policy(name, trigger, template, annotations=None) -> dict:
    """A RepackPolicy object with this trigger and run template (the bench arms' policies)."""
    return {"apiVersion": "repack.volcano.sh/v1alpha1", "kind": "RepackPolicy",
            "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": rfc3339(EPOCH)},
            "spec": {"trigger": trigger, "runTemplate": {"metadata": {"annotations": dict(annotations or {})},
                                                         "spec": template}}}


def make_arm(name, resource=GPU, **overrides):
    """The arm `name` at its stated settings (overrides: the arm's settings by keyword)."""
    template = {"mode": MODE_EXECUTE, "goals": [{"resource": resource}],
                "maxPerRun": {"podGroups": overrides.get("max_podgroups", 8)}}
    if name == "none":
        return Arm()
    if name == "repack-cron":
        trigger = {"cronSchedule": overrides.get("cron", "*/30 * * * *")}
    elif name == "repack-threshold":
        trigger = {"onFragAbovePercent": overrides.get("threshold", 10)}
    elif name == "repack-pending":
        trigger = {"onPendingBlocked": {"forSeconds": overrides.get("for_s", 300), "podGroupSelector": {}}}
        template["maxPerRun"]["podGroups"] = overrides.get("max_podgroups", 16)
    else:
        classes = {c.name: c for c in (DeschedulerHNU, VolcanoRescheduling, ConsolidateOnPending, ReserveBackfill)}
        return classes[name](**overrides)
    annotations = {COOLDOWN_ANNOTATION: str(overrides["cooldown"])} if "cooldown" in overrides else {}
    return RepackArm(name, repack_policy(name, trigger, template, annotations), overrides.get("interval_s", 60.0))
