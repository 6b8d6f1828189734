"""The three objects the in-cluster certificate manager (webhook.controller.certmanager) keeps consistent, read
and written by name: the webhook's TLS Secret, the MutatingWebhookConfiguration whose caBundle must
trust it, and the webhook Deployment whose pods must be restarted to serve a new pair. No decisions
here: those are webhook.controller.certmanager's, tested over an in-memory twin of this class."""
from __future__ import annotations

from typing import Optional

from kubectl_repack.errors import NotFound

from .client import request

FIELD_MANAGER = "repack-controller"


class WebhookTLSObjects:
    """Secret `secret` and Deployment `deployment` in `namespace`, MutatingWebhookConfiguration `config`."""

    def __init__(self, api, namespace: str, secret: str, config: str, deployment: str):
        self.api, self.namespace = api, namespace
        self.secret_path = f"/api/v1/namespaces/{namespace}/secrets/{secret}"
        self.config_path = f"/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/{config}"
        self.deployment_path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{deployment}"

    def _get(self, path: str) -> Optional[dict]:
        try:
            return request(self.api, "GET", path)
        except NotFound:
            return None

    def read_secret(self) -> Optional[dict]:
        return self._get(self.secret_path)

    def create_secret(self, body: dict) -> dict:
        """POST; Conflict when another process created it first."""
        return request(self.api, "POST", self.secret_path.rsplit("/", 1)[0], body,
                       query=[("fieldManager", FIELD_MANAGER)])

    def replace_secret(self, body: dict) -> dict:
        """PUT with the body's resourceVersion: Conflict when it changed since it was read."""
        return request(self.api, "PUT", self.secret_path, body, query=[("fieldManager", FIELD_MANAGER)])

    def read_webhook_config(self) -> Optional[dict]:
        return self._get(self.config_path)

    def patch_webhook_config(self, ops: list) -> dict:
        """A JSON patch (its `test` ops make a concurrent change fail with 422 instead of a wrong write)."""
        return request(self.api, "PATCH", self.config_path, ops, query=[("fieldManager", FIELD_MANAGER)],
                       content_type="application/json-patch+json")

    def read_deployment(self) -> Optional[dict]:
        return self._get(self.deployment_path)

    def patch_deployment(self, body: dict) -> dict:
        return request(self.api, "PATCH", self.deployment_path, body, query=[("fieldManager", FIELD_MANAGER)],
                       content_type="application/merge-patch+json")
