"""A gateway killed with SIGKILL and restarted on the same data dir loses no accepted invocation
and runs none twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from helpers.server import RunningServer, start_server


def appender(ledger: Path, seconds: float) -> list[str]:
    """A job that appends its invocation id to `ledger` (a double run shows as a repeated line)."""
    code = (
        "import os, time; "
        f"f = open({str(ledger)!r}, 'a'); f.write(os.environ['EOPS_INVOCATION_ID'] + '\\n'); f.close(); "
        f"time.sleep({seconds})"
    )
    return ["python", "-c", code]


async def _accept_many(gateway: RunningServer, name: str, count: int) -> list[str]:
    headers = {"Authorization": f"Bearer {gateway.token}"}
    async with httpx.AsyncClient(base_url=gateway.url, headers=headers, timeout=60) as client:
        responses = await asyncio.gather(
            *(client.post(f"/v1/functions/{name}/invocations", json={"i": i}) for i in range(count))
        )
    assert all(r.status_code == 202 for r in responses)
    return [r.json()["id"] for r in responses]


def test_sigkill_loses_nothing_and_runs_nothing_twice(tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.txt"
    data_dir = tmp_path / "data"
    first = start_server(data_dir, "--gpus", "2")
    try:
        with first.client() as client:
            put = client.put("/v1/functions/append", json={"command": appender(ledger, 2.0)})
            assert put.status_code == 201
        accepted = asyncio.run(_accept_many(first, "append", 12))
        # Wait until the oldest has run (admission goes oldest first), so the kill hits running
        # and queued ones alike.
        with first.client() as client:
            client.get(f"/v1/invocations/{min(accepted)}?wait=30")
            states = {client.get(f"/v1/invocations/{i}").json()["state"] for i in accepted}
        assert "queued" in states, states
    finally:
        first.kill()

    second = first.again()
    try:
        with second.client(timeout=120) as client:
            finals = [client.get(f"/v1/invocations/{i}?wait=100").json() for i in accepted]
        assert [f["state"] for f in finals] == ["succeeded"] * len(accepted), finals
        ran = ledger.read_text().split()
        assert sorted(ran) == sorted(accepted), "every accepted invocation ran exactly once"
    finally:
        second.stop()


def test_invocations_accepted_just_before_sigkill_are_all_there(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = start_server(data_dir, "--paused")
    try:
        with first.client() as client:
            assert client.put("/v1/functions/noop", json={"command": ["true"]}).status_code == 201
        accepted = asyncio.run(_accept_many(first, "noop", 200))
    finally:
        first.kill()  # right after the last 202: nothing gets a chance to flush
    second = first.again()
    try:
        with second.client() as client:
            for inv_id in accepted:
                response = client.get(f"/v1/invocations/{inv_id}")
                assert response.status_code == 200
                assert response.json()["state"] == "queued"
    finally:
        second.stop()
