"""The admission webhook's objects: its ServiceAccount and read-only RBAC, the TLS Secret (with
--webhook-url only), Deployment, Service, MutatingWebhookConfiguration and NetworkPolicy."""
from __future__ import annotations

import base64
from typing import Any, Optional

from kubectl_repack.api.gates import DEFAULT_REPLACEMENT_CREATORS
from kubectl_repack.api.installed import POLICY_SOURCE_ANNOTATION, SOURCE_FLAG, WEBHOOK_NAME
from kubectl_repack.deploy.certs import CA_CRT, TLS_CRT, TLS_KEY, CertBundle

from .parts import (CERT_MOUNT, CONFIG_NAME, CONTAINER_PORT, Manifest, NAME, POD_ENV, REPLICAS, REPLICAS_REASON,
                    RUN_CREATOR_PATH, SECRET_NAME, STAMP_WEBHOOK_NAME, TIMEOUT_SECONDS, TMP_MOUNT, TMP_VOLUME,
                    deployment_manifest, object_meta, pod_template_spec, security_context)


def cluster_role_rules() -> list[dict]:
    """The webhook's cluster-wide permissions: it keeps its relocation index from a watch of RepackRuns."""
    return [{"apiGroups": ["repack.volcano.sh"], "resources": ["repackruns"], "verbs": ["get", "list", "watch"]}]


def placement_key_rule() -> dict:
    """Read the placement key Secret, by name (SEC-5): the webhook MACs the marks of a replacement
    with it and the coordinator verifies them. The controller creates the Secret (and may not read
    it); no other account may read it. Neither process may read the records-seal key: they check
    records against their digest, which needs no key (SEC-2), so a stolen token of theirs can at
    worst forge marks (steer a replacement), never records the controller evicts by."""
    from kubectl_repack.api.gates import PLACEMENT_KEY_SECRET_NAME

    return {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [PLACEMENT_KEY_SECRET_NAME],
            "verbs": ["get"]}


def lease_role_rules() -> list[dict]:
    """The webhook's namespaced permissions: watching the coordinator's Lease (is anybody there to lift
    a gate?), by name, and reading the placement key (`placement_key_rule`)."""
    from kubectl_repack.api.gates import COORDINATOR_LEASE_NAME

    return [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [COORDINATOR_LEASE_NAME],
             "verbs": ["get", "list", "watch"]}, placement_key_rule()]


def service_account(namespace: str) -> Manifest:
    """The identity both containers run as."""
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": object_meta(NAME, namespace)}


def cluster_role() -> Manifest:
    """Cluster-wide permissions (see `cluster_role_rules`)."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": object_meta(NAME), "rules": cluster_role_rules()}


def cluster_role_binding(namespace: str) -> Manifest:
    """Binds the ClusterRole to the service account."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": object_meta(NAME),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": NAME},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]}


def lease_role(namespace: str) -> Manifest:
    """Lease permissions, confined to the own namespace."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": object_meta(NAME + "-leases", namespace), "rules": lease_role_rules()}


def lease_role_binding(namespace: str) -> Manifest:
    """Binds the Lease Role to the service account."""
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": object_meta(NAME + "-leases", namespace),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME + "-leases"},
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}]}


def secret(namespace: str, certs: CertBundle) -> Manifest:
    """kubernetes.io/tls Secret with the serving pair and the CA."""
    data = {k: base64.b64encode(v).decode() for k, v in
            ((TLS_CRT, certs.cert_pem), (TLS_KEY, certs.key_pem), (CA_CRT, certs.ca_cert_pem))}
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": object_meta(SECRET_NAME, namespace), "data": data}


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
        "env": [dict(e) for e in POD_ENV] + [{"name": "REPACK_REPLACEMENT_CREATORS",
                                           "value": ",".join(replacement_creators or DEFAULT_REPLACEMENT_CREATORS)}],
        "ports": [{"name": "https", "containerPort": CONTAINER_PORT, "protocol": "TCP"}],
        "readinessProbe": {"httpGet": {"path": "/readyz", **probe}, "periodSeconds": 5},
        "livenessProbe": {"httpGet": {"path": "/healthz", **probe}, "periodSeconds": 10},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "256Mi"}},
        "volumeMounts": [{"name": "tls", "mountPath": CERT_MOUNT, "readOnly": True},
                         {"name": "tmp", "mountPath": TMP_MOUNT}],
        "securityContext": security_context(),
    }
    dep = deployment_manifest(namespace, NAME, pod_template_spec(
        NAME, [webhook], [{"name": "tls", "secret": {"secretName": SECRET_NAME}}, dict(TMP_VOLUME)],
        node_selector, tolerations, priority_class), strategy={"type": "Recreate"})
    dep["spec"]["replicas"] = REPLICAS
    dep["metadata"]["annotations"] = {"repack.volcano.sh/replicas": REPLICAS_REASON}
    return dep


def service(namespace: str) -> Manifest:
    """ClusterIP Service of the webhook: 443 -> the webhook container's 8443."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": object_meta(NAME, namespace),
            "spec": {"selector": {"app.kubernetes.io/name": NAME},
                     "ports": [{"name": "https", "port": 443, "targetPort": CONTAINER_PORT, "protocol": "TCP"}]}}


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
        "metadata": object_meta(CONFIG_NAME),
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
                       "resources": ["repackruns", "repackpolicies"], "scope": "Cluster"}],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "timeoutSeconds": TIMEOUT_SECONDS,
            "matchPolicy": "Equivalent",
        }],
    }



# Where a NetworkPolicy's CIDRs came from (api.installed's SOURCE_*) is written on it: doctor compares
# an endpoints-made policy with the endpoints it reads.
def network_policy(namespace: str, apiserver_cidrs: list, source: str = SOURCE_FLAG) -> Manifest:
    """Only the API server may call the webhook's port (the coordinator runs in a pod of its own,
    which this policy does not select). `install` renders it from --apiserver-cidr, else from the
    addresses the API servers advertise (`source` says which, as an annotation). Kubelet probes of
    the webhook port come from the node itself, which common CNIs (Calico, Cilium) let through to
    local pods; where a CNI does not, add the nodes' CIDR. In-cluster scrapes of the webhook's
    /metrics (the same port) are blocked too."""
    meta = object_meta(NAME, namespace)
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
