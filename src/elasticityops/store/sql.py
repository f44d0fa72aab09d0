"""The Store on SQLAlchemy: SQLite (default, a WAL-mode file) or PostgreSQL, chosen by URL.

Writes go through one group-commit writer thread (see writer.py); reads run on a small thread
pool, so the event loop never blocks on the database. Every write is committed before its call
returns. Database exceptions never leave this module: they become TemporaryError (the database
is unreachable or busy) or Conflict."""

from __future__ import annotations

import asyncio
import functools
import itertools
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import (
    Connection,
    Dialect,
    Engine,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import RowMapping, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError, SQLAlchemyError

from elasticityops.domain.errors import (
    Conflict,
    EopsError,
    FieldProblem,
    InvalidInput,
    InvalidTransition,
    NotFound,
    TemporaryError,
)
from elasticityops.domain.events import BackendEvent, apply_event
from elasticityops.domain.functions import FunctionSpec, Priority
from elasticityops.domain.invocations import ACTIVE_STATES, Invocation, Note, State, add_note, advance
from elasticityops.domain.node_history import NodeHistory
from elasticityops.domain.node_seconds import Charge, CostGroup, Phase, PhaseTotal, RunningTotal
from elasticityops.domain.ports import Change, ClockReading, FunctionRecord, NewInvocation, Page
from elasticityops.domain.spillover import Spill, moved
from elasticityops.domain.tokens import TOKEN_ID_PREFIX, ApiToken, Scope, is_token_id, token_id
from elasticityops.settings import StoreSettings
from elasticityops.store import migrate, node_history, rows
from elasticityops.store import node_seconds as ledger
from elasticityops.store.tables import (
    api_tokens,
    function_versions,
    functions,
    gateway_generations,
    gateway_secrets,
    invocations,
)
from elasticityops.store.writer import CommitObserver, GroupCommitWriter

log = logging.getLogger(__name__)
T = TypeVar("T")

# Called on the event loop after a committed transition: (state before, invocation after).
TransitionObserver = Callable[[State, Invocation], None]

_COLUMNS = [invocations.c[name] for name in rows.INVOCATION_COLUMNS]


def _translate(exc: BaseException) -> BaseException:
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


class SqlStore:
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
        self._apply_many = functools.partial(_apply_many, pricing=self.pricing)
        self._record_many = functools.partial(_record_many, pricing=self.pricing)
        self._writer = GroupCommitWriter(engine, group_commit_max, _translate)
        self._readers = ThreadPoolExecutor(max_workers=read_threads, thread_name_prefix="eops-store-read")
        self._observers: list[TransitionObserver] = []
        self._closed = False

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        group_commit_max: int = StoreSettings.group_commit_max,
        read_threads: int = StoreSettings.read_threads,
        pricing: ledger.Pricing | None = None,
    ) -> SqlStore:
        """Connect and migrate the schema to this release's (see migrate.py)."""
        engine = make_engine(url, read_threads)
        try:
            await asyncio.to_thread(migrate.upgrade, engine)
        except BaseException as exc:
            engine.dispose()
            if isinstance(exc, SQLAlchemyError):
                raise _translate(exc) from None
            raise
        return cls(engine, group_commit_max=group_commit_max, read_threads=read_threads, pricing=pricing)

    def observe_transitions(self, observer: TransitionObserver) -> None:
        self._observers.append(observer)

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

    # -- plumbing ---------------------------------------------------------------------------

    async def _read(self, fn: Callable[[Connection], T]) -> T:
        def run() -> T:
            try:
                with self._engine.connect() as conn:
                    return fn(conn)
            except SQLAlchemyError as exc:
                raise _translate(exc) from None

        return await asyncio.get_running_loop().run_in_executor(self._readers, run)

    async def _write(self, fn: Callable[[Connection], T]) -> T:
        result: T = await self._writer.run(fn)
        return result

    # -- functions --------------------------------------------------------------------------

    async def put_function(self, spec: FunctionSpec, at: datetime) -> tuple[FunctionRecord, bool]:
        """A changed spec is a new version, kept in `function_versions` beside the ones before
        it; a name deleted before goes on from its tombstone's version."""
        text = rows.function_row(spec)

        def run(conn: Connection) -> tuple[FunctionRecord, bool]:
            row = conn.execute(select(functions).where(functions.c.name == spec.name)).mappings().first()
            if row is None:
                values = {
                    "name": spec.name,
                    "spec": text,
                    "version": 1,
                    "created_at": at,
                    "updated_at": at,
                    "deleted_at": None,
                }
                conn.execute(insert(functions).values(**values))
                created = True
            elif row["deleted_at"] is None and row["spec"] == text:
                return rows.function_from_row(row), False
            else:
                created = row["deleted_at"] is not None
                values = {**row, "spec": text, "version": row["version"] + 1, "updated_at": at}
                if created:
                    values.update(created_at=at, deleted_at=None)
                conn.execute(update(functions).where(functions.c.name == spec.name).values(**values))
            conn.execute(
                insert(function_versions).values(
                    name=spec.name, version=values["version"], spec=text, created_at=at
                )
            )
            _bump_functions_generation(conn)
            return rows.function_from_row(values), created

        return await self._write(run)

    async def get_function(self, name: str) -> FunctionRecord | None:
        def run(conn: Connection) -> FunctionRecord | None:
            query = select(functions).where(functions.c.name == name, functions.c.deleted_at.is_(None))
            row = conn.execute(query).mappings().first()
            return None if row is None else rows.function_from_row(row)

        return await self._read(run)

    async def get_function_version(self, name: str, version: int) -> FunctionSpec | None:
        def run(conn: Connection) -> FunctionSpec | None:
            query = select(function_versions.c.spec).where(
                function_versions.c.name == name, function_versions.c.version == version
            )
            text = conn.execute(query).scalar()
            return None if text is None else FunctionSpec.model_validate_json(text)

        return await self._read(run)

    async def list_functions(self) -> list[FunctionRecord]:
        def run(conn: Connection) -> list[FunctionRecord]:
            query = select(functions).where(functions.c.deleted_at.is_(None)).order_by(functions.c.name)
            return [rows.function_from_row(r) for r in conn.execute(query).mappings()]

        return await self._read(run)

    async def delete_function(self, name: str, at: datetime) -> bool:
        """Tombstone the name: its versions stay (finished and queued invocations name them)."""

        def run(conn: Connection) -> bool:
            query = (
                update(functions)
                .where(functions.c.name == name, functions.c.deleted_at.is_(None))
                .values(deleted_at=at)
            )
            deleted = conn.execute(query).rowcount > 0
            if deleted:
                _bump_functions_generation(conn)
            return deleted

        return await self._write(run)

    async def functions_generation(self) -> int:
        """The counter every function write bumps in its own transaction: a replica whose
        cached specs are older than its latest value drops them (catalog/function_cache.py)."""

        def run(conn: Connection) -> int:
            query = select(gateway_generations.c.value).where(gateway_generations.c.name == _FUNCTIONS)
            return int(conn.execute(query).scalar() or 0)

        return await self._read(run)

    # -- gateway-wide secrets ---------------------------------------------------------------

    async def gateway_secret(self, name: str, candidate: bytes, at: datetime) -> bytes:
        """The secret `name` as the database keeps it; when it keeps none, `candidate` becomes
        it. Atomic on both databases (INSERT .. ON CONFLICT DO NOTHING, then a read in the same
        transaction), so replicas starting together all get the one that was stored first."""

        def run(conn: Connection) -> bytes:
            dialect_insert = postgresql.insert if conn.dialect.name == "postgresql" else sqlite.insert
            conn.execute(
                dialect_insert(gateway_secrets)
                .values(name=name, value=candidate, created_at=at)
                .on_conflict_do_nothing(index_elements=["name"])
            )
            query = select(gateway_secrets.c.value).where(gateway_secrets.c.name == name)
            return bytes(conn.execute(query).scalar_one())

        return await self._write(run)

    # -- invocations ------------------------------------------------------------------------

    async def create_invocation(self, new: NewInvocation) -> tuple[Invocation, bool]:
        result: tuple[Invocation, bool] = await self._writer.run_batched(_create_many, new)
        return result

    async def get_invocation(self, invocation_id: str) -> Invocation | None:
        def run(conn: Connection) -> Invocation | None:
            return _get(conn, invocation_id)

        return await self._read(run)

    async def get_payload(self, invocation_id: str) -> bytes | None:
        def run(conn: Connection) -> bytes | None:
            value = conn.execute(
                select(invocations.c.payload).where(invocations.c.id == invocation_id)
            ).scalar()
            return None if value is None else bytes(value)

        return await self._read(run)

    async def small_payloads(self, invocation_ids: Sequence[str], max_bytes: int) -> dict[str, bytes]:
        def run(conn: Connection) -> dict[str, bytes]:
            found: dict[str, bytes] = {}
            for ids in _id_batches(invocation_ids):
                query = select(invocations.c.id, invocations.c.payload).where(
                    invocations.c.id.in_(ids), func.length(invocations.c.payload) <= max_bytes
                )
                found.update((row.id, bytes(row.payload)) for row in conn.execute(query))
            return found

        return await self._read(run)

    async def list_invocations(
        self, *, function: str | None, state: State | None, limit: int, cursor: str | None
    ) -> Page:
        """Newest first; `cursor` is the id of the last item of the previous page."""
        if limit < 1:
            raise InvalidInput([FieldProblem("limit", f"{limit} is below 1", "use 1 or more")])

        def run(conn: Connection) -> Page:
            query = select(*_COLUMNS).order_by(invocations.c.id.desc()).limit(limit + 1)
            if function is not None:
                query = query.where(invocations.c.function == function)
            if state is not None:
                query = query.where(invocations.c.state == state.value)
            if cursor is not None:
                query = query.where(invocations.c.id < cursor)
            items = [rows.invocation_from_row(r) for r in conn.execute(query).mappings()]
            more = len(items) > limit
            items = items[:limit]
            return Page(items=items, next_cursor=items[-1].id if more else None)

        return await self._read(run)

    async def queued(self, limit: int, after: Invocation | None = None) -> list[Invocation]:
        def run(conn: Connection) -> list[Invocation]:
            c = invocations.c
            found: list[Invocation] = []
            # One index range of (state, priority, id) per priority, highest first: the
            # admission order, without sorting every queued row by a computed rank.
            for priority in sorted(Priority, key=lambda p: p.rank):
                if after is not None and priority.rank < after.priority.rank:
                    continue
                where = [c.state == State.queued.value, c.priority == priority.value]
                if after is not None and priority is after.priority:
                    where.append(c.id > after.id)
                query = select(*_COLUMNS).where(*where).order_by(c.id).limit(limit - len(found))
                found += [rows.invocation_from_row(r) for r in conn.execute(query).mappings()]
                if len(found) >= limit:
                    break
            return found

        return await self._read(run)

    async def queued_ahead(self, invocation: Invocation) -> Mapping[tuple[str, int], int]:
        def run(conn: Connection) -> Mapping[tuple[str, int], int]:
            c = invocations.c
            counts: dict[tuple[str, int], int] = {}
            # One grouped count per index range of (state, priority, id): each higher priority
            # whole, and this priority up to this id (ids are the acceptance order). One OR-ed
            # query instead would let SQLite, without statistics, walk every queued row.
            for priority in Priority:
                if priority.rank > invocation.priority.rank:
                    continue
                where = [c.state == State.queued.value, c.priority == priority.value]
                if priority is invocation.priority:
                    where.append(c.id < invocation.id)
                query = (
                    select(c.function, c.spec_version, func.count())
                    .where(*where)
                    .group_by(c.function, c.spec_version)
                )
                for function, version, count in conn.execute(query):
                    counts[(function, version)] = counts.get((function, version), 0) + count
            return counts

        return await self._read(run)

    async def active(self) -> list[Invocation]:
        def run(conn: Connection) -> list[Invocation]:
            query = (
                select(*_COLUMNS)
                .where(invocations.c.state.in_([s.value for s in ACTIVE_STATES]))
                .order_by(invocations.c.id)
            )
            return [rows.invocation_from_row(r) for r in conn.execute(query).mappings()]

        return await self._read(run)

    async def active_counts_by_type(self) -> Mapping[tuple[str, int, str | None], int]:
        def run(conn: Connection) -> Mapping[tuple[str, int, str | None], int]:
            c = invocations.c
            query = (
                select(c.function, c.spec_version, c.gpu_type, func.count())
                .where(c.state.in_([s.value for s in ACTIVE_STATES]))
                .group_by(c.function, c.spec_version, c.gpu_type)
            )
            return {(name, version, kind): count for name, version, kind, count in conn.execute(query)}

        return await self._read(run)

    async def request_cancel(self, invocation_id: str, at: datetime) -> Invocation | None:
        """Record a cancel for the running dispatcher to carry out, as a compare-and-set: only
        on a pending or running invocation without one. The invocation as it is then (with the
        request, or as it moved on: queued again, ended); None for an unknown id."""

        def run(conn: Connection) -> Invocation | None:
            def step(before: Invocation, _: None) -> Invocation | None:
                if before.state not in ACTIVE_STATES or before.cancel_requested is not None:
                    return None
                return replace(before, cancel_requested=at)

            outcome = _fold_many(conn, [(invocation_id, None)], step)[0]
            return outcome[1] if outcome is not None else _get(conn, invocation_id)

        found: Invocation | None = await self._write(run)
        return found

    async def cancel_requests(self, limit: int) -> list[Invocation]:
        """Invocations with a recorded cancel request, oldest request first (one range of the
        cancel_requested_at index, empty nearly always)."""

        def run(conn: Connection) -> list[Invocation]:
            c = invocations.c
            query = (
                select(*_COLUMNS)
                .where(c.cancel_requested_at.is_not(None))
                .order_by(c.cancel_requested_at)
                .limit(limit)
            )
            return [rows.invocation_from_row(r) for r in conn.execute(query).mappings()]

        return await self._read(run)

    async def drop_cancel_requests(self, invocation_ids: Sequence[str]) -> int:
        """Clear the requests of those invocations that ended meanwhile (an end through a path
        that did not clear it: a replica's request written after the end's read); how many."""
        ended = [s.value for s in State if s.terminal]

        def run(conn: Connection) -> int:
            dropped = 0
            for ids in _id_batches(invocation_ids):
                query = (
                    update(invocations)
                    .where(invocations.c.id.in_(ids), invocations.c.state.in_(ended))
                    .values(cancel_requested_at=None)
                )
                dropped += conn.execute(query).rowcount
            return dropped

        return await self._write(run)

    async def change_stamps(self, invocation_ids: Sequence[str]) -> dict[str, tuple[State, int]]:
        """(state, attempt) of each of those invocations that exists, in one read: what a
        replica's change poller compares with what its waiters saw."""

        def run(conn: Connection) -> dict[str, tuple[State, int]]:
            c = invocations.c
            found: dict[str, tuple[State, int]] = {}
            for ids in _id_batches(invocation_ids):
                query = select(c.id, c.state, c.attempt).where(c.id.in_(ids))
                found.update((row.id, (State(row.state), row.attempt or 0)) for row in conn.execute(query))
            return found

        return await self._read(run)

    async def apply(self, change: Change) -> Invocation | None:
        # Batched with the other transitions queued meanwhile: a burst's admissions read their
        # rows with one SELECT per batch instead of one each (see _apply_many).
        outcome: tuple[State, Invocation] | None = await self._writer.run_batched(self._apply_many, change)
        if outcome is None:
            return None
        self._notify(*outcome)
        return outcome[1]

    def _notify(self, previous: State, after: Invocation) -> None:
        for observer in self._observers:
            try:
                observer(previous, after)
            except Exception:
                log.exception("transition observer failed")

    async def mark_preempting(self, invocation_id: str, by: str, note: Note) -> Invocation | None:
        outcome: tuple[State, Invocation] | None = await self._writer.run_batched(
            _preempting_many, (invocation_id, by, note)
        )
        return None if outcome is None else outcome[1]

    async def record(self, event: BackendEvent) -> tuple[State, Invocation] | None:
        # Batched like transitions: a burst's watch events share a SELECT and UPDATE statements
        # with the other writes queued meanwhile (see _record_many).
        outcome: tuple[State, Invocation] | None = await self._writer.run_batched(self._record_many, event)
        if outcome is not None and outcome[0] is not outcome[1].state:
            self._notify(*outcome)
        return outcome

    async def spill(self, invocation_id: str, current: str, spill: Spill, at: datetime) -> Invocation | None:
        def run(conn: Connection) -> tuple[State, Invocation] | None:
            def step(before: Invocation, _: None) -> Invocation | None:
                return moved(before, current, spill, at)

            return _fold_many(conn, [(invocation_id, None)], step)[0]

        outcome: tuple[State, Invocation] | None = await self._write(run)
        return None if outcome is None else outcome[1]

    async def set_result(self, invocation_id: str, result: bytes) -> State | None:
        def run(conn: Connection) -> State | None:
            # Compare-and-set: only while the job can still be running; an ended invocation's
            # result is final (a late or replayed callback changes nothing).
            stored = conn.execute(
                update(invocations)
                .where(
                    invocations.c.id == invocation_id,
                    invocations.c.state.in_([s.value for s in ACTIVE_STATES]),
                )
                .values(result=result)
            )
            if stored.rowcount:
                return None
            query = select(invocations.c.state).where(invocations.c.id == invocation_id)
            state = conn.execute(query).scalar()
            if state is None:
                raise NotFound(f"no invocation {invocation_id!r}")
            return State(state)

        refused: State | None = await self._write(run)
        return refused

    async def counts_by_state(self) -> Mapping[State, int]:
        def run(conn: Connection) -> Mapping[State, int]:
            query = select(invocations.c.state, func.count()).group_by(invocations.c.state)
            counts = dict.fromkeys(State, 0)
            for state, count in conn.execute(query):
                counts[State(state)] = count
            return counts

        return await self._read(run)

    # -- node-seconds -------------------------------------------------------------------------

    async def charge(self, charges: Sequence[Charge]) -> None:
        """Ledger rows for node time that no transition ends: a node's idle time after its last
        attempt, warm capacity no invocation used. A charge recorded again changes nothing."""

        def run(conn: Connection) -> None:
            ledger.write(conn, charges, self.pricing)

        await self._write(run)

    async def gpu_node_history(self) -> list[NodeHistory]:
        """Every GPU node's record (domain/node_history.py): the node watch's start reads them."""
        return await self._read(node_history.read)

    async def node_seconds_of(self, invocation_id: str) -> dict[Phase, PhaseTotal]:
        return await self._read(lambda conn: ledger.of_invocation(conn, invocation_id))

    async def cost_report(self, since: datetime, until: datetime, by: Sequence[str]) -> list[CostGroup]:
        return await self._read(lambda conn: ledger.report(conn, since, until, by))

    async def node_seconds_totals(self) -> list[RunningTotal]:
        return await self._read(ledger.totals)

    async def ping(self) -> None:
        def run(conn: Connection) -> None:
            conn.exec_driver_sql("SELECT 1")

        await self._read(run)

    async def clock_reading(self, local: Callable[[], datetime]) -> ClockReading | None:
        if self.dialect == "sqlite":
            return None

        def run(conn: Connection) -> ClockReading:
            # Read around the query itself, on the reader's thread with its connection checked
            # out and its transaction begun (the BEGIN is a round trip of its own): the round
            # trip measured, and so the uncertainty of the offset, is the one query's.
            conn.exec_driver_sql("SELECT 1")
            sent = local()
            # clock_timestamp(), not now(): now() is the transaction's start, not this moment.
            remote = conn.exec_driver_sql("SELECT clock_timestamp()").scalar_one()
            return ClockReading(sent, remote, local())

        return await self._read(run)

    # -- API tokens -------------------------------------------------------------------------

    async def create_api_token(
        self,
        name: str,
        token_hash: str,
        at: datetime,
        *,
        scope: Scope = Scope.admin,
        expires_at: datetime | None = None,
    ) -> ApiToken:
        def run(conn: Connection) -> None:
            conn.execute(
                insert(api_tokens).values(
                    token_hash=token_hash, name=name, created_at=at, scope=scope.value, expires_at=expires_at
                )
            )

        await self._write(run)
        return ApiToken(token_id(token_hash), name, scope, at, expires_at)

    async def check_api_token(self, token_hash: str) -> ApiToken | None:
        """The token with this hash, expired or not (the caller decides): None when unknown."""

        def run(conn: Connection) -> ApiToken | None:
            query = select(*_TOKEN_COLUMNS).where(api_tokens.c.token_hash == token_hash)
            row = conn.execute(query).mappings().first()
            return None if row is None else _api_token(row)

        return await self._read(run)

    async def list_api_tokens(self) -> list[ApiToken]:
        def run(conn: Connection) -> list[ApiToken]:
            query = select(*_TOKEN_COLUMNS).order_by(api_tokens.c.created_at, api_tokens.c.token_hash)
            return [_api_token(row) for row in conn.execute(query).mappings()]

        return await self._read(run)

    async def revoke_api_token(self, id_: str) -> bool:
        """Delete the token with this id; False when there is none."""
        if not is_token_id(id_):
            return False
        prefix = id_.removeprefix(TOKEN_ID_PREFIX)

        def run(conn: Connection) -> bool:
            done = conn.execute(delete(api_tokens).where(api_tokens.c.token_hash.startswith(prefix)))
            return bool(done.rowcount)

        return await self._write(run)


