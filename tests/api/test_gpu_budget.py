"""The GPU budget end to end: a real `eops serve` with the local backend and more virtual GPU
slots than the budget, so that the budget is what holds work back. Jobs wait for a gate file
the test creates, so which ones hold GPUs at each step is decided by the test, not by timing."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from helpers.server import running_server

pytestmark = pytest.mark.slow

BUDGET = 5
FULL = f"the GPU budget for nvidia-tesla-t4 is full ({BUDGET} of {BUDGET} in use)"
ACTIVE = {"pending", "running"}


def _job(gates: Path) -> str:
    """Hold until the gate named after the invocation (or the gate `all`) exists, then run 2 s."""
    return (
        "import os, pathlib, time\n"
        f"gates = pathlib.Path({str(gates)!r})\n"
        "me = os.environ['EOPS_INVOCATION_ID']\n"
        "while not (gates / me).exists() and not (gates / 'all').exists():\n"
        "    time.sleep(0.05)\n"
        "time.sleep(2)\n"
    )


@dataclass
class Sampler:
    """Every state seen, sampled each time the test polls: the most active at once."""

    client: httpx.Client
    most_active: int = 0
    most_running: int = 0
    samples: int = 0
    seen: dict[str, str] = field(default_factory=dict)

    def sample(self) -> dict[str, str]:
        items = self.client.get("/v1/invocations", params={"limit": 100}).json()["items"]
        states = {item["id"]: item["state"] for item in items}
        self.most_active = max(self.most_active, sum(s in ACTIVE for s in states.values()))
        self.most_running = max(self.most_running, sum(s == "running" for s in states.values()))
        self.samples += 1
        self.seen = states
        return states

    def until(self, check: Callable[[dict[str, str]], bool], what: str, within_s: float = 120) -> None:
        deadline = time.monotonic() + within_s
        while not check(self.sample()):
            assert time.monotonic() < deadline, f"never saw {what}: {self.seen}"
            time.sleep(0.1)


def _queue(client: httpx.Client, invocation_id: str) -> tuple[Any, Any]:
    body = client.get(f"/v1/invocations/{invocation_id}").json()
    return body["queue_position"], body["queue_reason"]


def test_the_budget_caps_gpus_in_use_and_queued_work_waits_in_priority_order(tmp_path: Path) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    args = ("--gpus", "8", "--gpu-budget", f"nvidia-tesla-t4={BUDGET}")
    with running_server(tmp_path / "data", *args) as gw, gw.client() as client:
        command = ["python", "-c", _job(gates)]
        for name, priority in (("batch", "low"), ("urgent", "high")):
            put = client.put(f"/v1/functions/{name}", json={"command": command, "priority": priority})
            assert put.status_code == 201, put.text
        ids = [client.post("/v1/functions/batch/invocations", json={}).json()["id"] for _ in range(8)]
        sampler = Sampler(client)
        sampler.until(lambda s: sum(s[i] in ACTIVE for i in ids) == BUDGET, f"{BUDGET} admitted", within_s=60)
        waiting = [i for i in ids if sampler.seen[i] == "queued"]
        assert waiting == ids[BUDGET:], "admitted in acceptance order"
        assert [_queue(client, i) for i in waiting] == [(1, FULL), (2, FULL), (3, FULL)]
        assert _queue(client, ids[0]) == (None, None)

        urgent = client.post("/v1/functions/urgent/invocations", json={}).json()["id"]
        assert _queue(client, urgent) == (1, FULL), "high priority goes ahead of the queued low ones"
        assert [_queue(client, i)[0] for i in waiting] == [2, 3, 4]

        # One GPU frees: the high-priority invocation takes it, the low ones keep waiting.
        (gates / ids[0]).touch()
        sampler.until(lambda s: s[urgent] in ACTIVE or s[urgent] == "succeeded", "urgent admitted")
        assert [sampler.seen[i] for i in waiting] == ["queued"] * 3
        assert [_queue(client, i)[0] for i in waiting] == [1, 2, 3]

        (gates / "all").touch()
        sampler.until(lambda s: all(s[i] == "succeeded" for i in [*ids, urgent]), "all 9 finished")
    assert sampler.most_active <= BUDGET, f"{sampler.most_active} held GPUs at once"
    assert sampler.most_running <= BUDGET
    assert sampler.most_active == BUDGET, "the budget was used, not only respected"
    assert sampler.samples >= 3


def test_a_function_listing_two_types_spills_to_the_second_when_the_first_types_budget_is_full(
    tmp_path: Path,
) -> None:
    gates = tmp_path / "gates"
    gates.mkdir()
    args = ("--gpus", "8", "--gpu-budget", "nvidia-tesla-t4=2,nvidia-l4=2")
    with running_server(tmp_path / "data", *args) as gw, gw.client() as client:
        spec = {"command": ["python", "-c", _job(gates)], "gpu": {"type": ["nvidia-tesla-t4", "nvidia-l4"]}}
        put = client.put("/v1/functions/spill", json=spec)
        assert put.status_code == 201, put.text
        got = client.get("/v1/functions/spill").json()["spec"]["gpu"]
        assert got == {"type": ["nvidia-tesla-t4", "nvidia-l4"], "count": 1}, "read back as written"
        ids = [client.post("/v1/functions/spill/invocations", json={}).json()["id"] for _ in range(5)]
        sampler = Sampler(client)
        sampler.until(lambda s: sum(s[i] in ACTIVE for i in ids) == 4, "4 admitted", within_s=60)
        types = [client.get(f"/v1/invocations/{i}").json()["gpu_type"] for i in ids]
        assert types == ["nvidia-tesla-t4", "nvidia-tesla-t4", "nvidia-l4", "nvidia-l4", None]
        assert _queue(client, ids[4]) == (
            1,
            "the GPU budget for nvidia-tesla-t4 is full (2 of 2 in use); "
            "the GPU budget for nvidia-l4 is full (2 of 2 in use)",
        )

        # An L4 frees: the one waiting takes it (its first type is still full).
        (gates / ids[2]).touch()
        sampler.until(lambda s: s[ids[4]] != "queued", "the fifth admitted")
        assert client.get(f"/v1/invocations/{ids[4]}").json()["gpu_type"] == "nvidia-l4"
        (gates / "all").touch()
        sampler.until(lambda s: all(s[i] == "succeeded" for i in ids), "all 5 finished")
    assert sampler.most_active <= 4
