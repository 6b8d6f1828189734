"""The in-cluster install set of the webhook and coordinator, rendered as plain dicts.

`kubectl repack install` applies `render(...)` (the RepackRun CRD comes from config/crd/);
`--dry-run -o yaml` prints it. `python -m kubectl_repack.deploy.manifests config/webhook` rewrites the
reference copies under config/webhook/ (no Secret, no caBundle: those are made per install).

RBAC is least privilege by construction (SEC-3), one ServiceAccount per process:

- the webhook (network-facing) may read RepackRuns and watch the coordinator's Lease: nothing else,
  no key, no write;
- the coordinator may read what the planner's filters need, patch pods (to remove its own gate and
  write its annotations: the admission policy `pod_write_policy` refuses any other pod change it
  asks for) and pods/status (nominatedNodeName: the admission policy `nomination_policy` allows only
  that field, and only the node a gated replacement or a marked target pod names), write RepackRun status, delete finished
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

import sys
from pathlib import Path
from typing import Optional

from kubectl_repack.api.installed import NAMESPACE, SOURCE_FLAG, WEBHOOK_NAME
from kubectl_repack.deploy.certs import CertBundle

from .admission_webhook import (cluster_role, cluster_role_binding, deployment, lease_role, lease_role_binding,
                                mutating_webhook_configuration, network_policy, secret, service, service_account)
from .controller import controller_cluster_role_rules, controller_deployment, controller_rbac, controller_role_rules
from .coordinator import coordinator_deployment, coordinator_rbac, coordinator_service
from .parts import (CONFIG_NAME, CONTAINER_PORT, CONTROLLER_NAME, COORDINATOR_NAME, DEFAULT_IMAGE, LABELS,
                    METRICS_PORT, NAME, RUN_AS, SECRET_NAME, STAMP_WEBHOOK_NAME, Manifest, object_meta)
from .policies import (controller_write_policy, controller_write_policy_binding, creator_policy,
                       creator_policy_binding, nomination_policy, nomination_policy_binding, pod_write_policy,
                       pod_write_policy_binding, replacement_pod_policy, replacement_pod_policy_binding,
                       run_status_policy, run_status_policy_binding)

# The install set's API: the names and ports of what it renders, each object's builder (one module
# per process: admission_webhook, coordinator, controller; the admission policies; what they share
# in parts), and render() of them all.
__all__ = [
    "NAMESPACE", "NAME", "CONTROLLER_NAME", "COORDINATOR_NAME", "SECRET_NAME", "CONFIG_NAME", "WEBHOOK_NAME",
    "STAMP_WEBHOOK_NAME", "DEFAULT_IMAGE", "CONTAINER_PORT", "METRICS_PORT", "RUN_AS", "LABELS", "Manifest",
    "namespace_manifest", "service_account", "cluster_role", "cluster_role_binding", "lease_role",
    "lease_role_binding", "secret", "deployment", "service", "mutating_webhook_configuration", "network_policy",
    "coordinator_rbac", "coordinator_deployment", "coordinator_service", "controller_cluster_role_rules",
    "controller_role_rules", "controller_rbac", "controller_deployment", "creator_policy", "creator_policy_binding",
    "pod_write_policy", "pod_write_policy_binding", "replacement_pod_policy", "replacement_pod_policy_binding",
    "nomination_policy", "nomination_policy_binding", "controller_write_policy", "controller_write_policy_binding",
    "run_status_policy", "run_status_policy_binding", "admission_policies",
    "leases", "render", "to_yaml", "FILES", "write_reference", "rbac_table", "readme_with_table"]

def admission_policies(namespace: str, replacement_creators: Optional[list] = None) -> list[Manifest]:
    """Every ValidatingAdmissionPolicy of the install, each followed by its binding."""
    return [creator_policy(namespace), creator_policy_binding(), pod_write_policy(namespace), pod_write_policy_binding(),
            replacement_pod_policy(namespace, replacement_creators), replacement_pod_policy_binding(),
            nomination_policy(namespace), nomination_policy_binding(),
            controller_write_policy(namespace), controller_write_policy_binding(),
            run_status_policy(namespace), run_status_policy_binding()]


def namespace_manifest(namespace: str) -> Manifest:
    """The Namespace the webhook and coordinator run in."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": object_meta(namespace)}


def leases(namespace: str) -> list[Manifest]:
    """The Leases of the in-cluster processes, made here so that each process needs only `get` and
    `update` on its own by name (RBAC cannot limit `create` by name). Only metadata is applied:
    holder and times belong to the processes, and a re-install leaves them as they are."""
    from kubectl_repack.api.control import CONTROLLER_LEASE_NAME, EXECUTE_LEASE_NAME
    from kubectl_repack.api.gates import COORDINATOR_LEASE_NAME

    return [{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": object_meta(name, namespace)}
            for name in (COORDINATOR_LEASE_NAME, CONTROLLER_LEASE_NAME, EXECUTE_LEASE_NAME)]


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
    out = admission_policies(namespace, replacement_creators) + [
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
    "validatingadmissionpolicy.yaml": lambda ns, image: admission_policies(ns),
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
