"""Completion webhooks on the real gateway process, delivered to a real receiver process:
signatures checked with the Standard Webhooks library, events in order per invocation, retries
with back-off, a receiver down across a gateway restart, the secret shown once and rotated,
and the SSRF refusals (at deploy and invoke, and at delivery for a name that resolves to
loopback)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from standardwebhooks import Webhook, WebhookVerificationError

from helpers.server import REPO, RunningServer, free_port, running_server, start_server
from helpers.webhook_receiver import Receiver, running_receiver, start_receiver, wait_for

# Fast retries, so that five failures take about a second; the defaults are 5 s and 1 h.
FAST = (
    "--webhook-allow-private",
    "--webhook-retry-initial",
    "0.1",
    "--webhook-retry-max",
    "0.5",
    "--webhook-poll",
    "0.1",
)
RESULT = "import os; open(os.environ['EOPS_RESULT_PATH'], 'w').write('{\"answer\": 42}')"


@pytest.fixture(scope="module")
def hooked_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(tmp_path_factory.mktemp("webhooks"), "--gpus", "2", *FAST) as gw:
        yield gw


@pytest.fixture(scope="module")
def strict_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """Without --webhook-allow-private: what a gateway in the field does."""
    with running_server(tmp_path_factory.mktemp("strict"), "--gpus", "1", "--webhook-poll", "0.1") as gw:
        yield gw


def deploy(client: httpx.Client, url: str, **hook: Any) -> tuple[str, str | None]:
    name = "hook-" + uuid.uuid4().hex[:8]
    spec = {"command": ["python", "-c", RESULT], "webhook": {"url": url, **hook}}
    response = client.put(f"/v1/functions/{name}", json=spec)
    assert response.status_code == 201, response.text
    return name, response.json()["webhook_secret"]


def invoke(client: httpx.Client, name: str, params: dict[str, str] | None = None) -> str:
    response = client.post(f"/v1/functions/{name}/invocations", params={"wait": "30", **(params or {})})
    assert response.status_code == 200, response.text
    assert response.json()["state"] == "succeeded"
    return str(response.json()["id"])


def verified(secret: str, request: dict[str, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = Webhook(secret).verify(request["body"], request["headers"])
    return payload


def deliveries(
    client: httpx.Client, invocation_id: str, until: int, timeout: float = 30.0
) -> list[dict[str, Any]]:
    """GET .../webhooks once `until` of its messages are delivered or failed."""
    deadline = time.monotonic() + timeout
    while True:
        items: list[dict[str, Any]] = client.get(f"/v1/invocations/{invocation_id}/webhooks").json()["items"]
        if sum(1 for item in items if item["next_attempt_at"] is None) >= until:
            return items
        assert time.monotonic() < deadline, items
        time.sleep(0.1)


def test_events_are_signed_in_order_and_carry_the_result(
    hooked_gateway: RunningServer, tmp_path: Path
) -> None:
    with running_receiver(tmp_path / "got.jsonl", free_port()) as receiver, hooked_gateway.client() as client:
        name, secret = deploy(client, receiver.url, events=["started", "completed"], include_result=True)
        assert secret is not None
        assert secret.startswith("whsec_")
        inv = invoke(client, name)
        got = wait_for(receiver, 2)
        events = [verified(secret, request) for request in got]
        assert [e["type"] for e in events] == ["invocation.started", "invocation.completed"]
        assert all(e["data"]["id"] == inv and e["data"]["function"] == name for e in events)
        assert events[1]["data"]["state"] == "succeeded"
        assert events[1]["data"]["result"] == {"answer": 42}
        assert got[0]["headers"]["webhook-id"] == f"{inv}.started.0"
        assert got[1]["headers"]["webhook-id"] == f"{inv}.completed"
        # Another secret does not verify it: the signature is the secret's.
        with pytest.raises(WebhookVerificationError):
            Webhook("whsec_" + "A" * 44).verify(got[0]["body"], got[0]["headers"])
        items = deliveries(client, inv, 2)
        assert [(i["type"], i["attempts"], i["last_status"]) for i in items] == [
            ("invocation.started", 1, 200),
            ("invocation.completed", 1, 200),
        ]
        assert all(i["delivered_at"] is not None for i in items)
        metrics = client.get("/metrics").text
        assert 'eops_webhook_deliveries_total{outcome="delivered"}' in metrics


def test_the_secret_is_shown_once_and_rotates(hooked_gateway: RunningServer, tmp_path: Path) -> None:
    with running_receiver(tmp_path / "got.jsonl", free_port()) as receiver, hooked_gateway.client() as client:
        name, secret = deploy(client, receiver.url)
        assert secret is not None
        spec = client.get(f"/v1/functions/{name}").json()["spec"]
        # A new version with the same URL: no new secret, and the secret is in no read.
        again = client.put(f"/v1/functions/{name}", json={**spec, "timeout_seconds": 60})
        assert again.status_code == 200
        assert again.json()["changed"] is True
        assert again.json()["webhook_secret"] is None
        assert secret not in client.get(f"/v1/functions/{name}").text
        assert secret not in client.get("/v1/functions").text
        # Another URL: a new secret.
        moved = client.put(f"/v1/functions/{name}", json={**spec, "webhook": {"url": receiver.url + "/2"}})
        moved_secret = moved.json()["webhook_secret"]
        assert moved_secret is not None
        assert moved_secret != secret
        rotated = client.post(f"/v1/functions/{name}/webhook-secret:rotate")
        assert rotated.status_code == 200, rotated.text
        new = rotated.json()["webhook_secret"]
        assert new.startswith("whsec_")
        assert new not in (secret, moved_secret)
        invoke(client, name)
        (request,) = wait_for(receiver, 1)
        assert verified(new, request)["type"] == "invocation.completed"
        with pytest.raises(WebhookVerificationError):
            verified(moved_secret, request)
        assert secret not in hooked_gateway.output()
        assert new not in hooked_gateway.output()


def test_a_name_deleted_and_deployed_again_gets_a_new_secret(hooked_gateway: RunningServer) -> None:
    with hooked_gateway.client() as client:
        name, secret = deploy(client, "https://example.com/hook")
        assert secret is not None
        spec = client.get(f"/v1/functions/{name}").json()["spec"]
        assert client.delete(f"/v1/functions/{name}").status_code == 204
        again = client.put(f"/v1/functions/{name}", json=spec)
        assert again.status_code == 201, again.text
        assert again.json()["webhook_secret"] not in (None, secret)


def test_a_receiver_failing_five_times_gets_the_message_then_with_one_id(
    hooked_gateway: RunningServer, tmp_path: Path
) -> None:
    with (
        running_receiver(tmp_path / "got.jsonl", free_port(), fail_first=5) as receiver,
        hooked_gateway.client() as client,
    ):
        name, secret = deploy(client, receiver.url, events=["started", "completed"])
        assert secret is not None
        inv = invoke(client, name)
        wait_for(receiver, 2)
        got = receiver.requests()
        ids = [r["headers"]["webhook-id"] for r in got]
        # The start is tried until it is delivered; the end waits for it (order per invocation).
        assert ids == [f"{inv}.started.0"] * 6 + [f"{inv}.completed"], ids
        assert [r["status"] for r in got] == [500] * 5 + [200, 200]
        for request in got:
            verified(secret, request)  # each attempt signed afresh, each valid
        items = deliveries(client, inv, 2)
        assert [i["attempts"] for i in items] == [6, 1]
        assert items[0]["last_status"] == 200
        assert items[0]["last_error"] is None
        assert 'eops_webhook_deliveries_total{outcome="retry"}' in client.get("/metrics").text


def test_an_invocation_overrides_the_webhook(hooked_gateway: RunningServer, tmp_path: Path) -> None:
    with (
        running_receiver(tmp_path / "a.jsonl", free_port()) as first,
        running_receiver(tmp_path / "b.jsonl", free_port()) as second,
        hooked_gateway.client() as client,
    ):
        name, secret = deploy(client, first.url)
        assert secret is not None
        inv = invoke(client, name, {"webhook": second.url, "webhook_events": "started,completed"})
        got = wait_for(second, 2)
        assert [verified(secret, r)["data"]["id"] for r in got] == [inv, inv]
        assert first.requests() == []
        bad = client.post(f"/v1/functions/{name}/invocations", params={"webhook_events": "finished"})
        assert bad.status_code == 422
        assert bad.json()["error"]["problems"][0]["field"] == "webhook_events"


def test_a_batch_tells_each_end_and_then_its_own_once(hooked_gateway: RunningServer, tmp_path: Path) -> None:
    with (
        running_receiver(tmp_path / "spec.jsonl", free_port()) as by_spec,
        running_receiver(tmp_path / "batch.jsonl", free_port()) as by_batch,
        hooked_gateway.client() as client,
    ):
        name, secret = deploy(client, by_spec.url, events=["completed", "batch.completed"])
        assert secret is not None
        accepted = client.post(f"/v1/functions/{name}/invocations:batch", json={"inputs": [1, 2, 3]})
        assert accepted.status_code == 202, accepted.text
        batch, ids = accepted.json()["batch_id"], accepted.json()["invocation_ids"]
        events = [verified(secret, r) for r in wait_for(by_spec, 4)]
        assert sorted(e["data"]["id"] for e in events if e["type"] == "invocation.completed") == sorted(ids)
        ends = [e for e in events if e["type"] == "batch.completed"]
        assert len(ends) == 1, events
        assert ends[0]["data"]["id"] == batch
        assert ends[0]["data"]["counts"] == {"succeeded": 3}
        # A batch's override applies to each of its invocations, and to its own event.
        params = {"webhook": by_batch.url, "webhook_events": "batch.completed"}
        again = client.post(f"/v1/functions/{name}/invocations:batch", params=params, json={"inputs": [4, 5]})
        assert again.status_code == 202, again.text
        only = [verified(secret, r) for r in wait_for(by_batch, 1)]
        assert [(e["type"], e["data"]["id"], e["data"]["count"]) for e in only] == [
            ("batch.completed", again.json()["batch_id"], 2)
        ]
        time.sleep(1)  # nothing more comes: one message per batch, none per invocation
        assert len(by_batch.requests()) == 1
        assert len(by_spec.requests()) == 4


def test_a_receiver_down_across_a_gateway_restart_gets_the_message_once(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/hook"
    first = start_server(tmp_path / "data", "--gpus", "1", *FAST)
    try:
        with first.client() as client:
            name, secret = deploy(client, url)
            assert secret is not None
            inv = invoke(client, name)
            deadline = time.monotonic() + 20
            while client.get(f"/v1/invocations/{inv}/webhooks").json()["items"][0]["attempts"] < 2:
                assert time.monotonic() < deadline
                time.sleep(0.1)
            (item,) = client.get(f"/v1/invocations/{inv}/webhooks").json()["items"]
            assert item["delivered_at"] is None
            assert item["next_attempt_at"] is not None
            assert item["last_status"] is None
            assert item["last_error"]
            assert "eops_webhooks_pending 1.0" in client.get("/metrics").text.splitlines()
    finally:
        first.kill()
    receiver: Receiver = start_receiver(tmp_path / "got.jsonl", port)
    second = first.again()
    try:
        with second.client() as client:
            (request,) = wait_for(receiver, 1)
            assert verified(secret, request)["data"]["id"] == inv
            (item,) = deliveries(client, inv, 1)
            assert item["delivered_at"] is not None
            time.sleep(1.0)  # nothing more comes: delivered once
            assert len(receiver.requests()) == 1
            assert "eops_webhooks_pending 0.0" in client.get("/metrics").text.splitlines()
    finally:
        second.stop()
        receiver.stop()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("http://127.0.0.1:9/hook", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.1.2.3/hook", "private"),
        ("http://[::1]/hook", "loopback"),
        ("http://[::ffff:192.168.0.1]/hook", "private"),
        ("http://0.0.0.0/hook", "unspecified"),
        ("http://224.0.0.1/hook", "multicast"),
        ("ftp://example.com/hook", "http or https"),
        ("https://user:pass@example.com/hook", "user name or password"),
        ("example.com/hook", "absolute URL"),
    ],
)
def test_a_webhook_url_is_refused_at_deploy_naming_the_field(
    strict_gateway: RunningServer, url: str, says: str
) -> None:
    with strict_gateway.client() as client:
        spec = {"command": ["true"], "webhook": {"url": url}}
        response = client.put(f"/v1/functions/ssrf-{uuid.uuid4().hex[:8]}", json=spec)
        assert response.status_code == 422, response.text
        (problem,) = response.json()["error"]["problems"]
        assert problem["field"] == "webhook.url"
        assert says in problem["problem"]


def test_an_override_to_a_private_address_is_refused_at_invoke(strict_gateway: RunningServer) -> None:
    with strict_gateway.client() as client:
        name = f"ssrf-{uuid.uuid4().hex[:8]}"
        spec = {"command": ["true"], "webhook": {"url": "https://example.com/hook"}}
        assert client.put(f"/v1/functions/{name}", json=spec).status_code == 201
        response = client.post(f"/v1/functions/{name}/invocations", params={"webhook": "http://10.0.0.1/x"})
        assert response.status_code == 422, response.text
        (problem,) = response.json()["error"]["problems"]
        assert problem["field"] == "webhook"
        assert "private" in problem["problem"]
        assert client.get("/v1/invocations", params={"function": name}).json()["items"] == []


def test_a_name_resolving_to_loopback_is_refused_at_delivery(
    strict_gateway: RunningServer, tmp_path: Path
) -> None:
    with running_receiver(tmp_path / "got.jsonl", free_port()) as receiver, strict_gateway.client() as client:
        # A host name passes the deploy's check (no literal address); its resolution is
        # checked at each delivery, and `localhost` resolves to loopback.
        name, secret = deploy(client, f"http://localhost:{receiver.port}/hook")
        assert secret is not None
        inv = invoke(client, name)
        deadline = time.monotonic() + 20
        while True:
            (item,) = client.get(f"/v1/invocations/{inv}/webhooks").json()["items"]
            if item["attempts"] >= 1:
                break
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert item["delivered_at"] is None
        assert item["last_status"] is None
        assert "loopback" in item["last_error"]
        assert "--webhook-allow-private" in item["last_error"]
        assert receiver.requests() == []


def test_the_spec_refuses_odd_webhook_fields(strict_gateway: RunningServer) -> None:
    with strict_gateway.client() as client:
        for hook, field in [
            ({"url": "https://example.com", "events": ["finished"]}, "webhook.events.0"),
            ({"url": "https://example.com", "events": []}, "webhook.events"),
            ({"url": "https://example.com", "include_result": "yes"}, "webhook.include_result"),
            ({"url": "https://example.com", "secret": "x"}, "webhook.secret"),
            ({"events": ["completed"]}, "webhook.url"),
        ]:
            response = client.put(
                f"/v1/functions/odd-{uuid.uuid4().hex[:8]}", json={"command": ["true"], "webhook": hook}
            )
            assert response.status_code == 422, (hook, response.text)
            assert [p["field"] for p in response.json()["error"]["problems"]] == [field], json.dumps(hook)


def _docs_receiver() -> str:
    """The receiver of docs/functions.md, as the page shows it."""
    text = (REPO / "docs" / "functions.md").read_text()
    start = text.index("```python\nfrom http.server import BaseHTTPRequestHandler")
    return text[start + len("```python\n") : text.index("```", start + 10)]


def test_the_receiver_in_the_docs_verifies_and_prints_each_event(
    hooked_gateway: RunningServer, tmp_path: Path
) -> None:
    port = free_port()
    with hooked_gateway.client() as client:
        name, secret = deploy(client, f"http://127.0.0.1:{port}/hook", events=["started", "completed"])
        assert secret is not None
        code = (
            _docs_receiver()
            .replace('"whsec_..."', repr(secret))
            .replace('("", 8000)', f'("127.0.0.1", {port})')
        )
        script = tmp_path / "receiver.py"
        script.write_text(code)
        out = tmp_path / "receiver.out"
        # Its stdout is what it prints of each event; http.server logs each request to stderr.
        with out.open("wb") as sink, (tmp_path / "receiver.err").open("wb") as errors:
            process = subprocess.Popen([sys.executable, "-u", str(script)], stdout=sink, stderr=errors)
        try:
            inv = invoke(client, name)
            items = deliveries(client, inv, 2)
            assert [i["last_status"] for i in items] == [204, 204], items
            printed = out.read_text().splitlines()
            assert len(printed) == 2, printed
            assert printed[0] == f"invocation.started {inv} running", printed
            assert printed[1] == f"invocation.completed {inv} succeeded"
        finally:
            os.kill(process.pid, signal.SIGTERM)
            process.wait(10)


def test_a_host_name_keeps_its_host_header(hooked_gateway: RunningServer, tmp_path: Path) -> None:
    """The delivery connects to the address it checked, and still names the host it was given."""
    with running_receiver(tmp_path / "got.jsonl", free_port()) as receiver, hooked_gateway.client() as client:
        name, _ = deploy(client, f"http://localhost:{receiver.port}/hook")
        invoke(client, name)
        (request,) = wait_for(receiver, 1)
        assert request["headers"]["host"] == f"localhost:{receiver.port}"
        assert request["headers"]["user-agent"].startswith("ElasticityOps-Webhooks")


def test_cloudevents_receivers_read_the_binary_mode_and_the_signature_still_holds(
    hooked_gateway: RunningServer, tmp_path: Path
) -> None:
    with running_receiver(tmp_path / "got.jsonl", free_port()) as receiver, hooked_gateway.client() as client:
        name, secret = deploy(client, receiver.url, format="cloudevents", include_result=True)
        assert secret is not None
        inv = invoke(client, name)
        (request,) = wait_for(receiver, 1)
        headers = {k.lower(): v for k, v in request["headers"].items()}
        event = from_http_event(HTTPMessage(headers=headers, body=request["body"].encode()))
        assert event.get_specversion() == "1.0"
        assert event.get_type() == "dev.elasticityops.invocation.completed"
        assert event.get_id() == f"{inv}.completed" == headers["webhook-id"]
        assert event.get_source() == f"/v1/functions/{name}"
        assert event.get_subject() == inv
        data = event.get_data()
        assert isinstance(data, dict)
        assert (data["id"], data["state"], data["result"]) == (inv, "succeeded", {"answer": 42})
        assert verified(secret, request) == data  # the body signed is the body sent
