"""The in-cluster install set of the webhook and coordinator, rendered as plain dicts.

`kubectl repack install` applies `render(...)` (the RepackRun CRD comes from config/crd/);
`--dry-run -o yaml` prints it. `python -m kubectl_repack.deploy.manifests config/webhook` rewrites the
reference copies under config/webhook/ (no Secret, no caBundle: those are made per install).

RBAC is least privilege by construction (SEC-3), one ServiceAccount per process:

- the webhook (network-facing) may read RepackRuns and watch the coordinator's Lease: nothing else,
  no key, no write;
- the coordinator may read what the planner's filters need, patch pods (to remove its own gate and
  write its annotations: the admission policy `pod_write_policy` refuses any other pod change it
  asks for) and pods/status (nominatedNodeName), write RepackRun status, delete finished
  RepackRuns (ttlSecondsAfterFinished) and renew its own Lease;
- Leases are made by install and granted by name (Kubernetes cannot limit `create` by name).

The RepackRun controller (webhook.controller) runs in its own Deployment with its own service
account, the only one that may create pods/eviction; it also asks SubjectAccessReviews (may the
run's creator evict?), records Events, keeps the records-seal key Secret of its namespace (which
only it may read) and reads the creator admission policy (is it in force?).

The creator of a RepackRun is vouched for by the API server: the ValidatingAdmissionPolicy
`creator_policy` (failurePolicy Fail) refuses a CREATE whose creator annotations are not the
authenticated user and an UPDATE that changes them (kubectl_repack.api.control).
"""
from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any, Optional

from kubectl_repack.api.gates import DEFAULT_REPLACEMENT_CREATORS
from kubectl_repack.api.control import (CREATOR_GROUPS_ANNOTATION, CREATOR_POLICY_NAME, CREATOR_UID_ANNOTATION,
                                        CREATOR_USERNAME_ANNOTATION, GROUP_SEPARATOR, POD_WRITE_POLICY_NAME,
                                        REPLACEMENT_POD_POLICY_NAME)
from kubectl_repack.api.installed import (CONTROLLER, COORDINATOR, NAMESPACE, PART_OF, PART_OF_LABEL,
                                          POLICY_SOURCE_ANNOTATION, SOURCE_FLAG, TLS_SECRET, WEBHOOK,
                                          WEBHOOK_CONFIG, WEBHOOK_NAME, WEBHOOK_PORT)
from kubectl_repack.deploy.certs import CA_CRT, TLS_CRT, TLS_KEY, CertBundle

# The installed objects' names (one table: kubectl_repack.api.installed).
NAME, CONTROLLER_NAME, COORDINATOR_NAME = WEBHOOK, CONTROLLER, COORDINATOR
SECRET_NAME, CONFIG_NAME = TLS_SECRET, WEBHOOK_CONFIG
DEFAULT_IMAGE = "ghcr.io/kubectl-repack/repack-webhook:0.1.0"
CONTAINER_PORT = WEBHOOK_PORT
CERT_MOUNT = "/etc/repack-webhook/tls"
METRICS_PORT = 9090  # the coordinator's /metrics and /healthz (plain HTTP)
CONTROLLER_HEALTH_PORT = 8081  # the controller's /healthz (plain HTTP)
STAMP_WEBHOOK_NAME = "creator.repack.volcano.sh"
RUN_CREATOR_PATH = "/run-creator"   # webhook.app serves it
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


def _meta(name: str, namespace: Optional[str] = None) -> dict:
    meta: dict[str, Any] = {"name": name, "labels": dict(LABELS)}
    if namespace:
        meta["namespace"] = namespace
    return meta


def cluster_role_rules() -> list[dict]:
    """The webhook's cluster-wide permissions: it keeps its relocation index from a watch of RepackRuns."""
    return [{"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns"], "verbs": ["get", "list", "watch"]}]


def lease_role_rules() -> list[dict]:
    """The webhook's namespaced permissions: watching the coordinator's Lease (is anybody there to lift
    a gate?), by name."""
    from kubectl_repack.api.gates import COORDINATOR_LEASE_NAME

    return [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [COORDINATOR_LEASE_NAME],
             "verbs": ["get", "list", "watch"]}]


