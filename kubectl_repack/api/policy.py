"""RepackPolicy (POLICY-1, POLICY-2): runs that start themselves, decided here, pure.

A cluster-scoped `RepackPolicy` (`repack.volcano.sh/v1alpha1`, field names of the Go design's
RepackPolicy where it has them) creates RepackRuns from `spec.runTemplate` when a trigger fires:

* `trigger.cronSchedule`: a 5-field cron string (or @hourly-style macro), evaluated with croniter
  in `spec.timeZone` (an IANA name, like CronJob's; UTC when absent). A slot is due when its fire
  time is later than the last slot consumed (`status.lastScheduleTime`, or the policy's creation):
  slots missed while the controller was down run once, not once per slot. A wall-clock time that
  a DST change repeats fires once; one it skips fires at the first instant after the gap.
* `trigger.onFragAbovePercent`: the live fragmentation of the template's goal resource (the whole
  cluster, as the Go design and the run's summary measure it) is strictly above the threshold;
  at most one such run per evaluation interval.
* `trigger.onPendingBlocked {forSeconds, podGroupSelector}`: a pending gang whose PodGroup matches
  the selector has been blocked by fragmentation (the cause `kubectl repack why` names, not its
  queue or its selectors) for `forSeconds`: a run targeted at it (`spec.target`, RELIEF-2) starts.
  The blocked-since time of each gang lives in `status.pendingBlocked`; after a targeted run of this
  policy ends TargetCannotFit, the gang's clock restarts at the run's end.

Whatever fires, a policy never has two unfinished runs; `spec.suspend` stops it creating any;
`spec.windows[] {schedule, duration}` are maintenance windows: a window is open while some fire time
t of its schedule has t <= now < t + duration; outside every window nothing is created, and an
Execute created inside one carries the window's end (WINDOW_END_ANNOTATION), which the controller
makes its executionDeadline. `spec.minWorkloadInterval`: workloads (by owner, so a re-created
PodGroup is still the same workload) that any Execute moved within that interval are excluded from
this policy's runs (`scope.podGroups.exclude.names`); the record is kept in `status.recentlyMoved`,
so it outlives the runs (TTL) and controller restarts. Finished runs beyond
`successfulRunsHistoryLimit` / `failedRunsHistoryLimit` (default 3) are deleted, oldest first.

Generated runs are named `<policy>-<UTC YYYYMMDDHHmmss>`, labelled POLICY_LABEL / TRIGGER_LABEL, owned
by the policy (deleting it deletes them), and carry the policy's creator record (SEC-1): the
admission policy lets only the controller's account create a run whose record is not its own, and
only for a run a RepackPolicy owns; so every SubjectAccessReview of such a run asks about the user
who created the policy.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

from .control import CREATOR_ANNOTATIONS, COOLDOWN_ANNOTATION, TIMEOUT_ANNOTATION
from .run import (API_VERSION, GROUP, KIND as RUN_KIND, MODE_EXECUTE, PHASE_FAILED, PHASE_SUCCEEDED, TERMINAL_PHASES,
                  VERSION)
from .times import parse_duration, parse_time, rfc3339
from .view import ObjectView, as_map

KIND, PLURAL, SINGULAR = "RepackPolicy", "repackpolicies", "repackpolicy"
CRD_NAME = f"{PLURAL}.{GROUP}"

POLICY_LABEL = "repack.volcano.sh/repack-policy"      # the Go design's RepackPolicyLabel
TRIGGER_LABEL = "repack.volcano.sh/repack-trigger"    # the Go design's RepackTriggerLabel
TRIGGER_CRON, TRIGGER_FRAG, TRIGGER_BLOCKED, TRIGGER_MANUAL = (
    "cronSchedule", "onFragAbovePercent", "onPendingBlocked", "manual")
# `kubectl repack policy trigger NAME` sets this (any value, e.g. a time stamp): the controller
# creates one run now (suspend and windows still hold) and records the value it honoured in
# status.lastManualTrigger, so each value triggers once.
MANUAL_TRIGGER_ANNOTATION = "repack.volcano.sh/trigger"
# On an Execute a policy creates inside a maintenance window: the window's end (RFC 3339). The
# controller caps the run's execution deadline at it; anybody may set it, it only shortens a run.
WINDOW_END_ANNOTATION = "repack.volcano.sh/window-end"

COND_HEALTHY = "Healthy"
REASON_OK, REASON_FAILED = "ReconcileSucceeded", "ReconcileFailed"
DEFAULT_HISTORY_LIMIT = 3
NAME_MAX = 48                    # (schema.POLICY_NAME_MAX) <name>-<14 digits> is a run name and a label value (63 characters)
TIMESTAMP_FORMAT = "%Y%m%d%H%M%S"
MAX_EXCLUDED_NAMES = 1024        # scope.podGroups.exclude.names' maxItems
MAX_RECENTLY_MOVED = 512         # entries kept in status.recentlyMoved (newest win)
MAX_PENDING_TRACKED = 64         # entries kept in status.pendingBlocked
MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
# Annotations of runTemplate.metadata a generated run keeps among repack.volcano.sh/ ones (bounded
# durations the controller reads); the others (creator record, executor, cancel, seal) are ours.
TEMPLATE_ANNOTATIONS_KEPT = frozenset({TIMEOUT_ANNOTATION, COOLDOWN_ANNOTATION})


class PolicyError(ValueError):
    """A policy the controller cannot act on; `field` names what to fix (kubectl-style path)."""

    def __init__(self, field_path: str, message: str):
        super().__init__(f"{field_path}: {message}")
        self.field = field_path


# --- cron ----------------------------------------------------------------------------------------
def _croniter():
    from croniter import croniter   # a pure-Python dependency (setup.py, the zipapp)
    return croniter


def _zone(name: str, field_path: str = "spec.timeZone"):
    if not name:
        return dt.timezone.utc
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise PolicyError(field_path, f"{name!r} is not a time zone name of the IANA database "
                                      "(e.g. UTC, Europe/Berlin, America/New_York)") from None


def cron_problem(expr: Any) -> str:
    """Why `expr` is not a schedule a policy takes ('' when it is): 5 fields (minute hour
    day-of-month month day-of-week) or a macro such as @hourly; no TZ= prefix (use spec.timeZone)."""
    if not isinstance(expr, str) or not expr.strip():
        return "a cron schedule is required, e.g. '0 2 * * *'"
    text = expr.strip()
    if text.upper().startswith(("TZ=", "CRON_TZ=")):
        return f"{text!r}: a TZ= prefix is not supported; set spec.timeZone"
    fields = text.split()
    if not (len(fields) == 1 and fields[0].lower() in MACROS) and len(fields) != 5:
        return (f"{text!r} has {len(fields)} field(s); a cron schedule has 5 (minute hour day-of-month month "
                "day-of-week), e.g. '0 2 * * *', or is one of " + ", ".join(MACROS))
    croniter = _croniter()
    try:
        croniter(text, dt.datetime(2000, 1, 1, tzinfo=dt.timezone.utc))
    except Exception as e:  # noqa: BLE001 - croniter's errors have no common base besides ValueError/KeyError
        return f"{text!r} is not a valid cron schedule: {e}"
    return ""


def _wall(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=None)


def prev_fire(expr: str, tz, now: dt.datetime) -> Optional[dt.datetime]:
    """The latest fire time t <= now (a repeated wall-clock time counts at its first occurrence)."""
    croniter = _croniter()
    it = croniter(expr, now.astimezone(tz) + dt.timedelta(microseconds=1))
    try:
        t = it.get_prev(dt.datetime)
        before = it.get_prev(dt.datetime)
    except Exception:  # noqa: BLE001 - no earlier fire time (croniter gives up far in the past)
        return None
    return before if _wall(before) == _wall(t) else t


def next_fire(expr: str, tz, after: dt.datetime) -> Optional[dt.datetime]:
    """The first fire time t > after (a wall-clock time a DST change repeats fires once)."""
    croniter = _croniter()
    it = croniter(expr, after.astimezone(tz))
    try:
        prev = prev_fire(expr, tz, after)
        for _ in range(4):
            t = it.get_next(dt.datetime)
            if prev is None or _wall(t) != _wall(prev):
                return t
            prev = t
    except Exception:  # noqa: BLE001
        return None
    return None


# --- the policy, parsed --------------------------------------------------------------------------
@dataclass(frozen=True)
class Window:
    schedule: str
    duration: dt.timedelta


@dataclass(frozen=True)
class PendingBlocked:
    for_seconds: int
    selector: Mapping[str, Any]


@dataclass(frozen=True)
class Policy:
    """A RepackPolicy as the controller acts on it (parse_policy: every field checked)."""
    name: str
    uid: str
    generation: int
    created: Optional[dt.datetime]
    cron: str = ""
    tz: Any = dt.timezone.utc
    frag_above: Optional[int] = None
    blocked: Optional[PendingBlocked] = None
    template_spec: Mapping[str, Any] = field(default_factory=dict)
    template_labels: Mapping[str, str] = field(default_factory=dict)
    template_annotations: Mapping[str, str] = field(default_factory=dict)
    suspend: bool = False
    successful_limit: int = DEFAULT_HISTORY_LIMIT
    failed_limit: int = DEFAULT_HISTORY_LIMIT
    windows: tuple = ()
    min_interval: Optional[dt.timedelta] = None

    @property
    def resource(self) -> str:
        goals = self.template_spec.get("goals")
        if isinstance(goals, list) and goals and isinstance(goals[0], Mapping):
            return str(goals[0].get("resource") or "")
        return ""

    @property
    def mode(self) -> str:
        return str(self.template_spec.get("mode") or "")


def _int(value: Any, path: str, lo: int, hi: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(path, f"{value!r} is not an integer")
    if value < lo or (hi is not None and value > hi):
        raise PolicyError(path, f"{value} is outside {lo}-{hi}" if hi is not None else f"{value} is less than {lo}")
    return value


def _duration(value: Any, path: str) -> dt.timedelta:
    try:
        return parse_duration(value)
    except ValueError as e:
        raise PolicyError(path, str(e)) from None


def parse_policy(obj: Mapping[str, Any]) -> Policy:
    """The policy as the controller acts on it; PolicyError naming the first field it cannot act on
    (what the CRD's schema cannot check: the cron strings, the time zone, durations, the name's
    length, a frag trigger without a goal resource). The template's own validity is the planner's
    to judge (the controller asks it)."""
    view = ObjectView(obj)
    name = view.name
    if len(name) > NAME_MAX:
        raise PolicyError("metadata.name", f"{name!r} is longer than {NAME_MAX} characters (a run is named "
                                           "<policy>-<YYYYMMDDHHmmss> and labelled with the policy's name)")
    spec = view.spec
    trigger = as_map(spec.get("trigger"))
    tz = _zone(str(spec.get("timeZone") or ""))
    cron = trigger.get("cronSchedule")
    if cron is not None:
        problem = cron_problem(cron)
        if problem:
            raise PolicyError("spec.trigger.cronSchedule", problem)
    frag = trigger.get("onFragAbovePercent")
    if frag is not None:
        frag = _int(frag, "spec.trigger.onFragAbovePercent", 0, 100)
    blocked = None
    if trigger.get("onPendingBlocked") is not None:
        raw = as_map(trigger.get("onPendingBlocked"))
        if not isinstance(raw.get("podGroupSelector"), Mapping):
            raise PolicyError("spec.trigger.onPendingBlocked.podGroupSelector", "required field is missing")
        blocked = PendingBlocked(_int(raw.get("forSeconds", 0), "spec.trigger.onPendingBlocked.forSeconds", 0),
                                 raw["podGroupSelector"])
    if cron is None and frag is None and blocked is None:
        raise PolicyError("spec.trigger", "set at least one of cronSchedule, onFragAbovePercent, onPendingBlocked")
    template = as_map(spec.get("runTemplate"))
    tspec = as_map(template.get("spec"))
    if not tspec:
        raise PolicyError("spec.runTemplate.spec", "required field is missing")
    if "target" in tspec:
        raise PolicyError("spec.runTemplate.spec.target", "a policy's template names no target (onPendingBlocked "
                                                          "aims its runs at the gang that waits)")
    tmeta = as_map(template.get("metadata"))
    policy = Policy(
        name=name, uid=view.uid, generation=int(view.meta.get("generation") or 0),
        created=parse_time(view.meta.get("creationTimestamp")),
        cron=cron.strip() if isinstance(cron, str) else "", tz=tz, frag_above=frag, blocked=blocked,
        template_spec=dict(tspec),
        template_labels={str(k): str(v) for k, v in as_map(tmeta.get("labels")).items()},
        template_annotations={str(k): str(v) for k, v in as_map(tmeta.get("annotations")).items()},
        suspend=bool(spec.get("suspend")),
        successful_limit=_int(spec.get("successfulRunsHistoryLimit", DEFAULT_HISTORY_LIMIT),
                              "spec.successfulRunsHistoryLimit", 0),
        failed_limit=_int(spec.get("failedRunsHistoryLimit", DEFAULT_HISTORY_LIMIT), "spec.failedRunsHistoryLimit", 0),
        windows=tuple(_window(w, i) for i, w in enumerate(spec.get("windows") or ())),
        min_interval=(_duration(spec["minWorkloadInterval"], "spec.minWorkloadInterval")
                      if spec.get("minWorkloadInterval") is not None else None))
    if frag is not None and not policy.resource:
        raise PolicyError("spec.runTemplate.spec.goals", "onFragAbovePercent needs goals[0].resource: the "
                                                         "fragmentation of which resource")
    return policy


def _window(raw: Any, i: int) -> Window:
    path = f"spec.windows[{i}]"
    raw = as_map(raw)
    problem = cron_problem(raw.get("schedule"))
    if problem:
        raise PolicyError(f"{path}.schedule", problem)
    if raw.get("duration") is None:
        raise PolicyError(f"{path}.duration", "required field is missing")
    duration = _duration(raw["duration"], f"{path}.duration")
    if duration <= dt.timedelta(0):
        raise PolicyError(f"{path}.duration", "must be longer than 0s")
    return Window(str(raw["schedule"]).strip(), duration)


# --- windows -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowState:
    open: bool
    end: Optional[dt.datetime] = None        # the latest end of the windows open now (None: no windows)
    next_open: Optional[dt.datetime] = None  # while closed: when the next window opens


def window_state(policy: Policy, now: dt.datetime) -> WindowState:
    """Open when the policy has no windows, or when some fire time t of a window's schedule has
    t <= now < t + duration; `end` is the latest such t + duration."""
    if not policy.windows:
        return WindowState(True)
    ends, opens = [], []
    for w in policy.windows:
        # every fire time within one duration before now opens a window covering now (a window
        # longer than its schedule's period overlaps the next one)
        t = prev_fire(w.schedule, policy.tz, now)
        seen = 0
        while t is not None and now < t + w.duration and seen < 1000:
            ends.append(t + w.duration)
            t = prev_fire(w.schedule, policy.tz, t - dt.timedelta(seconds=1))
            seen += 1
        nxt = next_fire(w.schedule, policy.tz, now)
        if nxt is not None:
            opens.append(nxt)
    if ends:
        return WindowState(True, max(ends).astimezone(dt.timezone.utc))
    return WindowState(False, None, min(opens).astimezone(dt.timezone.utc) if opens else None)


# --- cron slots ----------------------------------------------------------------------------------
def cron_anchor(policy: Policy, status: Mapping[str, Any]) -> Optional[dt.datetime]:
    """Slots after this time are due: the last slot consumed, else the policy's creation."""
    return parse_time(status.get("lastScheduleTime")) or policy.created


