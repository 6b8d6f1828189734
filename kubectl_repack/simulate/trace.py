"""What a replay replays: the cluster's nodes, the pod shapes and durations, and the seeded workload.

The openb trace (Alibaba GPU cluster trace v2023, the FGD paper's) is used as FGD uses it: its nodes
are the cluster, its pods are the distribution of shapes and durations, sampled at an arrival rate
that sets the load (offered GPU-seconds / capacity GPU-seconds), plus gang jobs from a seeded
generator (the trace has no gang ids). A GPU-sharing pod (gpu_milli < 1000) counts as one whole card;
a non-empty gpu_spec (`|`-separated GPU models) becomes a node-affinity term on the GPU model.
CPU-only pods (num_gpu 0) and pods that never ran (no scheduled_time) carry no GPU work and are not
sampled. `synthetic_*` make a trace of the same shape in code, for CI and users without the data.

Bad input is a TraceError naming the file, the line and the column.
"""
from __future__ import annotations

import csv
import math
import random
from dataclasses import dataclass

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec", "creation_time",
               "deletion_time", "scheduled_time")
DAY = 86400


class TraceError(ValueError):
    """Bad input, as `file:line: column NAME (N): problem` (or `file:OBJECT: field PATH: problem`)."""

    def __init__(self, path, line, column, message, index=None):
        where = (f"column {column}" if isinstance(line, int) else f"field {column}") + (
            f" ({index})" if index is not None else "")
        super().__init__(f"{path}:{line}: {where}: {message}")
        self.path, self.line, self.column = str(path), line, column


@dataclass(frozen=True)
class NodeSpec:
    name: str
    cpu_m: int
    mem_mib: int
    gpus: int
    model: str


@dataclass(frozen=True)
class Shape:
    """One sampled background pod: its requests (whole cards), allowed GPU models, duration (s)."""
    cpu_m: int
    mem_mib: int
    gpus: int
    models: tuple
    duration: float


@dataclass(frozen=True)
class GangKind:
    pods: int
    gpus: int
    min_available: int
    weight: float


# The default gang mix (sizes in cards: 2x4, 2x8, 4x8, 8x8; every pod needed: minAvailable = pods).
DEFAULT_GANGS = (GangKind(2, 4, 2, 0.4), GangKind(2, 8, 2, 0.3), GangKind(4, 8, 4, 0.2), GangKind(8, 8, 8, 0.1))


@dataclass(frozen=True)
class Workload:
    """Workload settings: load, horizon, the gang mix and its share of the offered GPU-seconds."""
    load: float = 1.0
    days: float = 8.0
    warmup_days: float = 1.0
    gangs: tuple = DEFAULT_GANGS
    gang_share: float = 0.3                 # of offered GPU-seconds
    gang_median_s: float = 2 * 3600.0       # lognormal duration: median, sigma (heavy tail), cap
    gang_sigma: float = 1.0
    max_duration_s: float = 2 * DAY         # background durations are capped too (the trace's
    #                                         still-running pods would otherwise run for months)
    gang_cpu_m: int = 8000                  # per gang pod: CPU and memory per card
    gang_mem_mib: int = 32768

    def describe(self) -> dict:
        return {"load": self.load, "days": self.days, "warmup_days": self.warmup_days,
                "gang_share_of_gpu_seconds": self.gang_share if self.gangs else 0.0,
                "gang_mix": [{"pods": g.pods, "gpus_per_pod": g.gpus, "min_available": g.min_available,
                              "weight": g.weight} for g in self.gangs],
                "gang_duration": {"lognormal_median_s": self.gang_median_s, "sigma": self.gang_sigma,
                                  "cap_s": self.max_duration_s},
                "background_duration_cap_s": self.max_duration_s}