def coordinator_cluster_role_rules() -> list[dict]:
    """The coordinator's cluster-wide permissions (reads for the planner's filters, its pod writes,
    RepackRun status and the TTL's deletes)."""
    read = ["get", "list", "watch"]
    return [
        {"apiGroups": [""], "resources": ["pods"], "verbs": read + ["patch"]},
        {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch"]},
        # namespaces: the coordinator's live snapshot lists them (the planner's filters read their labels).
        {"apiGroups": [""], "resources": ["namespaces", "nodes", "persistentvolumes", "persistentvolumeclaims"],
         "verbs": read},
        {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": read},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns"], "verbs": read + ["delete"]},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns/status"], "verbs": ["get", "patch", "update"]},
    ]


def coordinator_role_rules() -> list[dict]:
    """Its leader Lease only, by name (made by install)."""
    from kubectl_repack.api.gates import COORDINATOR_LEASE_NAME

    return [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [COORDINATOR_LEASE_NAME],
             "verbs": ["get", "update"]}]


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
        {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": read},
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": read},
        {"apiGroups": ["workload.serving.volcano.sh"], "resources": ["modelservings"], "verbs": read},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns"], "verbs": read + ["patch", "update", "delete"]},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns/status"], "verbs": ["get", "patch", "update"]},
        {"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns/finalizers"], "verbs": ["update"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        # webhook.certmanager keeps the webhook configuration's caBundle equal to the TLS Secret's CA.
        {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
         "resourceNames": [CONFIG_NAME], "verbs": ["get", "patch"]},
        # Is the creator policy in force, and since when (a run older than it has no vouched-for creator)?
        {"apiGroups": ["admissionregistration.k8s.io"],
         "resources": ["validatingadmissionpolicies", "validatingadmissionpolicybindings"],
         "resourceNames": [CREATOR_POLICY_NAME], "verbs": ["get"]},
    ]


def controller_role_rules() -> list[dict]:
    """In its own namespace: its two Leases by name (leader election, the execute mutex), the records-seal key
    and the webhook's TLS Secret (created; `create` cannot be limited by name), replacing only the TLS
    Secret when it rotates it, and the webhook Deployment's pod template (rolled after a rotation)."""
    from kubectl_repack.api.control import CONTROLLER_LEASE_NAME, EXECUTE_LEASE_NAME, SEAL_SECRET_NAME

    return [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": [CONTROLLER_LEASE_NAME, EXECUTE_LEASE_NAME], "verbs": ["get", "update"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SEAL_SECRET_NAME, SECRET_NAME],
             "verbs": ["get"]},
            {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [SECRET_NAME], "verbs": ["update"]},
            {"apiGroups": ["apps"], "resources": ["deployments"], "resourceNames": [NAME], "verbs": ["get", "patch"]}]


def namespace_manifest(namespace: str) -> Manifest:
    """The Namespace the webhook and coordinator run in."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(namespace)}


def service_account(namespace: str) -> Manifest:
    """The identity both containers run as."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(NAME, namespace)}


def cluster_role() -> Manifest:
    """Cluster-wide permissions (see `cluster_role_rules`)."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": _meta(NAME), "rules": cluster_role_rules()}


def cluster_role_binding(namespace: str) -> Manifest:
    """Binds the ClusterRole to the service account."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": _meta(NAME),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]}


def lease_role(namespace: str) -> Manifest:
    """Lease permissions, confined to the own namespace."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": _meta(NAME + "-leases", namespace), "rules": lease_role_rules()}


def lease_role_binding(namespace: str) -> Manifest:
    """Binds the Lease Role to the service account."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": _meta(NAME + "-leases", namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME + "-leases"},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]}


def secret(namespace: str, certs: CertBundle) -> Manifest:
    """kubernetes.io/tls Secret with the serving pair and the CA."""
    data = {k: base64.b64encode(v).decode() for k, v in
            ((TLS_CRT, certs.cert_pem), (TLS_KEY, certs.key_pem), (CA_CRT, certs.ca_cert_pem))}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": _meta(SECRET_NAME, namespace), "data": data}


def process_rbac(namespace: str, name: str, cluster_rules: list, namespaced_rules: list) -> list[Manifest]:
    """ServiceAccount, ClusterRole(+Binding) and Role(+Binding) of one in-cluster process, all named `name`."""
    meta = _meta(name)
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


def controller_rbac(namespace: str) -> list[Manifest]:
    """ServiceAccount, ClusterRole(+Binding) and Role(+Binding) of the controller."""
    return process_rbac(namespace, CONTROLLER_NAME, controller_cluster_role_rules(), controller_role_rules())


