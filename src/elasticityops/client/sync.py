"""The synchronous client: it runs the plans of plans.py over httpx.Client and its clock; the
one place it does I/O is `Client._do`."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

import httpx

from elasticityops.client.calls import (
    Call,
    RetryPolicy,
    WaitPolicy,
    auth_headers,
    error_from,
    http_request,
    next_page,
)
from elasticityops.client.plans import (
    Operations,
    Outcome,
    Pause,
    Plan,
    Progress,
    Run,
    Step,
    method_signature,
)
from elasticityops.wire import BatchAccepted, BatchOut, InvocationList, InvocationOut

P = ParamSpec("P")
T = TypeVar("T")


class BlockingClock(Protocol):
    """The sync client's clock: domain.clock.Clock's `monotonic`, with a sleep that blocks."""

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin that never goes backwards."""
        ...

    def sleep(self, seconds: float) -> None: ...


class BlockingSystemClock:
    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _runs(op: Callable[Concatenate[Operations, P], Plan[T]]) -> Callable[Concatenate[Client, P], T]:
    """A Client method that runs the plan of `op`, with `op`'s parameters and docs."""

    @functools.wraps(op)
    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._drive(op(self.ops, *args, **kwargs))

    method.__signature__ = method_signature(op)  # type: ignore[attr-defined]
    return method


class Client:
    """Synchronous client. `url` and `token` default to EOPS_URL and EOPS_TOKEN.

    `transport` replaces the network (tests use httpx.MockTransport); `clock` replaces time
    for retries and waiting."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        wait_policy: WaitPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: BlockingClock | None = None,
    ) -> None:
        self._clock = clock or BlockingSystemClock()
        self.ops = Operations(url, token, retry=retry, wait_policy=wait_policy, now=self._clock.monotonic)
        self.url, self.token = self.ops.url, self.ops.token
        self._http = httpx.Client(base_url=self.url, headers=auth_headers(self.token), transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _drive(self, plan: Plan[T]) -> T:
        run = Run(plan)
        while run.next is not None:
            run.resume(self._do(run.next))
        return run.result

    # The one I/O point: one step of a plan.
    def _do(self, step: Step) -> Outcome:
        if isinstance(step, Pause):
            self._clock.sleep(step.seconds)
            return None
        try:
            return self._http.send(http_request(self._http, step))
        except httpx.TransportError as exc:
            return exc

    run = _runs(Operations.run)
    deploy_function = _runs(Operations.deploy_function)
    list_functions = _runs(Operations.list_functions)
    get_function = _runs(Operations.get_function)
    delete_function = _runs(Operations.delete_function)
    invoke = _runs(Operations.invoke)
    invoke_batch = _runs(Operations.invoke_batch)
    get_batch = _runs(Operations.get_batch)
    cancel_batch = _runs(Operations.cancel_batch)
    map = _runs(Operations.map)
    batch_results = _runs(Operations.batch_results)
    get_invocation = _runs(Operations.get_invocation)
    list_invocations = _runs(Operations.list_invocations)
    cancel = _runs(Operations.cancel)
    wait = _runs(Operations.wait)
    headroom = _runs(Operations.headroom)
    cost_report = _runs(Operations.cost_report)
    cost_csv = _runs(Operations.cost_csv)
    health = _runs(Operations.health)

    def spawn_map(
        self,
        name: str,
        inputs: Iterable[Any],
        *,
        idempotency_key: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Batch:
        """Invoke `name` once per input as one batch (at most the gateway's
        EOPS_MAX_BATCH_INPUTS, 1,000 by default) and return at once: the batch, to read
        (`status()`), wait for (`results()`) or cancel (`cancel()`) later."""
        accepted = self.invoke_batch(
            name, list(inputs), idempotency_key=idempotency_key, annotations=annotations
        )
        return Batch(self, accepted)

    def iter_invocations(
        self,
        *,
        function: str | None = None,
        state: str | None = None,
        page_size: int = 100,
        batch: str | None = None,
    ) -> Iterator[InvocationOut]:
        """Every matching invocation (`batch`: of that batch), newest first as the server orders
        them, page by page."""
        call: Call[InvocationList] | None = self.ops.requests.list_invocations(
            function=function, state=state, limit=page_size, batch=batch
        )
        while call is not None:
            page = self.run(call)
            yield from page.items
            call = next_page(call, page)

    def logs(self, invocation_id: str, *, follow: bool = False, attempt: int | None = None) -> Iterator[str]:
        """The invocation's output as text chunks; with `follow`, until it ends. `attempt`: an
        earlier attempt's output (0 the first; the default is the current one's)."""
        call = self.ops.requests.logs(invocation_id, follow=follow, attempt=attempt)
        try:
            response = self._http.send(http_request(self._http, call), stream=True)
            try:
                if response.status_code not in call.expect:
                    raise error_from(response.status_code, response.read())
                yield from response.iter_text()
            finally:
                response.close()
        except httpx.TransportError as exc:
            raise self.ops.unreachable(exc) from None


class Batch:
    """A batch `spawn_map` started: its id, its function and its invocations' ids in input order."""

    def __init__(self, client: Client, accepted: BatchAccepted) -> None:
        self._client = client
        self.id = accepted.batch_id
        self.function = accepted.function
        self.invocation_ids = list(accepted.invocation_ids)

    def status(self) -> BatchOut:
        """How many of its invocations are in each state (and the first page of them)."""
        return self._client.get_batch(self.id)

    def results(self, *, return_exceptions: bool = False, on_progress: Progress | None = None) -> list[Any]:
        """Wait for every invocation; their results in input order, as `Client.map` gives them."""
        return self._client.batch_results(
            self.invocation_ids, return_exceptions=return_exceptions, on_progress=on_progress
        )

    def cancel(self) -> BatchOut:
        """Cancel every invocation of it that has not ended."""
        return self._client.cancel_batch(self.id)
