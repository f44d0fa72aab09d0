"""The console's live feed: which invocations changed, pushed to every open event stream
(GET /v1/events, server-sent events).

Fed by the hub (changes/hub.py), which hears every change this replica makes: its dispatcher's
transitions on the leader, its own accepts, cancels and results. On a store other replicas write
too (PostgreSQL), the ids the streams show are held as hub watches, so the change poller
(changes/replicas.py) finds what another replica changed in its one query for all waiters, and
the newest invocation is read once an interval, for those accepted elsewhere.

Changes are coalesced: one loop, every `flush_s` at most, reads the (state, attempt) of every id
changed since in one query and encodes one frame, shared by all streams. Each stream buffers at
most `buffer_frames`; a reader that falls behind further loses what it had buffered and is told
to read again (a `resync` frame), so a slow reader never grows memory. Nothing open: no work."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

import orjson

from elasticityops.api.console.stream_slots import Holder, refusal
from elasticityops.background import Background, wait_set
from elasticityops.changes.hub import ChangeHub, Watch
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import TemporaryError
from elasticityops.domain.invocations import new_invocation_id
from elasticityops.domain.ports import InvocationStore
from elasticityops.knobs import knob

log = logging.getLogger(__name__)

RESYNC = b"event: resync\ndata: {}\n\n"
KEEPALIVE = b": keep-alive\n\n"
MAX_WATCH = 200  # ids one stream may ask to be watched: a page's rows and one invocation
_MAX_BATCH = 500  # more changes than this in one flush: a resync is shorter than the list
_NEW_PAGE = 50  # invocations accepted elsewhere, read once an interval (more: the page refetches)
# Another replica stamps an id with its own clock: one accepted this long before a stream opens
# (by this replica's clock) is still shown as new.
_ACCEPT_SKEW_S = 2.0


def _id_floor(epoch_s: float) -> str:
    """Below every invocation id made at or after this time (ids are time-ordered)."""
    return new_invocation_id(int(epoch_s * 1e9), random_bytes=bytes)


@dataclass(frozen=True)
class FeedSettings:
    max_streams: int = knob(
        200,
        env="EOPS_CONSOLE_MAX_STREAMS",
        unit="streams",
        ge=0,
        le=100_000,
        help="Most event streams (console pages) open at once on this replica, the last of them "
        "kept for admin tokens; one more is answered 503 with Retry-After.",
    )
    max_streams_per_token: int = knob(
        20,
        env="EOPS_CONSOLE_MAX_STREAMS_PER_TOKEN",
        unit="streams",
        ge=1,
        le=100_000,
        help="Most event streams one token (its console sessions included) holds open at once on "
        "this replica; one more is answered 503 with Retry-After.",
    )
    buffer_frames: int = knob(
        32,
        env="EOPS_CONSOLE_STREAM_BUFFER",
        unit="frames",
        ge=1,
        le=100_000,
        help="Frames one event stream holds for a reader that is behind; past that its buffer is "
        "dropped and the reader told to read the list again.",
    )
    flush_s: float = knob(
        0.25,
        env="EOPS_CONSOLE_FLUSH_SECONDS",
        unit="seconds",
        gt=0,
        le=60,
        help="Changes are gathered this long into one frame for all streams (one store read).",
    )
    heartbeat_s: float = knob(
        15.0,
        env="EOPS_CONSOLE_HEARTBEAT_SECONDS",
        unit="seconds",
        gt=0,
        le=3600,
        help="A quiet event stream sends a comment this often, so proxies keep it and a gone "
        "reader is noticed.",
    )


class TooManyStreams(TemporaryError):
    code = "too_many_streams"


class Stream:
    """One open stream's bounded buffer of frames."""

    def __init__(self, limit: int, watch: frozenset[str], holder: Holder) -> None:
        self.watch = watch
        self.holder = holder
        self._limit = limit
        self._frames: deque[bytes] = deque()
        self._ready = asyncio.Event()
        self.ended = False
        self.dropped = 0  # frames lost to a full buffer, for the tests and the bench

    def put(self, frame: bytes) -> None:
        if len(self._frames) >= self._limit:
            self.dropped += len(self._frames)
            self._frames.clear()
            frame = RESYNC
        self._frames.append(frame)
        self._ready.set()

    def buffered(self) -> int:
        return len(self._frames)

    def end(self) -> None:
        """No more frames (its token went, the gateway stops): `next` is None at once from now."""
        self.ended = True
        self._frames.clear()
        self._ready.set()

    async def next(self, wait_s: float) -> bytes | None:
        """The next frame; None when there was none within `wait_s` seconds, or it has ended."""
        if not self._frames and not self.ended:
            self._ready.clear()
            await wait_set(self._ready, wait_s)
        return self._frames.popleft() if self._frames else None


