"""What every part of the SqlStore (store/sql.py) works through: the engine, one group-commit
writer thread for every write (writer.py), a small pool of threads for reads, so the event loop
never blocks on the database. Database exceptions never leave the store: they become
TemporaryError (the database is unreachable or busy) or Conflict."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError

from elasticityops.domain.errors import Conflict, EopsError, FieldProblem, InvalidInput, TemporaryError
from elasticityops.domain.invocations import Invocation, State
from elasticityops.store import compare_and_set
from elasticityops.store import node_seconds as ledger
from elasticityops.store.settings import StoreSettings
from elasticityops.store.writer import CommitObserver, GroupCommitWriter

T = TypeVar("T")

# Called on the event loop after a committed transition: (state before, invocation after).
TransitionObserver = Callable[[State, Invocation], None]


def translate(exc: BaseException) -> BaseException:
    if isinstance(exc, EopsError):
        return exc
    if isinstance(exc, IntegrityError):
        return Conflict(f"the database refused a duplicate: {exc.orig}")
    if isinstance(exc, OperationalError | DBAPIError):
        return TemporaryError(f"database unavailable: {exc.orig}", retry_after=1.0)
    if isinstance(exc, SQLAlchemyError):
        return TemporaryError(f"database error: {exc}", retry_after=1.0)
    return exc


def make_engine(url: str, pool_size: int) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            pool_size=pool_size + 1,
            max_overflow=4,
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            # WAL: readers never block the writer. synchronous=FULL: a commit is on disk (fsync)
            # before the caller hears of it, which is the promise behind every 202.
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA busy_timeout=30000")
            cursor.close()

        return engine
    if parsed.get_backend_name() == "postgresql":
        return create_engine(url, pool_size=pool_size + 1, max_overflow=4, pool_pre_ping=True)
    raise InvalidInput(
        [
            FieldProblem(
                "database_url",
                f"unsupported database {parsed.get_backend_name()!r}",
                "use sqlite:///PATH or postgresql+psycopg://USER:PASS@HOST/DB",
            )
        ]
    )


class Database:
    """The engine and the threads on it, shared by every part of the SqlStore. Every write is
    committed before its call returns."""

    def __init__(
        self,
        engine: Engine,
        *,
        group_commit_max: int = StoreSettings.group_commit_max,
        read_threads: int = StoreSettings.read_threads,
        pricing: ledger.Pricing | None = None,
    ) -> None:
        self._engine = engine
        self.pricing = pricing or ledger.Pricing()
        # Bound once: the writer batches operations whose function is the same object.
        self._apply_many = functools.partial(compare_and_set.apply_many, pricing=self.pricing)
        self._record_many = functools.partial(compare_and_set.record_many, pricing=self.pricing)
        self._writer = GroupCommitWriter(engine, group_commit_max, translate)
        self._readers = ThreadPoolExecutor(max_workers=read_threads, thread_name_prefix="eops-store-read")
        self._observers: list[TransitionObserver] = []
        self._closed = False

    def observe_commits(self, observer: CommitObserver) -> None:
        """`observer(writes)` after each commit, on the writer thread: how well writes share
        commits (each commit is one fsync on SQLite)."""
        self._writer.commit_observers.append(observer)

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await asyncio.to_thread(self._writer.stop)
        self._readers.shutdown(wait=True)
        self._engine.dispose()

    async def _read(self, fn: Callable[[Connection], T]) -> T:
        def run() -> T:
            try:
                with self._engine.connect() as conn:
                    return fn(conn)
            except SQLAlchemyError as exc:
                raise translate(exc) from None

        return await asyncio.get_running_loop().run_in_executor(self._readers, run)

    async def _write(self, fn: Callable[[Connection], T]) -> T:
        result: T = await self._writer.run(fn)
        return result