def coordinator_rbac(namespace: str) -> list[Manifest]:
    """ServiceAccount, ClusterRole(+Binding) and Role(+Binding) of the coordinator."""
    return process_rbac(namespace, COORDINATOR_NAME, coordinator_cluster_role_rules(), coordinator_role_rules())


def leases(namespace: str) -> list[Manifest]:
    """The Leases of the in-cluster processes, made here so that each process needs only `get` and
    `update` on its own by name (RBAC cannot limit `create` by name). Only metadata is applied:
    holder and times belong to the processes, and a re-install leaves them as they are."""
    from kubectl_repack.api.control import CONTROLLER_LEASE_NAME, EXECUTE_LEASE_NAME
    from kubectl_repack.api.gates import COORDINATOR_LEASE_NAME

    return [{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": _meta(name, namespace)}
            for name in (COORDINATOR_LEASE_NAME, CONTROLLER_LEASE_NAME, EXECUTE_LEASE_NAME)]


def _pod_spec(service_account: str, containers: list, volumes: list, node_selector: Optional[dict],
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
_TMP_VOLUME = {"name": "tmp", "emptyDir": {"medium": "Memory", "sizeLimit": "16Mi"}}
_ENV = [{"name": "REPACK_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]


def _deployment(namespace: str, name: str, pod_spec: dict, **spec: Any) -> Manifest:
    labels = dict(LABELS, **{"app.kubernetes.io/name": name})
    meta = _meta(name, namespace)
    meta["labels"] = dict(labels)
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": 1, **spec, "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}


def controller_deployment(namespace: str, image: str, node_selector: Optional[dict] = None,
                          tolerations: Optional[list] = None, priority_class: Optional[str] = None) -> Manifest:
    """The RepackRun controller: one replica, leader-elected (a rolling update's overlap is safe: only
    the Lease holder acts, and a run continues from its records)."""
    probe = {"httpGet": {"path": "/healthz", "port": "health", "scheme": "HTTP"}}
    container = {
        "name": "controller", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "webhook.controller"],
        "env": _ENV + [{"name": "REPACK_CONTROLLER_HEALTH_PORT", "value": str(CONTROLLER_HEALTH_PORT)}],
        "ports": [{"name": "health", "containerPort": CONTROLLER_HEALTH_PORT, "protocol": "TCP"}],
        "readinessProbe": {**probe, "periodSeconds": 5},
        "livenessProbe": {**probe, "periodSeconds": 10, "failureThreshold": 6},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
        "volumeMounts": [{"name": "tmp", "mountPath": TMP_MOUNT}],
        "securityContext": _security_context(),
    }
    # Evicted pods must get their chance to be re-created while this pod is replaced.
    return _deployment(namespace, CONTROLLER_NAME, _pod_spec(
        CONTROLLER_NAME, [container], [dict(_TMP_VOLUME)], node_selector, tolerations, priority_class,
        terminationGracePeriodSeconds=30))


def coordinator_deployment(namespace: str, image: str, node_selector: Optional[dict] = None,
                           tolerations: Optional[list] = None, priority_class: Optional[str] = None) -> Manifest:
    """The placement coordinator: one replica, leader-elected on its Lease (which the webhook watches
    before it gates a pod), apart from the network-facing webhook so that neither shares a token."""
    metrics_probe = {"httpGet": {"path": "/healthz", "port": "metrics", "scheme": "HTTP"}}
    container = {
        "name": "coordinator", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "webhook.coordinator"],
        "env": _ENV + [{"name": "REPACK_COORDINATOR_METRICS_PORT", "value": str(METRICS_PORT)}],
        "ports": [{"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        "readinessProbe": {**metrics_probe, "periodSeconds": 5},
        "livenessProbe": {**metrics_probe, "periodSeconds": 10},
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        "volumeMounts": [{"name": "tmp", "mountPath": TMP_MOUNT}],
        "securityContext": _security_context(),
    }
    return _deployment(namespace, COORDINATOR_NAME, _pod_spec(
        COORDINATOR_NAME, [container], [dict(_TMP_VOLUME)], node_selector, tolerations, priority_class))


def _security_context() -> dict:
    return {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
            "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "capabilities": {"drop": ["ALL"]}}


def deployment(namespace: str, image: str, node_selector: Optional[dict] = None,
               tolerations: Optional[list] = None, priority_class: Optional[str] = None,
               replacement_creators: Optional[list] = None) -> Manifest:
    """The admission webhook. One replica (see REPLICAS): relocation claims live in the webhook process's
    memory, so replicas would double-claim. Strategy Recreate for the same reason: a rolling update
    would run the old and the new pod side by side, each handing out the same open record to a
    different replacement. node_selector, tolerations and priority_class place the pod (install flags)."""
    probe = {"scheme": "HTTPS", "port": CONTAINER_PORT}
    webhook = {
        "name": "webhook", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-m", "webhook", "--cert-dir", CERT_MOUNT, "--port", str(CONTAINER_PORT)],
        "env": [dict(e) for e in _ENV] + [{"name": "REPACK_REPLACEMENT_CREATORS",
                                           "value": ",".join(replacement_creators or DEFAULT_REPLACEMENT_CREATORS)}],
        "ports": [{"name": "https", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/readyz", **probe}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/healthz", **probe}, "periodSeconds": 10},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "tls", "mountPath": CERT_MOUNT, "readOnly": True},
                         {"name": "tmp", "mountPath": TMP_MOUNT}],
        "securityContext": _security_context(),
    }
    dep = _deployment(namespace, NAME, _pod_spec(
        NAME, [webhook], [{"name": "tls", "secret": {"secretName": SECRET_NAME}}, dict(_TMP_VOLUME)],
        node_selector, tolerations, priority_class), strategy={"type": "Recreate"})
    dep["spec"]["replicas"] = REPLICAS
    dep["metadata"]["annotations"] = {"repack.volcano.sh/replicas": REPLICAS_REASON}
    return dep


def service(namespace: str) -> Manifest:
    """ClusterIP Service of the webhook: 443 -> the webhook container's 8443."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(NAME, namespace),
            "spec": {"selector": {"app.kubernetes.io/name": NAME},
                     "ports": [{"name": "https", "port": 443, "targetPort": CONTAINER_PORT, "protocol": "TCP"}]}}


def coordinator_service(namespace: str) -> Manifest:
    """ClusterIP Service of the coordinator's /metrics (plain HTTP, for scraping)."""
    meta = _meta(COORDINATOR_NAME, namespace)
    meta["labels"]["app.kubernetes.io/name"] = COORDINATOR_NAME
    return {"apiVersion": "v1", "kind": "Service", "metadata": meta,
            "spec": {"selector": {"app.kubernetes.io/name": COORDINATOR_NAME},
                     "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}]}}


def mutating_webhook_configuration(namespace: str, ca_bundle_pem: Optional[bytes] = None,
                                   url: Optional[str] = None) -> Manifest:
    """Pods CREATE only, fail open (Ignore, 5 s), never in kube-system or our own namespace."""
    client_config: dict[str, Any]
    if url:
        client_config = {"url": url}
    else:
        client_config = {"service": {"namespace": namespace, "name": NAME, "path": "/mutate", "port": 443}}
    if ca_bundle_pem:
        client_config["caBundle"] = base64.b64encode(ca_bundle_pem).decode()
    stamp_config = dict(client_config)
    if url:
        stamp_config["url"] = url.rsplit("/mutate", 1)[0] + RUN_CREATOR_PATH
    else:
        stamp_config["service"] = dict(client_config["service"], path=RUN_CREATOR_PATH)
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": _meta(CONFIG_NAME),
        "webhooks": [{
            "name": WEBHOOK_NAME,
            "admissionReviewVersions": ["v1"],
            "clientConfig": client_config,
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "timeoutSeconds": TIMEOUT_SECONDS,
            "reinvocationPolicy": "IfNeeded",
            "matchPolicy": "Equivalent",
            "namespaceSelector": {"matchExpressions": [{
                "key": "kubernetes.io/metadata.name", "operator": "NotIn",
                "values": sorted({"kube-system", namespace})}]},
        }, {
            # Fills in the creator annotations for `kubectl apply` (CREATE) and keeps them over a
            # server-side re-apply (UPDATE). It only helps: the admission policy (creator_policy)
            # checks them, so while this webhook is unreachable (fail open) a run without them is
            # refused with a message saying what to add, and nothing it answers is trusted.
            "name": STAMP_WEBHOOK_NAME,
            "admissionReviewVersions": ["v1"],
            "clientConfig": stamp_config,
            "rules": [{"apiGroups": ["repack.volcano.sh"], "apiVersions": ["v1alpha1"],
                       "operations": ["CREATE", "UPDATE"],
                       "resources": ["repackruns"], "scope": "Cluster"}],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "timeoutSeconds": TIMEOUT_SECONDS,
            "matchPolicy": "Equivalent",
        }],
    }


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def creator_policy() -> Manifest:
    """SEC-1: the API server vouches for a RepackRun's creator. On CREATE the three creator
    annotations must equal `request.userInfo` (username, uid, groups joined by GROUP_SEPARATOR);
    on UPDATE they may not be added, changed or removed. failurePolicy Fail: a policy that cannot
    be evaluated refuses, it never lets a record through unchecked. `extra` is not compared (CEL has
    no stable rendering of it), so nothing is authorized on it (SubjectAccessReviews omit it)."""
    user, uid, groups = (_cel_string(k) for k in (CREATOR_USERNAME_ANNOTATION, CREATOR_UID_ANNOTATION,
                                                  CREATOR_GROUPS_ANNOTATION))
    sep = _cel_string(GROUP_SEPARATOR)
    keys = f"[{user}, {uid}, {groups}]"
    fix = ("'RepackRun: the creator annotations must name the user creating it; kubectl repack plan --save and "
           "apply fill them in, and so does the repack webhook for kubectl apply; without them set metadata.annotations "
           f"{CREATOR_USERNAME_ANNOTATION}: \"' + variables.username + '\", {CREATOR_UID_ANNOTATION}: \"' + "
           f"variables.uid + '\", {CREATOR_GROUPS_ANNOTATION}: \"' + variables.groups + '\" "
           "(kubectl auth whoami -o yaml shows them)'")
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": _meta(CREATOR_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["repack.volcano.sh"], "apiVersions": ["*"], "operations": ["CREATE", "UPDATE"],
                "resources": ["repackruns"]}]},
            "variables": [
                {"name": "ann", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
                {"name": "old", "expression": "request.operation == 'UPDATE' && has(oldObject.metadata.annotations)"
                                              " ? oldObject.metadata.annotations : {}"},
                {"name": "username", "expression": "has(request.userInfo.username) ? request.userInfo.username : ''"},
                {"name": "uid", "expression": "has(request.userInfo.uid) ? request.userInfo.uid : ''"},
                {"name": "groupList", "expression": "has(request.userInfo.groups) ? request.userInfo.groups : []"},
                {"name": "groups", "expression": f"variables.groupList.join({sep})"},
            ],
            "validations": [
                {"expression": f"request.operation != 'CREATE' || !variables.groupList.exists(g, g.contains({sep}))",
                 "message": f"RepackRun: a group of the creating user contains {GROUP_SEPARATOR!r}, which the creator "
                            "record cannot hold; create the run as another user",
                 "reason": "Forbidden"},
                {"expression": f"request.operation != 'CREATE' || ({user} in variables.ann && {uid} in variables.ann && "
                               f"{groups} in variables.ann && variables.ann[{user}] == variables.username && "
                               f"variables.ann[{uid}] == variables.uid && variables.ann[{groups}] == variables.groups)",
                 "messageExpression": fix,
                 "reason": "Forbidden"},
                {"expression": "request.operation != 'UPDATE' || "
                               + _keys_unchanged(keys, "variables.ann", "variables.old"),
                 "message": "RepackRun: the creator annotations (repack.volcano.sh/creator-*) cannot be added, "
                            "changed or removed after creation",
                 "reason": "Forbidden"},
            ],
        },
    }


