"""A real `eops serve` whose whole data dir (database, run directories) is a 2 MiB tmpfs that
fills up while a job runs and is then given room again. Nothing is lost and nothing stays
blocked: an accept answers 202 (kept) or 503 (not kept), the job whose supervisor died
meanwhile ends, its GPU slot goes on to the work queued behind it, and all of that runs.

This is the case of issue 37: the gateway's watch of that job died of ENOSPC while it recorded
the loss, the invocation stayed `pending`, a cancel freed no slot, and the seven invocations
queued behind it never ran until a restart."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx

from backends.local.support import RECORDER, reaped_supervisors, supervisor_of
from helpers.server import running_server
from helpers.small_disk import fill, small_tmpfs

TERMINAL = {"succeeded", "failed", "cancelled", "timed_out"}
BEHIND = 7


def _until(client: httpx.Client, inv_id: str, states: set[str], within_s: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        answer = client.get(f"/v1/invocations/{inv_id}")
        if answer.status_code == 200:
            body = answer.json()
            if body["state"] in states:
                return body
        time.sleep(0.2)
    raise AssertionError(f"{inv_id} not {states} within {within_s}s: {body}")


def test_a_full_data_dir_loses_nothing_and_blocks_nothing(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "2m") as disk:
        data = disk / "data"
        with (
            reaped_supervisors(data / "runs"),
            running_server(data, "--gpus", "1") as gw,
            gw.client() as client,
        ):
            for name, command in (
                ("sleeper", ["python", RECORDER]),
                ("quick", ["python", "-c", "print('ran')"]),
            ):
                assert client.put(f"/v1/functions/{name}", json={"command": command}).status_code == 201
            sleeper = client.post("/v1/functions/sleeper/invocations", json={"sleep": 300}).json()["id"]
            _until(client, sleeper, {"running"})
            behind = []
            for _ in range(BEHIND):
                accepted = client.post("/v1/functions/quick/invocations", json={})
                assert accepted.status_code == 202, accepted.text
                behind.append(accepted.json()["id"])

            filler = fill(disk)
            supervisor_of(data / "runs" / sleeper).send_signal(signal.SIGKILL)
            # While the disk is full: an accept is kept (202) or refused whole (503), never half.
            while_full = client.post("/v1/functions/quick/invocations", json={})
            assert while_full.status_code in (202, 503), while_full.text
            if while_full.status_code == 202:
                behind.append(while_full.json()["id"])
            else:
                assert "full" in while_full.json()["error"]["message"]
            cancel = client.post(f"/v1/invocations/{sleeper}/cancel")
            assert cancel.status_code in (200, 409, 503), cancel.text

            filler.unlink()
            cancel = client.post(f"/v1/invocations/{sleeper}/cancel")
            assert cancel.status_code in (200, 409), cancel.text  # cancelled now, or it ended lost
            ended = _until(client, sleeper, TERMINAL)
            assert (ended["state"], ended["failure_reason"]) in (
                ("failed", "lost"),
                ("cancelled", "cancelled"),
            )
            for inv_id in behind:
                assert _until(client, inv_id, TERMINAL)["state"] == "succeeded", inv_id
            listed = client.get("/v1/invocations", params={"limit": 100}).json()["items"]
            assert sorted(i["id"] for i in listed) == sorted([sleeper, *behind])
            assert all(i["state"] in TERMINAL for i in listed)
