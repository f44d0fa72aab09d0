"""Group commit: one writer thread runs every write, many per transaction.

Callers on the event loop hand over an operation and await a future; the writer drains
whatever has queued up while the previous commit was in flight, runs it all in one transaction,
commits, and only then resolves each caller's future. Under load one fsync covers hundreds of
invocations; when idle a lone write commits at once (no batching delay).

If a batch fails as a whole, each of its operations is retried in a transaction of its own, so
one bad write fails only its own caller."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine

log = logging.getLogger(__name__)

# A batch of operations of one kind may be run together: `run_many(conn, args)` returns one
# result per argument, in order. Operations without `run_many` run one at a time.
Single = Callable[[Connection], Any]
Many = Callable[[Connection, list[Any]], list[Any]]


@dataclass
class _Op:
    run: Single | None
    many: Many | None
    arg: Any
    future: asyncio.Future[Any]
    loop: asyncio.AbstractEventLoop


_STOP = object()

# Called on the writer thread after each commit with the number of writes it made durable.
CommitObserver = Callable[[int], None]


class GroupCommitWriter:
    def __init__(self, engine: Engine, max_batch: int, translate: Callable[[BaseException], BaseException]):
        self._engine = engine
        self._max_batch = max(1, max_batch)
        self._translate = translate
        self._queue: queue.SimpleQueue[_Op | object] = queue.SimpleQueue()
        self.commit_observers: list[CommitObserver] = []
        self._conn: Connection | None = None  # used by the writer thread only
        self._thread = threading.Thread(target=self._loop, name="eops-store-writer", daemon=True)
        self._thread.start()

    async def run(self, fn: Single) -> Any:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.put(_Op(fn, None, None, future, loop))
        return await future

    async def run_batched(self, many: Many, arg: Any) -> Any:
        """Run `many(conn, [arg, ...])` together with other callers' arguments for the same
        `many` that queued up meanwhile."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._queue.put(_Op(None, many, arg, future, loop))
        return await future

    def stop(self) -> None:
        """Finish what is queued, then end the thread (blocking)."""
        self._queue.put(_STOP)
        self._thread.join()

    def _loop(self) -> None:
        stopping = False
        while not stopping:
            first = self._queue.get()
            if first is _STOP:
                break
            batch: list[_Op] = [first]  # type: ignore[list-item]
            while len(batch) < self._max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stopping = True
                    break
                assert isinstance(item, _Op)
                batch.append(item)
            self._settle(batch, self._run_batch(batch))
        self._drop_connection()

    def _run_batch(self, batch: list[_Op]) -> list[tuple[bool, Any]]:
        try:
            return [(True, r) for r in self._transaction(batch)]
        except Exception:
            if len(batch) == 1:
                return [self._alone(batch[0])]
        return [self._alone(op) for op in batch]

    def _alone(self, op: _Op) -> tuple[bool, Any]:
        try:
            return True, self._transaction([op])[0]
        except Exception as exc:
            return False, self._translate(exc)

    def _transaction(self, ops: Sequence[_Op]) -> list[Any]:
        # One connection kept for the writer's life: checking one out of the pool per batch
        # (and the pool's rollback on return) doubled the CPU a small commit costs. After any
        # failure it is dropped, so a broken one (a restarted PostgreSQL) is never reused.
        if self._conn is None:
            self._conn = self._engine.connect()
        conn = self._conn
        try:
            with conn.begin():
                results = self._run_in(conn, ops)
        except Exception:
            self._drop_connection()
            raise
        self._committed(len(ops))
        return results

    def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                log.debug("closing the writer's connection failed", exc_info=True)

    def _committed(self, writes: int) -> None:
        for observer in self.commit_observers:
            try:
                observer(writes)
            except Exception:
                log.exception("commit observer failed")

    @staticmethod
    def _run_in(conn: Connection, batch: Sequence[_Op]) -> list[Any]:
        results: list[Any] = []
        i = 0
        while i < len(batch):
            op = batch[i]
            if op.many is None:
                assert op.run is not None
                results.append(op.run(conn))
                i += 1
                continue
            # Consecutive operations of the same kind go to the database together.
            j = i
            while j < len(batch) and batch[j].many is op.many:
                j += 1
            results.extend(op.many(conn, [o.arg for o in batch[i:j]]))
            i = j
        return results

    @staticmethod
    def _settle(batch: list[_Op], results: list[tuple[bool, Any]]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]] = {}
        for op, (ok, value) in zip(batch, results, strict=True):
            by_loop.setdefault(op.loop, []).append((op.future, ok, value))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, items)
            except RuntimeError:
                log.warning("event loop closed before %d store results could be delivered", len(items))


def _resolve(items: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for future, ok, value in items:
        if future.done():  # the caller went away (cancelled); the write stands regardless
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
