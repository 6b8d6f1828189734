"""What the objects of every in-cluster process share: names, labels, metadata, the pod spec, the
Deployment and the RBAC set (kubectl_repack.deploy.manifests renders them all)."""
from __future__ import annotations

from typing import Any, Optional

from kubectl_repack.api.installed import (CONTROLLER, COORDINATOR, PART_OF, PART_OF_LABEL, TLS_SECRET, WEBHOOK,
                                          WEBHOOK_CONFIG, WEBHOOK_PORT)

# The installed objects' names (one table: kubectl_repack.api.installed).
NAME, CONTROLLER_NAME, COORDINATOR_NAME = WEBHOOK, CONTROLLER, COORDINATOR
SECRET_NAME, CONFIG_NAME = TLS_SECRET, WEBHOOK_CONFIG
DEFAULT_IMAGE = "ghcr.io/kubectl-repack/repack-webhook:0.1.0"
CONTAINER_PORT = WEBHOOK_PORT
CERT_MOUNT = "/etc/repack-webhook/tls"
METRICS_PORT = 9090  # the coordinator's /metrics and /healthz (plain HTTP)
CONTROLLER_HEALTH_PORT = 8081  # the controller's /healthz and /metrics (plain HTTP)
STAMP_WEBHOOK_NAME = "creator.repack.volcano.sh"
RUN_CREATOR_PATH = "/run-creator"   # webhook.admission.app serves it
RUN_AS = 65532  # the image's numeric USER; stated again so runAsNonRoot is verifiable
TMP_MOUNT = "/tmp"
# Why one replica (also written on the Deployment, as the annotation below): the webhook keeps
# its relocation claims in one process's memory, so two replicas could each hand the same
# relocation record to a different pod. The webhook fails open (failurePolicy Ignore), so while
# the replica restarts pods are created ungated, never blocked. No PodDisruptionBudget: with
# minAvailable 1 on a single replica it would block every node drain.
REPLICAS = 1
REPLICAS_REASON = ("1 on purpose: relocation claims live in one webhook process; the webhook fails open "
                   "(Ignore), so a restart only means pods created meanwhile are not steered. "
                   "No PodDisruptionBudget: minAvailable 1 of 1 would block node drains.")
TIMEOUT_SECONDS = 5
LABELS = {"app.kubernetes.io/name": NAME, PART_OF_LABEL: PART_OF}

Manifest = dict[str, Any]


def object_meta(name: str, namespace: Optional[str] = None) -> dict:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def process_rbac(namespace: str, name: str, cluster_rules: list, namespaced_rules: list) -> list[Manifest]:
    """ServiceAccount, ClusterRole(+Binding) and Role(+Binding) of one in-cluster process, all named `name`."""
    meta = object_meta(name)
    meta["labels"]["app.kubernetes.io/name"] = name
    ns_meta = dict(meta, namespace=namespace)
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(ns_meta)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": dict(meta),
         "rules": cluster_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": dict(meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
         "subjects": subject},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": dict(ns_meta),
         "rules": namespaced_rules},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": dict(ns_meta),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
         "subjects": subject},
    ]


def pod_template_spec(service_account: str, containers: list, volumes: list, node_selector: Optional[dict],
              tolerations: Optional[list], priority_class: Optional[str], **extra: Any) -> dict:
    """A pod spec as all three Deployments have it: non-root, RuntimeDefault seccomp, no Docker-link
    variables (for the Service `repack-webhook` Kubernetes would set REPACK_WEBHOOK_PORT=tcp://..., the
    webhook's own port variable), placed by the install flags."""
    pod_spec: dict[str, Any] = {
        "serviceAccountName": service_account, "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": containers, "volumes": volumes, **extra,
    }
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if tolerations:
        pod_spec["tolerations"] = [dict(t) for t in tolerations]
    if priority_class:
        pod_spec["priorityClassName"] = priority_class
    return pod_spec



# A read-only root file system; gunicorn and Python's tempfile need a writable /tmp.
TMP_VOLUME = {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}
POD_ENV = [{"name": "REPACK_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]


def deployment_manifest(namespace: str, name: str, pod_spec: dict, **spec: Any) -> Manifest:
    labels = dict(LABELS, **{"app.kubernetes.io/name": name})
    meta = object_meta(name, namespace)
    meta["labels"] = dict(labels)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": 1, **spec, "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}


def security_context() -> dict:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
            "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "capabilities": {"drop": ["ALL"]}}


def process_deployment(namespace: str, name: str, container: str, image: str, port_name: str, port: int,
                       port_env: str, memory_limit: str, placement: tuple, liveness: Optional[dict] = None,
                       **pod: Any) -> Manifest:
    """The Deployment of an in-cluster process besides the webhook (coordinator, controller): one
    container running `python -m webhook.<container>`, plain-HTTP /healthz on its named `port`
    (told to it in `port_env`), a read-only root with a memory /tmp. `placement`: (node_selector,
    tolerations, priority_class) from the install flags; `liveness` adds to the liveness probe,
    `pod` to the pod spec."""
    probe = {"httpGet": {"path": "/healthz", "port": port_name, "scheme": "HTTP"}}
    spec = {
        "name": container, "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", f"webhook.{container}"],
        "env": POD_ENV + [{"name": port_env, "value": str(port)}],
        "ports": [{"name": port_name, "containerPort": port, "protocol": "TCP"}],
        "readinessProbe": {**probe, "periodSeconds": 5},
        "livenessProbe": {**probe, "periodSeconds": 10, **(liveness or {})},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": memory_limit}},
        "volumeMounts": [{"name": "tmp", "mountPath": TMP_MOUNT}],
        "securityContext": security_context(),
    }
    return deployment_manifest(namespace, name, pod_template_spec(name, [spec], [dict(TMP_VOLUME)], *placement, **pod))
