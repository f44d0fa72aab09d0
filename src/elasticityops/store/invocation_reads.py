"""Reads of invocations in SQL: one, its payload, a page, the queue in admission order, the active
ones, and the grouped counts admission, the queue position and the metrics need (counted in the
database, never read row by row). Each runs on the read threads."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import Connection, func, select

from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.domain.functions import Priority
from elasticityops.domain.invocations import ACTIVE_STATES, Invocation, State
from elasticityops.domain.ports import Page
from elasticityops.domain.results import summary_of
from elasticityops.store import fair_queue, rows, selects
from elasticityops.store.database import Database
from elasticityops.store.selects import COLUMNS, LIST_COLUMNS, id_batches
from elasticityops.store.tables import invocations


class SqlInvocationReads(Database):
    """The reads of the InvocationStore (domain/ports/store.py)."""

    async def get_invocation(self, invocation_id: str) -> Invocation | None:
        def run(conn: Connection) -> Invocation | None:
            return selects.get(conn, invocation_id)

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
            for ids in id_batches(invocation_ids):
                query = select(invocations.c.id, invocations.c.payload).where(
                    invocations.c.id.in_(ids), func.length(invocations.c.payload) <= max_bytes
                )
                found.update((row.id, bytes(row.payload)) for row in conn.execute(query))
            return found

        return await self._read(run)

    async def list_invocations(
        self,
        *,
        function: str | None,
        state: State | None,
        limit: int,
        cursor: str | None,
        batch: str | None = None,
        oldest_first: bool = False,
    ) -> Page:
        """Newest first (`oldest_first`: a batch's in input order); `cursor` is the id of the
        last item of the previous page."""
        if limit < 1:
            raise InvalidInput([FieldProblem("limit", f"{limit} is below 1", "use 1 or more")])

        def run(conn: Connection) -> Page:
            c = invocations.c
            order = c.id.asc() if oldest_first else c.id.desc()
            query = select(*LIST_COLUMNS).order_by(order).limit(limit + 1)
            if function is not None:
                query = query.where(c.function == function)
            if state is not None:
                query = query.where(c.state == state.value)
            if batch is not None:
                query = query.where(c.batch_id == batch)
            if cursor is not None:
                query = query.where(c.id > cursor if oldest_first else c.id < cursor)
            found = list(conn.execute(query).mappings())
            more = len(found) > limit
            found = found[:limit]
            items = [rows.invocation_from_row({**r, "result": None}) for r in found]
            summaries = {
                r["id"]: summary_of(r["result_bytes"], bytes(r["result_head_or_cut"]))
                for r in found
                if r["result_head_or_cut"] is not None
            }
            return Page(items=items, next_cursor=items[-1].id if more else None, summaries=summaries)

        return await self._read(run)

    async def queued(self, limit: int, after: Invocation | None = None) -> list[Invocation]:
        def run(conn: Connection) -> list[Invocation]:
            found: list[Invocation] = []
            # Highest priority first; within one, the functions' turns (store/fair_queue.py).
            for priority in sorted(Priority, key=lambda p: p.rank):
                if after is not None and priority.rank < after.priority.rank:
                    continue
                behind = after if after is not None and priority is after.priority else None
                found += fair_queue.page(conn, priority, limit - len(found), behind)
                if len(found) >= limit:
                    break
            return found

        return await self._read(run)

    async def queued_ahead(self, invocation: Invocation) -> Mapping[tuple[str, int], int]:
        def run(conn: Connection) -> Mapping[tuple[str, int], int]:
            c = invocations.c
            counts: dict[tuple[str, int], int] = dict(fair_queue.ahead_in_its_priority(conn, invocation))
            # Each higher priority whole: one grouped count per index range of (state, priority,
            # id). One OR-ed query instead would let SQLite, without statistics, walk every queued row.
            for priority in Priority:
                if priority.rank >= invocation.priority.rank:
                    continue
                query = (
                    select(c.function, c.spec_version, func.count())
                    .where(c.state == State.queued.value, c.priority == priority.value)
                    .group_by(c.function, c.spec_version)
                )
                for function, version, count in conn.execute(query):
                    counts[(function, version)] = counts.get((function, version), 0) + count
            return counts

        return await self._read(run)

    async def active(self) -> list[Invocation]:
        def run(conn: Connection) -> list[Invocation]:
            query = (
                select(*COLUMNS)
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

    async def active_counts_by_cluster(self) -> Mapping[tuple[str, str, int, str | None], int]:
        def run(conn: Connection) -> Mapping[tuple[str, str, int, str | None], int]:
            c = invocations.c
            query = (
                select(c.cluster, c.function, c.spec_version, c.gpu_type, func.count())
                .where(c.state.in_([s.value for s in ACTIVE_STATES]), c.cluster.is_not(None))
                .group_by(c.cluster, c.function, c.spec_version, c.gpu_type)
            )
            rows = conn.execute(query)
            return {(where, name, version, kind): count for where, name, version, kind, count in rows}

        return await self._read(run)

    async def change_stamps(self, invocation_ids: Sequence[str]) -> dict[str, tuple[State, int]]:
        """(state, attempt) of each of those invocations that exists, in one read: what a
        replica's change poller compares with what its waiters saw."""

        def run(conn: Connection) -> dict[str, tuple[State, int]]:
            c = invocations.c
            found: dict[str, tuple[State, int]] = {}
            for ids in id_batches(invocation_ids):
                query = select(c.id, c.state, c.attempt).where(c.id.in_(ids))
                found.update((row.id, (State(row.state), row.attempt or 0)) for row in conn.execute(query))
            return found

        return await self._read(run)

    async def counts_by_state(self) -> Mapping[State, int]:
        def run(conn: Connection) -> Mapping[State, int]:
            query = select(invocations.c.state, func.count()).group_by(invocations.c.state)
            counts = dict.fromkeys(State, 0)
            for state, count in conn.execute(query):
                counts[State(state)] = count
            return counts

        return await self._read(run)