def cron_due(policy: Policy, anchor: Optional[dt.datetime], now: dt.datetime) -> Optional[dt.datetime]:
    """The latest cron slot t with anchor < t <= now (one, however many were missed), or None."""
    if not policy.cron:
        return None
    t = prev_fire(policy.cron, policy.tz, now)
    if t is None or (anchor is not None and t <= anchor):
        return None
    return t.astimezone(dt.timezone.utc)


def next_cron(policy: Policy, now: dt.datetime) -> Optional[dt.datetime]:
    if not policy.cron:
        return None
    t = next_fire(policy.cron, policy.tz, now)
    return t.astimezone(dt.timezone.utc) if t else None


# --- runs of a policy ----------------------------------------------------------------------------
def owned_by(run: Mapping[str, Any], policy_uid: str, policy_name: str) -> bool:
    """Whether this incarnation of the policy created the run: the controller's mark, the
    POLICY_LABEL naming the policy, and an ownerReference to its uid. An ownerReference alone is not
    enough (anybody who may create runs can write one, and "never two unfinished runs" would then
    stop the policy for good); the admission policy lets only the controller's account set the label,
    at creation, and nobody add an ownerReference to a RepackPolicy later (deploy.policies)."""
    view = ObjectView(run)
    return view.labels.get(POLICY_LABEL) == policy_name and any(
        as_map(r).get("kind") == KIND and as_map(r).get("uid") == policy_uid for r in view.meta.get("ownerReferences") or ())


