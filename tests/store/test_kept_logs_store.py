"""The logs kept of attempts whose pods go as they end (store/kept_logs.py), on SQLite and
PostgreSQL: kept per attempt and worker, replaced when kept again, read back by the worker the
record names or else the latest; and what a read shows of one whose beginning was dropped."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from elasticityops.domain.kept_logs import KeptLog, LastBytes
from elasticityops.store.sql import SqlStore

T0 = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)


def test_logs_are_kept_per_attempt_and_worker_replaced_and_read_back(
    store: SqlStore, run: asyncio.Runner
) -> None:
    first = KeptLog("inv-1", 0, "worker-1", b"hello\n\x00\xff binary too\n", False, T0)

    async def body() -> None:
        assert await store.kept_log("inv-1", 0) is None
        await store.keep_log(first)
        assert await store.kept_log("inv-1", 0) == first
        assert await store.kept_log("inv-1", 1) is None, "another attempt's"
        # The same attempt's run in a second worker (MultiKueue ran it again), kept later.
        second = KeptLog("inv-1", 0, "worker-2", b"again\n", True, T0 + timedelta(seconds=5))
        await store.keep_log(second)
        assert await store.kept_log("inv-1", 0, "worker-1") == first, "the worker the record names"
        assert await store.kept_log("inv-1", 0) == second, "no worker named: the latest"
        assert await store.kept_log("inv-1", 0, "worker-9") is None, "another worker's run is not its"
        # Kept again (a gateway that restarted before letting the pod go): replaced, not doubled.
        again = KeptLog("inv-1", 0, "worker-1", b"hello, once more\n", False, T0 + timedelta(seconds=9))
        await store.keep_log(again)
        assert await store.kept_log("inv-1", 0, "worker-1") == again

    run.run(body())


def test_only_the_last_bytes_are_kept_and_a_read_says_the_beginning_is_not() -> None:
    def last(chunks: list[bytes], limit: int) -> tuple[bytes, bool]:
        tail = LastBytes(limit)
        for chunk in chunks:
            tail.add(chunk)
        return tail.value(), tail.dropped

    assert last([b"abc", b"def"], 10) == (b"abcdef", False)
    assert last([b"abc", b"def"], 6) == (b"abcdef", False)
    assert last([b"abc", b"def"], 4) == (b"cdef", True)
    assert last([b"x" * 100] * 1000 + [b"end"], 8) == (b"xxxxxend", True), "a long stream, trimmed as read"
    # Cut inside a line (or a character): from the first whole line on.
    assert last([b"line 1\n", "é2\n".encode(), b"end\n"], 7) == (b"end\n", True)
    tail = LastBytes(8)
    for _ in range(1000):
        tail.add(b"y" * 7)
        assert len(tail._buffer) <= 16, "never more than twice the limit held"
    assert KeptLog("i", 0, "w", b"tail\n", False, T0).shown() == b"tail\n"
    assert KeptLog("i", 0, "w", b"tail\n", True, T0).shown() == (
        b"[eops: the log was longer; its last 5 bytes were kept]\ntail\n"
    )
