"""Certificates and keys for a throw-away local control plane, made with `cryptography`.

One CA signs the API server's serving certificate (SANs 127.0.0.1, localhost and the in-cluster
names) and the admin client certificate (CN=repack-admin, O=system:masters). A separate RSA key
pair signs and verifies service-account tokens.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# The admin identity of the tests and of vc-scheduler. The workload controllers that re-create
# evicted pods run under their own identities, as in a real cluster (controlplane.py): the
# admission policy that lets only them create repack replacements is tested with its defaults.
ADMIN_USER = "repack-admin"


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files written by `make_pki`."""

    dir: str
    ca_cert: str
    ca_key: str
    serving_cert: str
    serving_key: str
    admin_cert: str
    admin_key: str
    sa_key: str
    sa_pub: str


def _write(path: str, data: bytes, private: bool = False) -> None:
    with open(path, "wb") as f:
        f.write(data)
    if private:
        os.chmod(path, 0o600)


def _key_pem(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(cn: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
    if org:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _signed(subject, public_key, issuer, issuer_key, *, ca: bool, usages, sans=None, days=7):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=not ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=ca,
                crl_sign=ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_pki(directory: str, extra_dns: tuple[str, ...] = (), extra_ips: tuple[str, ...] = ()) -> Pki:
    """Writes a fresh CA, serving cert, admin client cert and service-account key pair.
    extra_ips: more IP SANs of the serving cert (the address pods reach the API server at)."""
    os.makedirs(directory, exist_ok=True)
    p = lambda name: os.path.join(directory, name)  # noqa: E731

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("repack-test-ca")
    ca_cert = _signed(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True, usages=None, days=30)

    serving_key = ec.generate_private_key(ec.SECP256R1())
    dns = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
           "kubernetes.default.svc.cluster.local", *extra_dns]
    sans = [x509.DNSName(d) for d in dns] + [
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
    ] + [x509.IPAddress(ipaddress.ip_address(ip)) for ip in extra_ips]
    serving_cert = _signed(
        _name("kube-apiserver"), serving_key.public_key(), ca_name, ca_key,
        ca=False, usages=[ExtendedKeyUsageOID.SERVER_AUTH], sans=sans,
    )

    admin_key = ec.generate_private_key(ec.SECP256R1())
    admin_cert = _signed(
        _name(ADMIN_USER, "system:masters"), admin_key.public_key(), ca_name, ca_key,
        ca=False, usages=[ExtendedKeyUsageOID.CLIENT_AUTH],
    )

    # Service-account tokens: kube-apiserver signs with the private key, verifies with the public.
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

    pki = Pki(
        dir=directory,
        ca_cert=p("ca.crt"), ca_key=p("ca.key"),
        serving_cert=p("apiserver.crt"), serving_key=p("apiserver.key"),
        admin_cert=p("admin.crt"), admin_key=p("admin.key"),
        sa_key=p("sa.key"), sa_pub=p("sa.pub"),
    )
    pem = serialization.Encoding.PEM
    _write(pki.ca_cert, ca_cert.public_bytes(pem))
    _write(pki.ca_key, _key_pem(ca_key), private=True)
    _write(pki.serving_cert, serving_cert.public_bytes(pem))
    _write(pki.serving_key, _key_pem(serving_key), private=True)
    _write(pki.admin_cert, admin_cert.public_bytes(pem))
    _write(pki.admin_key, _key_pem(admin_key), private=True)
    _write(pki.sa_key, _key_pem(sa_key), private=True)
    _write(pki.sa_pub, sa_key.public_key().public_bytes(
        pem, serialization.PublicFormat.SubjectPublicKeyInfo))
    return pki


def issue_client_cert(pki: Pki, name: str, cn: str, org: str | None = None) -> tuple[str, str]:
    """A client certificate signed by the harness CA (e.g. CN=system:node:<node>,
    O=system:nodes for a kubelet); returns the paths of the certificate and key it wrote."""
    with open(pki.ca_cert, "rb") as f:
        ca_cert = x509.load_pem_x509_certificate(f.read())
    with open(pki.ca_key, "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = _signed(_name(cn, org), key.public_key(), ca_cert.subject, ca_key,
                   ca=False, usages=[ExtendedKeyUsageOID.CLIENT_AUTH])
    cert_path, key_path = (os.path.join(pki.dir, f"{name}.crt"), os.path.join(pki.dir, f"{name}.key"))
    _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
    _write(key_path, _key_pem(key), private=True)
    return cert_path, key_path


def write_kubeconfig(path: str, server: str, pki: Pki, context: str = "repack-e2e",
                     client: tuple[str, str] | None = None, user: str = "repack-admin",
                     token: str | None = None) -> None:
    """A kubeconfig that refers to the PEM files by absolute path: the admin's, or another
    identity's when `client` = (certificate, key) paths is given, or a bearer `token`'s."""
    import yaml

    credentials = {"token": token} if token else {
        "client-certificate": os.path.abspath(client[0] if client else pki.admin_cert),
        "client-key": os.path.abspath(client[1] if client else pki.admin_key)}
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {
            "server": server, "certificate-authority": os.path.abspath(pki.ca_cert)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": user}}],
        "current-context": context,
    }
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    os.chmod(path, 0o600)