def runs_of(policy_uid: str, policy_name: str, runs: Iterable[Mapping[str, Any]]) -> list:
    """The runs this incarnation of the policy created (`owned_by`), oldest first."""
    return sorted((r for r in runs if owned_by(r, policy_uid, policy_name)),
                  key=lambda r: (str(ObjectView(r).meta.get("creationTimestamp") or ""), ObjectView(r).name))


def _phase(run: Mapping[str, Any]) -> str:
    return str(ObjectView(run).status.get("phase") or "")


def unfinished(runs: Iterable[Mapping[str, Any]]) -> list:
    return [r for r in runs if _phase(r) not in TERMINAL_PHASES]


def history_to_delete(owned: Sequence[Mapping[str, Any]], successful_limit: int, failed_limit: int) -> list:
    """Finished runs beyond the limits (each phase apart), oldest first; `owned` is oldest first."""
    out = []
    for phase, limit in ((PHASE_SUCCEEDED, successful_limit), (PHASE_FAILED, failed_limit)):
        done = [r for r in owned if _phase(r) == phase]
        out.extend(done[:max(len(done) - limit, 0)])
    return sorted(out, key=lambda r: str(ObjectView(r).meta.get("creationTimestamp") or ""))


def _reason(run: Mapping[str, Any]) -> str:
    for c in ObjectView(run).status.get("conditions") or ():
        c = as_map(c)
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed"):
            return str(c.get("reason") or "")
    return ""


