"""Trace replay (`kubectl repack simulate`, `python -m bench.replay`): does the waiting job start sooner?

A discrete-event replay of a GPU cluster under Volcano-style allocation, with arms that run the real
planner as a RepackPolicy would (and peer-style policies), on the same trace and seed. Pure: no
Kubernetes client, no click. Where the parts live:

- trace: reading the openb CSVs (errors name file, line, column), the synthetic trace, and the
  seeded workload (background sampled FGD-style at a load, gang jobs from a generator);
- engine: the replay state, the allocate model (queue order, gang all-or-nothing, the planner's own
  filters, binpack or least-allocated), evictions and their restart semantics;
- arms: what each arm does when it acts (none, repack-*, peer-style);
- metrics: waits, allocation, fragmentation, evictions, lost work; the result document.
"""
from .trace import TraceError

__all__ = ["TraceError"]
