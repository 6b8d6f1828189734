"""One replay per arm on the same trace and seed, and the result document they make together.

`replay_arms` is what `python -m bench.replay` and `kubectl repack simulate` both call; the
document is `{"settings": {...}, "arms": {name: metrics.summarize(...)}}`.
"""
from __future__ import annotations

import time

from .arms import ARMS, make_arm
from .engine import GPU, EngineSettings, Replay
from .metrics import summarize
from .trace import DAY, generate


def check_arms(names, known=ARMS) -> list:
    """The arm names, each known (ValueError naming the first unknown one)."""
    out = []
    for name in names:
        if name not in known:
            raise ValueError(f"unknown arm {name!r} (known: {', '.join(known)})")
        if name not in out:
            out.append(name)
    if not out:
        raise ValueError("no arm given")
    return out


def replay_arms(nodes, shapes, workload, arm_names, seed, engine=EngineSettings(), jobs=None, progress=None,
                sources=None, arm_overrides=None, resource=GPU, factories=None, extras=None) -> dict:
    """Replay every arm of `arm_names` (same nodes, same job stream) and the document of the results.
    `jobs` replaces the generated stream (a job history); `progress(arm, t, horizon)` is told where
    each replay is; `factories` ({name: () -> Arm}) adds arms of the caller's (a user's policy)."""
    if jobs is None:
        jobs = generate(nodes, shapes, workload, seed)
    warmup, horizon = workload.warmup_days * DAY, workload.days * DAY
    doc = {"settings": {"seed": seed, "nodes": len(nodes), "gpus": sum(_cards(n, resource) for n in nodes),
                        "resource": resource,
                        "jobs_generated": len(jobs), "gang_jobs": sum(1 for j in jobs if j.kind == "gang"),
                        "workload": workload.describe(), "engine": engine.describe(),
                        "sources": dict(sources or {}), "arms": {}},
           "arms": {}}
    factories = dict(factories or {})
    for name in check_arms(arm_names, ARMS + tuple(factories)):
        replay = Replay(nodes, jobs, engine, warmup, horizon, resource, extras)
        arm = factories[name]() if name in factories else make_arm(name, resource,
                                                                    **(arm_overrides or {}).get(name, {}))
        arm.attach(replay)
        tick = (lambda t, name=name: progress(name, t, horizon)) if progress is not None else None
        wall, cpu = time.perf_counter(), time.process_time()
        replay.run(tick)
        result = summarize(replay, arm.stats())
        result["replay_wall_s"] = round(time.perf_counter() - wall, 1)
        result["replay_cpu_s"] = round(time.process_time() - cpu, 1)
        doc["settings"]["arms"][name] = result.pop("settings")
        doc["arms"][name] = result
    return doc


def _cards(node, resource) -> int:
    """Cards of a trace.NodeSpec or of a planner Node."""
    return node.gpus if hasattr(node, "gpus") else node.allocatable.get(resource, 0)
