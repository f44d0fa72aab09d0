"""The synchronous client: the one place it does I/O is `Client.send`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
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


class Client:
    """Synchronous client. `url` and `token` default to EOPS_URL and EOPS_TOKEN.

    `transport` replaces the network (tests use httpx.MockTransport); `sleep` and `monotonic`
    replace the clock for retries and `wait`."""

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        *,
        retry: RetryPolicy | None = None,
        wait_policy: WaitPolicy | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.url, self.token = settings(url, token)
        self.retry = retry or RetryPolicy()
        self.wait_policy = wait_policy or WaitPolicy()
        self.requests = Requests()
        self._sleep = sleep
        self._monotonic = monotonic
        self._http = httpx.Client(base_url=self.url, headers=auth_headers(self.token), transport=transport)
        self._long_polls = True  # off once the gateway refuses our holds; then plain polling

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    # The one I/O point: send a Call, retrying only what is safe to repeat.
    def send(self, call: Call) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    headers=call.headers,
                    content=call.content,
                    timeout=timeout_for(call),
                )
            except httpx.TransportError as exc:
                if attempt + 1 < self.retry.attempts and (call.repeatable or never_sent(exc)):
                    self._sleep(self.retry.delay(attempt, None))
                    attempt += 1
                    continue
                raise ConnectionFailed(self.url, describe(exc)) from None
            if response.status_code in (429, 503) and call.repeatable and attempt + 1 < self.retry.attempts:
                self._sleep(self.retry.delay(attempt, retry_after_of(response)))
                attempt += 1
                continue
            return response

    def _fetch(self, call: Call, model: type[M]) -> M:
        response = self.send(call)
        return parse(call, response.status_code, response.content, model)

    def deploy_function(self, spec: FunctionSpec | Mapping[str, Any] | str | Path) -> FunctionOut:
        """Create or replace a function from a spec, a mapping or a YAML/JSON file path."""
        return self._fetch(self.requests.deploy_function(spec_from(spec)), FunctionOut)

    def list_functions(self) -> list[FunctionOut]:
        return self._fetch(self.requests.list_functions(), FunctionList).items

    def get_function(self, name: str) -> FunctionOut:
        return self._fetch(self.requests.get_function(name), FunctionOut)

    def delete_function(self, name: str, *, force: bool = False) -> None:
        """Remove a function; `force` fails its queued invocations and cancels its running ones
        (without it the server refuses while any are live)."""
        call = self.requests.delete_function(name, force=force)
        response = self.send(call)
        check(call, response.status_code, response.content)

    def invoke(
        self,
        name: str,
        payload: Any = None,
        *,
        wait: float | None = None,
        idempotency_key: str | None = None,
    ) -> InvocationOut:
        """Start an invocation with a JSON payload (None: the job gets null). With `wait`,
        return when it ends or after that many seconds, whichever comes first: the answer is
        final if `.state.terminal`, else its state at that moment."""
        began = self._monotonic()
        hold = None
        if wait is not None and self._long_polls:
            hold = min(self.wait_policy.long_poll_s, wait_seconds(wait))
        try:
            inv = self._fetch(
                self.requests.invoke(name, payload, wait=hold, idempotency_key=idempotency_key), InvocationOut
            )
        except ApiError as exc:
            if not (hold and refuses_hold(exc)):
                raise
            self._long_polls = False
            inv = self._fetch(
                self.requests.invoke(name, payload, idempotency_key=idempotency_key), InvocationOut
            )
        if wait is None or inv.state.terminal:
            return inv
        left = wait - (self._monotonic() - began)
        return inv if left <= 0 else self.wait(inv.id, left)

    def get_invocation(self, invocation_id: str, *, wait: int | None = None) -> InvocationOut:
        """An invocation's state; with `wait`, the server holds the answer up to that many
        seconds until it ends."""
        return self._fetch(self.requests.get_invocation(invocation_id, wait=wait), InvocationOut)

    def list_invocations(
        self,
        *,
        function: str | None = None,
        state: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> InvocationList:
        call = self.requests.list_invocations(function=function, state=state, limit=limit, cursor=cursor)
        return self._fetch(call, InvocationList)

    def iter_invocations(
        self, *, function: str | None = None, state: str | None = None, page_size: int = 100
    ) -> Iterator[InvocationOut]:
        """Every matching invocation, newest first as the server orders them, page by page."""
        cursor: str | None = None
        while True:
            page = self.list_invocations(function=function, state=state, limit=page_size, cursor=cursor)
            yield from page.items
            if not page.next_cursor or not page.items:
                return
            cursor = page.next_cursor

    def logs(self, invocation_id: str, *, follow: bool = False) -> Iterator[str]:
        """The invocation's output as text chunks; with `follow`, until it ends."""
        call = self.requests.logs(invocation_id, follow=follow)
        try:
            with self._http.stream(
                call.method, call.path, params=call.params, headers=call.headers, timeout=timeout_for(call)
            ) as response:
                if response.status_code not in call.expect:
                    raise error_from(response.status_code, response.read())
                yield from response.iter_text()
        except httpx.TransportError as exc:
            raise ConnectionFailed(self.url, describe(exc)) from None

    def cancel(self, invocation_id: str) -> InvocationOut:
        return self._fetch(self.requests.cancel(invocation_id), InvocationOut)

    def wait(
        self,
        invocation_id: str,
        timeout: float | None = None,
        *,
        on_update: Callable[[InvocationOut], None] | None = None,
    ) -> InvocationOut:
        """Wait until the invocation ends or `timeout` seconds pass (None: no limit), by long
        polls; returns its last seen state, not terminal when the timeout ran out. `on_update`
        sees every answer (the CLI's progress display: a short `long_poll_s` makes them often)."""
        deadline = None if timeout is None else self._monotonic() + timeout
        while True:
            began = self._monotonic()
            hold = hold_for(self.wait_policy, began, deadline) if self._long_polls else 0
            try:
                inv = self.get_invocation(invocation_id, wait=hold)
            except ApiError as exc:
                if not (hold and refuses_hold(exc)):
                    raise
                self._long_polls = False
                continue
            if on_update is not None:
                on_update(inv)
            now = self._monotonic()
            if inv.state.terminal or (deadline is not None and now >= deadline):
                return inv
            pause = pause_after(self.wait_policy, hold, now - began, now, deadline)
            if pause:
                self._sleep(pause)

    def health(self) -> dict[str, Any]:
        """The gateway's readiness answer (/readyz); raises when it is not ready."""
        call = self.requests.health()
        response = self.send(call)
        check(call, response.status_code, response.content)
        return as_dict(response.content)
