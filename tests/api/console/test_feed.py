"""The console's feed (api/console/feed.py) on a real SQLite store: changes of this replica come
through the hub, coalesced into one frame and one read for every stream; a slow reader's buffer
stays bounded and it is told to resync; the stream limit is a 503; and on a store another
replica writes, the ids a stream shows are followed through the change poller, and the newest
invocation is found, as a follower needs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from elasticityops.api.console.feed import RESYNC, ConsoleFeed, FeedSettings, Stream, TooManyStreams
from elasticityops.api.console.stream_slots import Holder
from elasticityops.changes.hub import ChangeHub
from elasticityops.changes.replicas import ChangePoller
from elasticityops.domain.clock import ManualClock, SystemClock
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import State, new_invocation_id
from elasticityops.domain.ports import Change, NewInvocation
from elasticityops.store.sql import SqlStore

pytestmark = pytest.mark.anyio
T0 = datetime(2026, 3, 1, tzinfo=UTC)
ADMIN = Holder("tok-000000000000", admin=True)


class CountingStore:
    """The store, counting the feed's reads."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.stamp_reads: list[int] = []

    async def change_stamps(self, ids: Sequence[str]) -> Any:
        self.stamp_reads.append(len(ids))
        return await self.store.change_stamps(ids)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


@dataclass
class Setup:
    here: SqlStore
    there: SqlStore  # another replica's store on the same file
    counted: CountingStore
    hub: ChangeHub

    def feed(self, *, others_write: bool = False, **knobs: Any) -> ConsoleFeed:
        settings = FeedSettings(**{"max_streams": 10, "buffer_frames": 4, "flush_s": 0.01, **knobs})
        return ConsoleFeed(
            self.counted,
            self.hub,
            SystemClock(),
            settings,
            others_write=others_write,
            poll_s=0.05,
        )

    async def accept(self, store: SqlStore | None = None) -> str:
        new = NewInvocation(new_invocation_id(), "hello", 1, Priority.normal.rank, T0, b"{}")
        await (store or self.here).create_invocation(new)
        return new.id


@asynccontextmanager
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    url = f"sqlite:///{tmp_path / 'eops.db'}"
    here, there = await SqlStore.open(url), await SqlStore.open(url)
    try:
        yield Setup(here, there, CountingStore(here), ChangeHub())
    finally:
        await here.close()
        await there.close()


def changes(frame: bytes | None) -> list[dict[str, Any]]:
    assert frame is not None, "no frame"
    assert frame.startswith(b"event: changes\ndata: "), frame
    items: list[dict[str, Any]] = orjson.loads(frame.split(b"data: ", 1)[1])["changes"]
    return items


async def test_changes_are_coalesced_into_one_read_and_one_frame_for_every_stream(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        feed = s.feed()
        feed.start()
        try:
            streams = [feed.open(ADMIN) for _ in range(3)]
            ids = [await s.accept() for _ in range(5)]
            for invocation_id in ids:
                s.hub.changed(invocation_id)
            frames = [await stream.next(2.0) for stream in streams]
        finally:
            await feed.stop()
        assert {c["id"] for c in changes(frames[0])} == set(ids)
        assert all(c["state"] == "queued" for c in changes(frames[0]))
        assert frames[0] is frames[1] is frames[2], "one frame, encoded once, shared"
        assert s.counted.stamp_reads == [5], "one read for the five changes and three streams"


async def test_nobody_streaming_costs_nothing(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        feed = s.feed()
        s.hub.listen(feed._on_change)
        s.hub.changed(await s.accept())
        await feed.flush()
        assert s.counted.stamp_reads == []
        assert feed.frames == 0


async def test_a_slow_reader_keeps_a_bounded_buffer_and_is_told_to_resync(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        feed = s.feed(buffer_frames=4)
        s.hub.listen(feed._on_change)
        slow, quick = feed.open(ADMIN), feed.open(ADMIN)
        got: list[bytes | None] = []
        for _ in range(20):
            s.hub.changed(await s.accept())
            await feed.flush()
            assert slow.buffered() <= 4
            got.append(await quick.next(0))
        assert all(changes(frame) for frame in got), "the quick reader got every frame"
        assert slow.dropped > 0
        frames = [await slow.next(0) for _ in range(slow.buffered())]
        assert RESYNC in frames, "the slow reader learns it lost frames and reads the list again"


async def test_one_stream_past_the_limit_is_refused_until_one_closes(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        feed = s.feed(max_streams=2)
        first = feed.open(ADMIN)
        feed.open(ADMIN)
        with pytest.raises(TooManyStreams) as refused:
            feed.open(ADMIN)
        assert refused.value.status_code == 503
        assert "EOPS_CONSOLE_MAX_STREAMS=2" in refused.value.message
        feed.close(first)
        assert isinstance(feed.open(ADMIN), Stream)


async def test_too_many_changes_at_once_is_one_resync(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        feed = s.feed()
        s.hub.listen(feed._on_change)
        stream = feed.open(ADMIN)
        for n in range(501):
            s.hub.changed(f"inv-{n:04d}")
        await feed.flush()
        assert await stream.next(0) == RESYNC
        assert s.counted.stamp_reads == [], "no read for a list the reader will fetch anyway"


async def test_on_a_shared_store_another_replicas_changes_reach_the_streams(tmp_path: Path) -> None:
    """The follower's path: the dispatcher that moves the invocation runs elsewhere (`there`),
    so this replica's hub hears nothing until its change poller reads the watched ids."""
    async with setup(tmp_path) as s:
        feed = s.feed(others_write=True)
        s.hub.listen(feed._on_change)
        first = feed.open(ADMIN)
        await feed.flush()  # an empty store: nothing newest yet
        watched = await s.accept(s.there)
        await feed.flush()
        assert [c["id"] for c in changes(await first.next(0))] == [watched], "the first one too"
        feed.close(first)
        poller = ChangePoller(s.here, s.hub, ManualClock(), 0.5)
        stream = feed.open(ADMIN, [watched])
        await feed.flush()  # watches the id (and reads what it is now), notes the newest
        assert stream.buffered() == 0
        await s.there.apply(Change(watched, State.pending, T0, from_states=frozenset({State.queued})))
        await poller.poll()
        await feed.flush()
        assert changes(await stream.next(0)) == [{"id": watched, "state": "pending", "attempt": 0}]
        # One accepted on the other replica shows up too, by the newest id.
        fresh = await s.accept(s.there)
        await feed.flush()
        assert [c["id"] for c in changes(await stream.next(0))] == [fresh]
        # The watch was renewed: the next move is found as well.
        await s.there.apply(Change(watched, State.running, T0, from_states=frozenset({State.pending})))
        await poller.poll()
        await feed.flush()
        assert changes(await stream.next(0)) == [{"id": watched, "state": "running", "attempt": 0}]
        feed.close(stream)
        await feed.flush()
        assert s.hub.waited_on() == {}, "no watch outlives the streams: the poller stops reading"


async def test_next_returns_none_after_the_heartbeat_when_nothing_changed(tmp_path: Path) -> None:
    async with setup(tmp_path) as s:
        stream = s.feed().open(ADMIN)
        started = asyncio.get_running_loop().time()
        assert await stream.next(0.05) is None
        assert asyncio.get_running_loop().time() - started >= 0.04
