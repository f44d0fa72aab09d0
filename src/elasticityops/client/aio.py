"""The asyncio client: the same methods, answers and errors as `Client` (the same plans, from
plans.py), run over httpx.AsyncClient and an async clock; the one place it does I/O is
`AsyncClient._do`."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from typing import Any, Concatenate, ParamSpec, TypeVar

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
from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.wire import BatchAccepted, BatchOut, InvocationList, InvocationOut

P = ParamSpec("P")
T = TypeVar("T")


def _runs(
    op: Callable[Concatenate[Operations, P], Plan[T]],
) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """An AsyncClient method that runs the plan of `op`, with `op`'s parameters and docs."""

    @functools.wraps(op)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._drive(op(self.ops, *args, **kwargs))

    method.__signature__ = method_signature(op)  # type: ignore[attr-defined]
    return method


class AsyncClient:
    """The same API for asyncio code; same settings and errors as `Client`. `clock` (a
    domain.clock.Clock) replaces time for retries and waiting."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        wait_policy: WaitPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._clock = clock or SystemClock()
        self.ops = Operations(url, token, retry=retry, wait_policy=wait_policy, now=self._clock.monotonic)
        self.url, self.token = self.ops.url, self.ops.token
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=auth_headers(self.token), transport=transport
        )

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _drive(self, plan: Plan[T]) -> T:
        run = Run(plan)
        while run.next is not None:
            run.resume(await self._do(run.next))
        return run.result

    # The one I/O point: one step of a plan.
    async def _do(self, step: Step) -> Outcome:
        if isinstance(step, Pause):
            await self._clock.sleep(step.seconds)
            return None
        try:
            return await self._http.send(http_request(self._http, step))
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

    async def spawn_map(
        self,
        name: str,
        inputs: Iterable[Any],
        *,
        idempotency_key: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> AsyncBatch:
        """Invoke `name` once per input as one batch (at most the gateway's
        EOPS_MAX_BATCH_INPUTS, 1,000 by default) and return at once: the batch, to read
        (`status()`), wait for (`results()`) or cancel (`cancel()`) later."""
        accepted = await self.invoke_batch(
            name, list(inputs), idempotency_key=idempotency_key, annotations=annotations
        )
        return AsyncBatch(self, accepted)

    async def iter_invocations(
        self,
        *,
        function: str | None = None,
        state: str | None = None,
        page_size: int = 100,
        batch: str | None = None,
    ) -> AsyncIterator[InvocationOut]:
        """Every matching invocation (`batch`: of that batch), newest first as the server orders
        them, page by page."""
        call: Call[InvocationList] | None = self.ops.requests.list_invocations(
            function=function, state=state, limit=page_size, batch=batch
        )
        while call is not None:
            page = await self.run(call)
            for item in page.items:
                yield item
            call = next_page(call, page)

    async def logs(
        self, invocation_id: str, *, follow: bool = False, attempt: int | None = None
    ) -> AsyncIterator[str]:
        """The invocation's output as text chunks; with `follow`, until it ends. `attempt`: an
        earlier attempt's output (0 the first; the default is the current one's)."""
        call = self.ops.requests.logs(invocation_id, follow=follow, attempt=attempt)
        try:
            response = await self._http.send(http_request(self._http, call), stream=True)
            try:
                if response.status_code not in call.expect:
                    raise error_from(response.status_code, await response.aread())
                async for chunk in response.aiter_text():
                    yield chunk
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            raise self.ops.unreachable(exc) from None


class AsyncBatch:
    """A batch `spawn_map` started: its id, its function and its invocations' ids in input order."""

    def __init__(self, client: AsyncClient, accepted: BatchAccepted) -> None:
        self._client = client
        self.id = accepted.batch_id
        self.function = accepted.function
        self.invocation_ids = list(accepted.invocation_ids)

    async def status(self) -> BatchOut:
        """How many of its invocations are in each state (and the first page of them)."""
        return await self._client.get_batch(self.id)

    async def results(
        self, *, return_exceptions: bool = False, on_progress: Progress | None = None
    ) -> list[Any]:
        """Wait for every invocation; their results in input order, as `AsyncClient.map` gives them."""
        return await self._client.batch_results(
            self.invocation_ids, return_exceptions=return_exceptions, on_progress=on_progress
        )

    async def cancel(self) -> BatchOut:
        """Cancel every invocation of it that has not ended."""
        return await self._client.cancel_batch(self.id)
