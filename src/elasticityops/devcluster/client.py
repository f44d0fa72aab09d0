"""The dev cluster's clients of its own components: the backend's `KubeApi`, blocking.

The same client the gateway uses (backends/kubernetes/api.py, driven from synchronous code by
blocking.py): plain JSON dicts, orjson decoding, one retry loop and one error translation, so
the dev cluster raises the domain's errors (`Conflict`, `NotFound`, `TemporaryError`, ...) and
never an HTTP library's. Tests and benches list thousands of pods and nodes and read a handful
of fields, which is why this is a dict client and not typed models."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.backends.kubernetes.settings import KubernetesSettings

ADMIN_SETTINGS = KubernetesSettings(qps=1e6, burst=10**6, concurrency=64)
"""No client-side rate limit (the simulated cloud creates thousands of static-pool nodes at once);
the API server's own 429s are still retried, after their Retry-After."""
PROBE_SETTINGS = KubernetesSettings(qps=1e6, burst=10**6, concurrency=4, request_timeout_seconds=2.0)
"""A readiness probe asks every 0.2 s and gives each answer 2 s."""


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and the admin client certificate that has every right there."""

    server: str
    ca_cert: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def in_pki(cls, server: str, pki: Path) -> Credentials:
        """The admin credentials `certs.generate_pki` wrote into `pki`."""
        return cls(server, pki / "ca.crt", pki / "admin.crt", pki / "admin.key")

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_cert))
        ctx.load_cert_chain(str(self.client_cert), str(self.client_key))
        return ctx


def admin_api(creds: Credentials, settings: KubernetesSettings = ADMIN_SETTINGS) -> BlockingKubeApi:
    """A blocking client with admin rights (close it, or use it as a context manager)."""
    return BlockingKubeApi(KubeApi.at(creds.server, settings, ssl_context=creds.ssl_context()))


def unverified_tls() -> ssl.SSLContext:
    """TLS that accepts any certificate: kube-controller-manager and kube-scheduler serve
    self-signed ones, and only their liveness is asked."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def probe_api(base_url: str, ssl_context: ssl.SSLContext | None = None) -> BlockingKubeApi:
    """A client for `ok(path)` readiness probes of one component (etcd, kwok, the controllers)."""
    return BlockingKubeApi(KubeApi.at(base_url, PROBE_SETTINGS, ssl_context=ssl_context), name="probe")
