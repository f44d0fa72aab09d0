"""The dev cluster's client (the backend's, blocking) over mutual TLS with the dev cluster's own
PKI, against a real TLS server on 127.0.0.1 that demands the admin client certificate, as
kube-apiserver does: admin calls, readiness probes that never raise, and the written kubeconfig
loaded the gateway's way."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from backends.kubernetes.scripted_server import Reply, scripted_in_thread
from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.devcluster.certs import Pki, generate_pki, write_kubeconfig
from elasticityops.devcluster.client import Credentials, admin_api, probe_api, unverified_tls
from elasticityops.domain.errors import Conflict


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return generate_pki(tmp_path_factory.mktemp("pki"))


def _serving(pki: Pki) -> ssl.SSLContext:
    """The API server's side: the admin certificate serves 127.0.0.1; clients must show one."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca_cert))
    ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def test_admin_api_speaks_mutual_tls_and_raises_the_domains_errors(pki: Pki) -> None:
    replies = [
        Reply(201, {"kind": "Namespace"}),
        Reply(409, {"reason": "AlreadyExists", "message": "exists"}),
    ]
    with scripted_in_thread(replies, ssl_context=_serving(pki)) as srv:
        creds = Credentials.in_pki(srv.url, pki.ca_cert.parent)
        with admin_api(creds) as api:
            assert api.create("/api/v1/namespaces", {"metadata": {"name": "a"}}) == {"kind": "Namespace"}
            with pytest.raises(Conflict, match="exists"):
                api.create("/api/v1/namespaces", {"metadata": {"name": "a"}})
    assert [s.method for s in srv.seen] == ["POST", "POST"]


def test_probes_answer_false_instead_of_raising(pki: Pki) -> None:
    with scripted_in_thread([Reply(200)] * 3, ssl_context=_serving(pki)) as srv:
        creds = Credentials.in_pki(srv.url, pki.ca_cert.parent)
        with probe_api(srv.url, creds.ssl_context()) as probe:
            assert probe.ok("/readyz") is True
        # No client certificate: the server refuses the handshake.
        with probe_api(srv.url, unverified_tls()) as probe:
            assert probe.ok("/readyz") is False
        # The system's CAs do not know the dev cluster's.
        with probe_api(srv.url) as probe:
            assert probe.ok("/readyz") is False
        url = srv.url
    with probe_api(url, creds.ssl_context()) as probe:  # nothing listens any more
        assert probe.ok("/readyz") is False
    assert len(srv.seen) == 1


def test_the_written_kubeconfig_works_with_the_gateways_client(pki: Pki, tmp_path: Path) -> None:
    with scripted_in_thread([Reply(200, {"gitVersion": "v1.36.3"})], ssl_context=_serving(pki)) as srv:
        write_kubeconfig(tmp_path / "kubeconfig", srv.url, pki)
        settings = KubernetesSettings(kubeconfig=str(tmp_path / "kubeconfig"))
        with BlockingKubeApi(KubeApi.connect(settings)) as api:
            assert api.get("/version") == {"gitVersion": "v1.36.3"}
