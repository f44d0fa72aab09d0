"""The console's login and event stream over HTTP, against a real gateway: the cookie it sets
(HttpOnly, SameSite=Strict), that the cookie stands for its token on /v1 (scope included) and
stops with it, the CSRF header on what changes state, the stream's frames by header or cookie,
and the limit on open streams."""

from __future__ import annotations

import contextlib
import csv
import io
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from helpers.examples import example_json
from helpers.server import RunningServer, running_server

MAX_STREAMS = 3


@pytest.fixture(scope="module")
def console_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(
        tmp_path_factory.mktemp("console"),
        "--gpus",
        "2",
        env={"EOPS_CONSOLE_MAX_STREAMS": str(MAX_STREAMS), "EOPS_CONSOLE_HEARTBEAT_SECONDS": "1"},
    ) as gw:
        with gw.client() as http:
            put = http.put("/v1/functions/hello", content=example_json("hello"))
            assert put.status_code in (200, 201), put.text
        yield gw


def _token(gw: RunningServer, scope: str) -> tuple[str, str]:
    with gw.client() as http:
        made = http.post("/v1/tokens", json={"name": f"console-{scope}", "scope": scope})
        assert made.status_code == 201, made.text
        return made.json()["token"], made.json()["id"]


def _login(gw: RunningServer, token: str) -> tuple[httpx.Client, str]:
    """A client holding the session cookie (and no Authorization header), and the CSRF value."""
    client = httpx.Client(base_url=gw.url, timeout=30)
    answer = client.post("/ui/login", json={"token": token})
    assert answer.status_code == 200, answer.text
    return client, answer.json()["csrf"]


def test_login_sets_a_strict_httponly_cookie_that_stands_for_the_token(
    console_gateway: RunningServer,
) -> None:
    with httpx.Client(base_url=console_gateway.url) as http:
        page = http.get("/ui")
        assert page.status_code == 200
        assert "text/html" in page.headers["content-type"]
        assert "default-src 'self'" in page.headers["content-security-policy"]
        assert http.get("/v1/functions").status_code == 401, "no cookie, no header: nobody"
        as_text = http.post(
            "/ui/login",
            content=orjson.dumps({"token": console_gateway.token}),
            headers={"Content-Type": "text/plain"},
        )
        assert as_text.status_code == 422, "what another site's form can post logs nobody in"
        assert "set-cookie" not in as_text.headers
        refused = http.post("/ui/login", json={"token": "eops_" + "x" * 43})
        assert refused.status_code == 401
        assert "eops_session" not in refused.headers.get("set-cookie", "")
        answer = http.post("/ui/login", json={"token": console_gateway.token})
        assert answer.status_code == 200, answer.text
        cookie = answer.headers["set-cookie"]
        for attribute in ("eops_session=", "HttpOnly", "SameSite=strict", "Path=/", "Max-Age=28800"):
            assert attribute.lower() in cookie.lower(), cookie
        assert console_gateway.token not in cookie, "the cookie holds a hash, never the token"
        assert answer.json()["token"]["scope"] == "admin"
        assert http.get("/v1/functions").status_code == 200
        assert http.get("/ui/session").json()["csrf"] == answer.json()["csrf"]
        assert http.post("/ui/logout").status_code == 204
        assert http.get("/v1/functions").status_code == 401, "logged out"
        assert http.get("/ui/session").status_code == 401


def test_a_tampered_cookie_is_a_401(console_gateway: RunningServer) -> None:
    client, _ = _login(console_gateway, console_gateway.token)
    with contextlib.closing(client):
        value = client.cookies["eops_session"]
        client.cookies.clear()
        client.cookies.set("eops_session", value[:-2] + ("AA" if not value.endswith("AA") else "BB"))
        answer = client.get("/v1/functions")
        assert answer.status_code == 401
        assert "log in again" in answer.json()["error"]["message"]