_TOKEN_COLUMNS = [api_tokens.c[name] for name in ("token_hash", "name", "scope", "created_at", "expires_at")]


def _api_token(row: RowMapping) -> ApiToken:
    return ApiToken(
        id=token_id(row["token_hash"]),
        name=row["name"],
        scope=Scope(row["scope"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )


_FUNCTIONS = "functions"


def _bump_functions_generation(conn: Connection) -> None:
    """In the transaction of a function write, so no replica sees the write without the bump."""
    query = (
        update(gateway_generations)
        .where(gateway_generations.c.name == _FUNCTIONS)
        .values(value=gateway_generations.c.value + 1)
    )
    if conn.execute(query).rowcount == 0:  # the seeded row was removed by hand: make it again
        conn.execute(insert(gateway_generations).values(name=_FUNCTIONS, value=1))


def _get(conn: Connection, invocation_id: str) -> Invocation | None:
    row = conn.execute(select(*_COLUMNS).where(invocations.c.id == invocation_id)).mappings().first()
    return None if row is None else rows.invocation_from_row(row)


def _id_batches(ids: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    """`ids` in slices small enough for one IN (...): SQLite and drivers cap bound parameters."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]


class _LostRace(Exception):
    """A compare-and-set in a batch of updates matched fewer rows than it wrote (another
    gateway on the same database got there first). The batch's transaction is rolled back and
    the writer runs each operation in a transaction of its own, where the count is exact."""


def _read_current(conn: Connection, ids: Sequence[str]) -> dict[str, Invocation]:
    current: dict[str, Invocation] = {}
    for batch in _id_batches(list(dict.fromkeys(ids))):
        query = select(*_COLUMNS).where(invocations.c.id.in_(batch))
        for row in conn.execute(query).mappings():
            inv = rows.invocation_from_row(row)
            current[inv.id] = inv
    return current


def _apply_many(
    conn: Connection, changes: list[Change], *, pricing: ledger.Pricing
) -> list[tuple[State, Invocation] | None]:
    """Apply transitions in order: (state before, invocation after) each, None where the
    compare-and-set lost."""
    return _fold_many(conn, [(change.id, change) for change in changes], _advanced, pricing)


def _record_many(
    conn: Connection, events: list[BackendEvent], *, pricing: ledger.Pricing
) -> list[tuple[State, Invocation] | None]:
    """Fold backend events into their invocations in order (`apply_event`: transition, notes,
    milestones and result), each changed row one compare-and-set UPDATE. An event that changes
    nothing (unknown id, ended already, a repeat) writes nothing and yields None."""
    outcomes = _fold_many(conn, [(seen.invocation_id, seen) for seen in events], _with_event, pricing)
    told = [charge for seen in events for charge in seen.charges]
    if told:
        ledger.write(conn, told, pricing)
    changed = [change for seen in events for change in seen.node_history]
    if changed:
        node_history.write(conn, changed)
    return outcomes


def _preempting_many(
    conn: Connection, items: list[tuple[str, str, Note]]
) -> list[tuple[State, Invocation] | None]:
    """Mark invocations as being preempted (see `SqlStore.mark_preempting`), in order."""
    return _fold_many(conn, [(item[0], item) for item in items], _with_preempting)


def _with_preempting(before: Invocation, item: tuple[str, str, Note]) -> Invocation | None:
    _, by, note = item
    if before.state not in ACTIVE_STATES or before.preempting_by is not None:
        return None
    return add_note(replace(before, preempting_by=by), note)


def _with_event(before: Invocation, seen: BackendEvent) -> Invocation | None:
    after = apply_event(before, seen)
    return None if after == before else after


def _fold_many(
    conn: Connection,
    items: list[tuple[str, T]],
    step: Callable[[Invocation, T], Invocation | None],
    pricing: ledger.Pricing | None = None,
) -> list[tuple[State, Invocation] | None]:
    """`step` each (id, item) over its invocation as it stands after the items before it, in
    order: (state before, invocation after), None where `step` changed nothing. One SELECT
    reads the batch's rows, and the updates go out as few statements as their columns allow
    (see _write_updates). The node-seconds of the attempts the updates end go to the ledger in
    the same transaction (`pricing`: the steps that can end an attempt pass it)."""
    current = _read_current(conn, [invocation_id for invocation_id, _ in items])
    outcomes: list[tuple[State, Invocation] | None] = []
    updates: list[tuple[Invocation, Invocation]] = []
    for invocation_id, item in items:
        before = current.get(invocation_id)
        after = None if before is None else step(before, item)
        if before is None or after is None:
            outcomes.append(None)
            continue
        current[invocation_id] = after  # a later item of the same invocation in this batch
        updates.append((before, after))
        outcomes.append((before.state, after))
    if not _write_updates(conn, updates):
        # Only ever with a single update (a larger batch raises _LostRace instead): it lost.
        return [None] * len(outcomes)
    if pricing is not None:
        ledger.write(conn, ledger.ended_charges(updates), pricing)
    return outcomes


def _advanced(before: Invocation, change: Change) -> Invocation | None:
    if change.from_states is not None and before.state not in change.from_states:
        return None
    if change.attempt is not None and before.attempt != change.attempt:
        return None  # about an attempt that is over: the one running now is not its to change
    try:
        after = advance(
            before,
            change.to,
            change.at,
            exit_code=change.exit_code,
            reason=change.reason,
            message=change.message,
            node=change.node,
            gpu_type=change.gpu_type,
        )
    except InvalidTransition:
        return None  # the state moved on: a lost race, not an error
    return after if change.note is None else add_note(after, change.note)


def _write_updates(conn: Connection, updates: Sequence[tuple[Invocation, Invocation]]) -> bool:
    """Write each (before, after) in order as a compare-and-set on the state, so a second
    gateway on the same database cannot win too. Consecutive updates of the same columns go
    to the driver as one executemany (a burst's 256 admissions are one statement instead of
    256 through SQLAlchemy's per-statement machinery, which was most of the writer's time).

    Returns False only when a single update lost; in a larger batch a lost compare-and-set
    raises _LostRace, so the writer re-runs each operation alone, where the count is exact."""
    changed = [(before, rows.invocation_update(before, after)) for before, after in updates]
    for columns, group in itertools.groupby(changed, key=lambda item: tuple(item[1])):
        if not columns:
            continue  # nothing changed, nothing to write
        run = list(group)
        sql, converters = _update_plan(conn.dialect, columns)
        params = [
            (
                *(convert(values[c]) for c, convert in zip(columns, converters, strict=True)),
                before.id,
                before.state.value,
            )
            for before, values in run
        ]
        matched = conn.exec_driver_sql(sql, params).rowcount
        if matched != len(run):
            if len(updates) == 1:
                return False
            raise _LostRace(f"{len(run) - matched} of {len(run)} compare-and-set updates lost")
    return True


@functools.cache
def _update_plan(dialect: Dialect, columns: tuple[str, ...]) -> tuple[str, tuple[Callable[[Any], Any], ...]]:
    """The driver-level compare-and-set UPDATE of these columns, and each column's converter
    (the one SQLAlchemy itself would apply: timestamps to SQLite's text, for one)."""
    mark = _mark(dialect)
    sets = ", ".join(f"{c} = {mark}" for c in columns)
    sql = f"UPDATE {invocations.name} SET {sets} WHERE id = {mark} AND state = {mark}"
    return sql, tuple(_converter(dialect, c) for c in columns)


def _mark(dialect: Dialect) -> str:
    return "?" if dialect.paramstyle == "qmark" else "%s"


def _converter(dialect: Dialect, column: str) -> Callable[[Any], Any]:
    processor = invocations.c[column].type.dialect_impl(dialect).bind_processor(dialect)
    return processor or _same


def _same(value: Any) -> Any:
    return value


def _create_many(conn: Connection, news: list[NewInvocation]) -> list[tuple[Invocation, bool]]:
    """Insert a batch of new invocations with one statement; an idempotency key already used for
    the same function (in the database or earlier in this batch) yields the existing one."""
    results: list[tuple[Invocation, bool] | None] = [None] * len(news)
    seen: dict[tuple[str, str], Invocation] = {}
    to_insert: list[dict[str, Any]] = []
    for i, new in enumerate(news):
        if new.idempotency_key is not None:
            key = (new.function, new.idempotency_key)
            existing = seen.get(key)
            if existing is None:
                row = (
                    conn.execute(
                        select(*_COLUMNS).where(
                            invocations.c.function == new.function,
                            invocations.c.idempotency_key == new.idempotency_key,
                        )
                    )
                    .mappings()
                    .first()
                )
                if row is not None:
                    existing = rows.invocation_from_row(row)
                    seen[key] = existing
            if existing is not None:
                results[i] = (existing, False)
                continue
        invocation = rows.invocation_of_new(new)
        if new.idempotency_key is not None:
            seen[(new.function, new.idempotency_key)] = invocation
        to_insert.append(rows.new_invocation_row(new))
        results[i] = (invocation, True)
    if to_insert:
        _insert_rows(conn, to_insert)
    return [r for r in results if r is not None]


_INSERT_COLUMNS = (
    "id",
    "function",
    "spec_version",
    "priority",
    "state",
    "idempotency_key",
    "accepted_at",
    "message",
    "notes",
    "payload",
    "annotations",
)


@functools.cache
def _insert_plan(dialect: Dialect) -> str:
    """The driver-level INSERT. The hot path skips SQLAlchemy's per-row statement machinery
    (measured at about a third of the writer's time per batch) and hands the driver plain
    tuples in one executemany."""
    mark = _mark(dialect)
    return (
        f"INSERT INTO {invocations.name} ({', '.join(_INSERT_COLUMNS)}) "
        f"VALUES ({', '.join([mark] * len(_INSERT_COLUMNS))})"
    )


def _insert_rows(conn: Connection, values: list[dict[str, Any]]) -> None:
    convert = _converter(conn.dialect, "accepted_at")
    params = [
        tuple(convert(row[c]) if c == "accepted_at" else row[c] for c in _INSERT_COLUMNS) for row in values
    ]
    conn.exec_driver_sql(_insert_plan(conn.dialect), params)
