"""A function's `example` input (what the console's Invoke form starts from) over HTTP against
a real gateway: stored and read back as written, bounded in size (422 naming the field), and a
spec without one stored as before (no new version for an unchanged spec)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from elasticityops.domain.functions import MAX_EXAMPLE_BYTES, FunctionSpec, spec_to_json
from helpers.server import RunningServer, running_server

SPEC = {"name": "greet", "command": ["python", "-c", "pass"], "timeout_seconds": 60}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(tmp_path_factory.mktemp("example-input"), "--gpus", "1") as gw:
        yield gw


def test_an_example_input_is_stored_and_read_back(gateway: RunningServer) -> None:
    example = {"name": "Ada", "times": [1, 2.5], "loud": True, "note": None}
    with gateway.client() as http:
        put = http.put("/v1/functions/greet", json={**SPEC, "example": example})
        assert put.status_code in (200, 201), put.text
        assert http.get("/v1/functions/greet").json()["spec"]["example"] == example
        again = http.put("/v1/functions/greet", json={**SPEC, "example": example})
        assert again.json()["changed"] is False


def test_an_example_input_over_the_limit_is_refused_naming_the_field(gateway: RunningServer) -> None:
    with gateway.client() as http:
        answer = http.put("/v1/functions/greet", json={**SPEC, "example": "x" * MAX_EXAMPLE_BYTES})
    assert answer.status_code == 422, answer.text
    problem = answer.json()["error"]["problems"][0]
    assert problem["field"] == "example"
    assert "within" in problem["problem"] + problem.get("fix", "")


def test_a_spec_without_an_example_is_stored_as_before() -> None:
    assert "example" not in spec_to_json(FunctionSpec.model_validate(SPEC))
    assert '"example"' in spec_to_json(FunctionSpec.model_validate({**SPEC, "example": [1]}))
