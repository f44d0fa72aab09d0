"""Every bad input gets a 4xx whose body names the field and the fix, never a 500."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from helpers.server import RunningServer

GOOD = {"command": ["python", "-c", "pass"]}


def put(client: httpx.Client, name: str, body: Any = None, **kwargs: Any) -> httpx.Response:
    return (
        client.put(f"/v1/functions/{name}", json=body, **kwargs)
        if body is not None
        else client.put(f"/v1/functions/{name}", **kwargs)
    )


def problem(response: httpx.Response) -> dict[str, str]:
    problems = response.json()["error"]["problems"]
    assert problems, response.text
    first: dict[str, str] = problems[0]
    return first


@pytest.mark.parametrize(
    ("name", "body", "status", "field", "fix_words"),
    [
        pytest.param("ok-name", {**GOOD, "colour": "red"}, 422, "colour", "remove it", id="unknown-field"),
        pytest.param("Bad_Name", GOOD, 422, "name", "lowercase", id="bad-name"),
        pytest.param("a" * 41, GOOD, 422, "name", "at most 40", id="name-too-long"),
        pytest.param("ok-name", {**GOOD, "gpu": {"count": 0}}, 422, "gpu.count", "larger", id="gpu-count-0"),
        pytest.param("ok-name", {**GOOD, "gpu": {"count": 9}}, 422, "gpu.count", "smaller", id="gpu-count-9"),
        pytest.param(
            "ok-name",
            {**GOOD, "timeout_seconds": -5},
            422,
            "timeout_seconds",
            "larger",
            id="negative-timeout",
        ),
        pytest.param("ok-name", {"image": "x"}, 422, "command", "add it", id="no-command"),
        pytest.param(
            "ok-name", {**GOOD, "gpu": {"type": []}}, 422, "gpu.type", "list 1-4", id="gpu-types-empty"
        ),
        pytest.param(
            "ok-name",
            {**GOOD, "gpu": {"type": ["nvidia-l4", "nvidia-l4"]}},
            422,
            "gpu.type",
            "listed twice",
            id="gpu-types-repeated",
        ),
        pytest.param("ok-name", {**GOOD, "priority": "urgent"}, 422, "priority", "one of", id="bad-priority"),
        pytest.param("ok-name", {**GOOD, "retries": 11}, 422, "retries", "smaller", id="retries-11"),
        pytest.param("ok-name", {**GOOD, "retries": -1}, 422, "retries", "larger", id="retries-negative"),
        pytest.param("ok-name", {**GOOD, "retries": 1.5}, 422, "retries", "whole", id="retries-fraction"),
        pytest.param(
            "ok-name",
            {**GOOD, "preemptible": "maybe"},
            422,
            "preemptible",
            "true or false",
            id="bad-preemptible",
        ),
        # issue 37: strict booleans ("yes", 1 and "off" were taken)
        *(
            pytest.param(
                "ok-name", {**GOOD, "preemptible": v}, 422, "preemptible", "true or false", id=f"pre-{v}"
            )
            for v in ("yes", 1, "off", "true")
        ),
        # issue 37: the dev cluster's run annotations are checked on a function too, as on an invocation
        pytest.param(
            "ok-name",
            {**GOOD, "annotations": {"eops.dev/run-seconds": "abc"}},
            422,
            "annotations",
            "not a number of seconds",
            id="run-seconds-abc",
        ),
        pytest.param(
            "ok-name",
            {**GOOD, "annotations": {"eops.dev/exit-code": "300"}},
            422,
            "annotations",
            "not an exit code",
            id="exit-code-300",
        ),
        pytest.param("ok-name", ["not", "a", "mapping"], 422, "(body)", "JSON object", id="not-a-mapping"),
        pytest.param(
            "ok-name", {**GOOD, "name": "other"}, 422, "name", "make them equal", id="name-mismatch"
        ),
    ],
)
def test_bad_function_specs(
    gateway: RunningServer, name: str, body: Any, status: int, field: str, fix_words: str
) -> None:
    with gateway.client() as client:
        response = put(client, name, body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == "invalid_input"
    found = problem(response)
    assert found["field"] == field
    assert fix_words in found["problem"] + " " + found["fix"]


def test_invalid_yaml_names_the_body_and_the_line(gateway: RunningServer) -> None:
    with gateway.client() as client:
        response = client.put(
            "/v1/functions/yaml-fn",
            content=b"command: [python\nenv: {",
            headers={"Content-Type": "application/yaml"},
        )
    assert response.status_code == 400
    found = problem(response)
    assert found["field"] == "(body)"
    assert "line" in found["problem"]
    assert found["fix"] == "fix the syntax"


def test_yaml_is_accepted_when_declared(gateway: RunningServer) -> None:
    with gateway.client() as client:
        response = client.put(
            "/v1/functions/yaml-ok",
            content=b"command: [python, -c, pass]\ntimeout_seconds: 30\n",
            headers={"Content-Type": "application/yaml"},
        )
    assert response.status_code in (200, 201), response.text
    assert response.json()["spec"]["timeout_seconds"] == 30


@pytest.mark.parametrize(
    "body", [b"{not json", b'{"a": }', b"\xff\xfe", b"[1, 2"], ids=["brace", "value", "bytes", "list"]
)
def test_malformed_json_names_the_body(gateway: RunningServer, body: bytes) -> None:
    with gateway.client() as client:
        assert put(client, "json-fn", GOOD).status_code in (200, 201)
        invoke = client.post("/v1/functions/json-fn/invocations", content=body)
        deploy = client.put("/v1/functions/json-fn", content=body)
    for response in (invoke, deploy):
        assert response.status_code == 400, response.text
        assert response.json()["error"]["code"] == "malformed_body"
        found = problem(response)
        assert found["field"] == "(body)"
        assert "JSON" in found["fix"]


def test_a_payload_over_the_limit_names_the_limit_and_the_setting(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        assert put(client, "big", GOOD).status_code in (200, 201)
        response = client.post("/v1/functions/big/invocations", content=b'"' + b"x" * 5000 + b'"')
        streamed = client.post(
            "/v1/functions/big/invocations", content=iter([b'"', b"x" * 3000, b"x" * 3000, b'"'])
        )
        fits = client.post("/v1/functions/big/invocations", content=b'"' + b"x" * 4000 + b'"')
    for refused in (response, streamed):
        assert refused.status_code == 413, refused.text
        message = refused.json()["error"]["message"]
        assert "4096 bytes" in message
        assert "EOPS_MAX_PAYLOAD_BYTES" in message
    assert fits.status_code == 202


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/functions/no-such-fn/invocations"),
        ("GET", "/v1/functions/no-such-fn"),
        ("DELETE", "/v1/functions/no-such-fn"),
        ("GET", "/v1/invocations/inv-00000000000000000000000000"),
        ("POST", "/v1/invocations/inv-00000000000000000000000000/cancel"),
        ("GET", "/v1/invocations/inv-00000000000000000000000000/logs"),
        ("GET", "/v1/no-such-route"),
    ],
)
def test_unknown_things_answer_404_with_where_to_look(gateway: RunningServer, method: str, path: str) -> None:
    with gateway.client() as client:
        response = client.request(method, path)
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "not_found"
    assert any(word in error["message"] for word in ("eops", "/docs")), error["message"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=501", "limit"),
        ("limit=ten", "limit"),
        ("state=sleeping", "state"),
        ("cursor=garbage", "cursor"),
    ],
)
def test_bad_list_parameters(gateway: RunningServer, query: str, field: str) -> None:
    with gateway.client() as client:
        response = client.get(f"/v1/invocations?{query}")
    assert response.status_code == 422, response.text
    found = problem(response)
    assert found["field"] == field
    assert found["fix"]


def test_a_wait_beyond_the_bound_is_refused(gateway: RunningServer) -> None:
    with gateway.client() as client:
        assert put(client, "wait-fn", GOOD).status_code in (200, 201)
        response = client.post("/v1/functions/wait-fn/invocations?wait=100000", json={})
    assert response.status_code == 422
    found = problem(response)
    assert found["field"] == "wait"
    assert found["fix"] == "use a smaller number"


def test_a_bad_idempotency_key_is_refused(gateway: RunningServer) -> None:
    with gateway.client() as client:
        assert put(client, "key-fn", GOOD).status_code in (200, 201)
        response = client.post(
            "/v1/functions/key-fn/invocations", json={}, headers={"Idempotency-Key": "k" * 300}
        )
    assert response.status_code == 422
    assert problem(response)["field"] == "header Idempotency-Key"


@pytest.mark.parametrize(
    ("content", "content_type"),
    [
        (b"name: deep-fn\ncommand: [python]\nenv: " + b"[" * 5000 + b"]" * 5000, "application/yaml"),
        (b'{"command": ["python"], "env": ' + b"[" * 5000 + b"]" * 5000 + b"}", "application/json"),
    ],
    ids=["yaml", "json"],
)
def test_a_deeply_nested_spec_is_a_400_in_yaml_as_in_json(
    gateway: RunningServer, content: bytes, content_type: str
) -> None:
    with gateway.client() as client:
        response = client.put(
            "/v1/functions/deep-fn", content=content, headers={"Content-Type": content_type}
        )
    assert response.status_code == 400, response.text
    assert "nested deeper than" in problem(response)["problem"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"command": ["python", "-c", "print(1)\x00"]}, "command.2"),
        ({**GOOD, "env": {"TOKEN": "a\x00b"}}, "env.TOKEN"),
    ],
)
def test_a_nul_in_the_command_or_env_is_refused_at_deploy(
    gateway: RunningServer, body: dict[str, Any], field: str
) -> None:
    with gateway.client() as client:
        response = put(client, "nul-fn", body)
        assert response.status_code == 422, response.text
        assert problem(response)["field"] == field
        assert client.get("/v1/functions/nul-fn").status_code == 404, "nothing was stored"


@pytest.mark.parametrize("wait", ["\uff15", "true", "1.5"])
def test_wait_is_read_by_one_parser_on_post_and_get(gateway: RunningServer, wait: str) -> None:
    with gateway.client() as client:
        assert put(client, "wait-fn", GOOD).status_code in (200, 201)
        posted = client.post(f"/v1/functions/wait-fn/invocations?wait={wait}", json={})
        inv = client.post("/v1/functions/wait-fn/invocations", json={}).json()
        got = client.get(f"/v1/invocations/{inv['id']}?wait={wait}")
    for response in (posted, got):
        assert response.status_code == 422, response.text
        assert problem(response)["field"] == "wait"
        assert problem(response)["fix"] == "use a whole number"


def test_gpu_count_true_is_not_one(gateway: RunningServer) -> None:
    with gateway.client() as client:
        response = put(client, "bool-fn", {**GOOD, "gpu": {"count": True}})
    assert response.status_code == 422, response.text
    assert problem(response)["field"] == "gpu.count"
    assert "true is not a number" in problem(response)["problem"]


def test_a_utf8_idempotency_key_is_stored_and_echoed_as_sent(gateway: RunningServer) -> None:
    with gateway.client() as client:
        assert put(client, "key-fn", GOOD).status_code in (200, 201)
        headers = [(b"Idempotency-Key", "ключ-🔑".encode())]
        first = client.post("/v1/functions/key-fn/invocations", json={}, headers=headers)
        again = client.post("/v1/functions/key-fn/invocations", json={}, headers=headers)
        latin1 = client.post(
            "/v1/functions/key-fn/invocations", json={}, headers=[(b"Idempotency-Key", b"\xff\xfe")]
        )
    assert first.status_code == 202, first.text
    assert first.json()["idempotency_key"] == "ключ-🔑"
    assert (again.json()["id"], again.headers.get("Idempotent-Replayed")) == (first.json()["id"], "true")
    assert latin1.status_code == 400, latin1.text
    assert problem(latin1)["field"] == "header Idempotency-Key"