@dataclass(frozen=True)
class JobSpec:
    name: str
    submit: float
    kind: str                 # "background" | "gang"
    pods: int
    gpus: int                 # per pod, whole cards
    cpu_m: int                # per pod
    mem_mib: int
    models: tuple             # allowed GPU models (() = any)
    duration: float
    min_available: int
    pod_shapes: tuple = ()    # per pod (cards, cpu_m, mem_mib) when its pods differ (a job history)
    labels: tuple = ()        # PodGroup and pod labels ((key, value), ...)
    node_selector: tuple = ()
    initial_nodes: tuple = ()   # per pod, where it already runs at submit (a snapshot's running pods)
    source_pods: tuple = ()     # a snapshot's own planner Pods (their owners, opt-outs, scheduler kept)
    source_podgroup: object = None      # and their PodGroup (None: they have none)


def csv_rows(path, columns):
    try:
        handle = open(path, newline="")
    except OSError as e:
        raise TraceError(path, 0, "-", f"cannot read: {e.strerror or e}") from None
    with handle:
        reader = csv.reader(handle)
        header = next(reader, None)
        if header is None:
            raise TraceError(path, 1, "-", "empty file: a header line is required")
        header = [h.strip() for h in header]
        for c in columns:
            if c not in header:
                raise TraceError(path, 1, c, f"required column is missing (header: {','.join(header)})")
        index = {c: header.index(c) for c in columns}
        for n, row in enumerate(reader, start=2):
            if not row:
                continue
            if len(row) < len(header):
                raise TraceError(path, n, header[len(row)], "missing value (short line)", len(row) + 1)
            yield n, {c: row[i].strip() for c, i in index.items()}, index


def read_int(path, n, row, index, column, low=0, optional=False):
    text = row[column]
    if text == "" and optional:
        return None
    try:
        value = int(float(text)) if text not in ("", "nan") else None
    except ValueError:
        value = None
    if value is None:
        raise TraceError(path, n, column, f"{text!r} is not a number", index[column] + 1)
    if value < low:
        raise TraceError(path, n, column, f"{value} is negative" if low == 0 else f"{value} is below {low}",
                         index[column] + 1)
    return value


def read_nodes(path) -> list:
    """Nodes of an openb node list with at least one GPU, in file order."""
    out = []
    for n, row, index in csv_rows(path, NODE_COLUMNS):
        gpus = read_int(path, n, row, index, "gpu")
        if not row["sn"]:
            raise TraceError(path, n, "sn", "empty node name", index["sn"] + 1)
        node = NodeSpec(row["sn"], read_int(path, n, row, index, "cpu_milli"), read_int(path, n, row, index, "memory_mib"),
                        gpus, row["model"])
        if gpus > 0:
            out.append(node)
    if not out:
        raise TraceError(path, 1, "gpu", "no node with a GPU")
    return out


def read_shapes(path, max_duration=Workload.max_duration_s) -> list:
    """Background shapes of an openb pod list (see the module doc for what is left out)."""
    out = []
    for n, row, index in csv_rows(path, POD_COLUMNS):
        cpu, mem = read_int(path, n, row, index, "cpu_milli"), read_int(path, n, row, index, "memory_mib")
        num_gpu, milli = read_int(path, n, row, index, "num_gpu"), read_int(path, n, row, index, "gpu_milli")
        created = read_int(path, n, row, index, "creation_time")
        deleted = read_int(path, n, row, index, "deletion_time", optional=True)
        scheduled = read_int(path, n, row, index, "scheduled_time", optional=True)
        if scheduled is not None and deleted is not None and deleted < scheduled:
            raise TraceError(path, n, "deletion_time", f"{deleted} is before scheduled_time {scheduled}",
                             index["deletion_time"] + 1)
        if scheduled is not None and scheduled < created:
            raise TraceError(path, n, "scheduled_time", f"{scheduled} is before creation_time {created}",
                             index["scheduled_time"] + 1)
        if num_gpu == 0 or scheduled is None or deleted is None:
            continue
        models = tuple(sorted(m for m in row["gpu_spec"].split("|") if m))
        gpus = num_gpu if milli >= 1000 else max(num_gpu, 1)      # a shared card counts whole
        out.append(Shape(cpu, mem, gpus, models, float(max(min(deleted - scheduled, max_duration), 1))))
    if not out:
        raise TraceError(path, 1, "num_gpu", "no pod with a GPU and a duration to sample")
    return out