def test_changing_state_with_the_cookie_needs_the_csrf_header(console_gateway: RunningServer) -> None:
    with console_gateway.client() as admin:
        inv = admin.post("/v1/functions/hello/invocations?wait=30").json()
    client, csrf = _login(console_gateway, console_gateway.token)
    with contextlib.closing(client):
        path = f"/v1/invocations/{inv['id']}/cancel"
        refused = client.post(path)
        assert refused.status_code == 403
        assert "x-eops-csrf" in refused.json()["error"]["message"]
        assert client.post(path, headers={"X-Eops-Csrf": csrf + "x"}).status_code == 403
        # With the header the request goes through to the route, which answers as it would.
        done = client.post(path, headers={"X-Eops-Csrf": csrf})
        assert done.status_code == 409
        assert "succeeded" in done.json()["error"]["message"]
        made = client.post("/v1/tokens", json={"name": "by-cookie"}, headers={"X-Eops-Csrf": csrf})
        assert made.status_code == 201, "an admin's session may do what its token may"


def test_the_sessions_token_scope_applies_and_revoking_it_ends_the_session(
    console_gateway: RunningServer,
) -> None:
    token, token_id = _token(console_gateway, "invoke")
    client, _csrf = _login(console_gateway, token)
    with contextlib.closing(client):
        assert client.get("/v1/invocations").status_code == 200
        assert client.get("/v1/capacity").status_code == 200
        assert client.get("/v1/tokens").status_code == 403, "an invoke token's session is no admin"
        with console_gateway.client() as admin:
            assert admin.delete(f"/v1/tokens/{token_id}").status_code == 204
        answer = client.get("/v1/invocations")
        assert answer.status_code == 401
        assert "revoked" in answer.json()["error"]["message"]
        assert client.get("/ui/session").status_code == 401


