"""The names of what `kubectl repack install` creates, in one place.

The installer renders objects with these names (kubectl_repack.deploy.manifests), the preflight
looks for them (kubectl_repack.kube.preflight), uninstall deletes them. The Leases and the
controller's Secrets are named where their protocol lives (api.control, api.gates, engine.mutex).
"""
from __future__ import annotations

NAMESPACE_ENV = "REPACK_NAMESPACE"   # every process and command reads its namespace here
NAMESPACE = "repack-system"          # the default install namespace

WEBHOOK = "repack-webhook"           # the webhook's Deployment, Service, ServiceAccount and NetworkPolicy
# The RepackRun controller (EXEC-8): its own Deployment and ServiceAccount, the only one that may evict.
CONTROLLER = "repack-controller"
# The placement coordinator (SEC-3): its own Deployment and ServiceAccount, apart from the webhook.
COORDINATOR = "repack-coordinator"

TLS_SECRET = "repack-webhook-tls"            # the webhook's serving pair (the controller makes it)
WEBHOOK_CONFIG = "repack-placement"          # the MutatingWebhookConfiguration
WEBHOOK_NAME = "placement.repack.volcano.sh"  # its placement webhook
WEBHOOK_PORT = 8443                          # the webhook container's port, which the NetworkPolicy guards

PART_OF_LABEL, PART_OF = "app.kubernetes.io/part-of", "kubectl-repack"   # on every object install makes

# Where the install's NetworkPolicy took the API server's addresses from (an annotation on it).
POLICY_SOURCE_ANNOTATION = "repack.volcano.sh/apiserver-source"
SOURCE_ENDPOINTS = "kubernetes-endpoints"   # install read them from the default/kubernetes Service
SOURCE_FLAG = "apiserver-cidr"              # install --apiserver-cidr
