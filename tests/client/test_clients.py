"""The sync and async clients over httpx.MockTransport: settings, retries, errors, waiting,
paging and log streaming. The real server is exercised in tests/cli/."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
import pytest

from elasticityops.client import (
    ApiError,
    AsyncClient,
    Client,
    ConnectionFailed,
    InvalidSpec,
    RetryPolicy,
    WaitPolicy,
)
from elasticityops.domain.invocations import State
from elasticityops.wire import InvocationList, InvocationOut, TimelineOut

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FAST = RetryPolicy(attempts=3, first_delay_s=0.01, max_delay_s=0.05)

Handler = Callable[[httpx.Request], httpx.Response]


def invocation(inv_id: str = "inv-1", state: State = State.queued) -> InvocationOut:
    return InvocationOut(
        id=inv_id,
        function="hello",
        state=state,
        priority="normal",
        timeline=TimelineOut(accepted=T0),
        durations={},
    )


def answer(model: InvocationOut | InvocationList, status: int = 200) -> httpx.Response:
    return httpx.Response(
        status, content=model.model_dump_json(), headers={"Content-Type": "application/json"}
    )


class Recorder:
    """A MockTransport handler that answers from a script and keeps every request."""

    def __init__(self, *responses: httpx.Response | Exception) -> None:
        self.script = list(responses)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(step, Exception):
            raise step
        return step


def client(handler: Handler, sleeps: list[float] | None = None, **kw: object) -> Client:
    record = sleeps if sleeps is not None else []
    return Client(
        "http://gw.test:9",
        "tok-1",
        retry=FAST,
        transport=httpx.MockTransport(handler),
        sleep=record.append,
        **kw,  # type: ignore[arg-type]
    )


def test_url_and_token_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOPS_URL", "http://env.test:1234/")
    monkeypatch.setenv("EOPS_TOKEN", "tok-env")
    rec = Recorder(answer(invocation()))
    with Client(transport=httpx.MockTransport(rec)) as c:
        assert c.url == "http://env.test:1234"
        c.get_invocation("inv-1")
    assert str(rec.requests[0].url) == "http://env.test:1234/v1/invocations/inv-1"
    assert rec.requests[0].headers["Authorization"] == "Bearer tok-env"


def test_defaults_without_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EOPS_URL", raising=False)
    monkeypatch.delenv("EOPS_TOKEN", raising=False)
    rec = Recorder(answer(invocation()))
    with Client(transport=httpx.MockTransport(rec)) as c:
        c.get_invocation("inv-1")
    assert str(rec.requests[0].url).startswith("http://127.0.0.1:8080/")
    assert "Authorization" not in rec.requests[0].headers


def test_invoke_sends_payload_key_and_wait() -> None:
    rec = Recorder(answer(invocation(state=State.succeeded)))
    with client(rec) as c:
        inv = c.invoke("hello", {"n": 1}, wait=5, idempotency_key="k-1")
    req = rec.requests[0]
    assert req.method == "POST"
    assert req.url.path == "/v1/functions/hello/invocations"
    assert req.url.params["wait"] == "5"
    assert req.headers["Idempotency-Key"] == "k-1"
    assert json.loads(req.content) == {"n": 1}
    assert inv.state is State.succeeded


def test_get_is_retried_on_503_honouring_retry_after() -> None:
    busy = httpx.Response(
        503, headers={"Retry-After": "0.03"}, json={"error": {"code": "x", "message": "busy"}}
    )
    rec = Recorder(busy, answer(invocation()))
    sleeps: list[float] = []
    with client(rec, sleeps) as c:
        assert c.get_invocation("inv-1").id == "inv-1"
    assert len(rec.requests) == 2
    assert sleeps == [0.03]


def test_get_gives_up_after_the_attempts_with_the_servers_error() -> None:
    busy = httpx.Response(503, json={"error": {"code": "temporarily_unavailable", "message": "store busy"}})
    rec = Recorder(busy)
    with client(rec) as c, pytest.raises(ApiError) as info:
        c.get_invocation("inv-1")
    assert len(rec.requests) == FAST.attempts
    assert info.value.status == 503
    assert info.value.message == "store busy"
    assert info.value.temporary


def test_post_without_key_is_not_retried_on_503() -> None:
    rec = Recorder(httpx.Response(503, json={"error": {"code": "busy", "message": "busy"}}))
    with client(rec) as c, pytest.raises(ApiError):
        c.invoke("hello", {})
    assert len(rec.requests) == 1


def test_post_with_key_is_retried_on_a_dropped_connection() -> None:
    rec = Recorder(httpx.ReadError("connection reset"), answer(invocation(), 202))
    with client(rec) as c:
        assert c.invoke("hello", {}, idempotency_key="k").id == "inv-1"
    assert len(rec.requests) == 2


def test_post_without_key_is_not_retried_once_it_may_have_arrived() -> None:
    rec = Recorder(httpx.ReadError("connection reset"))
    with client(rec) as c, pytest.raises(ConnectionFailed):
        c.invoke("hello", {})
    assert len(rec.requests) == 1


def test_refused_connection_is_retried_even_for_post_then_named_clearly() -> None:
    rec = Recorder(httpx.ConnectError("[Errno 111] Connection refused"))
    sleeps: list[float] = []
    with client(rec, sleeps) as c, pytest.raises(ConnectionFailed) as info:
        c.invoke("hello", {})
    assert len(rec.requests) == FAST.attempts
    assert len(sleeps) == FAST.attempts - 1
    message = str(info.value)
    assert "http://gw.test:9" in message
    assert "connection refused" in message
    assert "eops serve" in message
    assert "EOPS_URL" in message


def test_api_error_carries_code_and_problems() -> None:
    body = {
        "error": {
            "code": "invalid_input",
            "message": "gpu.count: too many",
            "problems": [{"field": "gpu.count", "problem": "9 > 8", "fix": "use a smaller number"}],
        }
    }
    rec = Recorder(httpx.Response(422, json=body))
    with client(rec) as c, pytest.raises(ApiError) as info:
        c.deploy_function({"name": "hello", "command": ["true"]})
    assert info.value.code == "invalid_input"
    assert info.value.problems[0].field == "gpu.count"
    assert str(info.value) == "422 invalid_input: gpu.count: too many"


def test_an_invalid_spec_sends_nothing() -> None:
    rec = Recorder(httpx.Response(500))
    with client(rec) as c, pytest.raises(InvalidSpec) as info:
        c.deploy_function({"name": "hello", "command": ["true"], "gpu": {"count": 0}})
    assert [p.field for p in info.value.problems] == ["gpu.count"]
    assert rec.requests == []


def test_delete_accepts_204() -> None:
    rec = Recorder(httpx.Response(204))
    with client(rec) as c:
        c.delete_function("hello", force=True)
    assert rec.requests[0].url.params["force"] == "true"


class HoldingGateway:
    """Answers GET /v1/invocations/inv-1?wait=W like the server: it holds the request until the
    invocation ends or W seconds pass, on a fake clock. `life`: (at second, state) steps."""

    def __init__(self, life: list[tuple[float, State]]) -> None:
        self.life = life
        self.now = 0.0
        self.holds: list[int] = []

    def state_at(self, t: float) -> State:
        return [state for at, state in self.life if at <= t][-1]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        hold = int(request.url.params.get("wait", "0"))
        self.holds.append(hold)
        ends = [at for at, state in self.life if state.terminal and self.now < at <= self.now + hold]
        self.now = ends[0] if ends else self.now + hold
        return answer(invocation(state=self.state_at(self.now)))

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def holding_client(gw: HoldingGateway, long_poll_s: int) -> Client:
    return Client(
        "http://gw.test:9",
        "t",
        transport=httpx.MockTransport(gw),
        sleep=gw.sleep,
        monotonic=lambda: gw.now,
        wait_policy=WaitPolicy(long_poll_s=long_poll_s, pause_s=0.25),
    )


def test_wait_long_polls_until_the_end_and_reports_each_answer() -> None:
    gw = HoldingGateway(
        [(0, State.queued), (1.5, State.pending), (2.5, State.running), (3.2, State.succeeded)]
    )
    seen: list[State] = []
    with holding_client(gw, long_poll_s=1) as c:
        final = c.wait("inv-1", on_update=lambda inv: seen.append(inv.state))
    assert final.state is State.succeeded
    assert seen == [State.queued, State.pending, State.running, State.succeeded]
    assert gw.holds == [1, 1, 1, 1]
    assert gw.now == pytest.approx(3.2)  # the end is seen when it happens, not at the next poll


def test_wait_returns_the_live_state_when_the_timeout_runs_out() -> None:
    gw = HoldingGateway([(0, State.running), (100, State.succeeded)])
    with holding_client(gw, long_poll_s=20) as c:
        inv = c.wait("inv-1", timeout=2.5)
    assert inv.state is State.running
    # Whole seconds held within the deadline, then looks a pause (0.25 s) apart for the last half second.
    assert gw.holds == [2, 0, 0, 0]
    assert gw.now == pytest.approx(2.5)


def test_wait_pauses_when_a_gateway_ignores_the_hold() -> None:
    sleeps: list[float] = []
    rec = Recorder(answer(invocation(state=State.running)), answer(invocation(state=State.failed)))
    with client(rec, sleeps, wait_policy=WaitPolicy(long_poll_s=5, pause_s=0.25)) as c:
        assert c.wait("inv-1").state is State.failed
    assert sleeps == [0.25]


def test_invoke_with_a_long_wait_holds_the_post_then_long_polls() -> None:
    calls: list[tuple[str, str | None]] = []
    gw = HoldingGateway([(0, State.queued), (30, State.succeeded)])

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append((request.method, request.url.params.get("wait")))
        if request.method == "POST":
            gw.now += 10
            return answer(invocation(state=State.running), 202)
        return gw(request)

    with Client(
        "http://gw.test:9",
        "t",
        transport=httpx.MockTransport(handler),
        sleep=gw.sleep,
        monotonic=lambda: gw.now,
        wait_policy=WaitPolicy(long_poll_s=10),
    ) as c:
        inv = c.invoke("hello", {"x": 1}, wait=3600)
    assert inv.state is State.succeeded
    assert calls == [("POST", "10"), ("GET", "10"), ("GET", "10")]


def test_iter_invocations_follows_cursors_to_the_end() -> None:
    pages = [
        InvocationList(items=[invocation("inv-3"), invocation("inv-2")], next_cursor="inv-2"),
        InvocationList(items=[invocation("inv-1")], next_cursor=None),
    ]
    rec = Recorder(*(answer(p) for p in pages))
    with client(rec) as c:
        ids = [inv.id for inv in c.iter_invocations(function="hello", page_size=2)]
    assert ids == ["inv-3", "inv-2", "inv-1"]
    assert "cursor" not in rec.requests[0].url.params
    assert rec.requests[1].url.params["cursor"] == "inv-2"
    assert rec.requests[1].url.params["limit"] == "2"
    assert rec.requests[1].url.params["function"] == "hello"


def test_logs_stream_text_chunks() -> None:
    rec = Recorder(httpx.Response(200, content=b"line 1\nline 2\n", headers={"Content-Type": "text/plain"}))
    with client(rec) as c:
        text = "".join(c.logs("inv-1", follow=True))
    assert text == "line 1\nline 2\n"
    assert rec.requests[0].url.params["follow"] == "true"


def test_logs_of_an_unknown_invocation_raise_api_error() -> None:
    body = {"error": {"code": "not_found", "message": "no invocation inv-9"}}
    rec = Recorder(httpx.Response(404, json=body))
    with client(rec) as c, pytest.raises(ApiError, match="no invocation inv-9"):
        list(c.logs("inv-9"))


def test_health_reads_readyz() -> None:
    rec = Recorder(httpx.Response(200, json={"status": "ready"}))
    with client(rec) as c:
        assert c.health() == {"status": "ready"}
    assert rec.requests[0].url.path == "/readyz"


def test_async_client_shares_calls_errors_and_paging() -> None:
    pages = [
        InvocationList(items=[invocation("inv-2")], next_cursor="inv-2"),
        InvocationList(items=[invocation("inv-1", State.succeeded)], next_cursor=None),
    ]
    rec = Recorder(*(answer(p) for p in pages))

    async def scenario() -> list[str]:
        async with AsyncClient("http://gw.test:9", "tok", transport=httpx.MockTransport(rec)) as c:
            return [inv.id async for inv in c.iter_invocations()]

    assert asyncio.run(scenario()) == ["inv-2", "inv-1"]
    assert rec.requests[0].headers["Authorization"] == "Bearer tok"


def test_async_client_waits_and_maps_errors() -> None:
    rec = Recorder(answer(invocation(state=State.running)), answer(invocation(state=State.failed)))
    refused = Recorder(httpx.ConnectError("Connection refused"))

    async def scenario() -> InvocationOut:
        fast = WaitPolicy(long_poll_s=1, pause_s=0.001)
        async with AsyncClient(
            "http://gw.test:9", "t", transport=httpx.MockTransport(rec), wait_policy=fast
        ) as c:
            return await c.wait("inv-1")

    async def unreachable() -> None:
        async with AsyncClient(
            "http://gw.test:9", "t", transport=httpx.MockTransport(refused), retry=FAST
        ) as c:
            await c.get_function("hello")

    assert asyncio.run(scenario()).state is State.failed
    with pytest.raises(ConnectionFailed, match=r"gw\.test"):
        asyncio.run(unreachable())
    assert len(refused.requests) == FAST.attempts


def test_a_gateway_with_a_lower_wait_limit_is_polled_instead() -> None:
    """A gateway run with EOPS_MAX_WAIT_SECONDS=2 answers 422 for ?wait=20: the client drops
    the hold (safe: nothing was created) and polls."""
    seen: list[tuple[str, str | None]] = []
    states = iter([State.running, State.succeeded])
    refusal = {
        "error": {
            "code": "invalid_input",
            "message": "wait: Input should be less than or equal to 2",
            "problems": [{"field": "wait", "problem": "Input should be less than or equal to 2", "fix": ""}],
        }
    }

    def handler(request: httpx.Request) -> httpx.Response:
        wait = request.url.params.get("wait")
        seen.append((request.method, wait))
        if wait is not None and int(wait) > 2:
            return httpx.Response(422, json=refusal)
        if request.method == "POST":
            return answer(invocation(state=State.queued), 202)
        return answer(invocation(state=next(states)))

    sleeps: list[float] = []
    with client(handler, sleeps, wait_policy=WaitPolicy(long_poll_s=20, pause_s=0.1)) as c:
        assert c.invoke("hello", {}, wait=60).state is State.succeeded
    assert seen == [("POST", "20"), ("POST", None), ("GET", None), ("GET", None)]
    assert sleeps == [0.1]
