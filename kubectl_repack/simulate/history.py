"""A user's job history as a replay's job stream (`kubectl repack simulate --history`), and the pods
already running in a snapshot as jobs that hold their nodes.

Two formats:
- the openb CSV (trace.POD_COLUMNS): one job of one pod per row, submitted at its creation_time
  (relative to the first row), running for deletion_time - scheduled_time; rows without a GPU or that
  never ran are left out, as in the trace module;
- a List (or YAML stream, or JSON array) of Volcano Jobs (batch.volcano.sh/v1alpha1 Job): submitted at
  metadata.creationTimestamp, running for status.runningDuration, else from creation to
  status.state.lastTransitionTime of a finished phase; pods per spec.tasks[] (replicas, the summed
  container requests, nodeSelector), minAvailable from spec.minAvailable (default: every pod).

Bad input is a TraceError naming the file and where in it (line and column for CSV; the object and
field for Volcano Jobs).
"""
from __future__ import annotations

from planner.quantity import scaled

from kubectl_repack.api.times import parse_duration, parse_time

from .trace import POD_COLUMNS, JobSpec, TraceError, csv_rows, read_int

MIB = 2 ** 20
FINISHED = ("Completed", "Failed", "Terminated", "Aborted")


def is_csv(path, text: str) -> bool:
    """A CSV history: named *.csv, or a first line of comma-separated names (no YAML or JSON)."""
    first = text.lstrip().split("\n", 1)[0]
    return str(path).lower().endswith(".csv") or (first.count(",") >= 2 and not first.startswith(("{", "[", "-"))
                                                  and ":" not in first)


def csv_jobs(path, resource, max_duration) -> list:
    """Jobs of an openb pod list on its own timestamps."""
    jobs, t0 = [], None
    for n, row, index in csv_rows(path, POD_COLUMNS):
        values = {c: read_int(path, n, row, index, c) for c in ("cpu_milli", "memory_mib", "num_gpu", "gpu_milli",
                                                            "creation_time")}
        deleted = read_int(path, n, row, index, "deletion_time", optional=True)
        scheduled = read_int(path, n, row, index, "scheduled_time", optional=True)
        if values["num_gpu"] == 0 or deleted is None or scheduled is None:
            continue
        if deleted < scheduled:
            raise TraceError(path, n, "deletion_time", f"{deleted} is before scheduled_time {scheduled}",
                             index["deletion_time"] + 1)
        created = values["creation_time"]
        t0 = created if t0 is None else min(t0, created)
        cards = values["num_gpu"] if values["gpu_milli"] >= 1000 else max(values["num_gpu"], 1)
        models = tuple(sorted(m for m in row["gpu_spec"].split("|") if m))
        jobs.append(JobSpec(f"h-{row['name'] or n}", float(created), "background", 1, cards, values["cpu_milli"],
                            values["memory_mib"], models, float(max(min(deleted - scheduled, max_duration), 1)), 1))
    if not jobs:
        raise TraceError(path, 1, "num_gpu", f"no row requests {resource} and ran")
    jobs = [_shift(j, t0) for j in jobs]
    jobs.sort(key=lambda j: (j.submit, j.name))
    return jobs


def _shift(job, t0):
    from dataclasses import replace
    return replace(job, submit=job.submit - t0, name=_dns(job.name))


def _dns(name):
    return "".join(c if c.isalnum() or c == "-" else "-" for c in name.lower())[:60].strip("-") or "job"


