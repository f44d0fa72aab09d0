"""Batches over HTTP on a real gateway: accepted whole or not at all, one invocation per input in
input order, an idempotent retry, reading a batch page by page, its event stream, its cancel."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import httpx
import pytest

from elasticityops.client import AsyncClient, Client, InvocationFailed
from helpers.server import RunningServer

# A job that hands back twice its input's n, and fails (exit code 3) for a negative one (jobs
# run with the gateway's own interpreter).
DOUBLE = (
    "import json, os, sys; p = json.load(open(os.environ['EOPS_PAYLOAD_PATH'])); "
    "p['n'] < 0 and sys.exit(3); "
    "open(os.environ['EOPS_RESULT_PATH'], 'w').write(json.dumps({'doubled': p['n'] * 2}))"
)


def deploy(client: httpx.Client, code: str = "pass") -> str:
    name = "bt-" + uuid.uuid4().hex[:10]
    response = client.put(f"/v1/functions/{name}", json={"command": ["python", "-c", code]})
    assert response.status_code == 201, response.text
    return name


def batch_url(name: str) -> str:
    return f"/v1/functions/{name}/invocations:batch"


def invocations_of(client: httpx.Client, name: str) -> list[dict[str, Any]]:
    page = client.get("/v1/invocations", params={"function": name, "limit": 500})
    assert page.status_code == 200, page.text
    items: list[dict[str, Any]] = page.json()["items"]
    return items


def accepted_total(client: httpx.Client) -> float:
    metrics = client.get("/metrics").text
    [line] = [x for x in metrics.splitlines() if x.startswith("eops_invocations_accepted_total ")]
    return float(line.split()[1])


def wait_done(client: httpx.Client, batch_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body: dict[str, Any] = client.get(f"/v1/batches/{batch_id}").json()
        if body["done"] or time.monotonic() > deadline:
            return body
        time.sleep(0.2)


def test_a_batch_is_one_invocation_per_input_in_input_order(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client)
        answer = client.post(batch_url(name), json={"inputs": [{"n": i} for i in range(7)]})
        assert answer.status_code == 202, answer.text
        body = answer.json()
        assert body["batch_id"].startswith("bat-")
        assert body["function"] == name
        assert body["count"] == 7
        ids = body["invocation_ids"]
        assert len(set(ids)) == 7
        assert ids == sorted(ids), "ids sort as the inputs came"
        assert "Idempotent-Replayed" not in answer.headers
        for invocation_id in ids:
            one = client.get(f"/v1/invocations/{invocation_id}").json()
            assert one["state"] == "queued"
            assert one["batch_id"] == body["batch_id"]
            assert one["function"] == name
        listed = client.get("/v1/invocations", params={"batch": body["batch_id"]}).json()["items"]
        assert [i["id"] for i in listed] == ids[::-1], "newest first, as every list"
        assert all(i["batch_id"] == body["batch_id"] for i in listed)


def test_each_input_is_its_own_invocation_with_its_own_result(gateway: RunningServer) -> None:
    with gateway.client(timeout=60) as client:
        name = deploy(client, DOUBLE)
        body = client.post(batch_url(name), json={"inputs": [{"n": n} for n in (5, 1, 4, 2)]}).json()
        done = wait_done(client, body["batch_id"])
        assert done["done"], done
        assert done["counts"]["succeeded"] == 4
        results = [client.get(f"/v1/invocations/{i}").json()["result"] for i in body["invocation_ids"]]
        assert results == [{"doubled": 10}, {"doubled": 2}, {"doubled": 8}, {"doubled": 4}]


@pytest.mark.parametrize(
    ("body", "status", "field"),
    [
        (b"[1, 2]", 422, "(body)"),
        (b'"inputs"', 422, "(body)"),
        (b"{}", 422, "inputs"),
        (b'{"inputs": 3}', 422, "inputs"),
        (b'{"inputs": {"0": 1}}', 422, "inputs"),
        (b'{"inputs": []}', 422, "inputs"),
        (b'{"inputs": [1], "wait": 3}', 422, "wait"),
        (b'{"inputs": [1,', 400, "(body)"),
        (b"", 400, "(body)"),
    ],
)
def test_a_bad_batch_is_refused_naming_the_field_and_nothing_is_accepted(
    paused_gateway: RunningServer, body: bytes, status: int, field: str
) -> None:
    with paused_gateway.client() as client:
        name = deploy(client)
        answer = client.post(batch_url(name), content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == status, answer.text
        problems = answer.json()["error"]["problems"]
        assert problems[0]["field"] == field
        assert problems[0]["fix"]
        assert invocations_of(client, name) == []


def test_one_input_over_the_payload_limit_refuses_the_whole_batch_naming_its_index(
    paused_gateway: RunningServer,
) -> None:
    # paused_gateway: --max-payload-bytes 4096.
    inputs: list[Any] = [{"n": i} for i in range(20)]
    inputs[17] = {"blob": "x" * 5000}
    with paused_gateway.client() as client:
        name = deploy(client)
        answer = client.post(batch_url(name), json={"inputs": inputs})
        assert answer.status_code == 413, answer.text
        [problem] = answer.json()["error"]["problems"]
        assert problem["field"] == "inputs[17]"
        assert "4096" in problem["problem"]
        assert invocations_of(client, name) == []


def test_more_inputs_than_a_batch_may_hold_are_refused_with_the_limit(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client)
        answer = client.post(batch_url(name), json={"inputs": [None] * 1001})
        assert answer.status_code == 422, answer.text
        [problem] = answer.json()["error"]["problems"]
        assert problem["field"] == "inputs"
        assert "1000" in problem["problem"]
        assert "EOPS_MAX_BATCH_INPUTS" in problem["fix"]
        assert invocations_of(client, name) == []
        assert client.post(batch_url(name), json={"inputs": [None] * 1000}).status_code == 202


def test_a_batch_of_a_function_that_does_not_exist_is_404(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        answer = client.post(batch_url("no-such-fn"), json={"inputs": [1]})
        assert answer.status_code == 404, answer.text
        assert "eops fn deploy" in answer.json()["error"]["message"]


def test_a_retried_batch_returns_the_same_ids_and_stores_nothing_more(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client)
        key = {"Idempotency-Key": "nightly-" + uuid.uuid4().hex}
        counted = accepted_total(client)
        first = client.post(batch_url(name), json={"inputs": [1, 2, 3]}, headers=key)
        again = client.post(batch_url(name), json={"inputs": [1, 2, 3]}, headers=key)
        assert accepted_total(client) == counted + 3, "three accepted; the replay counts none"
        assert first.status_code == again.status_code == 202, again.text
        assert again.headers["Idempotent-Replayed"] == "true"
        assert again.json()["batch_id"] == first.json()["batch_id"]
        assert again.json()["invocation_ids"] == first.json()["invocation_ids"]
        listed = invocations_of(client, name)
        assert len(listed) == 3
        keys = {i["id"]: i["idempotency_key"] for i in listed}
        ids = first.json()["invocation_ids"]
        assert [keys[i] for i in ids] == [f"{key['Idempotency-Key']}#{n}" for n in range(3)]
        other = client.post(
            batch_url(name), json={"inputs": [1, 2, 3]}, headers={"Idempotency-Key": "another"}
        )
        assert other.json()["batch_id"] != first.json()["batch_id"]
        assert len(invocations_of(client, name)) == 6


def test_a_batch_is_read_page_by_page_in_input_order_with_counts(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client)
        body = client.post(batch_url(name), json={"inputs": list(range(5))}).json()
        batch_id, ids = body["batch_id"], body["invocation_ids"]
        client.post(f"/v1/invocations/{ids[1]}/cancel")
        seen: list[str] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = client.get(f"/v1/batches/{batch_id}", params=params)
            assert page.status_code == 200, page.text
            doc = page.json()
            assert (doc["id"], doc["function"], doc["count"]) == (batch_id, name, 5)
            assert doc["counts"] == {
                "queued": 4,
                "pending": 0,
                "running": 0,
                "succeeded": 0,
                "failed": 0,
                "cancelled": 1,
                "timed_out": 0,
            }, "every state is named"
            assert (doc["ended"], doc["done"]) == (1, False)
            seen += [i["id"] for i in doc["items"]]
            cursor = doc["next_cursor"]
            if cursor is None:
                break
        assert seen == ids
        cancelled = client.get(f"/v1/batches/{batch_id}", params={"state": "cancelled"}).json()
        assert [i["id"] for i in cancelled["items"]] == [ids[1]]
        assert client.get("/v1/batches/bat-nosuchbatch").status_code == 404
        assert client.get("/v1/batches/inv-x").status_code == 404
        bad = client.get(f"/v1/batches/{batch_id}", params={"cursor": "x"})
        assert bad.status_code == 422
        assert bad.json()["error"]["problems"][0]["field"] == "cursor"


def test_cancelling_a_batch_cancels_every_invocation_not_ended(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client)
        body = client.post(batch_url(name), json={"inputs": list(range(6))}).json()
        answer = client.post(f"/v1/batches/{body['batch_id']}:cancel")
        assert answer.status_code == 200, answer.text
        doc = answer.json()
        assert (doc["counts"]["cancelled"], doc["done"]) == (6, True)
        for invocation_id in body["invocation_ids"]:
            assert client.get(f"/v1/invocations/{invocation_id}").json()["state"] == "cancelled"
        assert client.post(f"/v1/batches/{body['batch_id']}:cancel").status_code == 200, "again: a no-op"
        assert client.post("/v1/batches/bat-nosuchbatch:cancel").status_code == 404


def _events(client: httpx.Client, batch_id: str, timeout: float = 120) -> list[tuple[str, Any]]:
    """The stream's frames until it ends by itself: (event, data)."""
    frames: list[tuple[str, Any]] = []
    with client.stream("GET", f"/v1/batches/{batch_id}/events", timeout=timeout) as stream:
        assert stream.status_code == 200, stream.read()
        assert stream.headers["content-type"].startswith("text/event-stream")
        event = ""
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                frames.append((event, json.loads(line.removeprefix("data: "))))
    return frames


