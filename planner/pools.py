"""Node pools: how the provider nodes of a resource are grouped, for `kubectl repack plan`'s POOLS
table and the controller's `repack_free_whole_nodes{pool}` gauge alike (one grouping, one home).
"""
from __future__ import annotations

# Labels that name a node's pool or group, most specific first: the cloud providers' and Karpenter's.
# Then any label whose name ends in "pool" or "nodegroup" (accelerator-pool, node-pool, ...), then the
# instance type; without any of them, nodes are grouped by their card count.
POOL_LABELS = ("karpenter.sh/nodepool", "cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup",
               "kubernetes.azure.com/agentpool", "agentpool", "alibabacloud.com/nodepool-id",
               "node.kubernetes.io/nodepool")
_FALLBACK_POOL_LABEL = "node.kubernetes.io/instance-type"
NO_POOL = "<none>"      # the pool of a provider node without the chosen label


def pool_label(label_keys) -> str:
    """The label that names the pools among `label_keys` ("" when none does)."""
    for key in POOL_LABELS:
        if key in label_keys:
            return key
    generic = sorted(k for k in label_keys
                     if k.rsplit("/", 1)[-1].lower().replace("_", "-").endswith(("pool", "nodegroup", "node-group")))
    if generic:
        return generic[0]
    return _FALLBACK_POOL_LABEL if _FALLBACK_POOL_LABEL in label_keys else ""


def node_pools(snapshot, resource: str) -> tuple[str, dict]:
    """How the provider nodes of `resource` are grouped into pools ("label KEY", or "card count"),
    and each node's pool."""
    nodes = [n for n in snapshot.nodes if n.allocatable.get(resource)]
    keys = {k for n in nodes for k in (n.labels or {})}
    key = pool_label(keys)
    if key:
        return f"label {key}", {n.name: str((n.labels or {}).get(key) or NO_POOL) for n in nodes}
    return "card count", {n.name: f"{n.allocatable.get(resource)}-card" for n in nodes}