def _binding(policy_name: str) -> Manifest:
    """Binds a policy of ours cluster-wide, named like it, with the Deny action."""
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": _meta(policy_name), "spec": {"policyName": policy_name, "validationActions": ["Deny"]}}


def _keys_unchanged(keys: str, new: str, old: str) -> str:
    """CEL: none of the map keys in the CEL list `keys` was added, removed or changed from `old` to `new`."""
    return f"{keys}.all(k, (k in {new}) == (k in {old}) && (!(k in {new}) || {new}[k] == {old}[k]))"


def creator_policy_binding() -> Manifest:
    return _binding(CREATOR_POLICY_NAME)


def pod_write_policy(namespace: str) -> Manifest:
    """SEC-3: what the coordinator's and the controller's pod patches may change. Their RBAC has to
    allow `patch` on every pod (to lift the placement gate), and a pod's image, tolerations and
    labels are mutable: without this policy their token could run any code under any pod's
    ServiceAccount. With it, the only pod changes these two identities can make are removing the
    placement gate and writing `repack.volcano.sh/` annotations."""
    from kubectl_repack.api.gates import PLACEMENT_GATE

    users = [f"system:serviceaccount:{namespace}:{n}" for n in (COORDINATOR_NAME, CONTROLLER_NAME)]
    from planner.model import DO_NOT_DISRUPT

    gate = _cel_string(PLACEMENT_GATE)
    prefix = _cel_string("repack.volcano.sh/")
    opt_out = _cel_string(DO_NOT_DISRUPT)      # the owner's opt-out is theirs: neither account may touch it

    def same(path: str, empty: str = "[]", of: str = "") -> str:
        new_value, old_value = (f"(has({o}.{path}) ? {o}.{path}{of} : {empty})" for o in ("object", "oldObject"))
        return f"{new_value} == {old_value}"

    unchanged = [("spec.containers images", same("spec.containers", of=".map(c, c.image)")),
            ("spec.initContainers images", same("spec.initContainers", of=".map(c, c.image)")),
            ("spec.tolerations", same("spec.tolerations")),
            ("spec.activeDeadlineSeconds", same("spec.activeDeadlineSeconds", "0")),
            ("metadata.labels", same("metadata.labels", "{}")),
            ("metadata.ownerReferences", same("metadata.ownerReferences")),
            ("metadata.finalizers", same("metadata.finalizers"))]
    validations = [{"expression": expr, "message": f"{COORDINATOR_NAME}/{CONTROLLER_NAME} may not change a pod's {what}",
                    "reason": "Forbidden"} for what, expr in unchanged]
    validations += [
        {"expression": "variables.newGates.all(g, variables.oldGates.exists(o, o.name == g.name)) && "
                       f"variables.oldGates.all(o, o.name == {gate} || variables.newGates.exists(g, g.name == o.name))",
         "message": f"{COORDINATOR_NAME}/{CONTROLLER_NAME} may only remove the {PLACEMENT_GATE} scheduling gate",
         "reason": "Forbidden"},
        {"expression": f"variables.newAnn.all(k, (k.startsWith({prefix}) && k != {opt_out}) || (k in variables.oldAnn && "
                       "variables.oldAnn[k] == variables.newAnn[k])) && "
                       f"variables.oldAnn.all(k, (k.startsWith({prefix}) && k != {opt_out}) || k in variables.newAnn)",
         "message": f"{COORDINATOR_NAME}/{CONTROLLER_NAME} may only write repack.volcano.sh/ annotations "
                    f"(not {DO_NOT_DISRUPT})",
         "reason": "Forbidden"},
    ]
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": _meta(POD_WRITE_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                                                    "resources": ["pods"]}]},
            "matchConditions": [{"name": "repack-processes",
                                 "expression": f"request.userInfo.username in [{', '.join(map(_cel_string, users))}]"}],
            "variables": [
                {"name": "newGates", "expression": "has(object.spec.schedulingGates) ? object.spec.schedulingGates : []"},
                {"name": "oldGates",
                 "expression": "has(oldObject.spec.schedulingGates) ? oldObject.spec.schedulingGates : []"},
                {"name": "newAnn", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
                {"name": "oldAnn",
                 "expression": "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}"},
            ],
            "validations": validations,
        },
    }


