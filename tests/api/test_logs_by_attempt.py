"""Each attempt's output stays readable: a real `eops serve` (local backend, one GPU slot) where
a preemptible invocation is preempted by a high-priority one and runs again as attempt 1; its
first attempt's log and its second's differ, and each is read by `?attempt=N` over HTTP, by the
Python client and by `eops logs ID --attempt N`."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from elasticityops.client import Client
from helpers.server import EOPS, RunningServer, running_server

# The first attempt leaves a marker and sleeps until it is preempted; the next finds the marker
# and ends. Each prints which it is, and a token of its own.
ATTEMPT = (
    "import json, os, time, uuid\n"
    "marker = json.load(open(os.environ['EOPS_PAYLOAD_PATH']))['marker']\n"
    "first = not os.path.exists(marker)\n"
    "open(marker, 'a').close()\n"
    "print('first' if first else 'second', uuid.uuid4().hex, flush=True)\n"
    "time.sleep(300 if first else 0)\n"
)


@pytest.fixture(scope="module")
def one_slot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(tmp_path_factory.mktemp("attempts"), "--gpus", "1") as gw:
        yield gw


def _state(client: httpx.Client, inv_id: str, until: Any, within_s: float = 90.0) -> dict[str, Any]:
    deadline = time.monotonic() + within_s
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body = client.get(f"/v1/invocations/{inv_id}").json()
        if until(body):
            return body
        time.sleep(0.1)
    raise AssertionError(f"{inv_id} did not get there within {within_s}s: {body}")


def _logs(client: httpx.Client, inv_id: str, **params: str) -> httpx.Response:
    return client.get(f"/v1/invocations/{inv_id}/logs", params=params)


@pytest.fixture(scope="module")
def preempted_once(one_slot: RunningServer, tmp_path_factory: pytest.TempPathFactory) -> str:
    """An invocation that ran twice: preempted on its first attempt, succeeded on its second."""
    marker = tmp_path_factory.mktemp("marker") / "ran"
    with one_slot.client() as client:
        low = {"command": ["python", "-c", ATTEMPT], "priority": "low", "preemptible": True, "retries": 1}
        assert client.put("/v1/functions/low", json=low).status_code == 201
        high = {"command": ["python", "-c", "print('high')"], "priority": "high"}
        assert client.put("/v1/functions/high", json=high).status_code == 201
        inv_id: str = client.post("/v1/functions/low/invocations", json={"marker": str(marker)}).json()["id"]
        _state(client, inv_id, lambda b: b["state"] == "running")
        _state(client, inv_id, lambda b: _logs(client, inv_id).text.startswith("first"))
        urgent = client.post("/v1/functions/high/invocations", json={}).json()["id"]
        assert _state(client, urgent, lambda b: b["state"] in ("succeeded", "failed"))["state"] == "succeeded"
        done = _state(client, inv_id, lambda b: b["state"] in ("succeeded", "failed", "cancelled"))
        assert (done["state"], done["attempt"]) == ("succeeded", 1), done
    return inv_id


def test_each_attempt_keeps_its_own_log(one_slot: RunningServer, preempted_once: str) -> None:
    with one_slot.client() as client:
        first = _logs(client, preempted_once, attempt="0")
        second = _logs(client, preempted_once, attempt="1")
        current = _logs(client, preempted_once)
        followed = _logs(client, preempted_once, attempt="0", follow="true")  # over: read at once
    assert first.status_code == second.status_code == current.status_code == 200
    assert first.text.startswith("first ")
    assert second.text.startswith("second ")
    assert current.text == second.text, "the current attempt's by default"
    assert followed.text == first.text


@pytest.mark.parametrize("attempt", ["2", "-1", "one"])
def test_an_attempt_out_of_range_is_refused_naming_the_field(
    one_slot: RunningServer, preempted_once: str, attempt: str
) -> None:
    with one_slot.client() as client:
        answer = _logs(client, preempted_once, attempt=attempt)
    assert answer.status_code == 422, answer.text
    [problem] = answer.json()["error"]["problems"]
    assert problem["field"] == "attempt", problem
    if attempt == "2":
        assert problem["fix"] == "ask for one from 0 to 1, or leave attempt out for the current one"


def test_the_client_reads_the_attempt_asked_for(one_slot: RunningServer, preempted_once: str) -> None:
    with Client(one_slot.url, one_slot.token) as client:
        first = "".join(client.logs(preempted_once, attempt=0))
        second = "".join(client.logs(preempted_once, attempt=1))
    assert first.startswith("first ")
    assert second.startswith("second ")


def test_eops_logs_prints_the_attempt_asked_for(one_slot: RunningServer, preempted_once: str) -> None:
    with one_slot.client() as client:
        first = _logs(client, preempted_once, attempt="0").text
    printed = subprocess.run(
        [EOPS, "logs", preempted_once, "--attempt", "0"], env=one_slot.env(), capture_output=True, text=True
    )
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == first
    beyond = subprocess.run(
        [EOPS, "logs", preempted_once, "--attempt", "5"], env=one_slot.env(), capture_output=True, text=True
    )
    assert beyond.returncode == 2, beyond
    assert "attempt" in beyond.stderr
    assert "from 0 to 1" in beyond.stderr
    assert "Traceback" not in beyond.stderr + beyond.stdout
    negative = subprocess.run(
        [EOPS, "logs", preempted_once, "--attempt", "-1"], env=one_slot.env(), capture_output=True, text=True
    )
    assert negative.returncode == 2, negative
    assert "Traceback" not in negative.stderr + negative.stdout


def test_the_route_documents_the_attempt(one_slot: RunningServer) -> None:
    spec = json.loads(httpx.get(one_slot.url + "/openapi.json").text)
    [attempt] = [
        p
        for p in spec["paths"]["/v1/invocations/{invocation_id}/logs"]["get"]["parameters"]
        if p["name"] == "attempt"
    ]
    assert "current one" in attempt["description"]
    assert "404" in attempt["description"]
