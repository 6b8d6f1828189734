"""NOM-5: the generated CA and serving certificate."""
from __future__ import annotations

import socket
import ssl
import threading
from datetime import datetime, timedelta, timezone

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from kubectl_repack.deploy import certs

NOW = datetime(2026, 7, 30, 10, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def bundle():
    return certs.generate("repack-webhook", "repack-system", extra_sans=["127.0.0.1", "webhook.local"], now=NOW)


def test_sans_cover_service_names_and_extras(bundle):
    assert certs.sans_of(bundle.cert_pem) == [
        "repack-webhook", "repack-webhook.repack-system", "repack-webhook.repack-system.svc",
        "repack-webhook.repack-system.svc.cluster.local", "webhook.local", "127.0.0.1"]


def test_chain_verifies_against_the_ca(bundle):
    ca = x509.load_pem_x509_certificate(bundle.ca_cert_pem)
    leaf = x509.load_pem_x509_certificate(bundle.cert_pem)
    assert leaf.issuer == ca.subject
    leaf.verify_directly_issued_by(ca)  # raises on a bad signature or issuer mismatch
    other_ca = x509.load_pem_x509_certificate(certs.make_ca(now=NOW)[0])
    with pytest.raises(Exception):
        leaf.verify_directly_issued_by(other_ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    assert ExtendedKeyUsageOID.SERVER_AUTH in leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value


def test_tls_handshake_with_ca_bundle_and_service_hostname(bundle, tmp_path):
    paths = certs.write_pem(tmp_path, bundle)
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(paths["tls.crt"], paths["tls.key"])
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def accept():
        conn, _ = listener.accept()
        with server_ctx.wrap_socket(conn, server_side=True) as tls:
            tls.recv(1)

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    client_ctx = ssl.create_default_context(cadata=bundle.ca_cert_pem.decode())
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with client_ctx.wrap_socket(raw, server_hostname="repack-webhook.repack-system.svc") as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
            tls.send(b"x")
    t.join(5)
    listener.close()


def test_rotation_window(bundle):
    leaf = x509.load_pem_x509_certificate(bundle.cert_pem)
    expiry = leaf.not_valid_after_utc
    assert expiry == NOW + certs.DEFAULT_SERVING_VALIDITY
    assert not certs.needs_rotation(bundle.cert_pem, now=NOW)
    assert not certs.needs_rotation(bundle.cert_pem, now=expiry - timedelta(days=31))
    assert certs.needs_rotation(bundle.cert_pem, now=expiry - timedelta(days=29))
    assert certs.needs_rotation(bundle.cert_pem, now=expiry + timedelta(seconds=1))
    assert certs.needs_rotation(bundle.cert_pem, now=expiry - timedelta(days=5), before=timedelta(days=7))
    assert not certs.needs_rotation(bundle.cert_pem, now=expiry - timedelta(days=8), before=timedelta(days=7))


def test_pem_round_trip_and_key_permissions(bundle, tmp_path):
    paths = certs.write_pem(tmp_path / "tls", bundle)
    assert oct(paths["tls.key"].stat().st_mode & 0o777) == "0o600"
    back = certs.read_pem(tmp_path / "tls")
    assert (back.cert_pem, back.key_pem, back.ca_cert_pem) == (bundle.cert_pem, bundle.key_pem, bundle.ca_cert_pem)
    key = certs.serialization.load_pem_private_key(back.key_pem, password=None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    leaf = x509.load_pem_x509_certificate(back.cert_pem)
    assert leaf.public_key().public_numbers() == key.public_key().public_numbers()
