"""What each client method does, written once for both clients: a plan, a generator that
yields the steps it needs (a `Call` to send, a `Pause` to sleep) and returns the method's
answer. The sync `Client` and the `AsyncClient` only run plans (`Run`): they send each Call
once over their httpx client and sleep through their clock. Retries, long polls, deadlines and
the fallback to plain polling all live here, with no I/O, and time only through `now`.

The protocol between a plan and its sender: a `Call` is answered with its `httpx.Response`, or
the `httpx.TransportError` it failed with is thrown into the plan; a `Pause` is answered with
None once the sender has slept that long."""

from __future__ import annotations

import functools
import inspect
import typing
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar

import httpx
from pydantic import Field

from elasticityops.client.calls import (
    Call,
    Requests,
    RetryPolicy,
    WaitPolicy,
    describe,
    hold_for,
    never_sent,
    pause_after,
    refuses_hold,
    retry_after_of,
    settings,
    spec_from,
)
from elasticityops.client.errors import ApiError, ConnectionFailed, InvalidArgument, InvocationFailed
from elasticityops.domain.functions import FunctionSpec
from elasticityops.wire import FunctionDeployed, InvocationOut, ProblemOut

P = ParamSpec("P")
T = TypeVar("T")

# The gateway's default EOPS_MAX_BATCH_INPUTS: `map` sends batches of at most this many, and
# halves them if a gateway set lower refuses one (nothing of a refused batch is stored).
BATCH_SIZE = 1000
Progress = Callable[[int, int], None]  # (ended so far, all of them)


class WaitedInvocation(InvocationOut):
    """An invocation as `invoke(wait=...)` or `wait()` left it."""

    wait_expired: bool = Field(
        False,
        description="true when the wait ran out before the invocation ended: `state` is its state "
        "then (it runs on), and `result` is not there yet",
    )

    @classmethod
    def after(cls, inv: InvocationOut, waited: bool) -> WaitedInvocation:
        """`inv` as a wait (`waited`: one was asked for) left it."""
        return cls(**dict(inv), wait_expired=waited and not inv.state.terminal)


@dataclass(frozen=True)
class Pause:
    """Sleep this long before the plan goes on."""

    seconds: float


Step = Call[Any] | Pause
Plan = Generator[Step, object, T]
Outcome = httpx.Response | httpx.TransportError | None  # what came of a step


class Run(Generic[T]):
    """Steps through a plan: `next` is the step to do (None once it has finished: `result`),
    `resume` hands back what came of it."""

    def __init__(self, plan: Plan[T]) -> None:
        self._plan = plan
        self._result: tuple[T] | None = None
        self.next: Step | None = None
        self.resume(None)

    def resume(self, outcome: Outcome) -> None:
        try:
            if isinstance(outcome, BaseException):
                self.next = self._plan.throw(outcome)
            else:
                self.next = self._plan.send(outcome)
        except StopIteration as done:
            self.next = None
            self._result = (done.value,)

    @property
    def result(self) -> T:
        if self._result is None:
            raise RuntimeError("the plan has not finished")
        return self._result[0]


def exchange(call: Call[Any], retry: RetryPolicy, url: str) -> Plan[httpx.Response]:
    """Send `call`, retrying only what is safe to repeat: connection errors and 429/503 for a
    repeatable call, and a request that never left whatever it was."""
    attempt = 0
    while True:
        try:
            reply = yield call
        except httpx.TransportError as exc:
            if attempt + 1 < retry.attempts and (call.repeatable or never_sent(exc)):
                yield Pause(retry.delay(attempt, None))
                attempt += 1
                continue
            raise ConnectionFailed(url, describe(exc)) from None
        if not isinstance(reply, httpx.Response):
            raise TypeError(f"a sender answers a Call with its httpx.Response, not {reply!r}")
        if reply.status_code in (429, 503) and call.repeatable and attempt + 1 < retry.attempts:
            yield Pause(retry.delay(attempt, retry_after_of(reply)))
            attempt += 1
            continue
        return reply


def answer_type(op: Callable[..., Any]) -> Any:
    """What `op`'s Call or Plan answers with (its return type's last argument)."""
    return typing.get_args(inspect.signature(op, eval_str=True).return_annotation)[-1]


def method_signature(op: Callable[..., Plan[Any]]) -> inspect.Signature:
    """`op`'s signature with the plan's answer as its return type: what a client method that
    runs `op` takes and gives (for help() and for checking that both clients agree)."""
    return inspect.signature(op, eval_str=True).replace(return_annotation=answer_type(op))