def pod_write_policy_binding() -> Manifest:
    return _binding(POD_WRITE_POLICY_NAME)


def replacement_pod_policy(namespace: str, creators: Optional[list] = None) -> Manifest:
    """SEC-5: who may mark a pod as a repack replacement. A pod that carries the repack relocation
    annotations or the placement gate when it is created must be created by a workload controller
    that re-creates evicted pods (`creators`; the webhook adds the marks during exactly those
    requests); afterwards only the coordinator and the controller may change the marks. Cluster
    admins (system:masters) are not checked: `uninstall` lifts leftover gates as one."""
    from kubectl_repack.api.gates import DEFAULT_REPLACEMENT_CREATORS, PLACEMENT_GATE, REPLACEMENT_MARKS

    creators = list(creators or DEFAULT_REPLACEMENT_CREATORS)
    ours = [f"system:serviceaccount:{namespace}:{n}" for n in (COORDINATOR_NAME, CONTROLLER_NAME)]
    marks = "[" + ", ".join(map(_cel_string, REPLACEMENT_MARKS)) + "]"
    cel_list = lambda names: "[" + ", ".join(map(_cel_string, names)) + "]"   # noqa: E731
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": _meta(REPLACEMENT_POD_POLICY_NAME),
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                                                    "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}]},
            "matchConditions": [{"name": "not-a-cluster-admin", "expression":
                                 "!('system:masters' in (has(request.userInfo.groups) ? request.userInfo.groups : []))"}],
            "variables": [
                {"name": "newAnn", "expression": "has(object.metadata.annotations) ? object.metadata.annotations : {}"},
                {"name": "oldAnn", "expression": "request.operation == 'UPDATE' && has(oldObject.metadata.annotations)"
                                                 " ? oldObject.metadata.annotations : {}"},
                {"name": "username", "expression": "has(request.userInfo.username) ? request.userInfo.username : ''"},
            ],
            "validations": [
                {"expression": f"request.operation != 'CREATE' || variables.username in {cel_list(creators)} || "
                               f"(!{marks}.exists(k, k in variables.newAnn) && !(has(object.spec.schedulingGates) && "
                               f"object.spec.schedulingGates.exists(g, g.name == {_cel_string(PLACEMENT_GATE)})))",
                 "messageExpression": "'pod: ' + variables.username + ' may not create a pod carrying the repack.volcano.sh "
                                      "relocation annotations or placement gate: only the workload controllers that "
                                      "re-create evicted pods may (kubectl repack install --replacement-creator)'",
                 "reason": "Forbidden"},
                {"expression": f"request.operation != 'UPDATE' || variables.username in {cel_list(ours)} || "
                               + _keys_unchanged(marks, "variables.newAnn", "variables.oldAnn"),
                 "message": "pod: the repack.volcano.sh relocation annotations are written by the repack webhook at "
                            "creation and changed by its coordinator and controller only",
                 "reason": "Forbidden"},
            ],
        },
    }