def last_run_status(run: Mapping[str, Any]) -> dict:
    """status.lastRunStatus: the Go design's summary of the newest finished run (name, mode, trigger,
    resource) and the parts of its status an operator reads first."""
    view = ObjectView(run)
    st = view.status
    goals = view.spec.get("goals")
    out = {"name": view.name, "mode": str(view.spec.get("mode") or ""),
           "trigger": str(view.labels.get(TRIGGER_LABEL) or ""),
           "phase": str(st.get("phase") or ""), "reason": _reason(run), "message": str(st.get("message") or "")[:1024]}
    if isinstance(goals, list) and goals and isinstance(goals[0], Mapping) and goals[0].get("resource"):
        out["resource"] = str(goals[0]["resource"])
    for key in ("startTime", "completionTime"):
        if st.get(key):
            out[key] = st[key]
    summary = as_map(as_map(st.get("plan")).get("summary"))
    if summary:
        out["plan"] = {"summary": {k: summary[k] for k in ("fragBeforePercent", "fragAfterPercent", "freedNodeCount",
                                                           "movedCardCount") if k in summary}}
    result = as_map(st.get("result"))
    if result:
        out["result"] = {k: result[k] for k in ("fragAfterPercent", "freedNodeCount", "movedCardCount",
                                                "metricsVerified", "freedNodes") if k in result}
    return out