class ConsoleFeed:
    def __init__(
        self,
        store: InvocationStore,
        hub: ChangeHub,
        clock: Clock,
        settings: FeedSettings,
        *,
        others_write: bool,
        poll_s: float,
    ) -> None:
        self._store = store
        self._hub = hub
        self._clock = clock
        self._settings = settings
        self._others_write = others_write
        self._poll_s = poll_s
        self._streams: set[Stream] = set()
        self._held: Counter[str] = Counter()  # open streams by token id
        self._changed: set[str] = set()
        self._wake = asyncio.Event()
        self._watches: dict[str, tuple[contextlib.ExitStack, Watch]] = {}
        self._since: str | None = None  # ids above this one are new to the streams
        self._loop_task = Background("console feed")
        self.frames = 0  # frames made, for the tests and the bench

    def open(self, holder: Holder, watch: Iterable[str] = ()) -> Stream:
        settings = self._settings
        refused = refusal(
            holder, self._held, len(self._streams), settings.max_streams, settings.max_streams_per_token
        )
        if refused is not None:
            raise TooManyStreams(refused, retry_after=5)
        stream = Stream(settings.buffer_frames, frozenset(watch), holder)
        if self._since is None:
            self._since = _id_floor(self._clock.now().timestamp() - _ACCEPT_SKEW_S)
        self._streams.add(stream)
        self._held[holder.token_id] += 1
        self._wake.set()  # watch its ids now, not at the next change
        return stream

    def close(self, stream: Stream) -> None:
        if stream not in self._streams:
            return
        self._streams.remove(stream)
        self._held[stream.holder.token_id] -= 1
        if not self._held[stream.holder.token_id]:
            del self._held[stream.holder.token_id]
        if not self._streams:
            self._wake.set()  # the loop drops the watches: the poller stops reading for us

    def start(self) -> None:
        if not self._loop_task.running:
            self._hub.listen(self._on_change)
            self._loop_task.start(self._loop)

    async def stop(self) -> None:
        self._hub.unlisten(self._on_change)
        await self._loop_task.stop()
        self._drop_watches()

    def _drop_watches(self) -> None:
        for stack, _ in self._watches.values():
            stack.close()
        self._watches.clear()

    def _on_change(self, invocation_id: str) -> None:
        if self._streams:
            self._changed.add(invocation_id)
            self._wake.set()

    async def _loop(self) -> None:
        while True:
            timeout = self._poll_s if self._others_write and self._streams else None
            await wait_set(self._wake, timeout)
            # A burst's changes arrive hundreds a second: gather them into one frame.
            await self._clock.sleep(self._settings.flush_s)
            self._wake.clear()
            try:
                await self.flush()
            except Exception:
                # The database away for a moment: the streams stay open and catch up after.
                log.exception("console feed flush failed")

    async def flush(self) -> None:
        """One frame, to every stream, of what changed since the last."""
        changed, self._changed = self._changed, set()
        if not self._streams:
            self._since = None
            self._drop_watches()
            return
        if self._others_write:
            changed |= await self._from_other_replicas()
        if not changed:
            return
        if len(changed) > _MAX_BATCH:
            frame = RESYNC
        else:
            stamps = await self._store.change_stamps(sorted(changed))
            items = [
                {"id": i, "state": stamps[i][0].value, "attempt": stamps[i][1]}
                for i in sorted(changed)
                if i in stamps
            ]
            frame = b"event: changes\ndata: " + orjson.dumps({"changes": items}) + b"\n\n"
        self.frames += 1
        for stream in list(self._streams):
            stream.put(frame)

    async def _from_other_replicas(self) -> set[str]:
        """The watched ids the poller found moved, and the newest invocation if it is new."""
        fired = {i for i, (_, w) in self._watches.items() if w.event.is_set()}
        wanted = set().union(*(s.watch for s in self._streams))
        for invocation_id in [i for i in self._watches if i in fired or i not in wanted]:
            self._watches.pop(invocation_id)[0].close()
        fresh = [i for i in wanted if i not in self._watches]
        for invocation_id in fresh:
            stack = contextlib.ExitStack()
            # Subscribed before the read below, as the hub asks, so no change falls between.
            self._watches[invocation_id] = (stack, stack.enter_context(self._hub.watch(invocation_id)))
        if fresh:
            for invocation_id, (state, attempt) in (await self._store.change_stamps(fresh)).items():
                self._watches[invocation_id][1].saw((state, attempt))
        # Ids are time-ordered: the newest page holds whatever was accepted since the last look.
        page = await self._store.list_invocations(function=None, state=None, limit=_NEW_PAGE, cursor=None)
        since = self._since or ""
        fresh = [i.id for i in page.items if i.id > since]
        if fresh:
            fired.update(fresh)
            self._since = fresh[0]
        return fired