def vcjob_jobs(path, objects, resource, max_duration) -> list:
    """Jobs of a list of Volcano Jobs (see the module doc)."""
    out, t0 = [], None
    for i, obj in enumerate(objects):
        where = f"item [{i}]"
        if not isinstance(obj, dict) or obj.get("kind") != "Job" or not str(obj.get("apiVersion", "")).startswith(
                "batch.volcano.sh/"):
            raise TraceError(path, where, "kind", "expected a Volcano Job (batch.volcano.sh/v1alpha1, kind Job)")
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        where = f"Job {meta.get('namespace', 'default')}/{name} ({where})"
        created = parse_time(meta.get("creationTimestamp"))
        if created is None:
            raise TraceError(path, where, "metadata.creationTimestamp", "missing or not a time")
        status = obj.get("status") or {}
        duration = None
        if status.get("runningDuration"):
            try:
                duration = parse_duration(status["runningDuration"]).total_seconds()
            except ValueError as e:
                raise TraceError(path, where, "status.runningDuration", str(e)) from None
        else:
            state = status.get("state") or {}
            ended = parse_time(state.get("lastTransitionTime"))
            if state.get("phase") in FINISHED and ended is not None:
                duration = (ended - created).total_seconds()
        if duration is None:
            raise TraceError(path, where, "status.runningDuration",
                             "no run time: give status.runningDuration, or a finished status.state with lastTransitionTime")
        if duration < 0:
            raise TraceError(path, where, "status.state.lastTransitionTime", "before metadata.creationTimestamp")
        shapes, selector = [], {}
        spec = obj.get("spec") or {}
        for k, task in enumerate(spec.get("tasks") or ()):
            field = f"spec.tasks[{k}]"
            replicas = task.get("replicas", 1)
            if not isinstance(replicas, int) or replicas < 0:
                raise TraceError(path, where, f"{field}.replicas", f"{replicas!r} is not a non-negative integer")
            pod = ((task.get("template") or {}).get("spec")) or {}
            req = {}
            for c, container in enumerate(pod.get("containers") or ()):
                res = (container or {}).get("resources") or {}
                amounts = dict(res.get("limits") or {})
                amounts.update(res.get("requests") or {})
                for r in (resource, "cpu", "memory"):
                    if r in amounts:
                        try:
                            req[r] = req.get(r, 0) + scaled(r, amounts[r])
                        except ValueError as e:
                            raise TraceError(path, where, f"{field}.template.spec.containers[{c}].resources",
                                             f"{r}: {e}") from None
            selector.update(pod.get("nodeSelector") or {})
            shapes += [(req.get(resource, 0), req.get("cpu", 0), -(-req.get("memory", 0) // MIB))] * replicas
        if not shapes:
            raise TraceError(path, where, "spec.tasks", "no pod to run")
        if not any(s[0] for s in shapes):
            continue
        min_available = spec.get("minAvailable", len(shapes))
        if not isinstance(min_available, int) or not 0 < min_available <= len(shapes):
            raise TraceError(path, where, "spec.minAvailable", f"{min_available!r} is not 1..{len(shapes)}")
        t = created.timestamp()
        t0 = t if t0 is None else min(t0, t)
        labels = tuple(sorted((str(k), str(v)) for k, v in (meta.get("labels") or {}).items()))
        out.append(JobSpec(_dns(f"{meta.get('namespace', 'default')}-{name}"), t,
                           "gang" if len(shapes) > 1 else "background", len(shapes), max(s[0] for s in shapes),
                           shapes[0][1], shapes[0][2], (), float(max(min(duration, max_duration), 1)),
                           min_available, tuple(shapes), labels, tuple(sorted(selector.items()))))
    if not out:
        raise TraceError(path, "-", "spec.tasks", f"no Volcano Job requests {resource}")
    out = [_shift(j, t0) for j in out]
    out.sort(key=lambda j: (j.submit, j.name))
    return out


def running_jobs(snapshot, resource, horizon) -> list:
    """The snapshot's bound pods that request `resource`, one job per PodGroup (or pod), placed where
    they are at time 0 and running through the replay (their end is not in a snapshot). They keep
    their own objects (owner, scheduler, opt-outs, PodGroup), so a policy moves only what it may."""
    groups = {}
    for p in snapshot.pods:
        if p.node_name and not p.terminal and p.requests.get(resource, 0) > 0:
            groups.setdefault(f"{p.namespace}/{p.group_name or p.name}", []).append(p)
    out = []
    for key, pods in sorted(groups.items()):
        pg = snapshot.podgroup_by_key.get(key)
        shapes = tuple((p.requests.get(resource, 0), p.requests.get("cpu", 0), -(-p.requests.get("memory", 0) // MIB))
                       for p in pods)
        out.append(JobSpec(_dns("running-" + key.replace("/", "-")), 0.0, "running", len(pods),
                           max(s[0] for s in shapes), shapes[0][1], shapes[0][2], (), float(2 * horizon),
                           min(pg.min_member, len(pods)) if pg is not None and pg.min_member else len(pods), shapes,
                           tuple(sorted(pg.labels.items())) if pg is not None else (), (),
                           tuple(p.node_name for p in pods), tuple(pods), pg))
    return out
