"""What a token holds open ends with the token: an event stream, a log follow or a `?wait`
opened with a token that is then revoked (through the API or by another process) or expires
ends within a few seconds (docs/security.md). And the event streams' slots are shared fairly:
one token holds at most its share, and invoke tokens cannot keep an admin out. Against a real
gateway, over HTTP."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, closing
from typing import Any

import httpx
import pytest

from elasticityops.api.auth import CACHE_SECONDS
from helpers.examples import example_json
from helpers.server import EOPS, RunningServer, base_env, running_server

MAX_STREAMS = 4
PER_TOKEN = 2
# Generous: a stream ends at once after a revoke through the API and within CACHE_SECONDS and a
# second after one by another process (docs/security.md); this only keeps a failure from hanging.
BOUND_S = CACHE_SECONDS + 15


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(
        tmp_path_factory.mktemp("held"),
        "--gpus",
        "2",
        env={
            "EOPS_CONSOLE_MAX_STREAMS": str(MAX_STREAMS),
            "EOPS_CONSOLE_MAX_STREAMS_PER_TOKEN": str(PER_TOKEN),
            # A quiet stream still sends a line a second, so a reader notices it did not end.
            "EOPS_CONSOLE_HEARTBEAT_SECONDS": "1",
        },
    ) as server:
        with server.client() as admin:
            put = admin.put(
                "/v1/functions/sleep",
                content=example_json("sleep"),
                headers={"Content-Type": "application/json"},
            )
            assert put.status_code in (200, 201), put.text
        yield server
        # A job outlives its gateway (the next start adopts it): none is left to sleep on.
        with server.client() as admin:
            for state in ("queued", "pending", "running"):
                for inv in admin.get("/v1/invocations", params={"state": state}).json()["items"]:
                    _cancel(server, inv["id"])


def _token(gw: RunningServer, scope: str = "invoke", **extra: Any) -> tuple[str, str]:
    with gw.client() as admin:
        made = admin.post("/v1/tokens", json={"name": f"held-{scope}", "scope": scope, **extra})
    assert made.status_code == 201, made.text
    return made.json()["token"], made.json()["id"]


def _revoke(gw: RunningServer, token_id: str) -> None:
    with gw.client() as admin:
        assert admin.delete(f"/v1/tokens/{token_id}").status_code == 204


def _revoke_by_cli(gw: RunningServer, token_id: str) -> None:
    done = subprocess.run(
        [EOPS, "token", "revoke", token_id, "--data-dir", str(gw.data_dir)],
        capture_output=True,
        text=True,
        env=base_env(),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def _read_to_the_end(chunks: Iterator[Any], within_s: float = BOUND_S) -> None:
    """The rest of a streamed body, which must end (completely: httpx raises on a chunked body
    cut off) before `within_s`. The streams here send something every second."""
    deadline = time.monotonic() + within_s
    for _ in chunks:
        assert time.monotonic() < deadline, "the stream outlived its token"


def _running_sleep(gw: RunningServer, token: str, seconds: float = 120) -> str:
    with gw.client(token) as client:
        accepted = client.post("/v1/functions/sleep/invocations", json={"seconds": seconds})
        assert accepted.status_code == 202, accepted.text
        inv: str = accepted.json()["id"]
        deadline = time.monotonic() + 60
        while client.get(f"/v1/invocations/{inv}").json()["state"] != "running":
            assert time.monotonic() < deadline, "the sleep never started"
            time.sleep(0.1)
    return inv


def _cancel(gw: RunningServer, inv: str) -> None:
    with gw.client() as admin:
        assert admin.post(f"/v1/invocations/{inv}/cancel").status_code in (200, 409)


def test_a_revoked_tokens_event_stream_ends(gw: RunningServer) -> None:
    token, token_id = _token(gw)
    with gw.client(token) as client, client.stream("GET", "/v1/events") as events:
        assert events.status_code == 200
        lines = events.iter_lines()
        assert next(lines) == "retry: 2000"
        _revoke(gw, token_id)
        _read_to_the_end(lines)
    with gw.client(token) as client:
        assert client.get("/v1/events").status_code == 401


def test_an_event_stream_ends_when_another_process_revokes_its_token(gw: RunningServer) -> None:
    token, token_id = _token(gw)
    with gw.client(token) as client, client.stream("GET", "/v1/events") as events:
        assert events.status_code == 200
        _revoke_by_cli(gw, token_id)
        _read_to_the_end(events.iter_raw())


def test_an_event_stream_of_a_console_session_ends_with_its_token(gw: RunningServer) -> None:
    token, token_id = _token(gw)
    with httpx.Client(base_url=gw.url, timeout=30) as browser:
        assert browser.post("/ui/login", json={"token": token}).status_code == 200
        with browser.stream("GET", "/v1/events") as events:
            assert events.status_code == 200
            _revoke(gw, token_id)
            _read_to_the_end(events.iter_raw())


def test_an_expiring_tokens_event_stream_ends_when_it_expires(gw: RunningServer) -> None:
    token, _ = _token(gw, expires_in_seconds=5)
    with gw.client(token) as client, client.stream("GET", "/v1/events") as events:
        assert events.status_code == 200
        _read_to_the_end(events.iter_raw())


def test_a_revoked_tokens_log_follow_ends(gw: RunningServer) -> None:
    token, token_id = _token(gw)
    inv = _running_sleep(gw, token)
    try:
        with (
            gw.client(token) as client,
            client.stream("GET", f"/v1/invocations/{inv}/logs?follow=true") as logs,
        ):
            assert logs.status_code == 200
            chunks = logs.iter_raw()
            assert b"sleeping" in next(chunks)
            _revoke(gw, token_id)
            _read_to_the_end(chunks)  # the job prints a line a second
        with gw.client() as admin:
            assert admin.get(f"/v1/invocations/{inv}").json()["state"] == "running", "the job goes on"
    finally:
        _cancel(gw, inv)


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_revoked_tokens_wait_answers_401(gw: RunningServer, method: str) -> None:
    token, token_id = _token(gw)
    inv = _running_sleep(gw, token)
    try:
        # The client gives up well before the wait would run out: the answer must come first.
        with gw.client(token, timeout=BOUND_S) as client, ThreadPoolExecutor(1) as pool:
            if method == "GET":
                held = pool.submit(client.get, f"/v1/invocations/{inv}?wait=100")
            else:
                held = pool.submit(
                    client.post, "/v1/functions/sleep/invocations?wait=100", json={"seconds": 120}
                )
            time.sleep(1.0)  # let it reach its wait (a revoke before that is a 401 all the same)
            _revoke(gw, token_id)
            answer = held.result()
        assert answer.status_code == 401, answer.text
        assert answer.json()["error"]["code"] == "unauthorized"
    finally:
        _cancel(gw, inv)


def _open(client: httpx.Client, stack: ExitStack) -> httpx.Response:
    response = stack.enter_context(client.stream("GET", "/v1/events"))
    if response.status_code != 200:
        response.read()
    return response


def _closed_streams_released() -> None:
    # A stream a client closed is released as the gateway reads the disconnect, a moment later.
    time.sleep(1.0)


def test_invoke_tokens_cannot_keep_an_admin_out(gw: RunningServer) -> None:
    _closed_streams_released()
    with ExitStack() as stack:
        opened = 0
        for _ in range(MAX_STREAMS + 1):  # as many invoke tokens as it takes to be refused
            token, _ = _token(gw)
            client = stack.enter_context(gw.client(token))
            while (response := _open(client, stack)).status_code == 200:
                opened += 1
                assert opened <= MAX_STREAMS, "more streams than the most there may be"
            assert response.status_code == 503, response.text
            assert response.json()["error"]["code"] == "too_many_streams"
        assert opened < MAX_STREAMS, "invoke tokens took every slot"
        admin_token, _ = _token(gw, "admin")
        admin = stack.enter_context(gw.client(admin_token))
        assert _open(admin, stack).status_code == 200, "an admin was kept out"


def test_one_token_holds_at_most_its_share_of_the_streams(gw: RunningServer) -> None:
    first, _ = _token(gw)
    second, _ = _token(gw)
    _closed_streams_released()
    with ExitStack() as stack:
        greedy = stack.enter_context(gw.client(first))
        assert [_open(greedy, stack).status_code for _ in range(PER_TOKEN)] == [200] * PER_TOKEN
        refused = _open(greedy, stack)
        assert refused.status_code == 503, refused.text
        error = refused.json()["error"]
        assert error["code"] == "too_many_streams"
        assert f"EOPS_CONSOLE_MAX_STREAMS_PER_TOKEN={PER_TOKEN}" in error["message"]
        assert int(refused.headers["retry-after"]) >= 1
        with closing(gw.client(second)) as other:
            assert _open(other, stack).status_code == 200, "another token still gets a stream"


def _sleeping_batch(gw: RunningServer, token: str) -> str:
    with gw.client(token) as client:
        accepted = client.post("/v1/functions/sleep/invocations:batch", json={"inputs": [{"seconds": 120}]})
        assert accepted.status_code == 202, accepted.text
        batch_id: str = accepted.json()["batch_id"]
    return batch_id


def _cancel_batch(gw: RunningServer, batch_id: str) -> None:
    with gw.client() as admin:
        assert admin.post(f"/v1/batches/{batch_id}:cancel").status_code == 200


def test_a_revoked_tokens_batch_stream_ends(gw: RunningServer) -> None:
    token, token_id = _token(gw)
    batch_id = _sleeping_batch(gw, token)
    try:
        with gw.client(token) as client, client.stream("GET", f"/v1/batches/{batch_id}/events") as events:
            assert events.status_code == 200
            lines = events.iter_lines()
            assert next(lines) == "retry: 2000"
            _revoke(gw, token_id)
            _read_to_the_end(lines)  # a keep-alive a second (EOPS_CONSOLE_HEARTBEAT_SECONDS)
    finally:
        _cancel_batch(gw, batch_id)


def test_one_token_holds_at_most_its_share_of_the_batch_streams(gw: RunningServer) -> None:
    first, _ = _token(gw)
    second, _ = _token(gw)
    batch_id = _sleeping_batch(gw, first)
    _closed_streams_released()
    url = f"/v1/batches/{batch_id}/events"
    try:
        with ExitStack() as stack:
            greedy = stack.enter_context(gw.client(first))
            opened = [stack.enter_context(greedy.stream("GET", url)) for _ in range(PER_TOKEN)]
            assert [s.status_code for s in opened] == [200] * PER_TOKEN
            refused = greedy.get(url)
            assert refused.status_code == 503, refused.text
            assert refused.json()["error"]["code"] == "too_many_streams"
            with closing(gw.client(second)) as other, other.stream("GET", url) as theirs:
                assert theirs.status_code == 200, "another token still gets a stream"
    finally:
        _cancel_batch(gw, batch_id)
