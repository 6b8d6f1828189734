"""The webhook's TLS certificates, made and renewed in the cluster by the controller process (NOM-5):
no private key is made on, sent to, or printed by a client (`kubectl repack install` renders no
Secret and no caBundle).

`CertManager.ensure()` converges three objects (read and written through kube.webhook_tls):

* **Secret `repack-webhook-tls`** (namespace of the controller): a CA and a serving certificate for
  every DNS name of the webhook Service (deploy.certs). Created when missing (once the webhook
  configuration exists: nothing is made before install applied it or after uninstall deleted it); replaced by a fresh CA
  and serving pair when the serving certificate expires within `rotate_before` (30 days), no longer
  names the Service, or cannot be read. The CA's private key is used once, to sign, and never stored.
  `ca.crt` is the trust bundle: the current CA first, then, during a rotation's overlap, the previous
  CA, kept until the previous serving certificate expires (annotation `repack.volcano.sh/previous-ca-until`)
  so the API server trusts the old pod until the new one serves.
* **MutatingWebhookConfiguration `repack-placement`**: the caBundle of every webhook entry that calls
  the Service equals the Secret's `ca.crt` (JSON patch when it differs: after an install, a re-install
  that dropped it, or a rotation). Entries that call a URL (install --webhook-url) are not ours.
* **Deployment `repack-webhook`**: its pod template carries the serving certificate's fingerprint
  (`repack.volcano.sh/tls-fingerprint`); when it differs the annotation is patched and the Deployment
  (strategy Recreate) replaces its pod, which then loads the new pair (gunicorn reads it at start).

Until the Secret exists the webhook pod waits in ContainerCreating for its volume (install --wait
waits for it); the API server calls the webhook fail-open meanwhile.
"""
from __future__ import annotations

import base64
import hashlib
import logging
import threading
from datetime import datetime, timedelta, timezone
from typing import Callable, Optional

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from kubectl_repack.api.times import parse_time, rfc3339
from kubectl_repack.api.view import ObjectView, as_map
from kubectl_repack.deploy import certs, manifests
from kubectl_repack.deploy.controller import TLS_FINGERPRINT_ANNOTATION
from kubectl_repack.errors import ClusterAPIError, Conflict, RepackError

log = logging.getLogger("webhook.certmanager")

PREVIOUS_CA_UNTIL = "repack.volcano.sh/previous-ca-until"
FINGERPRINT = TLS_FINGERPRINT_ANNOTATION
DEFAULT_INTERVAL = 60.0     # seconds between checks once everything is in place (three GETs)
RETRY_INTERVAL = 5.0        # while something is missing (the webhook configuration not applied yet) or failed


def fingerprint(cert_pem: bytes) -> str:
    """SHA-256 of the certificate (DER), hex: what the Deployment's pod template carries."""
    return hashlib.sha256(x509.load_pem_x509_certificate(cert_pem).public_bytes(
        Encoding.DER)).hexdigest()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _pems(bundle: bytes) -> list[bytes]:
    """The certificates of a PEM bundle, each re-encoded as PEM (order kept)."""
    return [c.public_bytes(Encoding.PEM) for c in x509.load_pem_x509_certificates(bundle)]