def replacement_pod_policy_binding() -> Manifest:
    return _binding(REPLACEMENT_POD_POLICY_NAME)


# Where a NetworkPolicy's CIDRs came from (api.installed's SOURCE_*) is written on it: doctor compares
# an endpoints-made policy with the endpoints it reads.
def network_policy(namespace: str, apiserver_cidrs: list, source: str = SOURCE_FLAG) -> Manifest:
    """Only the API server may call the webhook's port (the coordinator runs in a pod of its own,
    which this policy does not select). `install` renders it from --apiserver-cidr, else from the
    addresses the API servers advertise (`source` says which, as an annotation). Kubelet probes of
    the webhook port come from the node itself, which common CNIs (Calico, Cilium) let through to
    local pods; where a CNI does not, add the nodes' CIDR. In-cluster scrapes of the webhook's
    /metrics (the same port) are blocked too."""
    meta = _meta(NAME, namespace)
    meta["annotations"] = {POLICY_SOURCE_ANNOTATION: source}
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": meta,
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"ipBlock": {"cidr": c}} for c in apiserver_cidrs],
                 "ports": [{"protocol": "TCP", "port": CONTAINER_PORT}]},
            ],
        },
    }


def render(namespace: str = NAMESPACE, image: str = DEFAULT_IMAGE, ca_bundle_pem: Optional[bytes] = None,
           url: Optional[str] = None, certs: Optional[CertBundle] = None, node_selector: Optional[dict] = None,
           tolerations: Optional[list] = None, priority_class: Optional[str] = None,
           apiserver_cidrs: Optional[list] = None, replacement_creators: Optional[list] = None,
           apiserver_source: str = SOURCE_FLAG) -> list[Manifest]:
    """Every object of the install, in apply order.

    `ca_bundle_pem` goes into the webhook's caBundle (defaults to the CA of `certs`); `certs`
    adds the TLS Secret; `url` switches clientConfig to a URL (loopback e2e) instead of the Service.
    `node_selector`, `tolerations`, `priority_class` go into the Deployment's pod template;
    `apiserver_cidrs` adds the NetworkPolicy that admits only those to the webhook port
    (`apiserver_source`: where they came from, written on it).
    """
    if ca_bundle_pem is None and certs is not None:
        ca_bundle_pem = certs.ca_cert_pem
    out = [creator_policy(), creator_policy_binding(), pod_write_policy(namespace), pod_write_policy_binding(),
           replacement_pod_policy(namespace, replacement_creators), replacement_pod_policy_binding(),
           namespace_manifest(namespace), service_account(namespace), cluster_role(),
           cluster_role_binding(namespace), lease_role(namespace), lease_role_binding(namespace)]
    if certs is not None:
        out.append(secret(namespace, certs))
    if apiserver_cidrs:  # before the pod serves; uninstall, in reverse, removes it after the webhook
        out.append(network_policy(namespace, list(apiserver_cidrs), apiserver_source))
    out += coordinator_rbac(namespace) + controller_rbac(namespace) + leases(namespace)
    out += [deployment(namespace, image, node_selector, tolerations, priority_class, replacement_creators),
            service(namespace),
            coordinator_deployment(namespace, image, node_selector, tolerations, priority_class),
            coordinator_service(namespace),
            controller_deployment(namespace, image, node_selector, tolerations, priority_class),
            mutating_webhook_configuration(namespace, ca_bundle_pem, url)]
    return out


