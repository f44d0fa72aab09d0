"""The asyncio client: the same calls, answers and errors as `Client`, over httpx.AsyncClient."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from elasticityops.client.calls import (
    Call,
    M,
    Requests,
    RetryPolicy,
    WaitPolicy,
    as_dict,
    auth_headers,
    check,
    describe,
    error_from,
    hold_for,
    never_sent,
    parse,
    pause_after,
    refuses_hold,
    retry_after_of,
    settings,
    spec_from,
    timeout_for,
    wait_seconds,
)
from elasticityops.client.errors import ApiError, ConnectionFailed
from elasticityops.domain.functions import FunctionSpec
from elasticityops.wire import FunctionList, FunctionOut, InvocationList, InvocationOut


class AsyncClient:
    """The same API for asyncio code; same settings and errors as `Client`."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        wait_policy: WaitPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url, self.token = settings(url, token)
        self.retry = retry or RetryPolicy()
        self.wait_policy = wait_policy or WaitPolicy()
        self.requests = Requests()
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=auth_headers(self.token), transport=transport
        )
        self._long_polls = True  # off once the gateway refuses our holds; then plain polling

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(self, call: Call) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    headers=call.headers,
                    content=call.content,
                    timeout=timeout_for(call),
                )
            except httpx.TransportError as exc:
                if attempt + 1 < self.retry.attempts and (call.repeatable or never_sent(exc)):
                    await asyncio.sleep(self.retry.delay(attempt, None))
                    attempt += 1
                    continue
                raise ConnectionFailed(self.url, describe(exc)) from None
            if response.status_code in (429, 503) and call.repeatable and attempt + 1 < self.retry.attempts:
                await asyncio.sleep(self.retry.delay(attempt, retry_after_of(response)))
                attempt += 1
                continue
            return response

    async def _fetch(self, call: Call, model: type[M]) -> M:
        response = await self.send(call)
        return parse(call, response.status_code, response.content, model)

    async def deploy_function(self, spec: FunctionSpec | Mapping[str, Any] | str | Path) -> FunctionOut:
        return await self._fetch(self.requests.deploy_function(spec_from(spec)), FunctionOut)

    async def list_functions(self) -> list[FunctionOut]:
        return (await self._fetch(self.requests.list_functions(), FunctionList)).items

    async def get_function(self, name: str) -> FunctionOut:
        return await self._fetch(self.requests.get_function(name), FunctionOut)

    async def delete_function(self, name: str, *, force: bool = False) -> None:
        """Remove a function; `force` fails its queued invocations and cancels its running ones
        (without it the server refuses while any are live)."""
        call = self.requests.delete_function(name, force=force)
        response = await self.send(call)
        check(call, response.status_code, response.content)

    async def invoke(
        self,
        name: str,
        payload: Any = None,
        *,
        wait: float | None = None,
        idempotency_key: str | None = None,
    ) -> InvocationOut:
        loop = asyncio.get_running_loop()
        began = loop.time()
        hold = None
        if wait is not None and self._long_polls:
            hold = min(self.wait_policy.long_poll_s, wait_seconds(wait))
        try:
            inv = await self._fetch(
                self.requests.invoke(name, payload, wait=hold, idempotency_key=idempotency_key), InvocationOut
            )
        except ApiError as exc:
            if not (hold and refuses_hold(exc)):
                raise
            self._long_polls = False
            inv = await self._fetch(
                self.requests.invoke(name, payload, idempotency_key=idempotency_key), InvocationOut
            )
        if wait is None or inv.state.terminal:
            return inv
        left = wait - (loop.time() - began)
        return inv if left <= 0 else await self.wait(inv.id, left)

    async def get_invocation(self, invocation_id: str, *, wait: int | None = None) -> InvocationOut:
        return await self._fetch(self.requests.get_invocation(invocation_id, wait=wait), InvocationOut)

    async def list_invocations(
        self,
        *,
        function: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> InvocationList:
        call = self.requests.list_invocations(function=function, state=state, limit=limit, cursor=cursor)
        return await self._fetch(call, InvocationList)

    async def iter_invocations(
        self, *, function: str | None = None, state: str | None = None, page_size: int = 100
    ) -> AsyncIterator[InvocationOut]:
        cursor: str | None = None
        while True:
            page = await self.list_invocations(function=function, state=state, limit=page_size, cursor=cursor)
            for item in page.items:
                yield item
            if not page.next_cursor or not page.items:
                return
            cursor = page.next_cursor

    async def logs(self, invocation_id: str, *, follow: bool = False) -> AsyncIterator[str]:
        call = self.requests.logs(invocation_id, follow=follow)
        try:
            async with self._http.stream(
                call.method, call.path, params=call.params, headers=call.headers, timeout=timeout_for(call)
            ) as response:
                if response.status_code not in call.expect:
                    raise error_from(response.status_code, await response.aread())
                async for chunk in response.aiter_text():
                    yield chunk
        except httpx.TransportError as exc:
            raise ConnectionFailed(self.url, describe(exc)) from None

    async def cancel(self, invocation_id: str) -> InvocationOut:
        return await self._fetch(self.requests.cancel(invocation_id), InvocationOut)

    # The same signature as Client.wait; long polls need a deadline of their own between calls.
    async def wait(self, invocation_id: str, timeout: float | None = None) -> InvocationOut:  # noqa: ASYNC109
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            began = loop.time()
            hold = hold_for(self.wait_policy, began, deadline) if self._long_polls else 0
            try:
                inv = await self.get_invocation(invocation_id, wait=hold)
            except ApiError as exc:
                if not (hold and refuses_hold(exc)):
                    raise
                self._long_polls = False
                continue
            now = loop.time()
            if inv.state.terminal or (deadline is not None and now >= deadline):
                return inv
            pause = pause_after(self.wait_policy, hold, now - began, now, deadline)
            if pause:
                await asyncio.sleep(pause)

    async def health(self) -> dict[str, Any]:
        call = self.requests.health()
        response = await self.send(call)
        check(call, response.status_code, response.content)
        return as_dict(response.content)