class CertManager:
    """Decisions over three objects; `objects` is a kube.webhook_tls.WebhookTLSObjects (or a twin)."""

    def __init__(self, objects, namespace: str, service: str = manifests.NAME,
                 rotate_before: timedelta = certs.DEFAULT_ROTATE_BEFORE,
                 now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
                 generate: Callable[..., certs.CertBundle] = certs.generate):
        self.objects, self.namespace, self.service = objects, namespace, service
        self.rotate_before, self.now, self.generate = rotate_before, now, generate

    # -- the Secret --
    def _why_replace(self, data: dict, now: datetime) -> str:
        """'' while the Secret's pair is usable; else why it must be replaced."""
        try:
            cert_pem = base64.b64decode(data[certs.TLS_CRT])
            base64.b64decode(data[certs.TLS_KEY])
            cas = _pems(base64.b64decode(data[certs.CA_CRT]))
            x509.load_pem_x509_certificate(cert_pem).verify_directly_issued_by(
                x509.load_pem_x509_certificate(cas[0]))
        except (KeyError, ValueError, TypeError, IndexError) as e:
            return f"it cannot be read ({type(e).__name__}: {e})"
        except Exception as e:  # noqa: BLE001 - cryptography's signature and key errors vary by version
            return f"its certificate is not signed by its CA ({type(e).__name__})"
        if certs.needs_rotation(cert_pem, now, self.rotate_before):
            return f"its serving certificate expires within {self.rotate_before.days} days"
        missing = set(certs.service_dns_names(self.service, self.namespace)) - set(certs.sans_of(cert_pem))
        if missing:
            return f"its serving certificate does not name {', '.join(sorted(missing))}"
        return ""

    def _secret_body(self, bundle: certs.CertBundle, trust: list[bytes], previous_until: Optional[datetime],
                     base: Optional[dict] = None) -> dict:
        meta = {k: v for k, v in ObjectView(base).meta.items() if k != "managedFields"}
        meta.update(name=manifests.SECRET_NAME, namespace=self.namespace)
        meta["labels"] = dict(meta.get("labels") or {}, **manifests.LABELS)
        annotations = dict(meta.get("annotations") or {})
        annotations.pop(PREVIOUS_CA_UNTIL, None)
        if previous_until is not None:
            annotations[PREVIOUS_CA_UNTIL] = rfc3339(previous_until)
        meta["annotations"] = annotations
        return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls", "metadata": meta,
                "data": {certs.TLS_CRT: _b64(bundle.cert_pem), certs.TLS_KEY: _b64(bundle.key_pem),
                         certs.CA_CRT: _b64(b"".join(trust))}}

    def ensure_secret(self, actions: list) -> dict:
        """The Secret as it is now in the cluster (created, rotated or pruned first when needed)."""
        now = self.now()
        secret = self.objects.read_secret()
        if secret is None:
            bundle = self.generate(self.service, self.namespace, now=now)
            try:
                secret = self.objects.create_secret(self._secret_body(bundle, [bundle.ca_cert_pem], None))
                actions.append(f"created secret {self.namespace}/{manifests.SECRET_NAME}")
            except Conflict:        # another controller replica made it first: use theirs
                secret = self.objects.read_secret()
                if secret is None:
                    raise ClusterAPIError(f"secret {self.namespace}/{manifests.SECRET_NAME} vanished") from None
            return secret
        data = secret.get("data") or {}
        why = self._why_replace(data, now)
        if why:
            old_cert = base64.b64decode(data.get(certs.TLS_CRT) or "")
            keep, until = [], None
            try:   # trust the previous CA while the previous pair may still be served
                old_until = x509.load_pem_x509_certificate(old_cert).not_valid_after_utc
                if old_until > now:
                    keep, until = _pems(base64.b64decode(data[certs.CA_CRT]))[:1], old_until
            except (KeyError, ValueError, TypeError):
                pass
            extra = []
            try:
                extra = [s for s in certs.sans_of(old_cert)
                         if s not in certs.service_dns_names(self.service, self.namespace)]
            except (ValueError, x509.ExtensionNotFound):
                pass
            bundle = self.generate(self.service, self.namespace, extra_sans=extra, now=now)
            secret = self.objects.replace_secret(self._secret_body(bundle, [bundle.ca_cert_pem] + keep, until, secret))
            actions.append(f"rotated secret {self.namespace}/{manifests.SECRET_NAME}: {why}"
                           + (f"; the previous CA stays trusted until {rfc3339(until)}" if until else ""))
            return secret
        until_text = ObjectView(secret).annotations.get(PREVIOUS_CA_UNTIL)
        cas = _pems(base64.b64decode(data[certs.CA_CRT]))
        until = parse_time(until_text)
        overlap_over = until is None or until <= now
        if overlap_over and (len(cas) > 1 or until_text is not None):
            body = dict(secret, metadata=dict(secret["metadata"]))
            bundle = certs.CertBundle(ca_cert_pem=cas[0], cert_pem=base64.b64decode(data[certs.TLS_CRT]),
                                      key_pem=base64.b64decode(data[certs.TLS_KEY]))
            secret = self.objects.replace_secret(self._secret_body(bundle, cas[:1], None, body))
            actions.append(f"secret {self.namespace}/{manifests.SECRET_NAME}: the previous CA is no longer trusted")
        return secret

    # -- the webhook configuration --
    def ensure_ca_bundle(self, config: dict, secret: dict, actions: list) -> None:
        """caBundle of every entry calling the Service = the Secret's ca.crt."""
        want = (secret.get("data") or {})[certs.CA_CRT]
        ops = []
        for i, hook in enumerate(config.get("webhooks") or []):
            service = (hook.get("clientConfig") or {}).get("service") or {}
            if (service.get("namespace"), service.get("name")) != (self.namespace, self.service):
                continue
            if hook["clientConfig"].get("caBundle") != want:
                ops += [{"op": "test", "path": f"/webhooks/{i}/name", "value": hook.get("name")},
                        {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": want}]
        if ops:
            self.objects.patch_webhook_config(ops)
            names = [op["value"] for op in ops if op["op"] == "test"]
            actions.append(f"mutatingwebhookconfiguration {config['metadata']['name']}: caBundle set to the "
                           f"secret's CA for {', '.join(names)}")

    # -- the webhook Deployment --
    def ensure_rollout(self, secret: dict, actions: list) -> bool:
        """The webhook's pod template carries the serving certificate's fingerprint; a different one
        is patched, so the Deployment replaces its pod and the new pod serves the new pair."""
        deployment = self.objects.read_deployment()
        if deployment is None:
            return False
        want = fingerprint(base64.b64decode(secret["data"][certs.TLS_CRT]))
        template_meta = as_map(as_map(ObjectView(deployment).spec.get("template")).get("metadata"))
        if as_map(template_meta.get("annotations")).get(FINGERPRINT) == want:
            return True
        self.objects.patch_deployment({"spec": {"template": {"metadata": {"annotations": {FINGERPRINT: want}}}}})
        actions.append(f"deployment {self.namespace}/{self.service}: pod template annotated with the serving "
                       f"certificate's fingerprint {want[:16]}... (the pod is replaced to serve it)")
        return True

    def ensure(self) -> tuple[list, bool]:
        """One pass: (what was changed, whether everything was there to converge)."""
        actions: list = []
        # Nothing is made while the webhook configuration does not exist: install applies it last
        # (retried every few seconds until then), and uninstall deletes it first, so a controller
        # still terminating does not re-create the Secret uninstall has just deleted.
        config = self.objects.read_webhook_config()
        if config is None:
            return actions, False
        secret = self.ensure_secret(actions)
        self.ensure_ca_bundle(config, secret, actions)
        deployment_there = self.ensure_rollout(secret, actions)
        return actions, deployment_there


def run_forever(manager: CertManager, stop: threading.Event, interval: float = DEFAULT_INTERVAL,
                retry: float = RETRY_INTERVAL) -> None:
    """ensure() now and then every `interval` seconds (every `retry` while incomplete or failing)."""
    while not stop.is_set():
        wait = interval
        try:
            actions, complete = manager.ensure()
            for action in actions:
                log.info("%s", action)
            if not complete:
                wait = retry
        except (RepackError, ValueError) as e:
            log.warning("webhook certificates: %s (retried in %.0fs)", e, retry)
            wait = retry
        except Exception:  # noqa: BLE001 - the thread must survive and try again
            log.exception("webhook certificates: unexpected failure (retried in %.0fs)", retry)
            wait = retry
        stop.wait(wait)


def start(api, namespace: str, stop: threading.Event, interval: float = DEFAULT_INTERVAL) -> threading.Thread:
    """The certificate manager of the controller process, in its own daemon thread."""
    from kubectl_repack.kube.webhook_tls import WebhookTLSObjects

    objects = WebhookTLSObjects(api, namespace, manifests.SECRET_NAME, manifests.CONFIG_NAME, manifests.NAME)
    thread = threading.Thread(target=run_forever, args=(CertManager(objects, namespace), stop, interval),
                              name="certificates", daemon=True)
    thread.start()
    return thread
