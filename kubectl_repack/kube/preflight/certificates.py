"""Certificate expiry by a small DER walk (the krew zipapp carries no compiled code, so no
`cryptography` here), and the webhook-cert verdict (pure)."""
from __future__ import annotations

import base64
import binascii
import datetime as dt
import re

from .checks import Check, FAIL, INSTALL, OK, age

CERT_MIN_REMAINING = dt.timedelta(days=30)


_PEM = re.compile(rb"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.S)


def pem_certificates(pem: bytes) -> list:
    """The DER bytes of every CERTIFICATE block of a PEM text, in order."""
    out = []
    for block in _PEM.findall(pem):
        try:
            out.append(base64.b64decode(re.sub(rb"\s+", b"", block), validate=True))
        except (binascii.Error, ValueError) as e:
            raise ValueError(f"a CERTIFICATE block is not base64: {e}") from None
    return out


def _der(data: bytes, pos: int) -> tuple:
    """(tag, content start, content end) of the DER element at `pos`."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        if not 1 <= n <= 4 or pos + n > len(data):
            raise ValueError("bad DER length")
        length = int.from_bytes(data[pos:pos + n], "big")
        pos += n
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def der_not_after(der: bytes) -> dt.datetime:
    """notAfter of one X.509 certificate (DER): Certificate > tbsCertificate > [version], serial,
    signature, issuer, validity > (notBefore, notAfter). ValueError when it is not one."""
    tag, start, _ = _der(der, 0)
    if tag != 0x30:
        raise ValueError("not an X.509 certificate (no outer SEQUENCE)")
    tag, pos, _ = _der(der, start)
    if tag != 0x30:
        raise ValueError("not an X.509 certificate (no tbsCertificate)")
    tag, _, end = _der(der, pos)
    if tag == 0xA0:           # [0] version, absent in v1 certificates
        pos = end
    for _ in range(3):        # serialNumber, signature AlgorithmIdentifier, issuer Name
        _, _, pos = _der(der, pos)
    tag, vstart, _ = _der(der, pos)
    if tag != 0x30:
        raise ValueError("not an X.509 certificate (no validity)")
    _, _, pos = _der(der, vstart)          # notBefore
    tag, tstart, tend = _der(der, pos)     # notAfter
    text = der[tstart:tend].decode("ascii", "replace")
    if tag == 0x17 and re.fullmatch(r"\d{12}Z", text):      # UTCTime YYMMDDHHMMSSZ (RFC 5280: 50-99 -> 19xx)
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    elif not (tag == 0x18 and re.fullmatch(r"\d{14}Z", text)):  # GeneralizedTime YYYYMMDDHHMMSSZ
        raise ValueError(f"notAfter {text!r} is not a UTCTime or GeneralizedTime")
    return dt.datetime.strptime(text, "%Y%m%d%H%M%SZ").replace(tzinfo=dt.timezone.utc)


def pem_not_after(pem: bytes) -> dt.datetime:
    """The earliest notAfter among a PEM text's certificates (a chain or bundle is as good as its
    first expiry). ValueError when it holds none, or one that is not a certificate."""
    ders = pem_certificates(pem)
    if not ders:
        raise ValueError("no PEM CERTIFICATE block")
    return min(der_not_after(d) for d in ders)


def cert_verdict(not_after: dt.datetime, what: str, now: dt.datetime) -> Check:
    left = not_after - now
    when = not_after.strftime("%Y-%m-%dT%H:%M:%SZ")
    fix = f"{INSTALL} (renews certificates that expire within 30 days)"
    if left <= dt.timedelta(0):
        return Check("webhook-cert", FAIL, f"{what} expired {age(-left.total_seconds())} ago ({when})", fix)
    if left < CERT_MIN_REMAINING:
        return Check("webhook-cert", FAIL, f"{what} expires in {age(left.total_seconds())} ({when})", fix)
    return Check("webhook-cert", OK, f"{what} valid for {age(left.total_seconds())} (until {when})")

