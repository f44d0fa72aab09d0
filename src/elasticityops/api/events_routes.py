"""/v1/events: the console's live updates as server-sent events (api/console/feed.py).

Authenticated like every /v1 route, by the bearer header (fetch streaming) or by the console's
session cookie (the browser's EventSource, which cannot send headers)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse

from elasticityops.api.auth import token_digest
from elasticityops.api.console.feed import KEEPALIVE, MAX_WATCH, Stream
from elasticityops.api.console.stream_slots import Holder
from elasticityops.api.held_open import Hold, ReleasingResponse
from elasticityops.api.runtime import Runtime
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.wire import ErrorOut

router = APIRouter(tags=["console"])
# Tells EventSource to come back 2 s after a drop (its default is about 3 s); the first frame.
_HELLO = b"retry: 2000\nevent: hello\ndata: {}\n\n"


def _watch_param(raw: str | None) -> list[str]:
    ids = [i for i in (raw or "").split(",") if i]
    if len(ids) > MAX_WATCH or any(not i.startswith("inv-") or len(i) > 40 for i in ids):
        raise InvalidInput(
            [
                FieldProblem(
                    "watch",
                    f"is not a list of at most {MAX_WATCH} invocation ids",
                    "pass the ids shown, comma-separated (inv-...)",
                )
            ]
        )
    return ids


@router.get(
    "/events",
    response_class=StreamingResponse,
    responses={
        200: {"content": {"text/event-stream": {}}, "description": "server-sent events"},
        401: {"model": ErrorOut, "description": "missing or wrong token"},
        422: {"model": ErrorOut, "description": "a bad watch list"},
        503: {
            "model": ErrorOut,
            "description": "too many streams are open on this replica, or by this token",
        },
    },
    summary="Live changes of invocations (server-sent events)",
    description='Frames: `hello` first; `changes` with `{"changes": [{"id", "state", '
    '"attempt"}]}` for invocations accepted or moved since the last (gathered a moment); '
    "`resync` when the reader fell behind or too much changed at once: read the list again. "
    "`watch` names the ids a page shows, so a replica that does not run them still follows them. "
    "The stream ends when its token is revoked or expires, and when the gateway stops.",
)
async def events(
    request: Request,
    watch: str | None = Query(None, max_length=MAX_WATCH * 41, description="invocation ids, comma-separated"),
) -> StreamingResponse:
    rt: Runtime = request.app.state.runtime
    ids = _watch_param(watch)
    stream = rt.feed.open(Holder.of(request.state.api_token), ids)
    hold = Hold(rt.stopping, rt.tokens, token_digest(request))
    hold.let_go.add_done_callback(lambda _: stream.end())

    def close() -> None:
        hold.release()
        rt.feed.close(stream)

    return ReleasingResponse(
        _frames(stream, rt.settings.feed.heartbeat_s),
        close,
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _frames(stream: Stream, heartbeat_s: float) -> AsyncIterator[bytes]:
    yield _HELLO
    while not stream.ended:
        frame = await stream.next(heartbeat_s)
        if not stream.ended:
            yield frame or KEEPALIVE
