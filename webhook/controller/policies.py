"""The RepackPolicy reconciler (POLICY-1, POLICY-2): the controller's leader runs it on
every tick, after the runs (webhook.controller.loop.Controller.tick), with the runs it just listed.

Per policy, in this order (the decisions are kubectl_repack.api.policy's, pure):

1. Housekeeping, every tick: the newest finished run becomes `status.lastRunStatus`
   (`lastSuccessfulTime` for a success), finished runs beyond the history limits are deleted, and
   workloads any Execute moved are added to `status.recentlyMoved` (when the policy has a
   `minWorkloadInterval`) before a run's TTL can delete the evidence.
2. An evaluation, every `interval` (and at once when a cron slot is due, the spec changed or a
   manual trigger was asked for): a policy the controller cannot act on (a bad cron string, time
   zone or duration, a template the planner refuses, a creator record the admission policy did not
   vouch for) is `Healthy=False`/`ReconcileFailed` naming the field, and creates nothing. Else,
   unless suspended, running (an unfinished run of it exists) or outside every window: a manual
   trigger, a due cron slot, fragmentation above the threshold (at most one such run per
   interval), or a gang blocked by fragmentation for forSeconds (explained with planner.relief,
   at most MAX_BLOCKED_EVALUATIONS gangs per evaluation) creates one run. `status.lastEvaluation`
   says what fired or why nothing did; `lastEvaluationTime` advances.

The Execute mutex and cooldown hold across policies: a policy's Execute run is carried out by the
same worker, under the same Lease, as any other run.
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any, Callable, Optional

import planner
from planner.gauge import measure_resource
from planner.gcpause import paused_gc
from kubectl_repack.api import policy as P
from kubectl_repack.api.control import UntrustedCreator, creator_of
from kubectl_repack.api.run import PHASE_SUCCEEDED
from kubectl_repack.api.times import parse_time, rfc3339
from kubectl_repack.api.view import ObjectView, as_map
from kubectl_repack.errors import Conflict, NotFound, RepackError, SpecError

log = logging.getLogger("webhook.controller.policies")

DEFAULT_POLICY_INTERVAL = 60.0     # seconds between evaluations of one policy (--policy-interval)
MAX_BLOCKED_EVALUATIONS = 4        # gangs one evaluation explains at most (each runs the planner)


def _iso(t: Optional[dt.datetime]) -> Optional[str]:
    return rfc3339(t) if t is not None else None


class _Snapshot:
    """One live snapshot per tick, read only when some policy needs it."""

    def __init__(self, read: Callable[[], list]):
        self._read, self._snapshot = read, None

    def get(self):
        if self._snapshot is None:
            with paused_gc():
                self._snapshot = planner.load_objects(self._read())
        return self._snapshot


class PolicyReconciler:
    def __init__(self, policies, runs, cluster, now: Callable[[], dt.datetime],
                 policy_since: Callable[[], Any] = lambda: None, interval: float = DEFAULT_POLICY_INTERVAL,
                 max_blocked: int = MAX_BLOCKED_EVALUATIONS, monotonic: Callable[[], float] = time.monotonic):
        self.policies, self.runs, self.cluster = policies, runs, cluster
        self.now, self.policy_since, self.interval = now, policy_since, interval
        self.max_blocked, self.monotonic = max_blocked, monotonic
        self._evaluated: dict = {}     # policy uid -> (monotonic time, generation) of its last evaluation
        self._missing_crd_logged = False

    # -- every tick --
    def reconcile(self, runs: list) -> None:
        try:
            policies = self.policies.list()
        except NotFound:          # the RepackPolicy CRD is not installed (an older install)
            if not self._missing_crd_logged:
                log.info("no RepackPolicy API on this cluster: policies are not reconciled")
                self._missing_crd_logged = True
            return
        snapshot = _Snapshot(self.cluster.snapshot_objects)
        moved = P.moved_workloads(runs)
        for obj in sorted(policies, key=lambda o: ObjectView(o).name):
            if ObjectView(obj).deleting:
                continue
            try:
                self.one(obj, runs, moved, snapshot)
            except RepackError as e:
                log.warning("repackpolicy %s: %s", ObjectView(obj).name, e)
            except Exception:  # noqa: BLE001 - one policy's failure must not stop the others
                log.exception("repackpolicy %s", ObjectView(obj).name)

    def one(self, obj: dict, runs: list, moved: list, snapshot: _Snapshot) -> None:
        view = ObjectView(obj)
        name, uid = view.name, view.uid
        now = self.now()
        stamp = rfc3339(now)
        try:
            policy: Optional[P.Policy] = P.parse_policy(obj)
            problem = ""
        except P.PolicyError as e:
            policy, problem = None, str(e)
        owned = P.runs_of(uid, name, runs)
        # 1. housekeeping
        if policy is not None:
            for run in P.history_to_delete(owned, policy.successful_limit, policy.failed_limit):
                rv = ObjectView(run)
                if self.runs.delete(rv.name, uid=rv.uid):
                    log.info("repackpolicy %s: deleted %s run %s (history limit)", name,
                             rv.status.get("phase"), rv.name)
        newest = P.newest_finished(owned)
        unfinished = P.unfinished(owned)
        status_now = view.status
        recently = None
        if policy is not None and policy.min_interval is not None:
            recently = P.merge_moved(status_now.get("recentlyMoved") or (), moved, now, policy.min_interval)

        # 2. evaluation?
        last = self._evaluated.get(uid)
        manual = str(view.annotations.get(P.MANUAL_TRIGGER_ANNOTATION) or "")
        manual_new = bool(manual) and manual != str(status_now.get("lastManualTrigger") or "")
        slot = P.cron_due(policy, P.cron_anchor(policy, status_now), now) if policy is not None else None
        # a due cron slot or a new manual trigger is acted on at once, unless it has to wait anyway
        # (suspended, or a run not finished): then the interval paces the evaluations as usual
        act_now = ((manual_new or slot is not None) and policy is not None and not policy.suspend
                   and not unfinished)
        due = (last is None or self.monotonic() - last[0] >= self.interval or last[1] != view.meta.get("generation")
               or act_now)
        decision: dict = {}
        if due:
            self._evaluated[uid] = (self.monotonic(), view.meta.get("generation"))
            decision = self.evaluate(obj, policy, problem, owned, unfinished, slot, manual, manual_new,
                                     recently or [], snapshot, now)

        def mutate(st: dict) -> None:
            if newest is not None:
                summary = P.last_run_status(newest)
                st["lastRunStatus"] = summary
                if summary.get("phase") == PHASE_SUCCEEDED:
                    done = summary.get("completionTime") or stamp
                    if str(st.get("lastSuccessfulTime") or "") < done:
                        st["lastSuccessfulTime"] = done
            refs = [{"apiVersion": r.get("apiVersion") or f"{P.GROUP}/{P.VERSION}", "kind": "RepackRun",
                     "name": ObjectView(r).name, "uid": ObjectView(r).uid} for r in unfinished]
            if decision.get("created"):
                refs.append(decision["created"])
            if refs:
                st["inProgress"] = refs
            else:
                st.pop("inProgress", None)
            if recently is not None:
                if recently:
                    st["recentlyMoved"] = recently
                else:
                    st.pop("recentlyMoved", None)
            elif policy is not None:
                st.pop("recentlyMoved", None)
            if not decision:
                return
            st["lastEvaluationTime"] = stamp
            st["observedGeneration"] = view.meta.get("generation")
            st["lastEvaluation"] = decision["evaluation"]
            for key in ("lastTriggerTime", "lastScheduleTime", "lastManualTrigger"):
                if decision.get(key):
                    st[key] = decision[key]
            if decision.get("nextTriggerTime"):
                st["nextTriggerTime"] = decision["nextTriggerTime"]
            else:
                st.pop("nextTriggerTime", None)
            if "pendingBlocked" in decision:
                if decision["pendingBlocked"]:
                    st["pendingBlocked"] = decision["pendingBlocked"]
                else:
                    st.pop("pendingBlocked", None)
            P.set_healthy(st, decision["healthy"], decision["evaluation"]["message"], stamp,
                          int(view.meta.get("generation") or 0))

        self.policies.update_status(name, uid, mutate)

    # -- one evaluation --
    def evaluate(self, obj, policy: Optional[P.Policy], problem: str, owned: list, unfinished: list,
                 slot: Optional[dt.datetime], manual: str, manual_new: bool, recently: list,
                 snapshot: _Snapshot, now: dt.datetime) -> dict:
        """What this evaluation decided: {evaluation: {triggered, trigger?, run?, message}, healthy,
        and the status fields it sets}; creates the run when a trigger fires."""
        def outcome(message: str, healthy: bool = True, **fields) -> dict:
            evaluation = {"triggered": bool(fields.get("created")), "message": message}
            if fields.get("trigger"):
                evaluation["trigger"] = fields.pop("trigger")
            if fields.get("created"):
                evaluation["run"] = fields["created"]["name"]
            return dict(fields, evaluation=evaluation, healthy=healthy)

        if policy is None:
            return outcome(f"{problem}; no run is created until it is fixed", healthy=False)
        nxt = _iso(P.next_cron(policy, now))
        base = {"nextTriggerTime": nxt}
        if problem := self.template_problem(policy.template_spec):
            return outcome(f"{problem}; no run is created until it is fixed", healthy=False, **base)
        if problem := self.creator_problem(obj):
            return outcome(f"{problem}; no run is created", healthy=False, **base)
        if policy.suspend:
            base.pop("nextTriggerTime")
            return outcome("suspended (spec.suspend): no run is created", **base)
        if unfinished:
            return outcome(f"run {ObjectView(unfinished[0]).name} has not finished: a policy never has two "
                           "unfinished runs", **base)
        window = P.window_state(policy, now)
        if not window.open:
            if slot is not None:
                base["lastScheduleTime"] = rfc3339(slot)
            when = f"; the next opens at {rfc3339(window.next_open)}" if window.next_open else ""
            return outcome(f"outside every maintenance window (spec.windows){when}: no run is created", **base)
        trigger, target, why_not = "", None, []
        if manual_new:
            trigger = P.TRIGGER_MANUAL
            base["lastManualTrigger"] = manual
        elif slot is not None:
            trigger = P.TRIGGER_CRON
            base["lastScheduleTime"] = rfc3339(slot)
        elif policy.cron:
            why_not.append(f"the next cron slot is {nxt}")
        pending = None
        if not trigger and policy.frag_above is not None:
            last_trigger = parse_time(ObjectView(obj).status.get("lastTriggerTime"))
            if last_trigger is not None and (now - last_trigger).total_seconds() < self.interval:
                why_not.append(f"a run started {rfc3339(last_trigger)}, less than the evaluation interval "
                               f"({int(self.interval)}s) ago")
            else:
                frag = measure_resource(snapshot.get(), policy.resource).frag_percent
                fruitless = P.fruitless_at(owned, frag) if frag > policy.frag_above else None
                if fruitless is not None:
                    why_not.append(f"fragmentation of {policy.resource} is {frag}%, above {policy.frag_above}%, but "
                                   f"run {ObjectView(fruitless).name} moved nothing at {frag}%: waiting for it to change")
                elif frag > policy.frag_above:
                    trigger = P.TRIGGER_FRAG
                    why_not.append(f"fragmentation of {policy.resource} is {frag}%, above {policy.frag_above}%")
                else:
                    why_not.append(f"fragmentation of {policy.resource} is {frag}%, not above {policy.frag_above}%")
        if not trigger and policy.blocked is not None:
            pending, target, note = self.blocked_gangs(obj, policy, owned, snapshot, now)
            why_not.append(note)
            if target:
                trigger = P.TRIGGER_BLOCKED
        if pending is not None:
            base["pendingBlocked"] = pending
        if not trigger:
            return outcome("no trigger fired: " + "; ".join(why_not), **base)
        return self.create(obj, policy, trigger, target, window, recently, snapshot, now, why_not, outcome, base)

    def create(self, obj, policy, trigger, target, window, recently, snapshot, now, why_not, outcome, base) -> dict:
        excluded = []
        if recently:
            pgs = [(g.key, g.namespace, g.owner.group if g.owner else "", g.owner.kind if g.owner else "",
                    g.owner.name if g.owner else "") for g in snapshot.get().podgroups]
            excluded = P.excluded_podgroups(recently, pgs)
        try:
            run = P.build_run(policy, obj, trigger, now, excluded, window.end, target)
        except P.PolicyError as e:
            return outcome(f"{e}; no run is created", healthy=False, **base)
        if problem := self.template_problem(run["spec"]):
            return outcome(f"{problem}; no run is created", healthy=False, **base)
        name = run["metadata"]["name"]
        try:
            stored = self.runs.create(run)
        except Conflict as e:
            return outcome(f"creating run {name}: {e}", healthy=False, **base)
        ref = {"apiVersion": run["apiVersion"], "kind": "RepackRun", "name": name, "uid": ObjectView(stored).uid}
        detail = "; ".join(why_not)
        aimed = f" for PodGroup {target}" if target else ""
        left_out = f"; {len(excluded)} PodGroup(s) moved within spec.minWorkloadInterval left out" if excluded else ""
        ends = f"; evictions must end by the window's end {rfc3339(window.end)}" if window.end else ""
        log.info("repackpolicy %s: %s fired, created run %s%s", policy.name, trigger, name, aimed)
        return outcome(f"{trigger} fired{': ' + detail if detail else ''}; created run {name}{aimed}{left_out}{ends}",
                       trigger=trigger, created=ref, lastTriggerTime=rfc3339(now), **base)

    # -- checks --
    @staticmethod
    def template_problem(spec) -> str:
        try:
            planner.RunSpec.from_spec(dict(spec))
        except SpecError as e:
            return "the planner refuses " + P.template_field(str(e))
        return ""

    def creator_problem(self, obj) -> str:
        """The policy's creator record must be one the admission policy vouched for (SEC-1): present,
        and the policy created after the admission policy was in force."""
        try:
            creator_of(obj)
        except UntrustedCreator as e:
            return f"no trustworthy creator record on the policy: {str(e).replace('the run', 'the policy')}"
        since = self.policy_since()
        created = parse_time(ObjectView(obj).meta.get("creationTimestamp"))
        if since is None:
            return ("the admission policy repack-run-creator is not installed, so the policy's creator record cannot "
                    "be trusted; run `kubectl repack install`")
        if created is None or created < since:
            return ("the policy was created before the admission policy repack-run-creator that vouches for its "
                    "creator record; re-create the policy")
        return ""

    # -- onPendingBlocked --
    def blocked_gangs(self, obj, policy: P.Policy, owned: list, snapshot: _Snapshot, now: dt.datetime) -> tuple:
        """(status.pendingBlocked, the gang to start a run for or None, a note for the message)."""
        from planner.relief import CAUSE_FRAGMENTATION, explain, gang_members
        from planner.scope import parse_selector
        from planner.selectors import selector_matches

        snap = snapshot.get()
        try:
            selector = parse_selector(dict(policy.blocked.selector), "spec.trigger.onPendingBlocked.podGroupSelector")
        except SpecError as e:
            return [], None, str(e)
        waiting = []
        for g in snap.podgroups:
            if selector is not None and not selector_matches(selector, g.labels):
                continue
            pending, bound = gang_members(snap, g.key)
            if bound < g.min_member:
                waiting.append(g.key)
        old = {as_map(e).get("podGroup"): dict(as_map(e)) for e in ObjectView(obj).status.get("pendingBlocked") or ()}
        # least recently checked first: untracked gangs, then the oldest checks
        order = sorted(waiting, key=lambda k: (str(old.get(k, {}).get("checkedAt") or ""), k))
        checked, entries = set(), {}
        for key in order[:self.max_blocked]:
            checked.add(key)
            try:
                diagnosis = explain(snap, key, policy.resource)
            except SpecError as e:
                log.info("repackpolicy %s: %s: %s", policy.name, key, e)
                continue
            if diagnosis.cause == CAUSE_FRAGMENTATION:
                entries[key] = {"podGroup": key, "blockedSince": old.get(key, {}).get("blockedSince") or rfc3339(now),
                                "checkedAt": rfc3339(now), "cause": diagnosis.cause}
        for key in order[self.max_blocked:]:
            if key in old and old[key].get("blockedSince"):
                entries[key] = old[key]       # not re-checked this time (cap): kept as it was
        tracked = P.restart_after_cannot_fit(sorted(entries.values(), key=lambda e: e["blockedSince"]), owned)
        tracked = tracked[:P.MAX_PENDING_TRACKED]
        due = [e for e in tracked if e["podGroup"] in checked and P.blocked_due(e, policy.blocked.for_seconds, now)]
        note = (f"{len(tracked)} of {len(waiting)} waiting gang(s) blocked by fragmentation"
                + (f" (checked {len(checked)} this time)" if len(waiting) > len(checked) else ""))
        if due:
            return tracked, due[0]["podGroup"], note + f"; {due[0]['podGroup']} since {due[0]['blockedSince']}"
        if tracked:
            first = tracked[0]
            note += f"; none for {policy.blocked.for_seconds}s yet ({first['podGroup']} since {first['blockedSince']})"
        return tracked, None, note