def test_the_event_stream_tells_each_end_then_done(gateway: RunningServer) -> None:
    with gateway.client(timeout=60) as client:
        name = deploy(client, DOUBLE)
        body = client.post(batch_url(name), json={"inputs": [{"n": n} for n in range(4)]}).json()
        frames = _events(client, body["batch_id"])
    assert frames[0][0] == "hello"
    ended = [data for event, data in frames if event == "ended"]
    assert sorted(d["id"] for d in ended) == sorted(body["invocation_ids"]), "each once"
    assert all(d["state"] == "succeeded" and d["batch_id"] == body["batch_id"] for d in ended)
    assert frames[-1][0] == "done"
    assert frames[-1][1]["counts"]["succeeded"] == 4


def test_the_event_stream_ends_when_a_cancel_ends_the_batch(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client, paused_gateway.client() as other:
        name = deploy(client)
        body = client.post(batch_url(name), json={"inputs": [1, 2, 3]}).json()
        client.post(f"/v1/invocations/{body['invocation_ids'][0]}/cancel")
        started = time.monotonic()
        with client.stream("GET", f"/v1/batches/{body['batch_id']}/events", timeout=30) as stream:
            lines = stream.iter_lines()
            seen: list[str] = []
            for line in lines:
                seen.append(line)
                if line.startswith("data: ") and body["invocation_ids"][0] in line:
                    break  # the one ended before the stream opened comes first
            assert other.post(f"/v1/batches/{body['batch_id']}:cancel").status_code == 200
            seen += list(lines)
        assert time.monotonic() - started < 10, "woken by the cancels, not by a poll"
        text = "\n".join(seen)
        assert text.count("event: ended") == 3
        assert "event: done" in text
        assert client.get("/v1/batches/bat-nosuchbatch/events").status_code == 404


def test_map_returns_results_in_input_order_and_failures_in_place(gateway: RunningServer) -> None:
    with gateway.client() as http:
        name = deploy(http, DOUBLE)
    inputs = [{"n": n} for n in (3, 1, -1, 2, 0, 5)]
    progress: list[int] = []
    with Client(gateway.url, gateway.token) as client:
        # Batches of 2, at most 3 in flight: several batches, refilled as results come.
        results = client.map(
            name,
            inputs,
            return_exceptions=True,
            batch_size=2,
            max_in_flight=3,
            on_progress=lambda done, total: progress.append(done),
        )
        with pytest.raises(InvocationFailed) as failed:
            client.map(name, [{"n": 1}, {"n": -2}])
    assert [r if isinstance(r, InvocationFailed) else r["doubled"] for r in results[:2]] == [6, 2]
    assert isinstance(results[2], InvocationFailed)
    assert results[2].invocation.exit_code == 3
    assert [r["doubled"] for r in results[3:]] == [4, 0, 10]
    assert progress == [1, 2, 3, 4, 5, 6]
    assert failed.value.invocation.failure_reason is not None
    with gateway.client() as http:
        batches = {i["batch_id"] for i in invocations_of(http, name)}
    assert len(batches) >= 4, "the six inputs went in batches of at most two"


def test_the_async_map_and_a_spawned_batch(gateway: RunningServer) -> None:
    with gateway.client() as http:
        name = deploy(http, DOUBLE)

    async def scenario() -> tuple[list[object], list[object], str]:
        async with AsyncClient(gateway.url, gateway.token) as client:
            mapped = await client.map(name, [{"n": n} for n in range(5)])
            batch = await client.spawn_map(name, [{"n": 7}, {"n": 8}])
            results = await batch.results()
            status = await batch.status()
            return mapped, results, f"{status.id} {status.done} {status.counts['succeeded']}"

    mapped, spawned, status = asyncio.run(scenario())
    assert mapped == [{"doubled": 2 * n} for n in range(5)]
    assert spawned == [{"doubled": 14}, {"doubled": 16}]
    assert status.endswith(" True 2")
    with Client(gateway.url, gateway.token) as client:
        batch = client.spawn_map(name, [{"n": 4}])
        assert batch.results() == [{"doubled": 8}]
        assert batch.status().counts["succeeded"] == 1


def test_a_big_batch_does_not_hold_back_another_functions_invocation(gateway: RunningServer) -> None:
    """Two GPU slots, 300 invocations of one function queued in a batch, then one of another
    function of the same priority: it takes the next free slot, not the 301st."""
    with gateway.client(timeout=60) as client:
        slow = deploy(client, "import time; time.sleep(2)")
        quick = deploy(client)
        batch = client.post(batch_url(slow), json={"inputs": [None] * 300}).json()
        try:
            single = client.post(f"/v1/functions/{quick}/invocations?wait=30").json()
            assert single["state"] == "succeeded", single
            started = {
                i["id"]
                for i in client.get(f"/v1/batches/{batch['batch_id']}", params={"limit": 500}).json()["items"]
                if i["timeline"]["started"] is not None
                and i["timeline"]["started"] < single["timeline"]["started"]
            }
            # Two slots: the batch's first two, then the single one at the next free slot (at
            # most one more of the batch's may start beside it).
            assert len(started) <= 3, f"{len(started)} of the batch started first"
        finally:
            client.post(f"/v1/batches/{batch['batch_id']}:cancel")


def test_the_queue_position_counts_the_turns(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        big, other = deploy(client), deploy(client)
        batch = client.post(batch_url(big), json={"inputs": [None] * 300}).json()
        try:
            single = client.post(f"/v1/functions/{other}/invocations").json()
            position = client.get(f"/v1/invocations/{single['id']}").json()["queue_position"]
            last = client.get(f"/v1/invocations/{batch['invocation_ids'][-1]}").json()["queue_position"]
        finally:
            client.post(f"/v1/batches/{batch['batch_id']}:cancel")
    # Behind whatever else the paused gateway holds queued for the same GPU type.
    assert last - position >= 297, (position, last)


def test_each_job_gets_its_input_byte_for_byte(gateway: RunningServer) -> None:
    """An input is cut from the batch as sent: a number no double holds, spacing and all."""
    echo = (
        "import json, os; text = open(os.environ['EOPS_PAYLOAD_PATH']).read(); "
        "open(os.environ['EOPS_RESULT_PATH'], 'w').write(json.dumps(text))"
    )
    body = b'{"inputs": [18446744073709551616, {"a" : [1.10, "x,]"]}, null]}'
    with gateway.client(timeout=60) as client:
        name = deploy(client, echo)
        accepted = client.post(batch_url(name), content=body, headers={"Content-Type": "application/json"})
        assert accepted.status_code == 202, accepted.text
        ids = accepted.json()["invocation_ids"]
        assert wait_done(client, accepted.json()["batch_id"])["done"]
        sent = [client.get(f"/v1/invocations/{i}").json()["result"] for i in ids]
    assert sent == ["18446744073709551616", '{"a" : [1.10, "x,]"]}', "null"]
