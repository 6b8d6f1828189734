"""The RepackRun controller's objects: RBAC (the only account that may evict) and Deployment."""
from __future__ import annotations

from typing import Optional

from kubectl_repack.api.control import CREATOR_POLICY_NAME

# On the webhook Deployment's pod template: the serving certificate's fingerprint, which the
# controller (webhook.controller.certmanager) patches after a rotation to roll the pod. The only
# change its account may make to the Deployment (deploy.policies.controller_write_policy).
TLS_FINGERPRINT_ANNOTATION = "repack.volcano.sh/tls-fingerprint"

from .parts import (CONFIG_NAME, CONTROLLER_HEALTH_PORT, CONTROLLER_NAME, Manifest, NAME, SECRET_NAME,
                    process_deployment, process_rbac)


def controller_cluster_role_rules() -> list[dict]:
    """What carrying out a run needs: the planner's reads, pods/eviction, RepackRuns and their
    status and finalizers, SubjectAccessReviews for the creator, Events."""
    read = ["get", "list", "watch"]
    return [
        {"apiGroups": [""], "resources": ["namespaces", "nodes", "persistentvolumes", "persistentvolumeclaims"],
         "verbs": read},
        # patch: lifting placement gates older than the placement lease (when the coordinator is down);
        # pod_write_policy confines what its patches may change to exactly that.
        {"apiGroups": [""], "resources": ["pods"], "verbs": read + ["patch"]},
        {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
        {"apiGroups": ["policy"], "resources": ["poddisruptionbudgets"], "verbs": read},
        {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups", "queues"], "verbs": read},
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": read},
        {"apiGroups": ["workload.serving.volcano.sh"], "resources": ["modelservings"], "verbs": read},
        {"apiGroups": ["topology.volcano.sh"], "resources": ["hypernodes"], "verbs": read},
        # create: the runs of RepackPolicies (POLICY-1, POLICY-2), which carry the policy's creator record (creator_policy)
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns"],
         "verbs": read + ["create", "patch", "update", "delete"]},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackpolicies"], "verbs": read},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackpolicies/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns/finalizers"], "verbs": ["update"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        # webhook.controller.certmanager keeps the webhook configuration's caBundle equal to the TLS Secret's CA.
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
         "resourceNames": [CONFIG_NAME], "verbs": ["get", "patch"]},
        # Is the creator policy in force, and since when (a run older than it has no vouched-for creator)?
        {"apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
         "resourceNames": [CREATOR_POLICY_NAME], "verbs": ["get"]},
    ]


def controller_role_rules() -> list[dict]:
    """In its own namespace: its two Leases by name (leader election, the execute mutex), the records-seal key
    and the webhook's TLS Secret (created; `create` cannot be limited by name), the placement key
    (created, never read: it is the webhook's and the coordinator's), replacing only the TLS
    Secret when it rotates it, and the webhook Deployment's pod template (rolled after a rotation)."""
    from kubectl_repack.api.control import CONTROLLER_LEASE_NAME, EXECUTE_LEASE_NAME, SEAL_SECRET_NAME

    return [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": [CONTROLLER_LEASE_NAME, EXECUTE_LEASE_NAME], "verbs": ["get", "update"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SEAL_SECRET_NAME, SECRET_NAME],
             "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET_NAME], "verbs": ["update"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": [NAME], "verbs": ["get", "patch"]}]


def controller_rbac(namespace: str) -> list[Manifest]:
    """ServiceAccount, ClusterRole(+Binding) and Role(+Binding) of the controller."""
    return process_rbac(namespace, CONTROLLER_NAME, controller_cluster_role_rules(), controller_role_rules())


def controller_deployment(namespace: str, image: str, node_selector: Optional[dict] = None,
                          tolerations: Optional[list] = None, priority_class: Optional[str] = None) -> Manifest:
    """The RepackRun controller: one replica, leader-elected (a rolling update's overlap is safe: only
    the Lease holder acts, and a run continues from its records)."""
    # Evicted pods must get their chance to be re-created while this pod is replaced.
    # /healthz and /metrics (runs, evictions, the fragmentation gauge) on one port, as the coordinator's.
    return process_deployment(namespace, CONTROLLER_NAME, "controller", image, "metrics", CONTROLLER_HEALTH_PORT,
                              "REPACK_CONTROLLER_HEALTH_PORT", "1Gi", (node_selector, tolerations, priority_class),
                              liveness={"failureThreshold": 6}, terminationGracePeriodSeconds=30)
