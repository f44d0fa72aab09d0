"""A throw-away PKI for one dev cluster, the layout kwokctl's binary runtime and envtest use.

One CA and one admin certificate (O=system:masters) that also serves as the API server's
serving certificate; the admin key doubles as the service-account signing key. Everything is
valid for 127.0.0.1 only and lives in the state directory, deleted with it.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

_VALIDITY = dt.timedelta(days=365)
_SERVICE_IP = "10.96.0.1"  # first address of --service-cluster-ip-range, the `kubernetes` Service


@dataclass(frozen=True)
class Pki:
    ca_cert: Path
    admin_cert: Path
    admin_key: Path


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _pem_key(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def generate_pki(directory: Path) -> Pki:
    """Write ca.crt, admin.crt, admin.key under `directory` and return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)  # tolerate small clock skew
    ca_key = _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "elasticityops-dev-ca")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    admin_key = _key()
    admin_name = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters"),
            x509.NameAttribute(NameOID.COMMON_NAME, "kubernetes-admin"),
        ]
    )
    sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address(_SERVICE_IP)),
    ]
    admin_cert = (
        x509.CertificateBuilder()
        .subject_name(admin_name)
        .issuer_name(ca_name)
        .public_key(admin_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [x509.oid.ExtendedKeyUsageOID.SERVER_AUTH, x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(directory / "ca.crt", directory / "admin.crt", directory / "admin.key")
    pki.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    pki.admin_cert.write_bytes(admin_cert.public_bytes(serialization.Encoding.PEM))
    pki.admin_key.write_bytes(_pem_key(admin_key))
    pki.admin_key.chmod(0o600)
    return pki


def write_kubeconfig(path: Path, server: str, pki: Pki, name: str = "eops-dev") -> None:
    """A self-contained kubeconfig (certificates embedded) for `server`."""

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": server, "certificate-authority-data": b64(pki.ca_cert)}}
        ],
        "users": [
            {
                "name": f"{name}-admin",
                "user": {
                    "client-certificate-data": b64(pki.admin_cert),
                    "client-key-data": b64(pki.admin_key),
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)


@dataclass(frozen=True)
class ServingPki:
    """A CA of its own and a serving certificate it signed, as PEM bytes (for a Secret)."""

    ca_cert: bytes
    ca_key: bytes
    cert: bytes
    key: bytes


def generate_serving_pki(ca_name: str, dns_names: tuple[str, ...]) -> ServingPki:
    """A CA named `ca_name` (also its DNS name: cert-controller checks a CA as it checks a server)
    and a certificate for `dns_names` and 127.0.0.1, both valid for a year: what Kueue's own
    certificate rotator takes as valid instead of making its own, which would not name 127.0.0.1."""
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    ca_key = _key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ca_name)])
    ca = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(ca_name)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = _key()
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns_names]
    sans.append(x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + _VALIDITY)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    return ServingPki(ca.public_bytes(pem), _pkcs1(ca_key), cert.public_bytes(pem), _pkcs1(key))


def _pkcs1(key: rsa.RSAPrivateKey) -> bytes:
    # cert-controller reads keys with x509.ParsePKCS1PrivateKey: "RSA PRIVATE KEY", not PKCS#8.
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
