"""What gateway replicas share through the store, on SQLite and PostgreSQL: the callback secret
(get-or-create, the old data-dir file adopted once), the functions' generation counter and the
cache that watches it, cancel requests, and the stamps the change poller reads."""

from __future__ import annotations

import asyncio
import os
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, update

from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.invocations import State
from elasticityops.domain.ports import Change
from elasticityops.server.credentials import SECRET_FILE, server_secret
from elasticityops.store.sql import SqlStore
from elasticityops.store.tables import invocations

from .conftest import open_store
from .test_sql_store import T0, new, spec


def test_a_secret_is_made_once_and_every_later_candidate_gets_the_stored_one(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> tuple[bytes, bytes, bytes]:
        first = await store.gateway_secret("callback", b"a" * 32, T0)
        second = await store.gateway_secret("callback", b"b" * 32, T0)
        other = await store.gateway_secret("another", b"c" * 32, T0)
        return first, second, other

    assert run.run(body()) == (b"a" * 32, b"a" * 32, b"c" * 32)


def test_replicas_starting_together_all_get_the_first_stored_secret(
    store_url: str, run: asyncio.Runner, tmp_path: Path
) -> None:
    """Each replica its own store (connection pool) and data dir, all at once: one secret."""

    async def body() -> list[bytes]:
        stores = await asyncio.gather(*(open_store(store_url) for _ in range(6)))
        try:
            return list(
                await asyncio.gather(
                    *(server_secret(s, tmp_path / f"data-{i}", ManualClock()) for i, s in enumerate(stores))
                )
            )
        finally:
            await asyncio.gather(*(s.close() for s in stores))

    secrets = run.run(body())
    assert len(secrets[0]) == 32
    assert secrets == [secrets[0]] * 6
    for i in range(6):
        data = tmp_path / f"data-{i}"
        assert stat.S_IMODE(data.stat().st_mode) == 0o700
        assert not (data / SECRET_FILE).exists(), "the database keeps it now, not each data dir"


def test_the_old_secret_file_goes_into_an_empty_database_and_the_database_wins_afterwards(
    store: SqlStore, run: asyncio.Runner, tmp_path: Path
) -> None:
    old = tmp_path / "old"
    old.mkdir(mode=0o700)
    fd = os.open(old / SECRET_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, b"k" * 32)
    os.close(fd)
    other = tmp_path / "other"
    other.mkdir(mode=0o700)
    (other / SECRET_FILE).write_bytes(b"z" * 32)

    async def body() -> tuple[bytes, bytes, bytes]:
        adopted = await server_secret(store, old, ManualClock())
        elsewhere = await server_secret(store, other, ManualClock())
        fresh = await server_secret(store, tmp_path / "fresh", ManualClock())
        return adopted, elsewhere, fresh

    assert run.run(body()) == (b"k" * 32, b"k" * 32, b"k" * 32)
    assert (old / SECRET_FILE).read_bytes() == b"k" * 32, "left alone for a rollback"
    assert stat.S_IMODE((old / SECRET_FILE).stat().st_mode) == 0o600


def test_every_function_write_and_only_a_write_moves_the_generation(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> list[int]:
        seen = [await store.functions_generation()]
        await store.put_function(spec(), T0)
        seen.append(await store.functions_generation())
        await store.put_function(spec(), T0)  # unchanged: no write
        seen.append(await store.functions_generation())
        await store.put_function(spec(timeout_seconds=5), T0)
        seen.append(await store.functions_generation())
        assert await store.delete_function("hello", T0)
        seen.append(await store.functions_generation())
        assert not await store.delete_function("hello", T0)
        seen.append(await store.functions_generation())
        return seen

    assert run.run(body()) == [0, 1, 1, 2, 3, 3]


class CountingStore:
    """The real store, counting the reads the function cache makes."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.reads: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.store, name)
        if name not in ("get_function", "functions_generation"):
            return real

        async def counted(*args: Any) -> Any:
            self.reads[name] = self.reads.get(name, 0) + 1
            return await real(*args)

        return counted


def test_another_replicas_deploy_and_delete_are_seen_within_the_bound_without_a_read_per_use(
    store_url: str, run: asyncio.Runner
) -> None:
    async def body() -> None:
        a, b = await open_store(store_url), await open_store(store_url)
        try:
            clock = ManualClock()
            counted = CountingStore(b)
            cache = FunctionCache(counted, clock, check_s=1.0)
            await a.put_function(spec(timeout_seconds=10), T0)
            first = await cache.get("hello")
            assert first is not None
            assert first.version == 1
            await a.put_function(spec(timeout_seconds=20), T0)  # v2, written by replica A
            for _ in range(1000):
                record = await cache.get("hello")
                assert record is not None
                assert record.version == 1, "within the bound: the cached one"
            assert counted.reads == {"functions_generation": 1, "get_function": 1}
            clock.advance(1.0)
            record = await cache.get("hello")
            assert record is not None
            assert record.version == 2
            assert counted.reads == {"functions_generation": 2, "get_function": 2}
            await a.delete_function("hello", T0)
            clock.advance(1.0)
            assert await cache.get("hello") is None
            assert (await cache.version("hello", 2)) is not None, "versions are kept after a delete"
        finally:
            await a.close()
            await b.close()

    run.run(body())


def test_concurrent_uses_past_the_bound_share_one_check_and_one_read_of_a_dropped_record(
    store_url: str, run: asyncio.Runner
) -> None:
    async def body() -> dict[str, int]:
        store = await open_store(store_url)
        try:
            clock = ManualClock()
            counted = CountingStore(store)
            cache = FunctionCache(counted, clock, check_s=1.0)
            await store.put_function(spec(), T0)
            await cache.get("hello")
            await store.put_function(spec(timeout_seconds=9), T0)  # as another replica would
            clock.advance(2.0)
            found = await asyncio.gather(*(cache.get("hello") for _ in range(50)))
            assert [r.version if r else None for r in found] == [2] * 50
            return counted.reads
        finally:
            await store.close()

    reads = run.run(body())
    # One check for all 50, and one read of the record they all missed after it.
    assert reads == {"functions_generation": 2, "get_function": 2}


async def _pending(store: SqlStore) -> str:
    item = new()
    await store.create_invocation(item)
    assert await store.apply(Change(item.id, State.pending, T0)) is not None
    return item.id


def test_a_cancel_request_is_recorded_on_active_work_only_and_an_end_clears_it(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        at = T0 + timedelta(seconds=5)
        running = await _pending(store)
        await store.apply(Change(running, State.running, T0))
        queued = new()
        await store.create_invocation(queued)
        assert await store.cancel_requests(10) == []
        requested = await store.request_cancel(running, at)
        assert requested is not None
        assert (requested.state, requested.cancel_requested) == (State.running, at)
        again = await store.request_cancel(running, at + timedelta(seconds=1))
        assert again is not None
        assert again.cancel_requested == at, "the first request stands"
        left = await store.request_cancel(queued.id, at)
        assert left is not None
        assert left.cancel_requested is None, "a queued one is cancelled, not asked"
        assert await store.request_cancel("inv-unknown", at) is None
        assert [i.id for i in await store.cancel_requests(10)] == [running]
        done = await store.apply(Change(running, State.cancelled, at))
        assert done is not None
        assert done.cancel_requested is None
        assert await store.cancel_requests(10) == []
        got = await store.get_invocation(running)
        assert got is not None
        assert got.cancel_requested is None

    run.run(body())


def test_a_request_left_on_an_ended_invocation_is_dropped_and_an_active_ones_stays(
    store_url: str, run: asyncio.Runner
) -> None:
    """Replica B's request committed while replica A's end was being written from a row read
    before it (PostgreSQL, two transactions at once): A's compare-and-set is on the state, so the
    end stands and the request is left on an ended row. Made here by writing the column as
    that race leaves it; the dispatcher's look finds it and drops it."""

    async def body() -> None:
        a, b = await open_store(store_url), await open_store(store_url)
        try:
            ended = await _pending(a)
            active = await _pending(a)
            assert await b.request_cancel(active, T0) is not None
            assert await a.apply(Change(ended, State.succeeded, T0)) is not None
            engine = create_engine(store_url)
            try:
                with engine.begin() as conn:
                    conn.execute(
                        update(invocations)
                        .where(invocations.c.id == ended)
                        .values(cancel_requested_at=T0 - timedelta(seconds=1))
                    )
            finally:
                engine.dispose()
            found = await a.cancel_requests(10)
            assert [(i.id, i.state) for i in found] == [(ended, State.succeeded), (active, State.pending)]
            assert await a.drop_cancel_requests([ended, active]) == 1
            assert [i.id for i in await a.cancel_requests(10)] == [active]
        finally:
            await a.close()
            await b.close()

    run.run(body())


def test_change_stamps_read_state_and_attempt_of_many_in_one_call(
    store: SqlStore, run: asyncio.Runner
) -> None:
    async def body() -> None:
        ids = []
        for _ in range(700):  # more than one IN (...) batch
            item = new()
            await store.create_invocation(item)
            ids.append(item.id)
        await store.apply(Change(ids[0], State.pending, T0))
        stamps = await store.change_stamps([*ids, "inv-unknown"])
        assert len(stamps) == 700
        assert stamps[ids[0]] == (State.pending, 0)
        assert stamps[ids[-1]] == (State.queued, 0)

    run.run(body())
