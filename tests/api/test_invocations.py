"""Invoking, waiting, results, logs, cancel, idempotency, pagination and deletion over HTTP."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx
import pytest

from helpers.server import REPO, RunningServer

RECORDER = REPO / "tests" / "jobs" / "recorder.py"

# Jobs run with the gateway's own interpreter (a leading `python` means it).
ECHO_RESULT = (
    "import json, os, sys; p = json.load(open(os.environ['EOPS_PAYLOAD_PATH'])); "
    "print('hello from', os.environ['EOPS_INVOCATION_ID']); sys.stdout.flush(); "
    "open(os.environ['EOPS_RESULT_PATH'], 'w').write(json.dumps({'doubled': p['n'] * 2}))"
)
CALLBACK = (
    "import json, os, urllib.request; "
    "body = json.dumps({'via': 'callback'}).encode(); "
    "auth = 'Bearer ' + os.environ['EOPS_CALLBACK_TOKEN']; "
    "req = urllib.request.Request(os.environ['EOPS_CALLBACK_URL'], data=body, "
    "headers={'Authorization': auth, 'Content-Type': 'application/json'}); "
    "print(urllib.request.urlopen(req).status)"
)
SLEEP = "import time; print('sleeping', flush=True); time.sleep(120)"


def deploy(client: httpx.Client, code: str, **extra: Any) -> str:
    name = "fn-" + uuid.uuid4().hex[:10]
    response = client.put(f"/v1/functions/{name}", json={"command": ["python", "-c", code], **extra})
    assert response.status_code == 201, response.text
    return name


def test_invoke_answers_202_at_once_with_a_queued_id(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client, "pass")
        response = client.post(f"/v1/functions/{name}/invocations", json={"n": 1})
        assert response.status_code == 202
        body = response.json()
        assert body["id"].startswith("inv-")
        assert body["state"] == "queued"
        got = client.get(f"/v1/invocations/{body['id']}").json()
        assert got["state"] == "queued"
        assert got["timeline"]["accepted"] == body["timeline"]["accepted"]


def test_wait_returns_the_result_the_job_wrote(gateway: RunningServer) -> None:
    with gateway.client(timeout=120) as client:
        name = deploy(client, ECHO_RESULT)
        response = client.post(f"/v1/functions/{name}/invocations?wait=60", json={"n": 21})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["state"] == "succeeded"
        assert body["exit_code"] == 0
        assert body["result"] == {"doubled": 42}
        timeline = body["timeline"]
        assert None not in (timeline["dispatched"], timeline["started"], timeline["finished"])
        logs = client.get(f"/v1/invocations/{body['id']}/logs")
        assert logs.status_code == 200
        assert f"hello from {body['id']}" in logs.text


def test_the_job_can_post_its_result_with_its_own_token(gateway: RunningServer) -> None:
    with gateway.client(timeout=120) as client:
        name = deploy(client, CALLBACK)
        body = client.post(f"/v1/functions/{name}/invocations?wait=60", json={}).json()
        assert body["state"] == "succeeded", body
        assert body["result"] == {"via": "callback"}
        other = client.post(
            f"/v1/invocations/{body['id']}/result",
            content=b"{}",
            headers={"Authorization": "Bearer not-the-token"},
        )
        assert other.status_code == 401


def test_a_result_cannot_be_replaced_after_the_invocation_ended(gateway: RunningServer) -> None:
    record = gateway.data_dir / f"record-{uuid.uuid4().hex}.jsonl"
    with gateway.client(timeout=120) as client:
        name = "fn-" + uuid.uuid4().hex[:10]
        put = client.put(f"/v1/functions/{name}", json={"command": ["python", str(RECORDER)]})
        assert put.status_code == 201, put.text
        payload = {"record": str(record), "result": {"v": 1}}
        body = client.post(f"/v1/functions/{name}/invocations?wait=60", json=payload).json()
        assert body["state"] == "succeeded", body
        token = json.loads(record.read_text().splitlines()[0])["token"]
        url = f"/v1/invocations/{body['id']}/result"
        late = client.post(url, json={"v": 2}, headers={"Authorization": f"Bearer {token}"})
        assert late.status_code == 409, late.text
        assert "succeeded" in late.json()["error"]["message"]
        api = client.post(url, json={"v": 3})  # the client's own API (admin) token
        assert api.status_code == 401, api.text
        odd = client.post(url, json={"v": 4}, headers={b"Authorization": "Bearer t\u00f6k\u00e9n".encode()})
        assert odd.status_code == 401, odd.text
        assert client.get(f"/v1/invocations/{body['id']}").json()["result"] == {"v": 1}


def test_a_failing_job_reports_its_exit_code(gateway: RunningServer) -> None:
    with gateway.client(timeout=120) as client:
        name = deploy(client, "import sys; sys.exit(3)")
        body = client.post(f"/v1/functions/{name}/invocations?wait=60").json()
        assert body["state"] == "failed"
        assert body["exit_code"] == 3
        assert body["failure_reason"] == "exit_code"


def test_wait_that_runs_out_answers_202_with_the_current_state(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client, "pass")
        response = client.post(f"/v1/functions/{name}/invocations?wait=1", json={})
        assert response.status_code == 202
        assert response.json()["state"] == "queued"


def test_cancel_kills_a_running_job_and_follow_ends(gateway: RunningServer) -> None:
    with gateway.client(timeout=120) as client:
        name = deploy(client, SLEEP)
        inv = client.post(f"/v1/functions/{name}/invocations", json={}).json()
        with client.stream("GET", f"/v1/invocations/{inv['id']}/logs?follow=true") as stream:
            lines = stream.iter_lines()
            assert next(lines) == "sleeping"
            cancelled = client.post(f"/v1/invocations/{inv['id']}/cancel")
            assert cancelled.status_code == 200
            assert cancelled.json()["state"] == "cancelled"
            assert list(lines) == [], "the stream ends when the job does"
        again = client.post(f"/v1/invocations/{inv['id']}/cancel")
        assert again.status_code == 200, "cancelling twice is a no-op"
        assert client.get(f"/v1/invocations/{inv['id']}").json()["failure_reason"] == "cancelled"


def test_cancelling_a_finished_invocation_is_a_conflict(gateway: RunningServer) -> None:
    with gateway.client(timeout=120) as client:
        name = deploy(client, "pass")
        inv = client.post(f"/v1/functions/{name}/invocations?wait=60").json()
        assert inv["state"] == "succeeded"
        response = client.post(f"/v1/invocations/{inv['id']}/cancel")
        assert response.status_code == 409
        assert "already ended" in response.json()["error"]["message"]


def test_the_same_idempotency_key_returns_the_same_invocation(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client, "pass")
        other = deploy(client, "pass")
        headers = {"Idempotency-Key": "order-1234"}
        first = client.post(f"/v1/functions/{name}/invocations", json={"a": 1}, headers=headers)
        second = client.post(f"/v1/functions/{name}/invocations", json={"a": 2}, headers=headers)
        elsewhere = client.post(f"/v1/functions/{other}/invocations", json={"a": 1}, headers=headers)
        assert first.status_code == second.status_code == 202
        assert second.json()["id"] == first.json()["id"]
        assert second.headers["idempotent-replayed"] == "true"
        assert "idempotent-replayed" not in first.headers
        assert first.json()["idempotency_key"] == "order-1234"
        assert elsewhere.json()["id"] != first.json()["id"], "keys are per function"
        listed = client.get(f"/v1/invocations?function={name}").json()["items"]
        assert len(listed) == 1


def test_pages_cover_every_invocation_once_newest_first(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client, "pass")
        made = [
            client.post(f"/v1/functions/{name}/invocations", json={"i": i}).json()["id"] for i in range(23)
        ]
        seen: list[str] = []
        url = f"/v1/invocations?function={name}&limit=10"
        cursor = None
        pages = 0
        while True:
            page = client.get(url + (f"&cursor={cursor}" if cursor else "")).json()
            pages += 1
            seen.extend(item["id"] for item in page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == 3
        assert seen == sorted(made, reverse=True)
        queued = client.get(f"/v1/invocations?function={name}&state=queued&limit=500").json()["items"]
        assert len(queued) == 23


def test_deleting_a_function_with_queued_work_needs_force(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client, "pass")
        ids = [client.post(f"/v1/functions/{name}/invocations", json={}).json()["id"] for _ in range(3)]
        refused = client.delete(f"/v1/functions/{name}")
        assert refused.status_code == 409
        assert "force=true" in refused.json()["error"]["message"]
        assert client.delete(f"/v1/functions/{name}?force=true").status_code == 204
        assert client.get(f"/v1/functions/{name}").status_code == 404
        for inv_id in ids:
            inv = client.get(f"/v1/invocations/{inv_id}").json()
            assert inv["state"] == "failed"
            assert inv["failure_reason"] == "function_deleted"
        assert client.post(f"/v1/functions/{name}/invocations", json={}).status_code == 404


def test_an_idle_function_is_deleted_without_force(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client, "pass")
        assert client.delete(f"/v1/functions/{name}").status_code == 204
        assert name not in [f["spec"]["name"] for f in client.get("/v1/functions").json()["items"]]


def test_redeploying_bumps_the_version_only_on_change(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client, "pass")
        same = client.put(f"/v1/functions/{name}", json={"command": ["python", "-c", "pass"]})
        changed = client.put(
            f"/v1/functions/{name}", json={"command": ["python", "-c", "pass"], "priority": "high"}
        )
        assert same.status_code == 200
        assert same.json()["version"] == 1
        assert same.json()["changed"] is False, "the answer says nothing changed"
        assert (changed.status_code, changed.json()["version"]) == (200, 2)
        assert changed.json()["changed"] is True
        inv = client.post(f"/v1/functions/{name}/invocations", json={}).json()
        assert inv["priority"] == "high", "the new version is used at once"


@pytest.mark.parametrize("payload", [b"", b"null", b"[1,2,3]", json.dumps({"deep": {"x": [1]}}).encode()])
def test_any_json_document_is_a_payload(paused_gateway: RunningServer, payload: bytes) -> None:
    with paused_gateway.client() as client:
        name = deploy(client, "pass")
        response = client.post(
            f"/v1/functions/{name}/invocations", content=payload, headers={"Content-Type": "application/json"}
        )
        assert response.status_code == 202, response.text


def _metric(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[1])
    raise AssertionError(f"{series} not in /metrics")


def test_metrics_count_the_gpus_held_by_running_invocations(gateway: RunningServer) -> None:
    with gateway.client(timeout=60) as client:
        name = deploy(client, SLEEP, gpu={"count": 2})
        inv = client.post(f"/v1/functions/{name}/invocations", json={}).json()
        for _ in range(300):
            if client.get(f"/v1/invocations/{inv['id']}").json()["state"] == "running":
                break
            time.sleep(0.1)
        held = client.get("/metrics").text
        client.post(f"/v1/invocations/{inv['id']}/cancel")
        released = client.get("/metrics").text
    assert _metric(held, "eops_gpus_in_use") == 2, "one invocation of a 2-GPU function"
    assert _metric(held, "eops_gpus_free") == 0
    assert _metric(released, "eops_gpus_in_use") == 0
    assert _metric(held, 'eops_invocations{state="running"}') >= 1


def test_an_invocation_names_its_spec_version_and_a_redeploy_after_rm_goes_on_counting(
    paused_gateway: RunningServer,
) -> None:
    name = f"ver-{uuid.uuid4().hex[:8]}"
    url = f"/v1/functions/{name}"
    with paused_gateway.client() as client:
        assert client.put(url, json={"command": ["python", "-c", "pass"]}).json()["version"] == 1
        first = client.post(f"{url}/invocations", json={}).json()
        assert (
            client.put(url, json={"command": ["python", "-c", "pass"], "timeout_seconds": 9}).json()[
                "version"
            ]
            == 2
        )
        second = client.post(f"{url}/invocations", json={}).json()
        assert (first["spec_version"], second["spec_version"]) == (1, 2)
        assert client.get(f"/v1/invocations/{first['id']}").json()["spec_version"] == 1
        assert client.delete(url, params={"force": "true"}).status_code == 204
        again = client.put(url, json={"command": ["python", "-c", "pass"]})
        assert (again.status_code, again.json()["version"]) == (201, 3), "never restarts at 1"


def test_preemption_fields_are_in_the_spec_the_invocation_and_openapi(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client, "pass", preemptible=True, retries=2, priority="low")
        spec = client.get(f"/v1/functions/{name}").json()["spec"]
        assert (spec["preemptible"], spec["retries"]) == (True, 2)
        plain = client.get(f"/v1/functions/{deploy(client, 'pass')}").json()["spec"]
        assert (plain["preemptible"], plain["retries"]) == (False, 0), "off by default"
        inv = client.post(f"/v1/functions/{name}/invocations", json={}).json()
        got = client.get(f"/v1/invocations/{inv['id']}").json()
        assert (got["attempt"], got["preempting_by"], got["timeline"]["preempted"]) == (0, None, None)
        schemas = client.get("/openapi.json").json()["components"]["schemas"]
        fields = schemas["FunctionSpec"]["properties"]
        assert "preempt" in fields["preemptible"]["description"]
        assert "loss of its node" in fields["retries"]["description"]
        assert "preemption" in schemas["InvocationOut"]["properties"]["attempt"]["description"]
        reasons = schemas["FailureReason"]["enum"]
        assert "preempted" in reasons