def to_yaml(manifests: list[Manifest]) -> str:
    """A multi-document YAML stream (no anchors: the rendered files are read by people)."""
    from planner import documents

    return documents.dump_yaml(*manifests)


FILES = {
    "namespace.yaml": lambda ns, image: [namespace_manifest(ns)],
    "rbac.yaml": lambda ns, image: [service_account(ns), cluster_role(), cluster_role_binding(ns),
                                    lease_role(ns), lease_role_binding(ns)] + coordinator_rbac(ns) + controller_rbac(ns),
    "leases.yaml": lambda ns, image: leases(ns),
    "deployment.yaml": lambda ns, image: [deployment(ns, image), coordinator_deployment(ns, image),
                                          controller_deployment(ns, image)],
    "service.yaml": lambda ns, image: [service(ns), coordinator_service(ns)],
    "mutatingwebhookconfiguration.yaml": lambda ns, image: [mutating_webhook_configuration(ns)],
    "validatingadmissionpolicy.yaml": lambda ns, image: [creator_policy(), creator_policy_binding(),
                                                         pod_write_policy(ns), pod_write_policy_binding(),
                                                         replacement_pod_policy(ns), replacement_pod_policy_binding()],
}


def write_reference(directory: str, namespace: str = NAMESPACE, image: str = DEFAULT_IMAGE) -> list[Path]:
    """Write the static reference manifests (no Secret, no caBundle) into `directory`."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    header = "# Generated by `python -m kubectl_repack.deploy.manifests config/webhook`; do not edit by hand.\n"
    paths = []
    for name, make in FILES.items():
        path = root / name
        path.write_text(header + to_yaml(make(namespace, image)))
        paths.append(path)
    return paths


README_BEGIN = "<!-- rbac: generated by `python -m kubectl_repack.deploy.manifests`; do not edit by hand -->"
README_END = "<!-- rbac: end -->"


def rbac_table(namespace: str = NAMESPACE) -> str:
    """Markdown: every ServiceAccount of the install and each verb it holds, from the rendered roles
    (the README's security section carries it, so what it says is what install grants)."""
    objs = render(namespace=namespace)
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objs if o["kind"] in ("Role", "ClusterRole")}
    rows = ["| ServiceAccount | where | resources | verbs | only these names |", "|---|---|---|---|---|"]
    for binding in (o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        where = "cluster" if role["kind"] == "ClusterRole" else f"namespace {namespace}"
        for subject in binding["subjects"]:
            for rule in role["rules"]:
                resources = ", ".join(f"{g + '/' if g else ''}{r}" for g in rule["apiGroups"] for r in rule["resources"])
                rows.append(f"| {subject['name']} | {where} | {resources} | {', '.join(rule['verbs'])} | "
                            f"{', '.join(rule.get('resourceNames') or []) or 'any'} |")
    return "\n".join(rows)


def readme_with_table(text: str, namespace: str = NAMESPACE) -> str:
    """`text` (the README) with the block between README_BEGIN and README_END set to rbac_table()."""
    start, end = text.index(README_BEGIN) + len(README_BEGIN), text.index(README_END)
    return text[:start] + "\n" + rbac_table(namespace) + "\n" + text[end:]


if __name__ == "__main__":
    for written in write_reference(sys.argv[1] if len(sys.argv) > 1 else "config/webhook"):
        print(written)
    readme = Path(__file__).resolve().parents[2] / "README.md"
    if readme.is_file() and README_BEGIN in readme.read_text():
        readme.write_text(readme_with_table(readme.read_text()))
        print(readme)