def test_the_cost_csv_downloads_with_the_cookie_as_a_named_file(console_gateway: RunningServer) -> None:
    """What the console's download link asks for: the cookie alone authenticates it (no token
    in the URL), the answer names a file, and an invoke token's session is refused as admin-only."""
    with console_gateway.client() as admin:
        assert admin.post("/v1/functions/hello/invocations?wait=30").json()["state"] == "succeeded"
    client, _ = _login(console_gateway, console_gateway.token)
    with contextlib.closing(client):
        answer = client.get(
            "/v1/cost", params=[("since", "24h"), ("by", "function"), ("by", "hour"), ("format", "csv")]
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/csv")
        disposition = answer.headers["content-disposition"]
        assert re.fullmatch(
            r'attachment; filename="eops-cost-\d{8}T\d{4}Z-\d{8}T\d{4}Z-function-hour\.csv"', disposition
        ), disposition
        header, *rows = list(csv.reader(io.StringIO(answer.text)))
        assert header[:3] == ["function", "hour", "provisioning_s"]
        assert "hello" in [row[0] for row in rows]
        assert "content-disposition" not in client.get("/v1/cost").headers, "JSON is shown, not saved"
    token, _id = _token(console_gateway, "invoke")
    invoker, _ = _login(console_gateway, token)
    with contextlib.closing(invoker):
        refused = invoker.get("/v1/cost", params={"format": "csv"})
        assert refused.status_code == 403
        assert "needs scope admin" in refused.json()["error"]["message"]


def _frames(response: httpx.Response, until: float) -> Iterator[tuple[str, bytes]]:
    """(event, data) of each frame read before the `until` deadline (monotonic)."""
    buffer = b""
    for chunk in response.iter_raw():
        buffer += chunk
        while b"\n\n" in buffer:
            frame, buffer = buffer.split(b"\n\n", 1)
            fields = dict(line.split(b": ", 1) for line in frame.split(b"\n") if b": " in line)
            yield fields.get(b"event", b"").decode(), fields.get(b"data", b"")
        if time.monotonic() > until:
            return


def test_the_event_stream_by_header_carries_an_invocations_changes(console_gateway: RunningServer) -> None:
    with console_gateway.client() as http, http.stream("GET", "/v1/events") as events:
        assert events.status_code == 200
        assert events.headers["content-type"].startswith("text/event-stream")
        frames = _frames(events, time.monotonic() + 30)
        assert next(frames)[0] == "hello"
        inv = http.post("/v1/functions/hello/invocations").json()
        seen: list[str] = []
        for event, data in frames:
            if event == "changes":
                seen += [c["state"] for c in orjson.loads(data)["changes"] if c["id"] == inv["id"]]
            if "succeeded" in seen:
                break
        assert seen, "no change of the invocation came"
        assert seen[-1] == "succeeded", seen


def test_open_streams_are_limited_with_a_503(console_gateway: RunningServer, tmp_path: Path) -> None:
    client, _ = _login(console_gateway, console_gateway.token)
    with contextlib.closing(client):
        opened = [client.stream("GET", "/v1/events") for _ in range(MAX_STREAMS)]
        responses = [o.__enter__() for o in opened]
        try:
            assert all(r.status_code == 200 for r in responses)
            refused = client.get("/v1/events")
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "too_many_streams"
            assert int(refused.headers["retry-after"]) >= 1
            bad = client.get("/v1/events", params={"watch": "not-an-id"})
            assert bad.status_code == 422, "the watch list is checked before the limit"
        finally:
            for o in opened:
                o.__exit__(None, None, None)
        # The server notices the closed streams (at the latest at the next heartbeat, 1 s).
        deadline = time.monotonic() + 10
        while True:
            with client.stream("GET", "/v1/events", params={"watch": "inv-0"}) as again:
                if again.status_code == 200:
                    break
            assert time.monotonic() < deadline, "closed streams were never released"
            time.sleep(0.5)


def test_capacity_counts_the_queue_its_head_and_the_budget_and_keeps_samples(tmp_path: Path) -> None:
    with (
        running_server(
            tmp_path / "paused",
            "--paused",
            "--gpus",
            "2",
            "--gpu-budget",
            "nvidia-tesla-t4=3",
            env={"EOPS_CONSOLE_SAMPLE_SECONDS": "0.2"},
        ) as gw,
        gw.client() as http,
    ):
        http.put("/v1/functions/hello", content=example_json("hello"))
        ids = [http.post("/v1/functions/hello/invocations").json()["id"] for _ in range(3)]
        deadline = time.monotonic() + 20
        while True:
            capacity = http.get("/v1/capacity").json()
            if any(s["queued"] == 3 for s in capacity["history"]) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # After a time: only the samples taken after it (the console's refreshes ask so).
        times = [s["at"] for s in capacity["history"]]
        assert len(times) >= 2, capacity["history"]
        after = http.get("/v1/capacity", params={"since": times[-2]}).json()
        assert after["history"][0]["at"] == times[-1], "the ring keeps every sample for keep_s"
        assert all(s["at"] > times[-2] for s in after["history"])
        assert after["keep_s"] == 6 * 3600
        for bad in ("2026-12-01T10:00:00", "yesterday"):
            refused = http.get("/v1/capacity", params={"since": bad})
            assert refused.status_code == 422, refused.text
            [problem] = refused.json()["error"]["problems"]
            assert problem["field"] == "since", problem
            assert "zone" in problem["fix"] + problem["problem"], problem
    assert capacity["queue_length"] == 3
    assert capacity["states"]["queued"] == 3
    assert capacity["queue_head"]["id"] == ids[0], "admission takes the first accepted next"
    assert capacity["queue_head"]["waiting_s"] >= 0
    assert capacity["budget"] == "nvidia-tesla-t4=3"
    assert capacity["budget_total"] is None
    assert capacity["budget_by_type"] == {"nvidia-tesla-t4": 3}
    assert capacity["in_use_total"] == 0
    assert (capacity["free_gpus"], capacity["total_gpus"]) == (2, 2)
    assert capacity["nodes"] is None, "the local backend has slots, not nodes"
    assert capacity["headroom"] is None
    assert capacity["sample_s"] == 0.2
    latest = [s for s in capacity["history"] if s["queued"] == 3]
    assert latest, capacity["history"]
    assert latest[-1]["demand"] == 3
    assert latest[-1]["nodes"] == 2
    times = [s["at"] for s in capacity["history"]]
    assert times == sorted(times), "oldest first"
