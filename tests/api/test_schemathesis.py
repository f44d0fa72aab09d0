"""Property-based requests generated from /openapi.json against a live gateway: none may be
answered with a 5xx."""

from __future__ import annotations

from typing import Any

import hypothesis
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok

from helpers.server import RunningServer


def test_no_request_gets_a_server_error(fuzzed_gateway: RunningServer) -> None:
    # Driven by hand rather than by schemathesis.pytest.from_fixture, which pytest 9 breaks.
    schema = schemathesis.openapi.from_url(f"{fuzzed_gateway.url}/openapi.json")
    headers = {"Authorization": f"Bearer {fuzzed_gateway.token}"}
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operation = result.ok()
        operations += 1
        if operation.path == "/v1/events":
            continue  # a stream that never ends; its parameters: tests/api/test_console_http.py

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=30,
            deadline=None,
            suppress_health_check=list(hypothesis.HealthCheck),
            derandomize=True,
            database=None,
        )
        def check(case: schemathesis.Case[Any]) -> None:
            case.call_and_validate(headers=headers, checks=[not_a_server_error], timeout=30)

        try:
            check()
        except Exception as exc:
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    assert operations >= 12, "the schema lists every route"
    assert not failures, "\n\n".join(failures)
