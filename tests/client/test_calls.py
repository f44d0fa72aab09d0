"""Request building and answer reading of the Python client: pure, no network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elasticityops.client import InvalidSpec, Requests, spec_from
from elasticityops.client.calls import RetryPolicy, WaitPolicy, error_from, hold_for, parse, pause_after
from elasticityops.domain.functions import FunctionSpec
from elasticityops.wire import ErrorBody, ErrorOut, FunctionOut, ProblemOut

R = Requests()
SPEC = FunctionSpec(name="hello", command=["python", "-c", "print(1)"])


def test_deploy_is_a_put_of_the_full_spec_and_may_be_repeated() -> None:
    call = R.deploy_function(SPEC)
    assert (call.method, call.path) == ("PUT", "/v1/functions/hello")
    assert call.content is not None
    assert json.loads(call.content) == SPEC.model_dump(mode="json")
    assert call.headers["Content-Type"] == "application/json"
    assert call.repeatable


@pytest.mark.parametrize(
    ("payload", "sent"),
    [
        pytest.param(None, b"", id="none-sends-empty-body"),
        pytest.param({"name": "Ada"}, b'{"name":"Ada"}', id="mapping-as-json"),
        pytest.param([1, 2], b"[1,2]", id="list-as-json"),
        pytest.param(b'{ "raw" : true }', b'{ "raw" : true }', id="bytes-verbatim"),
    ],
)
def test_invoke_body_is_the_payload(payload: object, sent: bytes) -> None:
    call = R.invoke("hello", payload)
    assert (call.method, call.path) == ("POST", "/v1/functions/hello/invocations")
    assert call.content == sent
    assert call.params == {}


def test_invoke_without_idempotency_key_is_not_repeated() -> None:
    call = R.invoke("hello", {})
    assert "Idempotency-Key" not in call.headers
    assert not call.repeatable


def test_invoke_with_idempotency_key_may_be_repeated() -> None:
    call = R.invoke("hello", {}, idempotency_key="order-17")
    assert call.headers["Idempotency-Key"] == "order-17"
    assert call.repeatable


def test_invoke_wait_is_a_query_parameter_and_stretches_the_read_timeout() -> None:
    call = R.invoke("hello", {}, wait=30)
    plain = R.invoke("hello", {})
    assert call.params == {"wait": "30"}
    assert call.read_timeout_s is not None
    assert plain.read_timeout_s is not None
    assert call.read_timeout_s == plain.read_timeout_s + 30
    assert R.invoke("hello", {}, wait=0).params == {}


def test_get_invocation_may_be_a_long_poll() -> None:
    assert R.get_invocation("inv-1").params == {}
    assert R.get_invocation("inv-1", wait=5).params == {"wait": "5"}


@pytest.mark.parametrize(
    ("now", "deadline", "hold"),
    [
        pytest.param(0.0, None, 20, id="no-deadline-full-hold"),
        pytest.param(0.0, 100.0, 20, id="far-deadline-full-hold"),
        pytest.param(0.0, 7.9, 7, id="near-deadline-rounded-down"),
        pytest.param(0.0, 0.4, 0, id="under-a-second-no-hold"),
        pytest.param(5.0, 1.0, 0, id="past-deadline-no-hold"),
    ],
)
def test_hold_never_overshoots_the_deadline(now: float, deadline: float | None, hold: int) -> None:
    assert hold_for(WaitPolicy(long_poll_s=20), now, deadline) == hold


@pytest.mark.parametrize(
    ("hold", "took", "deadline", "pause"),
    [
        pytest.param(5, 5.0, None, 0.0, id="held-no-pause"),
        pytest.param(5, 0.01, None, 0.5, id="answered-early-pause"),
        pytest.param(0, 0.01, None, 0.5, id="no-hold-pause"),
        pytest.param(0, 0.01, 10.2, 0.2, id="pause-within-deadline"),
    ],
)
def test_pause_only_when_the_server_answered_early(
    hold: int, took: float, deadline: float | None, pause: float
) -> None:
    assert pause_after(WaitPolicy(pause_s=0.5), hold, took, 10.0, deadline) == pytest.approx(pause)


def test_list_invocations_sends_only_given_filters() -> None:
    assert R.list_invocations().params == {}
    call = R.list_invocations(function="hello", state="failed", limit=5, cursor="inv-abc")
    assert call.params == {"function": "hello", "state": "failed", "limit": "5", "cursor": "inv-abc"}
    assert (call.method, call.path) == ("GET", "/v1/invocations")


def test_followed_logs_have_no_read_timeout_and_are_never_repeated() -> None:
    followed = R.logs("inv-1", follow=True)
    assert followed.params == {"follow": "true"}
    assert followed.read_timeout_s is None
    assert not followed.repeatable
    assert R.logs("inv-1").params == {}


def test_delete_force_is_a_query_parameter_and_not_repeated() -> None:
    assert R.delete_function("hello").params == {}
    call = R.delete_function("hello", force=True)
    assert call.params == {"force": "true"}
    assert call.method == "DELETE"
    assert not call.repeatable


def test_cancel_is_a_post_that_is_not_repeated() -> None:
    call = R.cancel("inv-1")
    assert (call.method, call.path, call.repeatable) == ("POST", "/v1/invocations/inv-1/cancel", False)


def test_path_segments_are_quoted_so_a_bad_name_cannot_change_the_route() -> None:
    assert R.get_function("a/../b").path == "/v1/functions/a%2F..%2Fb"
    assert R.get_invocation("x?y").path == "/v1/invocations/x%3Fy"


def test_error_out_body_becomes_api_error_with_problems() -> None:
    body = ErrorOut(
        error=ErrorBody(
            code="invalid_input",
            message="gpu.count: too many",
            problems=[ProblemOut(field="gpu.count", problem="9 is more than 8", fix="use a smaller number")],
        )
    ).model_dump_json()
    exc = error_from(422, body.encode())
    assert (exc.status, exc.code, exc.message) == (422, "invalid_input", "gpu.count: too many")
    assert exc.problems == [
        ProblemOut(field="gpu.count", problem="9 is more than 8", fix="use a smaller number")
    ]
    assert not exc.temporary


def test_fastapi_detail_list_becomes_per_field_problems() -> None:
    body = json.dumps({"detail": [{"loc": ["query", "limit"], "msg": "must be >= 1", "type": "x"}]})
    exc = error_from(422, body.encode())
    assert exc.code == "invalid_input"
    assert exc.problems == [ProblemOut(field="query.limit", problem="must be >= 1")]


@pytest.mark.parametrize(
    ("status", "body", "code", "message"),
    [
        pytest.param(502, b"<html>Bad Gateway</html>", "server_error", "<html>Bad Gateway</html>", id="html"),
        pytest.param(503, b"", "temporarily_unavailable", "HTTP 503", id="empty"),
        pytest.param(404, b'{"detail": "Not Found"}', "not_found", "Not Found", id="detail-string"),
    ],
)
def test_other_error_bodies_still_become_api_errors(
    status: int, body: bytes, code: str, message: str
) -> None:
    exc = error_from(status, body)
    assert (exc.status, exc.code, exc.message) == (status, code, message)


def test_an_unreadable_success_body_is_reported_not_raised_as_validation_error() -> None:
    call = R.get_function("hello")
    with pytest.raises(Exception, match="cannot read") as info:
        parse(call, 200, b'{"unexpected": 1}', FunctionOut)
    assert type(info.value).__name__ == "ApiError"


def test_retry_delays_grow_are_capped_and_follow_retry_after() -> None:
    policy = RetryPolicy(attempts=5, first_delay_s=0.2, max_delay_s=1.0)
    assert [policy.delay(n, None) for n in range(4)] == [0.2, 0.4, 0.8, 1.0]
    assert policy.delay(0, 0.5) == 0.5
    assert policy.delay(0, 30.0) == 1.0


def test_spec_from_a_bad_file_names_the_field_and_fix(tmp_path: Path) -> None:
    path = tmp_path / "fn.yaml"
    path.write_text("name: Bad_Name\ncommand: [python]\ngpu: {count: 9}\ncolour: blue\n")
    with pytest.raises(InvalidSpec) as info:
        spec_from(path)
    fields = {p.field: p for p in info.value.problems}
    assert set(fields) == {"name", "gpu.count", "colour"}
    assert "DNS-1123" in fields["name"].problem
    assert fields["colour"].problem == "unknown field"
    assert fields["colour"].fix.startswith("remove it")


def test_spec_from_invalid_yaml_says_where(tmp_path: Path) -> None:
    path = tmp_path / "fn.yaml"
    path.write_text("name: [unclosed\n")
    with pytest.raises(InvalidSpec, match="not valid YAML or JSON at line"):
        spec_from(path)


def test_spec_from_a_missing_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(InvalidSpec, match="cannot read it"):
        spec_from(tmp_path / "absent.yaml")


def test_spec_from_mapping_and_spec() -> None:
    assert spec_from({"name": "hello", "command": ["true"]}).name == "hello"
    assert spec_from(SPEC) is SPEC
