"""Bearer-token auth on /v1; probes and metrics are open."""

from __future__ import annotations

import re
import subprocess

import httpx
import pytest

from helpers.rawhttp import raw_request, request_bytes
from helpers.server import EOPS, RunningServer


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({}, id="missing"),
        pytest.param({"Authorization": "Bearer eops_wrong"}, id="wrong"),
        pytest.param({"Authorization": "Basic dXNlcjpwYXNz"}, id="not-bearer"),
        pytest.param({"Authorization": "Bearer"}, id="scheme-only"),
    ],
)
@pytest.mark.parametrize("path", ["/v1/functions", "/v1/invocations", "/v1/invocations/inv-x"])
def test_v1_needs_a_valid_token(gateway: RunningServer, headers: dict[str, str], path: str) -> None:
    response = httpx.get(gateway.url + path, headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    error = response.json()["error"]
    assert error["code"] == "unauthorized"
    assert "eops token create" in error["message"]


def test_a_created_token_works_at_once(gateway: RunningServer) -> None:
    done = subprocess.run(
        [EOPS, "token", "create", "--data-dir", str(gateway.data_dir), "--name", "test"],
        capture_output=True,
        text=True,
        check=True,
    )
    token = done.stdout.strip()
    assert token.startswith("eops_")
    with gateway.client(token) as client:
        assert client.get("/v1/functions").status_code == 200
    assert token not in (gateway.data_dir / "eops.db").read_bytes().decode("latin-1"), (
        "only hashes are stored"
    )


@pytest.mark.parametrize("path", ["/healthz", "/readyz", "/metrics", "/openapi.json", "/docs"])
def test_probes_and_docs_need_no_token(gateway: RunningServer, path: str) -> None:
    # The first /openapi.json builds the whole schema: under CI's load (the cluster half beside
    # it) that took longer than httpx's 5-s default once. What is checked is the answer, not its speed.
    assert httpx.get(gateway.url + path, timeout=60).status_code == 200


def test_metrics_name_the_promised_series(gateway: RunningServer) -> None:
    text = httpx.get(gateway.url + "/metrics").text
    for series in (
        'eops_invocations{state="queued"}',
        "eops_queue_depth",
        "eops_gpus_in_use",
        "eops_time_to_start_seconds_bucket",
        "eops_invocation_duration_seconds",
        "eops_accept_latency_seconds_bucket",
        "eops_store_commit_writes_bucket",
    ):
        assert series in text


# -- every auth path compares bytes: any Authorization header is a 401, never a 500 ----------

_BAD_AUTHORIZATION = [
    pytest.param("Bearer tökén".encode(), id="utf8"),
    pytest.param(b"Bearer \xff\xfe\x80", id="latin1-bytes"),
    pytest.param("Bearer eops_ключ".encode(), id="cyrillic"),
    pytest.param(b"Bearer eops_a\tb", id="tab-inside"),
    pytest.param(b"Bearer \x80", id="lone-continuation"),
    pytest.param("Bäarer x".encode(), id="non-ascii-scheme"),
]
_AUTH_ROUTES = [
    ("POST", "/v1/invocations/inv-0000000000000000000000000/result"),
    ("POST", "/v1/functions/hello/invocations"),
    ("GET", "/v1/functions"),
    ("PUT", "/v1/functions/hello"),
    ("DELETE", "/v1/functions/hello"),
    ("GET", "/v1/invocations"),
    ("GET", "/v1/invocations/inv-0000000000000000000000000"),
    ("POST", "/v1/invocations/inv-0000000000000000000000000/cancel"),
    ("GET", "/v1/invocations/inv-0000000000000000000000000/logs"),
    ("GET", "/v1/tokens"),
    ("POST", "/v1/tokens"),
    ("DELETE", "/v1/tokens/tok-000000000000"),
]


@pytest.mark.parametrize("authorization", _BAD_AUTHORIZATION)
@pytest.mark.parametrize(("method", "path"), _AUTH_ROUTES, ids=[f"{m} {p}" for m, p in _AUTH_ROUTES])
def test_a_header_no_token_can_be_is_a_401_on_every_route(
    gateway: RunningServer, authorization: bytes, method: str, path: str
) -> None:
    """A non-ASCII bearer token on the result route was a 500 (`hmac.compare_digest` on str)."""
    answer = raw_request(
        gateway.port, request_bytes(method, path, [(b"Authorization", authorization)], b"{}")
    )
    assert answer.status == 401, answer.head + answer.body
    assert b'"code":"unauthorized"' in answer.body


@pytest.mark.parametrize(
    "authorization", [b"Bearer eops_a\x01b", b"Bearer eops_\x00", b"Bearer a\x1bb", b"Bearer eops_a\x7fb"]
)
def test_control_characters_in_the_header_never_reach_a_500(
    gateway: RunningServer, authorization: bytes
) -> None:
    """The HTTP parser refuses these itself (400) before any route; never a 500."""
    for method, path in _AUTH_ROUTES[:3]:
        answer = raw_request(gateway.port, request_bytes(method, path, [(b"Authorization", authorization)]))
        assert answer.status in (400, 401), answer.head + answer.body


# -- /docs works offline ----------------------------------------------------------------------


def test_docs_reference_only_the_gateways_own_urls_and_they_answer(gateway: RunningServer) -> None:
    page = httpx.get(gateway.url + "/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']|url:\s*'([^']+)'""", page.text)
    found = [a or b for a, b in urls]
    assert len(found) >= 4, page.text  # the script, the stylesheet, the icon, the schema
    for url in found:
        assert url.startswith("/"), f"{url} is not on the gateway"
        assert not url.startswith("//"), f"{url} is not on the gateway"
        assert httpx.get(gateway.url + url).status_code == 200, url
    assert "http://" not in page.text, page.text
    assert "https://" not in page.text, page.text
    assert httpx.get(gateway.url + "/redoc").status_code == 404, "ReDoc would load from a CDN"


@pytest.mark.parametrize(
    "header",
    [
        "Bearer tökén",
        "Bearer \x00\x01",
        "Bearer a\x7fb",
        "Bearer a b",
        "Bearer \u0444",
        "Bearer \udcff",
        "Bearer",
    ],
)
def test_the_token_parsers_take_any_characters_without_raising(header: str) -> None:
    """What an ASGI server other than ours might pass through: still a clean no, never a 500."""
    import asyncio

    from elasticityops.api.auth import bearer_token
    from elasticityops.domain.errors import Unauthorized
    from elasticityops.domain.invocations import callback_token, check_callback_token

    token = header.partition(" ")[2]
    assert not check_callback_token(b"secret", "inv-x", token)
    assert not check_callback_token(b"secret", "inv-x", token.encode("utf-8", "surrogatepass"))
    assert check_callback_token(b"secret", "inv-x", callback_token(b"secret", "inv-x"))
    try:
        parsed = bearer_token(header)
    except Unauthorized:
        parsed = None
    assert parsed is None
    del asyncio
