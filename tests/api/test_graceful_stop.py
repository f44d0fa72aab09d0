"""A gateway told to stop (SIGTERM) answers what it holds open at once, and properly: a `?wait`
with the invocation as it stands (a POST's with the id it accepted), a log follow and an event
stream end with their bodies complete; no 500, no traceback. And from the signal on its
dispatcher starts nothing: a queued invocation stays queued. A real `eops serve`, over HTTP."""

from __future__ import annotations

import os
import signal
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from helpers.examples import example_json
from helpers.server import HOST, RunningServer, start_server


def _deploy_sleep(gw: RunningServer) -> None:
    with gw.client() as admin:
        put = admin.put(
            "/v1/functions/sleep", content=example_json("sleep"), headers={"Content-Type": "application/json"}
        )
        assert put.status_code in (200, 201), put.text


def _until_state(gw: RunningServer, inv: str, state: str) -> None:
    with gw.client() as admin:
        deadline = time.monotonic() + 60
        while admin.get(f"/v1/invocations/{inv}").json()["state"] != state:
            assert time.monotonic() < deadline, f"{inv} never became {state}"
            time.sleep(0.1)


def _follow(gw: RunningServer, inv: str, started: list[bytes]) -> tuple[int, bytes]:
    with gw.client() as client, client.stream("GET", f"/v1/invocations/{inv}/logs?follow=true") as logs:
        body = b""
        for chunk in logs.iter_raw():  # httpx raises on a chunked body cut off
            body += chunk
            started.append(chunk)
        return logs.status_code, body


def _events(gw: RunningServer, started: list[bytes]) -> tuple[int, bytes]:
    with gw.client() as client, client.stream("GET", "/v1/events") as events:
        body = b""
        for chunk in events.iter_raw():
            body += chunk
            started.append(chunk)
        return events.status_code, body


def _until(what: list[bytes]) -> None:
    deadline = time.monotonic() + 60
    while not what:
        assert time.monotonic() < deadline, "the stream never started"
        time.sleep(0.05)


def test_sigterm_answers_waits_and_ends_follows_and_streams_at_once(tmp_path: Path) -> None:
    gw = start_server(tmp_path / "data", "--gpus", "1")
    try:
        _deploy_sleep(gw)
        with gw.client() as admin:
            running = admin.post("/v1/functions/sleep/invocations", json={"seconds": 120}).json()["id"]
        _until_state(gw, running, "running")
        followed: list[bytes] = []
        streamed: list[bytes] = []
        with gw.client(timeout=60) as client, ThreadPoolExecutor(4) as pool:
            get_wait = pool.submit(client.get, f"/v1/invocations/{running}?wait=100")
            follow = pool.submit(_follow, gw, running, followed)
            events = pool.submit(_events, gw, streamed)
            # The one GPU is taken: this one stays queued through its wait.
            post_wait = pool.submit(client.post, "/v1/functions/sleep/invocations?wait=100", json={})
            _until(followed)
            _until(streamed)
            with gw.client() as admin:
                deadline = time.monotonic() + 60
                while not admin.get("/v1/invocations", params={"state": "queued"}).json()["items"]:
                    assert time.monotonic() < deadline, "the POST with ?wait never got in"
                    time.sleep(0.1)
            time.sleep(1.0)  # the GET's wait, sent first, is held by now too
            os.kill(gw.pid, signal.SIGTERM)

            got = get_wait.result()
            assert got.status_code == 200, got.text
            assert got.headers["content-type"] == "application/json"
            assert got.json()["id"] == running
            assert got.json()["state"] == "running"

            posted = post_wait.result()
            assert posted.status_code == 202, posted.text
            assert posted.json()["id"].startswith("inv-"), "the caller learns the id it was given"
            assert posted.json()["state"] == "queued"

            status, body = follow.result()
            assert status == 200
            assert b"sleeping 120s" in body

            status, body = events.result()
            assert status == 200
            assert body.startswith(b"retry: 2000")
        assert gw.process.wait(30) is not None
    finally:
        gw.stop()
    output = gw.output()
    assert "Traceback" not in output, output
    assert "CancelledError" not in output, output
    assert "timeout graceful shutdown exceeded" not in output, output
    # A job outlives its gateway (the next start adopts it): this one is not left to sleep on.
    again = start_server(tmp_path / "data", "--paused")
    try:
        with again.client() as admin:
            assert admin.post(f"/v1/invocations/{running}/cancel").status_code == 200
    finally:
        again.stop()


def _held_upload(gw: RunningServer, function: str) -> socket.socket:
    """An invocation whose body never comes whole: it holds uvicorn's graceful stop open (10 s)."""
    sock = socket.create_connection((HOST, gw.port), timeout=30)
    sock.sendall(
        f"POST /v1/functions/{function}/invocations HTTP/1.1\r\nHost: 127.0.0.1\r\n".encode()
        + f"Authorization: Bearer {gw.token}\r\n".encode()
        + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
    )
    return sock


def test_no_queued_invocation_starts_once_the_stop_has_begun(tmp_path: Path) -> None:
    gw = start_server(tmp_path / "data", "--gpus", "2")
    try:
        with gw.client() as admin:
            one = {"command": ["python", "-c", "import time; time.sleep(4)"], "max_concurrency": 1}
            assert admin.put("/v1/functions/one", json=one).status_code == 201
            first = admin.post("/v1/functions/one/invocations").json()["id"]
            _until_state(gw, first, "running")
            second = admin.post("/v1/functions/one/invocations").json()["id"]
            assert admin.get(f"/v1/invocations/{second}").json()["state"] == "queued"
        with _held_upload(gw, "one"):
            time.sleep(0.5)
            os.kill(gw.pid, signal.SIGTERM)
            # The first ends within the stop's grace period (which the upload holds open): its
            # GPU is free, and a dispatcher still admitting would start the second now.
            gw.process.wait(60)
    finally:
        gw.stop()
    again = start_server(tmp_path / "data", "--paused")
    try:
        with again.client() as admin:
            assert admin.get(f"/v1/invocations/{second}").json()["state"] == "queued"
        # No wait for the first here: a paused gateway records no end, so a ?wait would only
        # run out. Its job (4 s) ended inside the stop's grace period above.
    finally:
        again.stop()
