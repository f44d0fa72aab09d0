"""Per-invocation pod annotations on the invoke route: `?annotation=KEY=VALUE`, `eops.dev/` keys
only, stored with the invocation, shown when it is read, kept on an idempotent replay, and
each bad form refused with 422 naming the parameter and the fix."""

from __future__ import annotations

import uuid

import httpx
import pytest

from elasticityops.domain import invocation_annotations as hints
from helpers.server import RunningServer


def deploy(client: httpx.Client, **extra: object) -> str:
    name = "ann-" + uuid.uuid4().hex[:10]
    body = {"command": ["python", "-c", "pass"], **extra}
    assert client.put(f"/v1/functions/{name}", json=body).status_code == 201
    return name


def invoke(
    client: httpx.Client, name: str, *pairs: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    params: list[tuple[str, str | int | float | bool | None]] = [("annotation", pair) for pair in pairs]
    return client.post(f"/v1/functions/{name}/invocations", params=params, json={}, headers=headers)


def test_annotations_are_stored_and_shown(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client)
        answer = invoke(client, name, "eops.dev/run-seconds=12", "eops.dev/exit-code=3", "eops.dev/tag=a=b")
        assert answer.status_code == 202, answer.text
        expected = {"eops.dev/run-seconds": "12", "eops.dev/exit-code": "3", "eops.dev/tag": "a=b"}
        assert answer.json()["annotations"] == expected
        got = client.get(f"/v1/invocations/{answer.json()['id']}").json()
        assert got["annotations"] == expected, "the value is everything after the first '='"
        listed = client.get("/v1/invocations", params={"function": name}).json()["items"]
        assert [item["annotations"] for item in listed] == [expected]
        plain = invoke(client, name).json()
        assert plain["annotations"] == {}


def test_a_replay_returns_the_first_invocation_with_its_annotations(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        name = deploy(client)
        key = {"Idempotency-Key": uuid.uuid4().hex}
        first = invoke(client, name, "eops.dev/run-seconds=2", headers=key)
        again = invoke(client, name, "eops.dev/run-seconds=12", headers=key)
        bare = invoke(client, name, headers=key)
        assert first.status_code == again.status_code == bare.status_code == 202
        assert again.headers["idempotent-replayed"] == "true"
        assert {r.json()["id"] for r in (first, again, bare)} == {first.json()["id"]}
        assert [r.json()["annotations"] for r in (again, bare)] == [{"eops.dev/run-seconds": "2"}] * 2


_LONG_NAME = "n" * 63
_BAD = [
    pytest.param(["eops.dev/run-seconds"], "'='", id="no-equals"),
    pytest.param(["example.com/x=1"], "function's annotations field", id="other-prefix"),
    pytest.param(["run-seconds=1"], f"under {hints.PREFIX}", id="no-prefix"),
    pytest.param(["eops.dev/-x=1"], "letters, digits", id="bad-key"),
    pytest.param([f"eops.dev/{'x' * 64}=1"], "up to 63", id="key-too-long"),
    pytest.param(["eops.dev/x=" + "v" * (hints.MAX_VALUE_CHARS + 1)], "at most", id="value-too-long"),
    pytest.param(["eops.dev/x=a\x01b"], "remove it", id="control-character"),
    pytest.param(["eops.dev/run-seconds=12s"], "decimal number", id="run-seconds-with-unit"),
    pytest.param(["eops.dev/run-seconds=-1"], "decimal number", id="negative-run-seconds"),
    pytest.param(["eops.dev/exit-code=256"], "0 to 255", id="exit-code-too-large"),
    pytest.param(["eops.dev/x=1", "eops.dev/x=2"], "once", id="key-twice"),
    pytest.param([f"eops.dev/k{i}=1" for i in range(hints.MAX_COUNT + 1)], "at most", id="too-many"),
    pytest.param(
        [f"eops.dev/{_LONG_NAME[:-2]}{i:02d}={'v' * hints.MAX_VALUE_CHARS}" for i in range(hints.MAX_COUNT)],
        "bytes in all",
        id="too-large-in-all",
    ),
]


@pytest.mark.parametrize(("pairs", "fix_words"), _BAD)
def test_bad_annotations_are_refused_naming_the_parameter(
    paused_gateway: RunningServer, pairs: list[str], fix_words: str
) -> None:
    with paused_gateway.client() as client:
        name = deploy(client)
        answer = invoke(client, name, *pairs)
        assert answer.status_code == 422, answer.text
        problems = answer.json()["error"]["problems"]
        assert {p["field"] for p in problems} == {"annotation"}
        assert any(fix_words in p["fix"] + p["problem"] for p in problems), problems
        assert all(p["fix"] for p in problems)
        assert client.get("/v1/invocations", params={"function": name}).json()["items"] == []


def test_the_largest_allowed_set_is_accepted(paused_gateway: RunningServer) -> None:
    # At the bounds, not over them: 16 keys whose values fill the total to the byte.
    per_pair = hints.MAX_TOTAL_BYTES // hints.MAX_COUNT
    pairs = [
        f"eops.dev/k{i:02d}={'v' * (per_pair - len(f'eops.dev/k{i:02d}'))}" for i in range(hints.MAX_COUNT)
    ]
    with paused_gateway.client() as client:
        answer = invoke(client, deploy(client), *pairs)
    assert answer.status_code == 202, answer.text
    assert len(answer.json()["annotations"]) == hints.MAX_COUNT


def test_the_openapi_entry_documents_the_parameter(paused_gateway: RunningServer) -> None:
    with paused_gateway.client() as client:
        spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/v1/functions/{name}/invocations"]["post"]
    (param,) = [p for p in operation["parameters"] if p["name"] == "annotation"]
    assert param["in"] == "query"
    assert param["schema"]["type"] == "array"
    assert param["schema"]["maxItems"] == hints.MAX_COUNT
    assert param["explode"] is True


def test_the_local_backend_accepts_and_ignores_them(gateway: RunningServer) -> None:
    with gateway.client(timeout=120) as client:
        name = deploy(client)
        answer = client.post(
            f"/v1/functions/{name}/invocations",
            params=[("wait", "60"), ("annotation", "eops.dev/run-seconds=3600")],
            json={},
        )
    assert answer.status_code == 200, answer.text
    assert answer.json()["state"] == "succeeded", "a process runs as long as it runs, whatever the hint"
    assert answer.json()["annotations"] == {"eops.dev/run-seconds": "3600"}
