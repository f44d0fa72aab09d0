"""The sync and async clients over httpx.MockTransport: settings, retries, errors, waiting,
paging and log streaming, each test run on both clients (`sender`). The real server is
exercised in tests/cli/."""

from __future__ import annotations

import asyncio
import inspect
import json
import typing
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from elasticityops.client import (
    ApiError,
    AsyncBatch,
    AsyncClient,
    Batch,
    Client,
    ConnectionFailed,
    InvalidSpec,
    InvocationFailed,
    Operations,
    Requests,
    RetryPolicy,
    WaitedInvocation,
    WaitPolicy,
)
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.invocations import State
from elasticityops.wire import (
    FunctionDeployed,
    FunctionList,
    FunctionOut,
    InvocationList,
    InvocationOut,
    TimelineOut,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
FAST = RetryPolicy(attempts=3, first_delay_s=0.01, max_delay_s=0.05)
KINDS = ["sync", "async"]

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


def function_out(name: str = "hello") -> FunctionOut:
    return FunctionOut(
        spec=FunctionSpec(name=name, command=["true"]), version=1, created_at=T0, updated_at=T0
    )


def answer(
    model: InvocationOut | InvocationList | FunctionOut | FunctionList, status: int = 200
) -> httpx.Response:
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


class FakeTime:
    """The clients' clock in tests: `now` moves only when a client sleeps (each sleep is kept)
    or a fake gateway holds a request."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class AsyncFakeTime:
    """FakeTime as a domain.clock.Clock, for the AsyncClient."""

    def __init__(self, time: FakeTime) -> None:
        self.time = time

    def now(self) -> datetime:
        return T0

    def monotonic(self) -> float:
        return self.time.monotonic()

    async def sleep(self, seconds: float) -> None:
        self.time.sleep(seconds)


class Sender:
    """Runs one use of a client on the sync `Client` or the `AsyncClient` (its `kind`), with
    the same transport, clock and options, so a test says once what both must do. `use` gets
    the client and returns the method's answer (awaited for the async client)."""

    def __init__(self, kind: str, handler: Handler, *, time: FakeTime | None = None, **options: Any) -> None:
        self.kind = kind
        self.handler = handler
        self.time = time or FakeTime()
        self.options: dict[str, Any] = {"url": "http://gw.test:9", "token": "tok-1", "retry": FAST, **options}

    def __call__(self, use: Callable[[Any], Any]) -> Any:
        return self._with_client(use, "answer")

    def collect(self, use: Callable[[Any], Any]) -> list[Any]:
        """For the methods that stream (iter_invocations, logs): everything they yield."""
        items: list[Any] = self._with_client(use, "collect")
        return items

    def peek(self, use: Callable[[Any], Any]) -> Any:
        """For attributes: what `use` gives, neither awaited nor iterated."""
        return self._with_client(use, "peek")

    def _with_client(self, use: Callable[[Any], Any], how: str) -> Any:
        transport = httpx.MockTransport(self.handler)
        if self.kind == "sync":
            with Client(transport=transport, clock=self.time, **self.options) as c:
                return list(use(c)) if how == "collect" else use(c)

        async def scenario() -> Any:
            async with AsyncClient(transport=transport, clock=AsyncFakeTime(self.time), **self.options) as c:
                if how == "collect":
                    return [item async for item in use(c)]
                return use(c) if how == "peek" else await use(c)

        return asyncio.run(scenario())


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


# --- the two clients agree ------------------------------------------------------------------


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    return {name: fn for name, fn in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


CLOSE = {Client: "close", AsyncClient: "aclose"}
STREAMS = {"iter_invocations", "logs"}  # iterators: methods each client writes itself
HANDLES = {"spawn_map"}  # the other: it returns a batch of each client's own kind (Batch, AsyncBatch)


def test_both_clients_offer_the_same_methods_with_the_same_signatures() -> None:
    sync, aio = public_methods(Client), public_methods(AsyncClient)
    assert set(sync) - {CLOSE[Client]} == set(aio) - {CLOSE[AsyncClient]}
    for name in sorted(set(sync) - {CLOSE[Client]}):
        s = inspect.signature(sync[name], eval_str=True)
        a = inspect.signature(aio[name], eval_str=True)
        assert s.parameters == a.parameters, name
        assert not inspect.iscoroutinefunction(sync[name]), name
        assert not inspect.isasyncgenfunction(sync[name]), name
        if name in HANDLES:
            assert inspect.iscoroutinefunction(aio[name]), name
            assert (s.return_annotation, a.return_annotation) == (Batch, AsyncBatch), name
        elif name in STREAMS:
            assert inspect.isasyncgenfunction(aio[name]), name
            assert typing.get_origin(s.return_annotation) is Iterator, name
            assert typing.get_origin(a.return_annotation) is AsyncIterator, name
            assert typing.get_args(s.return_annotation) == typing.get_args(a.return_annotation), name
        else:
            assert inspect.iscoroutinefunction(aio[name]), name
            assert s.return_annotation == a.return_annotation, name
            assert s.return_annotation is not inspect.Signature.empty, name


def test_every_operation_is_a_method_of_both_clients_with_its_parameters() -> None:
    ops = set(public_methods(Operations)) - {"unreachable"}
    assert ops == set(public_methods(Client)) - STREAMS - HANDLES - {"close"}
    for name in ops:
        plan = inspect.signature(getattr(Operations, name), eval_str=True)
        for cls in (Client, AsyncClient):
            method = inspect.signature(getattr(cls, name), eval_str=True)
            assert method.parameters == plan.parameters, (cls, name)
            assert getattr(cls, name).__doc__ == getattr(Operations, name).__doc__


def test_waits_are_in_the_whole_seconds_the_gateway_takes() -> None:
    # The gateway's ?wait= is an int (api/invocations_routes.py); a client deadline may be a float.
    for cls in (Client, AsyncClient, Requests):
        for name in ("invoke", "get_invocation"):
            assert inspect.signature(getattr(cls, name), eval_str=True).parameters["wait"].annotation == (
                int | None
            ), (cls, name)
    for cls in (Client, AsyncClient):
        assert inspect.signature(cls.wait, eval_str=True).parameters["timeout"].annotation == float | None


# --- settings -------------------------------------------------------------------------------


def test_url_and_token_come_from_the_environment(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EOPS_URL", "http://env.test:1234/")
    monkeypatch.setenv("EOPS_TOKEN", "tok-env")
    rec = Recorder(answer(invocation()))
    send = Sender(kind, rec, url=None, token=None)
    assert send.peek(lambda c: c.url) == "http://env.test:1234"
    send(lambda c: c.get_invocation("inv-1"))
    assert str(rec.requests[0].url) == "http://env.test:1234/v1/invocations/inv-1"
    assert rec.requests[0].headers["Authorization"] == "Bearer tok-env"


def test_defaults_without_environment(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EOPS_URL", raising=False)
    monkeypatch.delenv("EOPS_TOKEN", raising=False)
    rec = Recorder(answer(invocation()))
    Sender(kind, rec, url=None, token=None)(lambda c: c.get_invocation("inv-1"))
    assert str(rec.requests[0].url).startswith("http://127.0.0.1:8080/")
    assert "Authorization" not in rec.requests[0].headers


# --- every call shape -----------------------------------------------------------------------

FN = function_out()
DEPLOYED = FunctionDeployed(**dict(FN), changed=True)
INV = invocation()
PAGE = InvocationList(items=[INV], next_cursor="inv-1")


@pytest.mark.parametrize(
    ("use", "reply", "request_line", "result"),
    [
        pytest.param(
            lambda c: c.deploy_function({"name": "hello", "command": ["true"]}),
            lambda: answer(DEPLOYED, 201),
            ("PUT", "/v1/functions/hello", {}),
            DEPLOYED,
            id="deploy_function",
        ),
        pytest.param(
            lambda c: c.list_functions(),
            lambda: answer(FunctionList(items=[FN])),
            ("GET", "/v1/functions", {}),
            [FN],
            id="list_functions",
        ),
        pytest.param(
            lambda c: c.get_function("hello"),
            lambda: answer(FN),
            ("GET", "/v1/functions/hello", {}),
            FN,
            id="get_function",
        ),
        pytest.param(
            lambda c: c.delete_function("hello", force=True),
            lambda: httpx.Response(204),
            ("DELETE", "/v1/functions/hello", {"force": "true"}),
            None,
            id="delete_function-204",
        ),
        pytest.param(
            lambda c: c.invoke("hello", [1]),
            lambda: answer(INV, 202),
            ("POST", "/v1/functions/hello/invocations", {}),
            WaitedInvocation(**dict(INV), wait_expired=False),
            id="invoke",
        ),
        pytest.param(
            lambda c: c.get_invocation("inv-1", wait=5),
            lambda: answer(INV),
            ("GET", "/v1/invocations/inv-1", {"wait": "5"}),
            INV,
            id="get_invocation",
        ),
        pytest.param(
            lambda c: c.list_invocations(state="queued", limit=1),
            lambda: answer(PAGE),
            ("GET", "/v1/invocations", {"state": "queued", "limit": "1"}),
            PAGE,
            id="list_invocations",
        ),
        pytest.param(
            lambda c: c.cancel("inv-1"),
            lambda: answer(INV, 202),
            ("POST", "/v1/invocations/inv-1/cancel", {}),
            INV,
            id="cancel",
        ),
        pytest.param(
            lambda c: c.health(),
            lambda: httpx.Response(200, json={"status": "ready"}),
            ("GET", "/readyz", {}),
            {"status": "ready"},
            id="health",
        ),
        pytest.param(
            lambda c: c.run(Requests().get_function("hello")),
            lambda: answer(FN),
            ("GET", "/v1/functions/hello", {}),
            FN,
            id="run-any-call",
        ),
    ],
)
def test_each_call_sends_its_request_and_reads_its_answer(
    kind: str,
    use: Callable[[Any], Any],
    reply: Callable[[], httpx.Response],
    request_line: tuple[str, str, dict[str, str]],
    result: object,
) -> None:
    rec = Recorder(reply())
    assert Sender(kind, rec)(use) == result
    [req] = rec.requests
    assert (req.method, req.url.path, dict(req.url.params)) == request_line
    assert req.headers["Authorization"] == "Bearer tok-1"


def test_invoke_sends_payload_key_and_wait(kind: str) -> None:
    rec = Recorder(answer(invocation(state=State.succeeded)))
    inv = Sender(kind, rec)(lambda c: c.invoke("hello", {"n": 1}, wait=5, idempotency_key="k-1"))
    req = rec.requests[0]
    assert req.method == "POST"
    assert req.url.path == "/v1/functions/hello/invocations"
    assert req.url.params["wait"] == "5"
    assert req.headers["Idempotency-Key"] == "k-1"
    assert json.loads(req.content) == {"n": 1}
    assert inv.state is State.succeeded


def test_invoke_sends_annotations(kind: str) -> None:
    rec = Recorder(answer(invocation(state=State.queued)))
    Sender(kind, rec)(lambda c: c.invoke("hello", annotations={"eops.dev/run-seconds": "2"}))
    assert rec.requests[0].url.params.get_list("annotation") == ["eops.dev/run-seconds=2"]


# --- retries and errors ---------------------------------------------------------------------


def test_get_is_retried_on_503_honouring_retry_after(kind: str) -> None:
    busy = httpx.Response(
        503, headers={"Retry-After": "0.03"}, json={"error": {"code": "x", "message": "busy"}}
    )
    rec = Recorder(busy, answer(invocation()))
    send = Sender(kind, rec)
    assert send(lambda c: c.get_invocation("inv-1")).id == "inv-1"
    assert len(rec.requests) == 2
    assert send.time.sleeps == [0.03]


def test_get_gives_up_after_the_attempts_with_the_servers_error(kind: str) -> None:
    busy = httpx.Response(503, json={"error": {"code": "temporarily_unavailable", "message": "store busy"}})
    rec = Recorder(busy)
    with pytest.raises(ApiError) as info:
        Sender(kind, rec)(lambda c: c.get_invocation("inv-1"))
    assert len(rec.requests) == FAST.attempts
    assert info.value.status == 503
    assert info.value.message == "store busy"
    assert info.value.temporary


def test_post_without_key_is_not_retried_on_503(kind: str) -> None:
    rec = Recorder(httpx.Response(503, json={"error": {"code": "busy", "message": "busy"}}))
    with pytest.raises(ApiError):
        Sender(kind, rec)(lambda c: c.invoke("hello", {}))
    assert len(rec.requests) == 1


def test_post_with_key_is_retried_on_a_dropped_connection(kind: str) -> None:
    rec = Recorder(httpx.ReadError("connection reset"), answer(invocation(), 202))
    assert Sender(kind, rec)(lambda c: c.invoke("hello", {}, idempotency_key="k")).id == "inv-1"
    assert len(rec.requests) == 2


def test_post_without_key_is_not_retried_once_it_may_have_arrived(kind: str) -> None:
    rec = Recorder(httpx.ReadError("connection reset"))
    with pytest.raises(ConnectionFailed):
        Sender(kind, rec)(lambda c: c.invoke("hello", {}))
    assert len(rec.requests) == 1


def test_refused_connection_is_retried_even_for_post_then_named_clearly(kind: str) -> None:
    rec = Recorder(httpx.ConnectError("[Errno 111] Connection refused"))
    send = Sender(kind, rec)
    with pytest.raises(ConnectionFailed) as info:
        send(lambda c: c.invoke("hello", {}))
    assert len(rec.requests) == FAST.attempts
    assert len(send.time.sleeps) == FAST.attempts - 1
    message = str(info.value)
    assert "http://gw.test:9" in message
    assert "connection refused" in message
    assert "eops serve" in message
    assert "EOPS_URL" in message


def test_api_error_carries_code_and_problems(kind: str) -> None:
    body = {
        "error": {
            "code": "invalid_input",
            "message": "gpu.count: too many",
            "problems": [{"field": "gpu.count", "problem": "9 > 8", "fix": "use a smaller number"}],
        }
    }
    rec = Recorder(httpx.Response(422, json=body))
    with pytest.raises(ApiError) as info:
        Sender(kind, rec)(lambda c: c.deploy_function({"name": "hello", "command": ["true"]}))
    assert info.value.code == "invalid_input"
    assert info.value.problems[0].field == "gpu.count"
    assert str(info.value) == "422 invalid_input: gpu.count: too many"


def test_an_invalid_spec_sends_nothing(kind: str) -> None:
    rec = Recorder(httpx.Response(500))
    with pytest.raises(InvalidSpec) as info:
        Sender(kind, rec)(
            lambda c: c.deploy_function({"name": "hello", "command": ["true"], "gpu": {"count": 0}})
        )
    assert [p.field for p in info.value.problems] == ["gpu.count"]
    assert rec.requests == []


# --- waiting --------------------------------------------------------------------------------


class HoldingGateway:
    """Answers GET /v1/invocations/inv-1?wait=W like the server: it holds the request until the
    invocation ends or W seconds pass, on the clients' fake clock. `life`: (at second, state)
    steps."""

    def __init__(self, life: list[tuple[float, State]], time: FakeTime) -> None:
        self.life = life
        self.time = time
        self.holds: list[int] = []

    def state_at(self, t: float) -> State:
        return [state for at, state in self.life if at <= t][-1]

    def __call__(self, request: httpx.Request) -> httpx.Response:
        hold = int(request.url.params.get("wait", "0"))
        self.holds.append(hold)
        now = self.time.now
        ends = [at for at, state in self.life if state.terminal and now < at <= now + hold]
        self.time.now = ends[0] if ends else now + hold
        return answer(invocation(state=self.state_at(self.time.now)))


def holding(kind: str, life: list[tuple[float, State]], long_poll_s: int) -> tuple[HoldingGateway, Sender]:
    time = FakeTime()
    gw = HoldingGateway(life, time)
    return gw, Sender(kind, gw, time=time, wait_policy=WaitPolicy(long_poll_s=long_poll_s, pause_s=0.25))


def test_wait_long_polls_until_the_end_and_reports_each_answer(kind: str) -> None:
    gw, send = holding(
        kind, [(0, State.queued), (1.5, State.pending), (2.5, State.running), (3.2, State.succeeded)], 1
    )
    seen: list[State] = []
    final = send(lambda c: c.wait("inv-1", on_update=lambda inv: seen.append(inv.state)))
    assert final.state is State.succeeded
    assert seen == [State.queued, State.pending, State.running, State.succeeded]
    assert gw.holds == [1, 1, 1, 1]
    assert send.time.now == pytest.approx(3.2)  # the end is seen when it happens, not at the next poll


def test_wait_returns_the_live_state_when_the_timeout_runs_out(kind: str) -> None:
    gw, send = holding(kind, [(0, State.running), (100, State.succeeded)], 20)
    inv = send(lambda c: c.wait("inv-1", timeout=2.5))
    assert inv.state is State.running
    # Whole seconds held within the deadline, then looks a pause (0.25 s) apart for the last half second.
    assert gw.holds == [2, 0, 0, 0]
    assert send.time.now == pytest.approx(2.5)


def test_a_wait_that_runs_out_says_so(kind: str) -> None:
    """`invoke(..., wait=1)` on work that runs on: a live state and no result, and
    `wait_expired` says the wait ran out (not that the invocation has none)."""
    time = FakeTime()
    gw = HoldingGateway([(0, State.running), (100, State.succeeded)], time)
    send = Sender(kind, gw, time=time, wait_policy=WaitPolicy(long_poll_s=20))
    inv = send(lambda c: c.invoke("hello", {}, wait=1))
    assert (inv.state, inv.result, inv.wait_expired) == (State.running, None, True)
    assert send(lambda c: c.wait("inv-1", timeout=2)).wait_expired is True
    ended = send(lambda c: c.wait("inv-1", timeout=200))
    assert (ended.state, ended.wait_expired) == (State.succeeded, False)
    assert send(lambda c: c.invoke("hello", {}, wait=5)).wait_expired is False, "it ended within"
    assert send(lambda c: c.invoke("hello", {})).wait_expired is False, "no wait was asked for"


def test_wait_pauses_when_a_gateway_ignores_the_hold(kind: str) -> None:
    rec = Recorder(answer(invocation(state=State.running)), answer(invocation(state=State.failed)))
    send = Sender(kind, rec, wait_policy=WaitPolicy(long_poll_s=5, pause_s=0.25))
    assert send(lambda c: c.wait("inv-1")).state is State.failed
    assert send.time.sleeps == [0.25]


def test_invoke_with_a_long_wait_holds_the_post_then_long_polls(kind: str) -> None:
    calls: list[tuple[str, str | None]] = []
    time = FakeTime()
    gw = HoldingGateway([(0, State.queued), (30, State.succeeded)], time)

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append((request.method, request.url.params.get("wait")))
        if request.method == "POST":
            time.now += 10
            return answer(invocation(state=State.running), 202)
        return gw(request)

    send = Sender(kind, handler, time=time, wait_policy=WaitPolicy(long_poll_s=10))
    inv = send(lambda c: c.invoke("hello", {"x": 1}, wait=3600))
    assert inv.state is State.succeeded
    assert calls == [("POST", "10"), ("GET", "10"), ("GET", "10")]


def test_invoke_waits_no_longer_than_asked(kind: str) -> None:
    time = FakeTime()
    gw = HoldingGateway([(0, State.running), (100, State.succeeded)], time)
    send = Sender(kind, gw, time=time, wait_policy=WaitPolicy(long_poll_s=20))
    inv = send(lambda c: c.invoke("hello", {}, wait=3))
    assert inv.state is State.running
    assert gw.holds[0] == 3  # the POST held for the whole wait: nothing left to long-poll for
    assert gw.holds == [3]
    assert time.now == pytest.approx(3)


def test_a_gateway_with_a_lower_wait_limit_is_polled_instead(kind: str) -> None:
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

    send = Sender(kind, handler, wait_policy=WaitPolicy(long_poll_s=20, pause_s=0.1))
    assert send(lambda c: c.invoke("hello", {}, wait=60)).state is State.succeeded
    assert seen == [("POST", "20"), ("POST", None), ("GET", None), ("GET", None)]
    assert send.time.sleeps == [0.1]


# --- streams: paging and logs ---------------------------------------------------------------


def test_iter_invocations_follows_cursors_to_the_end(kind: str) -> None:
    pages = [
        InvocationList(items=[invocation("inv-3"), invocation("inv-2")], next_cursor="inv-2"),
        InvocationList(items=[invocation("inv-1")], next_cursor=None),
    ]
    rec = Recorder(*(answer(p) for p in pages))
    items = Sender(kind, rec).collect(lambda c: c.iter_invocations(function="hello", page_size=2))
    assert [inv.id for inv in items] == ["inv-3", "inv-2", "inv-1"]
    assert "cursor" not in rec.requests[0].url.params
    assert rec.requests[1].url.params["cursor"] == "inv-2"
    assert rec.requests[1].url.params["limit"] == "2"
    assert rec.requests[1].url.params["function"] == "hello"


def test_logs_stream_text_chunks(kind: str) -> None:
    rec = Recorder(httpx.Response(200, content=b"line 1\nline 2\n", headers={"Content-Type": "text/plain"}))
    chunks = Sender(kind, rec).collect(lambda c: c.logs("inv-1", follow=True))
    assert "".join(chunks) == "line 1\nline 2\n"
    assert rec.requests[0].url.params["follow"] == "true"


def test_logs_of_an_earlier_attempt_ask_for_it(kind: str) -> None:
    rec = Recorder(httpx.Response(200, content=b"first\n", headers={"Content-Type": "text/plain"}))
    chunks = Sender(kind, rec).collect(lambda c: c.logs("inv-1", attempt=0))
    assert "".join(chunks) == "first\n"
    assert rec.requests[0].url.params["attempt"] == "0"


def test_logs_of_an_unknown_invocation_raise_api_error(kind: str) -> None:
    body = {"error": {"code": "not_found", "message": "no invocation inv-9"}}
    rec = Recorder(httpx.Response(404, json=body))
    with pytest.raises(ApiError, match="no invocation inv-9"):
        Sender(kind, rec).collect(lambda c: c.logs("inv-9"))


def test_logs_cut_off_raise_connection_failed(kind: str) -> None:
    rec = Recorder(httpx.ReadError("connection reset"))
    with pytest.raises(ConnectionFailed, match=r"gw\.test"):
        Sender(kind, rec).collect(lambda c: c.logs("inv-1", follow=True))
    assert len(rec.requests) == 1  # a stream is never repeated


# --- map: batches, in input order -------------------------------------------------------------


class FakeBatchGateway:
    """Accepts batches of at most `most` inputs (422 over it, as the gateway answers), runs each
    input at once: its result is twice its n, a negative n fails."""

    def __init__(self, most: int = 1000) -> None:
        self.most = most
        self.batches: list[list[Any]] = []
        self.keys: list[str] = []
        self.payloads: dict[str, Any] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.endswith("/invocations:batch"):
            inputs = json.loads(request.content)["inputs"]
            if len(inputs) > self.most:
                problem = {
                    "field": "inputs",
                    "problem": f"holds {len(inputs)} inputs, over the most a batch may hold ({self.most})",
                    "fix": "split them",
                }
                return httpx.Response(
                    422, json={"error": {"code": "invalid_input", "message": "m", "problems": [problem]}}
                )
            self.batches.append(inputs)
            self.keys.append(request.headers["Idempotency-Key"])
            ids = [f"inv-{len(self.payloads) + i:06d}" for i in range(len(inputs))]
            self.payloads.update(zip(ids, inputs, strict=True))
            body = {
                "batch_id": f"bat-{len(self.batches)}",
                "function": "hello",
                "count": len(ids),
                "invocation_ids": ids,
                "created_at": T0.isoformat(),
            }
            return httpx.Response(202, json=body)
        invocation_id = path.rsplit("/", 1)[-1]
        n = self.payloads[invocation_id]["n"]
        inv = invocation(invocation_id, State.failed if n < 0 else State.succeeded)
        inv = inv.model_copy(update={"result": None if n < 0 else n * 2, "message": "boom" if n < 0 else ""})
        return answer(inv)


def test_map_sends_batches_and_returns_results_in_input_order(kind: str) -> None:
    gateway = FakeBatchGateway()
    progress: list[tuple[int, int]] = []
    inputs = [{"n": n} for n in range(25)]
    results = Sender(kind, gateway)(
        lambda c: c.map(
            "hello", inputs, batch_size=10, max_in_flight=10, on_progress=lambda d, t: progress.append((d, t))
        )
    )
    assert results == [n * 2 for n in range(25)]
    assert [len(b) for b in gateway.batches] == [10, 5, 5, 5], "refilled once half a batch had room"
    assert [x for b in gateway.batches for x in b] == inputs
    assert len(set(gateway.keys)) == len(gateway.keys), "each batch its own idempotency key"
    assert progress[-1] == (25, 25)
    assert len(progress) == 25


def test_map_halves_its_batches_for_a_gateway_that_takes_fewer(kind: str) -> None:
    gateway = FakeBatchGateway(most=300)
    inputs = [{"n": n} for n in range(1000)]
    results = Sender(kind, gateway)(lambda c: c.map("hello", inputs))
    assert results == [n * 2 for n in range(1000)]
    assert max(len(b) for b in gateway.batches) <= 300


def test_map_raises_a_failure_or_returns_it_in_its_place(kind: str) -> None:
    inputs = [{"n": 1}, {"n": -1}, {"n": 3}]
    with pytest.raises(InvocationFailed) as failed:
        Sender(kind, FakeBatchGateway())(lambda c: c.map("hello", inputs))
    assert failed.value.invocation.id == "inv-000001"
    assert "boom" in str(failed.value)
    results = Sender(kind, FakeBatchGateway())(lambda c: c.map("hello", inputs, return_exceptions=True))
    assert results[0] == 2
    assert results[2] == 6
    assert isinstance(results[1], InvocationFailed)
