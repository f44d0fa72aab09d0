"""`eops serve --example` outside the checkout: the checkout's example functions still run.

Their commands name files beside their spec (`python hello.py`); a gateway started in another
directory found none of them (exit code 2, "can't open file") until the deploy recorded the
spec file's directory as their `workdir` (as `eops fn deploy` does)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from helpers.server import running_server


def _final(http: httpx.Client, inv_id: str, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = http.get(f"/v1/invocations/{inv_id}").json()
        if body["state"] in ("succeeded", "failed", "cancelled") or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def test_examples_run_when_the_gateway_starts_outside_the_checkout(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with (
        running_server(tmp_path / "data", "--gpus", "1", "--example", cwd=elsewhere) as srv,
        srv.client() as http,
    ):
        hello = http.get("/v1/functions/hello").json()
        script = Path(hello["spec"]["workdir"], hello["spec"]["command"][-1])
        assert script.is_absolute(), hello
        assert script.is_file()
        for name, payload in (("hello", {"name": "Ada"}), ("sleep", {"seconds": 0.1})):
            inv = http.post(f"/v1/functions/{name}/invocations", json=payload)
            assert inv.status_code == 202, inv.text
            body = _final(http, inv.json()["id"])
            assert body["state"] == "succeeded", body
