"""kubectl-repack's planner: a pure library from a cluster snapshot to a gang-aware relocation plan.

No Kubernetes client, Flask or click here: `load_*` turns Kubernetes JSON into a ClusterSnapshot,
`plan(snapshot, spec)` returns a Plan whose `status()` is the RepackRun status.
"""
from .blocks import blocks_on
from .errors import DocumentError, RepackError, SnapshotError, SpecError, UnreadableInput
from .load import load_file, load_objects, load_text, parse_text
from .model import ClusterSnapshot
from .plan import Plan, RunSpec, movable_namespaces, plan
from .quantity import parse_quantity

__all__ = ["RepackError", "SnapshotError", "SpecError", "DocumentError", "UnreadableInput", "load_file", "load_objects", "load_text", "parse_text",
           "ClusterSnapshot", "Plan", "RunSpec", "plan", "movable_namespaces", "parse_quantity", "blocks_on"]