def synthetic_nodes(count=64, seed=0) -> list:
    """A cluster shaped like openb's: mostly 8-card nodes, some 2- and 4-card ones, a few models."""
    rng = random.Random(f"nodes-{seed}")
    kinds = ((8, "G2", 0.5), (2, "T4", 0.35), (4, "V100M16", 0.1), (1, "P100", 0.05))
    out = []
    for i in range(count):
        gpus, model, _ = rng.choices(kinds, weights=[k[2] for k in kinds])[0]
        out.append(NodeSpec(f"sim-node-{i:04d}", 96000 if gpus == 8 else 64000, 786432 if gpus == 8 else 262144,
                            gpus, model))
    return out


def synthetic_shapes(count=2000, seed=0, max_duration=Workload.max_duration_s) -> list:
    """Background pods like openb's: mostly one card (some shared), few multi-card, heavy-tailed durations."""
    rng = random.Random(f"shapes-{seed}")
    out = []
    for _ in range(count):
        gpus = rng.choices((1, 2, 4, 8), weights=(0.93, 0.02, 0.02, 0.03))[0]
        cpu = rng.choice((4000, 6000, 8000, 12000)) * gpus
        duration = min(max(rng.lognormvariate(math.log(900), 2.0), 5), max_duration)
        out.append(Shape(cpu, cpu * 2, gpus, (), float(duration)))
    return out


def _lognormal_mean(median, sigma):
    return median * math.exp(sigma * sigma / 2)


def generate(nodes, shapes, workload: Workload, seed: int) -> list:
    """The job stream: background pods sampled from `shapes` and gangs from the mix, as Poisson
    arrivals whose offered GPU-seconds are `load` x the cluster's GPU capacity; by submit time."""
    rng = random.Random(f"jobs-{seed}")
    capacity = sum(n.gpus for n in nodes)
    horizon = workload.days * DAY
    gang_share = workload.gang_share if workload.gangs else 0.0
    bg_work = sum(s.gpus * s.duration for s in shapes) / len(shapes)
    jobs = []
    bg_rate = (1 - gang_share) * workload.load * capacity / bg_work
    t = 0.0
    i = 0
    while bg_rate > 0:
        t += rng.expovariate(bg_rate)
        if t >= horizon:
            break
        s = shapes[rng.randrange(len(shapes))]
        jobs.append(JobSpec(f"bg-{i:06d}", t, "background", 1, s.gpus, s.cpu_m, s.mem_mib, s.models, s.duration, 1))
        i += 1
    if gang_share > 0:
        weights = [g.weight for g in workload.gangs]
        total_w = sum(weights)
        mean_cards = sum(g.pods * g.gpus * g.weight for g in workload.gangs) / total_w
        gang_rate = gang_share * workload.load * capacity / (mean_cards * _lognormal_mean(
            workload.gang_median_s, workload.gang_sigma))
        t, i = 0.0, 0
        grng = random.Random(f"gangs-{seed}")
        while True:
            t += grng.expovariate(gang_rate)
            if t >= horizon:
                break
            g = grng.choices(workload.gangs, weights=weights)[0]
            d = min(grng.lognormvariate(math.log(workload.gang_median_s), workload.gang_sigma), workload.max_duration_s)
            jobs.append(JobSpec(f"gang-{i:05d}", t, "gang", g.pods, g.gpus, workload.gang_cpu_m * g.gpus,
                                workload.gang_mem_mib * g.gpus, (), float(d), g.min_available))
            i += 1
    jobs.sort(key=lambda j: (j.submit, j.name))
    return jobs
