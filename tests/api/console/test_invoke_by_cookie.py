"""The accept route (POST /v1/functions/{name}/invocations, a hand-written route off FastAPI's
dependency path) takes the console's session cookie as every other /v1 route does: with the
CSRF header only, and with the session's token's scope. Against a real gateway over HTTP."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from helpers.examples import example_json
from helpers.server import RunningServer, running_server


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(tmp_path_factory.mktemp("invoke-by-cookie"), "--gpus", "1") as gw:
        with gw.client() as http:
            put = http.put("/v1/functions/hello", content=example_json("hello"))
            assert put.status_code in (200, 201), put.text
        yield gw


def _session(gw: RunningServer, scope: str) -> tuple[httpx.Client, str]:
    """A client holding only a session cookie of a new token of `scope`, and its CSRF value."""
    with gw.client() as http:
        made = http.post("/v1/tokens", json={"name": f"cookie-{scope}", "scope": scope})
        assert made.status_code == 201, made.text
    client = httpx.Client(base_url=gw.url, timeout=30)
    login = client.post("/ui/login", json={"token": made.json()["token"]})
    assert login.status_code == 200, login.text
    return client, login.json()["csrf"]


@pytest.mark.parametrize("scope", ["invoke", "admin"])
def test_invoke_with_the_session_cookie_needs_the_csrf_header(gateway: RunningServer, scope: str) -> None:
    client, csrf = _session(gateway, scope)
    try:
        path = "/v1/functions/hello/invocations"
        refused = client.post(path, json={"name": "Ada"})
        assert refused.status_code == 403, refused.text
        assert "x-eops-csrf" in refused.json()["error"]["message"]
        assert client.post(path, json={"name": "Ada"}, headers={"X-Eops-Csrf": csrf + "x"}).status_code == 403
        accepted = client.post(path + "?wait=30", json={"name": "Ada"}, headers={"X-Eops-Csrf": csrf})
        assert accepted.status_code == 200, accepted.text
        assert accepted.json()["result"]["greeting"] == "hello, Ada!"
    finally:
        client.close()


def test_invoke_without_a_token_or_a_session_is_401(gateway: RunningServer) -> None:
    answer = httpx.post(gateway.url + "/v1/functions/hello/invocations", json={}, timeout=30)
    assert answer.status_code == 401
    assert "missing bearer token" in answer.json()["error"]["message"]
    forged = httpx.post(
        gateway.url + "/v1/functions/hello/invocations",
        json={},
        cookies={"eops_session": "s1." + "0" * 64 + ".9999999999." + "A" * 43},
        headers={"X-Eops-Csrf": "x"},
        timeout=30,
    )
    assert forged.status_code == 401, forged.text
