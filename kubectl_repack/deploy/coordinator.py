"""The placement coordinator's objects: RBAC, Deployment and the Service of its /metrics."""
from __future__ import annotations

from typing import Optional

from .parts import COORDINATOR_NAME, METRICS_PORT, Manifest, object_meta, process_deployment, process_rbac


def coordinator_cluster_role_rules() -> list[dict]:
    """The coordinator's cluster-wide permissions (reads for the planner's filters, its pod writes and
    RepackRun status; it deletes nothing: expired runs are the controller's to delete)."""
    read = ["get", "list", "watch"]
    return [
        {"apiGroups": [""], "resources": ["pods"], "verbs": read + ["patch"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
        # namespaces: the coordinator's live snapshot lists them (the planner's filters read their labels).
        {"apiGroups": [""], "resources": ["namespaces", "nodes", "persistentvolumes", "persistentvolumeclaims"],
         "verbs": read},
        {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": read},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns"], "verbs": read},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns/status"], "verbs": ["get", "patch", "update"]},
    ]


def coordinator_role_rules() -> list[dict]:
    """Its leader Lease only, by name (made by install), and the placement key, by name (read only)."""
    from kubectl_repack.api.gates import COORDINATOR_LEASE_NAME

    from .admission_webhook import placement_key_rule

    return [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [COORDINATOR_LEASE_NAME],
             "verbs": ["get", "update"]}, placement_key_rule()]


def coordinator_rbac(namespace: str) -> list[Manifest]:
    """ServiceAccount, ClusterRole(+Binding) and Role(+Binding) of the coordinator."""
    return process_rbac(namespace, COORDINATOR_NAME, coordinator_cluster_role_rules(), coordinator_role_rules())


def coordinator_deployment(namespace: str, image: str, node_selector: Optional[dict] = None,
                           tolerations: Optional[list] = None, priority_class: Optional[str] = None) -> Manifest:
    """The placement coordinator: one replica, leader-elected on its Lease (which the webhook watches
    before it gates a pod), apart from the network-facing webhook so that neither shares a token."""
    return process_deployment(namespace, COORDINATOR_NAME, "coordinator", image, "metrics", METRICS_PORT,
                              "REPACK_COORDINATOR_METRICS_PORT", "512Mi", (node_selector, tolerations, priority_class))


def coordinator_service(namespace: str) -> Manifest:
    """ClusterIP Service of the coordinator's /metrics (plain HTTP, for scraping)."""
    meta = object_meta(COORDINATOR_NAME, namespace)
    meta["labels"]["app.kubernetes.io/name"] = COORDINATOR_NAME
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"selector": {"app.kubernetes.io/name": COORDINATOR_NAME},
                     "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}]}}
