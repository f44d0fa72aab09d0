"""GET /v1/batches/{id}/events: a batch's invocations as each ends, as server-sent events, until
every one has ended.

Woken by the change hub for this replica's changes; every `heartbeat_s` it also reads the state
of all that have not ended, which finds the changes another replica made (and sends the
keep-alive). The stream counts against the console's stream limits (its slots, its share per
token) and lets go as every request held open does (api/held_open.py): the gateway stopping,
the token revoked or expired."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable

import orjson
from fastapi import Request
from fastapi.responses import StreamingResponse

from elasticityops.api.auth import token_digest
from elasticityops.api.console.feed import KEEPALIVE
from elasticityops.api.console.stream_slots import Holder
from elasticityops.api.encode import invocation_document
from elasticityops.api.held_open import Hold, ReleasingResponse
from elasticityops.api.runtime import Runtime
from elasticityops.background import wait_set
from elasticityops.domain.invocations import Invocation, State
from elasticityops.pricing.table import capacity_of_backend

_HELLO = b"retry: 2000\nevent: hello\ndata: {}\n\n"
_OPTIONS = orjson.OPT_UTC_Z


async def batch_events_response(rt: Runtime, request: Request, batch_id: str) -> StreamingResponse:
    feed = rt.settings.feed
    holder = Holder.of(request.state.api_token)
    rt.batch_streams.open(holder, feed.max_streams, feed.max_streams_per_token)
    follower = _Follower(rt, batch_id)
    hold = Hold(rt.stopping, rt.tokens, token_digest(request))
    hold.let_go.add_done_callback(lambda _: follower.wake.set())

    def close() -> None:
        hold.release()
        follower.close()
        rt.batch_streams.close(holder)

    return ReleasingResponse(
        follower.frames(hold),
        close,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


class _Follower:
    def __init__(self, rt: Runtime, batch_id: str) -> None:
        self._rt = rt
        self._batch_id = batch_id
        self._pending: set[str] = set()
        self._read = False  # until the first read, every change is kept: it may be one of ours
        self._changed: set[str] = set()
        self.wake = asyncio.Event()
        # Listening before the first read: an end between that read and the loop is not missed.
        rt.hub.listen(self._on_change)

    def close(self) -> None:
        self._rt.hub.unlisten(self._on_change)

    def _on_change(self, invocation_id: str) -> None:
        if invocation_id in self._pending or not self._read:
            self._changed.add(invocation_id)
            self.wake.set()

    async def frames(self, hold: Hold) -> AsyncIterator[bytes]:
        rt = self._rt
        yield _HELLO
        states = await rt.store.batch_states(self._batch_id)
        self._pending = {i for i, state in states if not state.terminal}
        self._read = True
        ended = [i for i, state in states if state.terminal]
        if ended:
            yield self._frame_of(await rt.store.ended_among(ended))
        feed = rt.settings.feed
        while self._pending and not hold.let_go.done():
            woken = await wait_set(self.wake, feed.heartbeat_s)
            if hold.let_go.done():
                return
            if woken:
                await asyncio.sleep(feed.flush_s)  # a burst of ends: one read, one write
            self.wake.clear()
            # Woken: what changed here. The heartbeat: all that are left (another replica's).
            look = (self._changed if woken else self._pending) & self._pending
            self._changed = set()
            done = await rt.store.ended_among(sorted(look)) if look else []
            if done:
                yield self._frame_of(done)
            elif not woken:
                yield KEEPALIVE
        if not self._pending:
            status = await rt.store.get_batch(self._batch_id)
            counts = {} if status is None else {s.value: status.counts.get(s, 0) for s in State}
            yield _event("done", {"batch_id": self._batch_id, "counts": counts})

    def _frame_of(self, done: Iterable[Invocation]) -> bytes:
        unnamed = capacity_of_backend(self._rt.settings.backend)
        frames = []
        for inv in done:
            self._pending.discard(inv.id)
            frames.append(_event("ended", invocation_document(inv, unnamed=unnamed, listed=True)))
        return b"".join(frames)


def _event(name: str, data: object) -> bytes:
    return b"event: " + name.encode() + b"\ndata: " + orjson.dumps(data, option=_OPTIONS) + b"\n\n"