def newest_finished(owned: Sequence[Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    done = [r for r in owned if _phase(r) in TERMINAL_PHASES]
    return max(done, key=lambda r: (str(ObjectView(r).status.get("completionTime") or ""),
                                    str(ObjectView(r).meta.get("creationTimestamp") or "")), default=None)


def fruitless_at(owned: Sequence[Mapping[str, Any]], frag: int) -> Optional[Mapping[str, Any]]:
    """The newest finished run of the policy when it moved nothing although it started at this same
    fragmentation (`status.plan.summary.fragBeforePercent`): another run now would find what it
    found, so onFragAbovePercent waits for the fragmentation to change (None: no such run)."""
    newest = newest_finished(owned)
    if newest is None:
        return None
    st = ObjectView(newest).status
    before = as_map(as_map(st.get("plan")).get("summary")).get("fragBeforePercent")
    if before == frag and not any(_evicted(as_map(r)) for r in st.get("relocations") or ()):
        return newest
    return None


# --- moved workloads (minWorkloadInterval) -------------------------------------------------------
def _evicted(record: Mapping[str, Any]) -> bool:
    return as_map(record.get("eviction")).get("phase") in ("Accepted", "IndirectlyRemoved", "InProgress")


def moved_workloads(runs: Iterable[Mapping[str, Any]]) -> list:
    """What Execute runs moved: one entry per (namespace, workload) with the time it was moved.
    The workload is the PodGroup's owner from the plan (so a re-created PodGroup of the same VCJob
    or ModelServing is the same workload), else the PodGroup itself."""
    out = {}
    for run in runs:
        view = ObjectView(run)
        if view.spec.get("mode") != MODE_EXECUTE:
            continue
        st = view.status
        moves = {(as_map(m).get("namespace"), as_map(m).get("podGroupName")): as_map(as_map(m).get("owner"))
                 for m in as_map(st.get("plan")).get("moves") or ()}
        when = str(st.get("startTime") or view.meta.get("creationTimestamp") or "")
        for rec in st.get("relocations") or ():
            rec = as_map(rec)
            if not _evicted(rec):
                continue
            ns, group = str(rec.get("namespace") or ""), str(rec.get("podGroupName") or "")
            if not ns or not group:
                continue
            entry = workload_entry(ns, group, moves.get((ns, group)) or {}, when, view.name)
            key = workload_key(entry)
            if key not in out or out[key]["movedAt"] < entry["movedAt"]:
                out[key] = entry
    return list(out.values())


def workload_entry(namespace: str, group: str, owner: Mapping[str, Any], moved_at: str, run: str) -> dict:
    entry = {"namespace": namespace, "podGroupName": group, "movedAt": moved_at, "run": run}
    if owner.get("kind") and owner.get("name"):
        entry["owner"] = {k: str(owner[k]) for k in ("apiVersion", "kind", "name") if owner.get(k)}
    return entry


def workload_key(entry: Mapping[str, Any]) -> tuple:
    owner = as_map(entry.get("owner"))
    if owner.get("kind") and owner.get("name"):
        return (entry.get("namespace"), str(owner.get("apiVersion") or "").split("/")[0], owner["kind"], owner["name"])
    return (entry.get("namespace"), "", "PodGroup", entry.get("podGroupName"))


def merge_moved(existing: Iterable[Mapping[str, Any]], fresh: Iterable[Mapping[str, Any]], now: dt.datetime,
                interval: dt.timedelta) -> list:
    """status.recentlyMoved: the newest entry per workload, those moved within `interval` of now."""
    keep = {}
    for entry in list(existing or ()) + list(fresh or ()):
        entry = dict(as_map(entry))
        moved = parse_time(entry.get("movedAt"))
        if moved is None or now - moved >= interval:
            continue
        key = workload_key(entry)
        if key not in keep or str(keep[key]["movedAt"]) < str(entry["movedAt"]):
            keep[key] = entry
    out = sorted(keep.values(), key=lambda e: (str(e["movedAt"]), workload_key(e)), reverse=True)
    return out[:MAX_RECENTLY_MOVED]


def excluded_podgroups(moved: Iterable[Mapping[str, Any]], podgroups: Iterable[tuple]) -> list:
    """PodGroup keys ("namespace/name") of the moved workloads, from `podgroups`: (key, namespace,
    owner group, owner kind, owner name) of each PodGroup now (owner fields '' when it has none);
    a moved PodGroup that no longer exists is named too (harmless, and covers a listing race)."""
    owners, groups = set(), set()
    for entry in moved:
        key = workload_key(entry)
        if key[2] == "PodGroup" and not key[1]:
            groups.add(f"{key[0]}/{key[3]}")
        else:
            owners.add(key)
        groups.add(f"{entry.get('namespace')}/{entry.get('podGroupName')}")
    for key, namespace, group, kind, name in podgroups:
        if kind and name and (namespace, group, kind, name) in owners:
            groups.add(key)
    return sorted(groups)


# --- pending gangs blocked by fragmentation ------------------------------------------------------
def blocked_due(entry: Mapping[str, Any], for_seconds: int, now: dt.datetime) -> bool:
    since = parse_time(as_map(entry).get("blockedSince"))
    return since is not None and (now - since).total_seconds() >= for_seconds


def restart_after_cannot_fit(entries: list, owned: Sequence[Mapping[str, Any]]) -> list:
    """A gang whose targeted run of this policy ended TargetCannotFit waits forSeconds again,
    counted from the run's end."""
    from .run import Reason

    ended = {}
    for run in owned:
        view = ObjectView(run)
        target = as_map(view.spec.get("target")).get("podGroups") or ()
        if _phase(run) in TERMINAL_PHASES and _reason(run) == Reason.TARGET_CANNOT_FIT and target:
            end = str(view.status.get("completionTime") or "")
            for key in target:
                ended[key] = max(ended.get(key, ""), end)
    out = []
    for e in entries:
        e = dict(e)
        end = ended.get(e.get("podGroup"))
        if end and str(e.get("blockedSince") or "") < end:
            e["blockedSince"] = end
        out.append(e)
    return out


# --- the run a policy creates --------------------------------------------------------------------
def run_name(policy_name: str, now: dt.datetime) -> str:
    return f"{policy_name}-{now.astimezone(dt.timezone.utc).strftime(TIMESTAMP_FORMAT)}"


def build_run(policy: Policy, policy_obj: Mapping[str, Any], trigger: str, now: dt.datetime,
              excluded: Sequence[str] = (), window_end: Optional[dt.datetime] = None,
              target: Optional[str] = None) -> dict:
    """The RepackRun the policy creates now: the template's spec (with `excluded` PodGroups added
    to scope.podGroups.exclude.names, and for `target` aimed at that gang), its labels and bounded
    annotations, the policy's labels, its creator record and an ownerReference to it."""
    import copy

    spec = copy.deepcopy(dict(policy.template_spec))
    if excluded:
        scope = spec.setdefault("scope", {})
        podgroups = scope.setdefault("podGroups", {})
        exclude = podgroups.setdefault("exclude", {})
        names = list(exclude.get("names") or [])
        names += [n for n in excluded if n not in names]
        if len(names) > MAX_EXCLUDED_NAMES:
            raise PolicyError("status.recentlyMoved", f"{len(names)} PodGroups to exclude, more than the "
                                                      f"{MAX_EXCLUDED_NAMES} a run's scope can name")
        exclude["names"] = names
    if target:
        spec.pop("networkTopology", None)
        goals = [{"resource": g["resource"]} for g in spec.get("goals") or () if as_map(g).get("resource")]
        if goals:
            spec["goals"] = goals[:1]
        else:
            spec.pop("goals", None)
        spec["target"] = {"podGroups": [target]}
    view = ObjectView(policy_obj)
    labels = dict(policy.template_labels)
    labels.update({POLICY_LABEL: policy.name, TRIGGER_LABEL: trigger})
    annotations = {k: v for k, v in policy.template_annotations.items()
                   if not k.startswith("repack.volcano.sh/") or k in TEMPLATE_ANNOTATIONS_KEPT}
    annotations.update({k: str(view.annotations.get(k) or "") for k in CREATOR_ANNOTATIONS})
    if window_end is not None and spec.get("mode") == MODE_EXECUTE:
        annotations[WINDOW_END_ANNOTATION] = rfc3339(window_end)
    return {"apiVersion": API_VERSION, "kind": RUN_KIND,
            "metadata": {"name": run_name(policy.name, now), "labels": labels, "annotations": annotations,
                         "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": policy.name,
                                              "uid": policy.uid, "controller": True,
                                              "blockOwnerDeletion": False}]},
            "spec": spec}


