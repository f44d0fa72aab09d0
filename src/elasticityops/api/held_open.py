"""What lets go of a request held open (a `?wait`, a log follow, an event stream) before its
own end: the gateway beginning to stop, or the token the request came with revoked or expired.

A stop must come first: uvicorn, told to stop, waits (up to its graceful timeout) for the open
connections before it runs the lifespan's end, and then cancels what is left, which a client
sees as a bare 500 or a body cut off. So the stop is signalled as it begins (`Stopping`), and
every request held open lets go at once: a `?wait` answers the invocation as it stands, a
follow and an event stream end, their bodies complete. A token revoked or expired while a
request holds something open lets go of it too (auth.TokenChecker.until_invalid): a `?wait`
then answers 401, as any request with that token would; a stream just ends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from enum import Enum
from types import TracebackType

from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from elasticityops.api.auth import HOW_TO_GET_ONE, TokenChecker
from elasticityops.domain.errors import Unauthorized


class Stopping:
    """Set once, when the gateway begins to stop: by uvicorn's shutdown as it starts
    (server/serving.py) and by the lifespan's end. The hooks given to `on_begin` run then."""

    def __init__(self) -> None:
        self._begun = asyncio.Event()
        self._hooks: list[Callable[[], None]] = []

    def on_begin(self, hook: Callable[[], None]) -> None:
        self._hooks.append(hook)

    def begin(self) -> None:
        if self._begun.is_set():
            return
        self._begun.set()
        for hook in self._hooks:
            hook()

    @property
    def begun(self) -> bool:
        return self._begun.is_set()

    async def wait(self) -> None:
        await self._begun.wait()


class LetGo(Enum):
    """Why a request held open lets go before its own end."""

    stopping = "the gateway is stopping"
    token = "the token was revoked or has expired"


class Hold:
    """One request held open: `let_go` ends, with the reason, when the gateway begins to stop
    or the token of `digest` no longer checks. Released (its watch cancelled) on leaving an
    `async with`, or by `release` when the hold outlives the handler (a streamed body)."""

    def __init__(self, stopping: Stopping, tokens: TokenChecker, digest: str) -> None:
        self.let_go: asyncio.Task[LetGo] = asyncio.ensure_future(_first_of(stopping, tokens, digest))

    @property
    def reason(self) -> LetGo | None:
        done = self.let_go.done() and not self.let_go.cancelled()
        return self.let_go.result() if done else None

    def check_token(self) -> None:
        """401 when the token went while this request was held, as any request with it gets."""
        if self.reason is LetGo.token:
            raise Unauthorized(f"the bearer token was revoked or has expired meanwhile: {HOW_TO_GET_ONE}")

    def release(self) -> None:
        self.let_go.cancel()

    async def __aenter__(self) -> Hold:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()


async def _first_of(stopping: Stopping, tokens: TokenChecker, digest: str) -> LetGo:
    stop = asyncio.ensure_future(stopping.wait())
    token = asyncio.ensure_future(tokens.until_invalid(digest))
    try:
        done, _ = await asyncio.wait((stop, token), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        token.cancel()
    if stop in done:
        return LetGo.stopping
    token.result()  # a check that failed (a bug) is no revoke: it comes out here
    return LetGo.token


class ReleasingResponse(StreamingResponse):
    """A streamed body that runs `on_close` however the response ends: a client gone before
    the body's first byte never runs the body's own finally."""

    def __init__(
        self,
        body: AsyncIterator[bytes],
        on_close: Callable[[], None],
        media_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(body, media_type=media_type, headers=headers)
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._on_close()
