"""Certificates for the webhook's TLS endpoint (requirement NOM-5), made with `cryptography`.

The API server calls the webhook at `https://<service>.<namespace>.svc` and verifies the serving
certificate against the MutatingWebhookConfiguration's caBundle, so the project makes its own CA
and a serving certificate whose SANs cover every name the Service answers to (plus extra DNS
names or IPs, e.g. 127.0.0.1 when the API server calls a loopback URL in tests).
"""
from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterable, Optional, Union

from kubectl_repack.errors import RepackError

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ImportError:  # the krew zipapp carries no compiled code; `require_cryptography` says so
    x509 = None

DEFAULT_CA_VALIDITY = timedelta(days=3650)
DEFAULT_SERVING_VALIDITY = timedelta(days=365)
DEFAULT_ROTATE_BEFORE = timedelta(days=30)

TLS_CRT, TLS_KEY, CA_CRT = "tls.crt", "tls.key", "ca.crt"


class CryptographyMissing(RepackError):
    """Certificates are needed but the `cryptography` library is not importable here."""


def require_cryptography(doing: str) -> None:
    """Raise CryptographyMissing, naming what to use instead, when `cryptography` is absent."""
    if x509 is None:
        raise CryptographyMissing(
            f"{doing} needs the Python library `cryptography` to make the webhook's TLS certificates; it "
            "comes with the webhook extra (`pipx install 'kubectl-repack[webhook]'`, or pip in a "
            "virtualenv), which the krew build cannot carry (compiled code). A plain `install` needs "
            "none: the in-cluster controller makes the certificates")


@dataclass(frozen=True)
class CertBundle:
    """PEM-encoded CA certificate plus the serving certificate and its private key."""

    ca_cert_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    ca_key_pem: Optional[bytes] = None

    def as_secret_data(self) -> dict[str, bytes]:
        """Keys of a kubernetes.io/tls Secret (plus ca.crt)."""
        return {TLS_CRT: self.cert_pem, TLS_KEY: self.key_pem, CA_CRT: self.ca_cert_pem}


def service_dns_names(service: str, namespace: str) -> list[str]:
    """Every DNS name a ClusterIP Service answers to inside the cluster."""
    return [service, f"{service}.{namespace}", f"{service}.{namespace}.svc",
            f"{service}.{namespace}.svc.cluster.local"]


def _now(now: Optional[datetime]) -> datetime:
    now = now or datetime.now(timezone.utc)
    return now if now.tzinfo else now.replace(tzinfo=timezone.utc)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca(common_name: str = "repack-webhook-ca", now: Optional[datetime] = None,
            validity: timedelta = DEFAULT_CA_VALIDITY) -> tuple[bytes, bytes]:
    """A self-signed CA: (certificate PEM, private key PEM)."""
    now = _now(now)
    key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _san(extra: Iterable[str]) -> list[x509.GeneralName]:
    out: list[x509.GeneralName] = []
    for entry in extra:
        try:
            out.append(x509.IPAddress(ipaddress.ip_address(entry)))
        except ValueError:
            out.append(x509.DNSName(entry))
    return out


def make_serving_cert(ca_cert_pem: bytes, ca_key_pem: bytes, service: str, namespace: str,
                      extra_sans: Iterable[str] = (), now: Optional[datetime] = None,
                      validity: timedelta = DEFAULT_SERVING_VALIDITY) -> tuple[bytes, bytes]:
    """A serving certificate signed by the CA: (certificate PEM, private key PEM).

    SANs: the four Service DNS names plus `extra_sans` (IP literals become IP SANs).
    """
    now = _now(now)
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    key = _key()
    names = service_dns_names(service, namespace)
    sans = _san(list(names) + [s for s in extra_sans if s not in names])
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[2])]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=False,
                                         content_commitment=False, data_encipherment=False,
                                         key_agreement=False, key_cert_sign=False, crl_sign=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def generate(service: str, namespace: str, extra_sans: Iterable[str] = (),
             now: Optional[datetime] = None) -> CertBundle:
    """A fresh CA and serving certificate for `<service>.<namespace>.svc`."""
    require_cryptography("generating certificates")
    ca_cert, ca_key = make_ca(now=now)
    cert, key = make_serving_cert(ca_cert, ca_key, service, namespace, extra_sans, now=now)
    return CertBundle(ca_cert_pem=ca_cert, cert_pem=cert, key_pem=key, ca_key_pem=ca_key)


def needs_rotation(cert_pem: bytes, now: Optional[datetime] = None,
                   before: timedelta = DEFAULT_ROTATE_BEFORE) -> bool:
    """True if the certificate expires within `before` of `now` (or is not yet valid)."""
    now = _now(now)
    cert = x509.load_pem_x509_certificate(cert_pem)
    return now + before >= cert.not_valid_after_utc or now < cert.not_valid_before_utc


def sans_of(cert_pem: bytes) -> list[str]:
    """The certificate's DNS and IP SANs as strings."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return ext.get_values_for_type(x509.DNSName) + [str(ip) for ip in ext.get_values_for_type(x509.IPAddress)]


PathLike = Union[str, os.PathLike]


def write_pem(directory: PathLike, bundle: CertBundle) -> dict[str, Path]:
    """Write tls.crt, tls.key (mode 0600) and ca.crt into `directory`; returns their paths."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, data in bundle.as_secret_data().items():
        path = root / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if name == TLS_KEY else 0o644)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        paths[name] = path
    return paths


def read_pem(directory: PathLike) -> CertBundle:
    """Read a bundle written by `write_pem` (or mounted from the Secret)."""
    root = Path(directory)
    return CertBundle(ca_cert_pem=(root / CA_CRT).read_bytes(), cert_pem=(root / TLS_CRT).read_bytes(),
                      key_pem=(root / TLS_KEY).read_bytes())