def template_field(message: str) -> str:
    """A planner message about `spec.x` of a run, said of the policy's `spec.runTemplate.spec.x`."""
    return message.replace("spec.", "spec.runTemplate.spec.", 1) if message.startswith("spec.") else \
        f"spec.runTemplate.spec: {message}"


def window_timeout(window_end: Optional[str], now: dt.datetime) -> Optional[dt.timedelta]:
    """How long an Execute starting now may run to end with its window (None: no window end);
    ValueError naming the annotation when it is unreadable."""
    if window_end is None:
        return None
    end = parse_time(window_end)
    if end is None:
        raise ValueError(f"metadata.annotations[{WINDOW_END_ANNOTATION}]: {str(window_end)[:64]!r} is not a time")
    return max(end - now, dt.timedelta(0))


# --- status --------------------------------------------------------------------------------------
def set_healthy(status: dict, ok: bool, message: str, now: str, generation: int = 0) -> None:
    """The Go design's single condition: Healthy True/ReconcileSucceeded or False/ReconcileFailed."""
    cstatus, reason = ("True", REASON_OK) if ok else ("False", REASON_FAILED)
    conds = [c for c in status.get("conditions") or () if isinstance(c, dict)]
    for c in conds:
        if c.get("type") == COND_HEALTHY:
            if c.get("status") != cstatus:
                c["lastTransitionTime"] = now
            c.update(status=cstatus, reason=reason, message=message[:2048])
            if generation:
                c["observedGeneration"] = generation
            break
    else:
        c = {"type": COND_HEALTHY, "status": cstatus, "reason": reason, "message": message[:2048],
             "lastTransitionTime": now}
        if generation:
            c["observedGeneration"] = generation
        conds.append(c)
    status["conditions"] = conds


def healthy(status: Mapping[str, Any]) -> Optional[Mapping[str, Any]]:
    return next((as_map(c) for c in status.get("conditions") or () if as_map(c).get("type") == COND_HEALTHY), None)
