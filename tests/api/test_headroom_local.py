"""The headroom controller end to end on the local backend: a real `eops serve --headroom
warm:1` with two virtual slots that take 3 s to provision when cold. The controller pins one
slot warm: an invocation lands on it at once (the timeline says so), a second one at the same
time waits for the cold slot, and the warm slot comes back. Refusals at start name the flag."""

from __future__ import annotations

import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.server import EOPS, RunningServer, base_env, running_server

pytestmark = pytest.mark.slow

COLD_S = 3.0


def _wait(client: httpx.Client, inv: str, within_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    while True:
        body: dict[str, Any] = client.get(f"/v1/invocations/{inv}").json()
        if body["state"] in ("succeeded", "failed", "cancelled", "timed_out"):
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.1)


def _start_s(body: dict[str, Any]) -> float:
    t = body["timeline"]
    return (datetime.fromisoformat(t["started"]) - datetime.fromisoformat(t["accepted"])).total_seconds()


def _held(client: httpx.Client) -> float:
    for line in client.get("/metrics").text.splitlines():
        if line.startswith("eops_headroom_held{"):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_warm_slot_starts_work_at_once_and_comes_back(tmp_path: Path) -> None:
    args = ("--gpus", "2", "--cold-start-seconds", str(COLD_S), "--headroom", "warm:1")
    with (
        running_server(tmp_path / "data", *args, env={"EOPS_HEADROOM_SYNC": "0.5"}) as gw,
        gw.client() as client,
    ):
        put = client.put(
            "/v1/functions/quick", json={"command": ["python", "-c", "import time; time.sleep(1)"]}
        )
        assert put.status_code == 201, put.text
        deadline = time.monotonic() + 20
        while _held(client) < 1:
            assert time.monotonic() < deadline, client.get("/metrics").text
            time.sleep(0.2)
        time.sleep(COLD_S + 0.5)  # the pinned slot has provisioned
        status = client.get("/v1/headroom").json()
        assert (status["policy"], status["mechanism"]) == ("warm:1", "slots")
        [pool] = status["pools"]
        assert (pool["gpu_type"], pool["wanted"], pool["held"], pool["busy"]) == ("nvidia-tesla-t4", 1, 1, 0)
        shown = subprocess.run(
            [EOPS, "headroom"], env=gw.env(), capture_output=True, text=True, timeout=60, check=False
        )
        assert shown.returncode == 0, shown.stderr
        assert "warm:1" in shown.stdout
        assert "1 x nvidia-tesla-t4" in shown.stdout
        first, second = (
            client.post("/v1/functions/quick/invocations", json={}).json()["id"] for _ in range(2)
        )
        done = [_wait(client, first), _wait(client, second)]
        assert all(d["state"] == "succeeded" for d in done), done
        kinds = [{n["kind"] for n in d["notes"]} for d in done]
        warm = [d for d, k in zip(done, kinds, strict=True) if "WarmUnits" in k]
        cold = [d for d, k in zip(done, kinds, strict=True) if "SlotWarming" in k]
        assert len(warm) == 1, kinds
        assert len(cold) == 1, kinds
        assert _start_s(warm[0]) < 1.5
        assert _start_s(cold[0]) >= COLD_S * 0.9
        # The warm slot comes back: both slots are warm now (one pinned again), so the next two
        # start at once as well.
        time.sleep(1.5)
        again = [client.post("/v1/functions/quick/invocations", json={}).json()["id"] for _ in range(2)]
        for inv in again:
            body = _wait(client, inv)
            assert _start_s(body) < 1.5, body


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--headroom", "warm:9", "--gpu-budget", "4"), "--headroom: the policy holds up to 9 warm GPUs"),
        (("--headroom", "sometimes"), "--headroom: cannot parse 'sometimes'"),
        (("--headroom", "static"), "--headroom: static is a node pool's fixed size"),
        (("--headroom-mechanism", "magic"), "--headroom-mechanism: invalid value 'magic'"),
    ],
)
def test_bad_headroom_settings_are_refused_at_start(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    done = subprocess.run(
        [EOPS, "serve", "--data-dir", str(tmp_path / "d"), "--port", "0", *args],
        env=base_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr
    assert "Traceback" not in done.stderr


def test_without_headroom_the_status_says_none(gateway: RunningServer) -> None:
    # The session's gateway (tests/api/conftest.py) was started without --headroom, and no
    # test can change that after its start: no gateway of this test's own is needed.
    with gateway.client() as client:
        assert client.get("/v1/headroom").json() == {
            "policy": "none",
            "mechanism": None,
            "pools": [],
            "syncs": 0,
            "last_error": "",
        }
