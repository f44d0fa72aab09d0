"""Request building, answer reading and the plans of the Python client: pure, no network."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from elasticityops.client import ApiError, ConnectionFailed, InvalidSpec, Operations, Requests, spec_from
from elasticityops.client.calls import (
    RetryPolicy,
    WaitPolicy,
    error_from,
    hold_for,
    http_request,
    next_page,
    pause_after,
)
from elasticityops.client.errors import InvalidArgument
from elasticityops.client.plans import Pause, Run
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.invocations import State
from elasticityops.wire import ErrorBody, ErrorOut, InvocationList, InvocationOut, ProblemOut, TimelineOut

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


def test_invoke_annotations_are_a_repeated_query_parameter() -> None:
    call = R.invoke("hello", {}, wait=5, annotations={"eops.dev/run-seconds": "12", "eops.dev/tag": "a=b"})
    assert call.params == {"wait": "5", "annotation": ["eops.dev/run-seconds=12", "eops.dev/tag=a=b"]}
    with httpx.Client(base_url="http://gw") as http:
        request = http_request(http, call)
    assert request.url.params.get_list("annotation") == ["eops.dev/run-seconds=12", "eops.dev/tag=a=b"]
    assert R.invoke("hello", {}, annotations={}).params == {}, "none: no parameter at all"


@pytest.mark.parametrize(
    ("annotations", "words"),
    [
        pytest.param({"example.com/x": "1"}, "not under eops.dev/", id="other-prefix"),
        pytest.param({"eops.dev/run-seconds": "soon"}, "not a number of seconds", id="bad-run-seconds"),
        pytest.param({f"eops.dev/k{i}": "1" for i in range(17)}, "17 annotations", id="too-many"),
    ],
)
def test_invalid_annotations_are_refused_before_sending(annotations: dict[str, str], words: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        R.invoke("hello", {}, annotations=annotations)
    assert {p.field for p in caught.value.problems} == {"annotations"}
    assert any(words in p.problem for p in caught.value.problems)


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


def test_logs_of_an_earlier_attempt_name_it() -> None:
    assert R.logs("inv-1", attempt=0).params == {"attempt": "0"}
    assert R.logs("inv-1", follow=True, attempt=2).params == {"follow": "true", "attempt": "2"}


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
        pytest.param(
            502,
            b"<html>Bad Gateway</html>",
            "server_error",
            "what answered is not an ElasticityOps gateway (HTTP 502 with an HTML page: another server, "
            "or a proxy in front); check EOPS_URL: it should point at `eops serve`",
            id="html",
        ),
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
        call.answer(200, b'{"unexpected": 1}')
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


def test_each_call_reads_its_own_answer() -> None:
    assert R.delete_function("hello").answer(204, b"") is None
    assert R.health().answer(200, b'{"status": "ready"}') == {"status": "ready"}
    assert R.health().answer(200, b"ok") == {"status": "ok"}
    assert R.logs("inv-1").answer(200, b"line 1\n") == "line 1\n"
    with pytest.raises(ApiError) as info:
        R.get_function("hello").answer(404, b'{"error": {"code": "not_found", "message": "no hello"}}')
    assert (info.value.status, info.value.code) == (404, "not_found")


def _inv(state: State) -> bytes:
    inv = InvocationOut(
        id="inv-1",
        function="hello",
        state=state,
        priority="normal",
        timeline=TimelineOut(accepted=datetime(2026, 1, 1, tzinfo=UTC)),
        durations={},
    )
    return inv.model_dump_json().encode()


def test_next_page_asks_for_the_cursor_and_stops_at_the_end() -> None:
    first = R.list_invocations(function="hello", limit=2)
    full = InvocationList.model_validate_json(b'{"items": [], "next_cursor": "inv-2"}')
    assert next_page(first, full) is None  # an empty page ends it, whatever its cursor
    page = InvocationList(items=[InvocationOut.model_validate_json(_inv(State.queued))], next_cursor="inv-1")
    following = next_page(first, page)
    assert following is not None
    assert following.params == {"function": "hello", "limit": "2", "cursor": "inv-1"}
    assert next_page(following, page.model_copy(update={"next_cursor": None})) is None


def test_a_plan_is_pure_data_in_and_out_so_its_sender_does_every_step() -> None:
    """The wait plan driven by hand: no transport, no clock but `now`."""
    now = [0.0]
    ops = Operations(
        "http://gw.test:9",
        "t",
        retry=RetryPolicy(attempts=2, first_delay_s=0.5),
        wait_policy=WaitPolicy(long_poll_s=5, pause_s=0.25),
        now=lambda: now[0],
    )
    run = Run(ops.wait("inv-1", timeout=10))
    poll = run.next
    assert poll == R.get_invocation("inv-1", wait=5)
    run.resume(httpx.ConnectError("refused"))
    assert run.next == Pause(0.5)  # the retry's delay, slept by the sender
    run.resume(None)
    # mypy keeps run.next as the Pause asserted above, though resume() moved it on
    assert run.next == poll  # type: ignore[comparison-overlap]
    run.resume(httpx.Response(200, content=_inv(State.running)))  # answered at once, not held
    assert run.next == Pause(0.25)
    now[0] = 0.25
    run.resume(None)
    assert run.next == R.get_invocation("inv-1", wait=5)  # type: ignore[comparison-overlap]  # as above
    run.resume(httpx.Response(200, content=_inv(State.succeeded)))
    assert run.next is None
    assert run.result.state is State.succeeded


def test_a_plan_gives_up_with_connection_failed() -> None:
    ops = Operations(
        "http://gw.test:9", "t", retry=RetryPolicy(attempts=1), wait_policy=None, now=lambda: 0.0
    )
    run = Run(ops.get_function("hello"))
    with pytest.raises(ConnectionFailed, match=r"gw\.test:9 \(connection refused\)"):
        run.resume(httpx.ConnectError("Connection refused"))
