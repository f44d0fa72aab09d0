"""`GET /v1/invocations/{id}/logs`: the job's output, read or followed. A follow is held open
until the invocation has ended and its output gone quiet, the gateway stops, or the token goes
(api/held_open.py), and its body always ends complete."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fastapi.responses import StreamingResponse

from elasticityops.api.held_open import Hold, ReleasingResponse
from elasticityops.api.runtime import Runtime
from elasticityops.api.waiting import ended, get_or_404, started_or_ended, wait_for_end
from elasticityops.domain.errors import FieldProblem, InvalidInput, TemporaryError
from elasticityops.domain.invocations import Invocation


async def logs_response(
    rt: Runtime, invocation_id: str, follow: bool, attempt: int | None, digest: str
) -> StreamingResponse:
    inv = await get_or_404(rt, invocation_id)
    if attempt is not None and attempt > inv.attempt:
        raise InvalidInput(
            [
                FieldProblem(
                    "attempt",
                    f"{inv.id} has had attempts 0 to {inv.attempt}; there is no attempt {attempt}",
                    f"ask for one from 0 to {inv.attempt}, or leave attempt out for the current one",
                )
            ]
        )
    earlier = attempt is not None and attempt < inv.attempt  # over: read, never followed
    if not follow or earlier:
        chunks = rt.backend.logs(inv, False, attempt)
        return StreamingResponse(_output(await _first(chunks), chunks), media_type=_TEXT)
    # Held until the body ends (ReleasingResponse): the gateway stopping or the token going
    # ends the follow, its body complete.
    hold = Hold(rt.stopping, rt.tokens, digest)
    try:
        # A job that has not started has no output yet: wait (bounded) for it to start.
        inv = await wait_for_end(rt, inv, rt.settings.api.max_wait_seconds, started_or_ended, hold)
        hold.check_token()
        # An invocation already over has nothing left to follow: read what it wrote and stop.
        following = not inv.state.terminal and hold.reason is None
        chunks = rt.backend.logs(inv, following, attempt)
        if following:
            chunks = _until_ended(rt, inv, chunks, hold)
        first = await _first(chunks)
    except BaseException:
        hold.release()
        raise

    async def stream() -> AsyncIterator[bytes]:
        async for chunk in _output(first, chunks):
            yield chunk
        # The backend's output ends as the job exits, a moment before its end is recorded: a
        # follow ends when the invocation has, so the next read says so.
        await wait_for_end(rt, inv, _FOLLOW_SETTLE_SECONDS, ended, hold)

    return ReleasingResponse(stream(), hold.release, media_type=_TEXT)


_TEXT = "text/plain; charset=utf-8"


async def _first(chunks: AsyncIterator[bytes]) -> bytes:
    """The first chunk, pulled before answering, so a failure there is still a proper error."""
    try:
        return await anext(chunks)
    except StopAsyncIteration:
        return b""


async def _output(first: bytes, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if first:
        yield first
    async for chunk in chunks:
        yield chunk


_FOLLOW_SETTLE_SECONDS = 10  # the longest a follow waits, after the output ends, for the end
_FOLLOW_DRAIN_SECONDS = 2.0  # after the end, the longest a follow waits for more output
_NO_DEADLINE_SECONDS = 366 * 86400.0


async def _until_ended(
    rt: Runtime, inv: Invocation, chunks: AsyncIterator[bytes], hold: Hold
) -> AsyncIterator[bytes]:
    """The backend's output until it ends, or until the invocation has ended and the output has
    then been quiet for _FOLLOW_DRAIN_SECONDS, or at once when the hold lets go. A stream may
    outlive its job: kwok's stand-in for a kubelet tails a log file for ever, and a proxy to a
    node that is gone may never close; a follow must end with the invocation all the same."""
    ended = asyncio.ensure_future(_ended_at_last(rt, inv))
    pending: asyncio.Future[bytes] | None = None
    try:
        while True:
            pending = asyncio.ensure_future(anext(chunks))
            if not ended.done():
                await asyncio.wait((pending, ended, hold.let_go), return_when=asyncio.FIRST_COMPLETED)
            if hold.let_go.done():
                return
            if not pending.done():
                # Over: what is left of its output comes now or not at all.
                await asyncio.wait((pending,), timeout=_FOLLOW_DRAIN_SECONDS)
                if not pending.done():
                    return
            nxt, pending = pending, None
            try:
                chunk = nxt.result()
            except StopAsyncIteration:
                return
            yield chunk
    finally:
        ended.cancel()
        if pending is not None and not pending.done():
            pending.cancel()  # closes the backend's stream at its await
            await asyncio.wait((pending,))
        closing = getattr(chunks, "aclose", None)
        if closing is not None:
            await closing()


async def _ended_at_last(rt: Runtime, inv: Invocation) -> None:
    """Returns once the invocation has ended (or is gone). A store that is away meanwhile ends
    nothing: the output keeps streaming, and the store is asked again."""
    while True:
        try:
            await wait_for_end(rt, inv, _NO_DEADLINE_SECONDS)
            return
        except TemporaryError as exc:
            await asyncio.sleep(max(exc.retry_after, 0.5))