def _sends(
    build: Callable[Concatenate[Requests, P], Call[T]],
) -> Callable[Concatenate[Operations, P], Plan[T]]:
    """The operation that sends the one Call `build` makes, with `build`'s parameters and docs."""

    @functools.wraps(build)
    def operation(self: Operations, /, *args: P.args, **kwargs: P.kwargs) -> Plan[T]:
        return self.run(build(self.requests, *args, **kwargs))

    plan_of = typing.cast(Any, Plan)[answer_type(build)]
    operation.__signature__ = inspect.signature(build, eval_str=True).replace(  # type: ignore[attr-defined]
        return_annotation=plan_of
    )
    return operation


class Operations:
    """Every method both clients offer (bar the two that stream: `iter_invocations`, `logs`),
    each returning the plan that does it; each one that makes a single call is Requests'
    method of that name, sent. `url` and `token` default to EOPS_URL and EOPS_TOKEN;
    `now` is the client's clock (seconds, never going backwards)."""

    def __init__(
        self,
        url: str | None,
        token: str | None,
        *,
        retry: RetryPolicy | None,
        wait_policy: WaitPolicy | None,
        now: Callable[[], float],
    ) -> None:
        self.url, self.token = settings(url, token)
        self.retry = retry or RetryPolicy()
        self.wait_policy = wait_policy or WaitPolicy()
        self.requests = Requests()
        self.now = now
        self.long_polls = True  # off once the gateway refuses our holds; then plain polling

    def run(self, call: Call[T]) -> Plan[T]:
        """Send any Call (retries included) and read its answer."""
        response = yield from exchange(call, self.retry, self.url)
        return call.answer(response.status_code, response.content)

    def unreachable(self, exc: httpx.TransportError) -> ConnectionFailed:
        """What a transport error of a stream (which is never retried) is raised as."""
        return ConnectionFailed(self.url, describe(exc))

    def deploy_function(self, spec: FunctionSpec | Mapping[str, Any] | str | Path) -> Plan[FunctionDeployed]:
        """Create or replace a function from a spec, a mapping or a YAML/JSON file path (its
        relative paths are relative to its directory: `workdir`); the spec is validated first,
        and an invalid one (InvalidSpec) sends nothing. `changed` is false when the same spec
        was deployed already (its version stays)."""
        return self.run(self.requests.deploy_function(spec_from(spec)))

    def invoke(
        self,
        name: str,
        payload: Any = None,
        *,
        wait: int | None = None,
        idempotency_key: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Plan[WaitedInvocation]:
        """Start an invocation with a JSON payload (None: the job gets null). With `wait`
        (whole seconds, as the gateway takes them), return when it ends or after that long,
        whichever comes first: the answer is final if `.state.terminal`, else its state at
        that moment, with `wait_expired` true. `annotations`: its own pod annotations, keys
        under `eops.dev/` (e.g. `{"eops.dev/run-seconds": "12"}` on the dev cluster), over its
        function's; an invalid one raises InvalidArgument before anything is sent."""
        began = self.now()
        hold = None
        if wait is not None and self.long_polls:
            hold = min(self.wait_policy.long_poll_s, max(0, wait))
        try:
            inv = yield from self.run(
                self.requests.invoke(
                    name, payload, wait=hold, idempotency_key=idempotency_key, annotations=annotations
                )
            )
        except ApiError as exc:
            if not (hold and refuses_hold(exc)):
                raise
            self.long_polls = False
            inv = yield from self.run(
                self.requests.invoke(name, payload, idempotency_key=idempotency_key, annotations=annotations)
            )
        left = None if wait is None else wait - (self.now() - began)
        if left is None or left <= 0 or inv.state.terminal:
            return WaitedInvocation.after(inv, waited=wait is not None)
        return (yield from self.wait(inv.id, left))

    def wait(
        self,
        invocation_id: str,
        timeout: float | None = None,
        *,
        on_update: Callable[[InvocationOut], None] | None = None,
    ) -> Plan[WaitedInvocation]:
        """Wait until the invocation ends or `timeout` seconds pass (None: no limit), by long
        polls; returns its last seen state, not terminal when the timeout ran out (then
        `wait_expired` is true). `on_update` sees every answer (the CLI's progress display: a
        short `long_poll_s` makes them often)."""
        deadline = None if timeout is None else self.now() + timeout
        while True:
            began = self.now()
            hold = hold_for(self.wait_policy, began, deadline) if self.long_polls else 0
            try:
                inv = yield from self.run(self.requests.get_invocation(invocation_id, wait=hold))
            except ApiError as exc:
                if not (hold and refuses_hold(exc)):
                    raise
                self.long_polls = False
                continue
            if on_update is not None:
                on_update(inv)
            now = self.now()
            if inv.state.terminal or (deadline is not None and now >= deadline):
                return WaitedInvocation.after(inv, waited=True)
            pause = pause_after(self.wait_policy, hold, now - began, now, deadline)
            if pause:
                yield Pause(pause)

    def map(
        self,
        name: str,
        inputs: Iterable[Any],
        *,
        return_exceptions: bool = False,
        max_in_flight: int = 1000,
        batch_size: int = BATCH_SIZE,
        on_progress: Progress | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Plan[list[Any]]:
        """Invoke `name` once per input and return the results in input order. Inputs go in
        batches (POST .../invocations:batch) of at most `batch_size`, with at most
        `max_in_flight` invocations accepted and not yet collected at a time; each batch is sent
        with an idempotency key, so a dropped connection is retried without a second set. A
        result is what the job handed back (JSON as written, else text; None without one). One
        that did not succeed raises InvocationFailed (the rest run on), or, with
        `return_exceptions`, takes its place in the list. `on_progress(ended, total)` is called
        as each is collected."""
        items = list(inputs)
        if max_in_flight < 1 or batch_size < 1:
            raise InvalidArgument(
                [ProblemOut(field="max_in_flight, batch_size", problem="below 1", fix="use 1 or more")]
            )
        total = len(items)
        ids: list[str] = []
        results: list[Any] = []
        key = f"map-{uuid.uuid4().hex}"
        size = min(batch_size, max_in_flight)
        sent = 0
        while len(results) < total:
            while len(ids) < total:
                want = _next_batch(total - len(ids), len(ids) - len(results), size, max_in_flight)
                if want == 0:
                    break
                chunk = items[len(ids) : len(ids) + want]
                try:
                    accepted = yield from self.run(
                        self.requests.invoke_batch(
                            name, chunk, idempotency_key=f"{key}.{sent}", annotations=annotations
                        )
                    )
                except ApiError as exc:
                    if len(chunk) > 1 and _over_batch_limit(exc):
                        size = len(chunk) // 2
                        continue
                    raise
                sent += 1
                ids += accepted.invocation_ids
            inv = yield from self.wait(ids[len(results)])
            results.append(_outcome(inv, return_exceptions))
            if on_progress is not None:
                on_progress(len(results), total)
        return results

    def batch_results(
        self,
        invocation_ids: Sequence[str],
        *,
        return_exceptions: bool = False,
        on_progress: Progress | None = None,
    ) -> Plan[list[Any]]:
        """Wait for each of these invocations (a batch's `invocation_ids`) to end, and return
        their results in that order, as `map` does."""
        results: list[Any] = []
        for invocation_id in invocation_ids:
            inv = yield from self.wait(invocation_id)
            results.append(_outcome(inv, return_exceptions))
            if on_progress is not None:
                on_progress(len(results), len(invocation_ids))
        return results

    # The methods that make one call: Requests' parameters and docs.
    list_functions = _sends(Requests.list_functions)
    get_function = _sends(Requests.get_function)
    delete_function = _sends(Requests.delete_function)
    invoke_batch = _sends(Requests.invoke_batch)
    get_batch = _sends(Requests.get_batch)
    cancel_batch = _sends(Requests.cancel_batch)
    get_invocation = _sends(Requests.get_invocation)
    list_invocations = _sends(Requests.list_invocations)
    cancel = _sends(Requests.cancel)
    headroom = _sends(Requests.headroom)
    cost_report = _sends(Requests.cost_report)
    cost_csv = _sends(Requests.cost_csv)
    health = _sends(Requests.health)


def _next_batch(left: int, in_flight: int, size: int, max_in_flight: int) -> int:
    """How many inputs to send next: a whole batch when there is room for it (or nothing is in
    flight), else what room there is once it is at least half a batch (no trickle of tiny
    batches as results come in one by one), else none yet."""
    room = max_in_flight - in_flight
    target = min(size, left)
    if room >= target or in_flight == 0:
        return min(target, max(room, 1))
    return room if room * 2 >= size else 0


def _over_batch_limit(exc: ApiError) -> bool:
    """The gateway refused a batch for holding more inputs than its EOPS_MAX_BATCH_INPUTS."""
    return exc.status == 422 and any(
        p.field == "inputs" and "over the most" in p.problem for p in exc.problems
    )


def _outcome(inv: InvocationOut, return_exceptions: bool) -> Any:
    if inv.state.value == "succeeded":
        return inv.result
    failed = InvocationFailed(inv)
    if return_exceptions:
        return failed
    raise failed
