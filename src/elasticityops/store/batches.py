"""Batches into SQL: the batch's row and all its invocations in one transaction, a retried batch
answered by the one it made, and the reads of a batch (its counts, its invocations)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, func, insert, select

from elasticityops.domain.batches import Batch, BatchStatus
from elasticityops.domain.invocations import Invocation, State
from elasticityops.domain.ports import NewInvocation
from elasticityops.store import rows, webhook_outbox
from elasticityops.store.database import Database
from elasticityops.store.new_invocations import insert_rows
from elasticityops.store.selects import LIST_COLUMNS, id_batches
from elasticityops.store.tables import batches, invocations

_TERMINAL = [s.value for s in State if s.terminal]


class SqlBatches(Database):
    """BatchStore (domain/ports/store.py)."""

    async def create_batch(
        self, batch: Batch, items: Sequence[NewInvocation]
    ) -> tuple[Batch, list[Invocation], bool]:
        def run(conn: Connection) -> tuple[Batch, list[Invocation], bool]:
            if batch.idempotency_key is not None:
                found = _batch_by_key(conn, batch.function, batch.idempotency_key)
                if found is not None:
                    return found, _invocations_of(conn, found.id), False
            conn.execute(insert(batches).values(_batch_row(batch)))
            insert_rows(conn, [rows.new_invocation_row(new) for new in items])
            webhook_outbox.write_subscriptions(conn, items)
            return batch, [rows.invocation_of_new(new) for new in items], True

        result: tuple[Batch, list[Invocation], bool] = await self._write(run)
        return result

    async def get_batch(self, batch_id: str) -> BatchStatus | None:
        def run(conn: Connection) -> BatchStatus | None:
            row = conn.execute(select(batches).where(batches.c.id == batch_id)).mappings().first()
            if row is None:
                return None
            c = invocations.c
            query = select(c.state, func.count()).where(c.batch_id == batch_id).group_by(c.state)
            counts = {State(state): n for state, n in conn.execute(query)}
            return BatchStatus(_batch_from_row(row), counts)

        return await self._read(run)

    async def batch_states(self, batch_id: str) -> list[tuple[str, State]]:
        def run(conn: Connection) -> list[tuple[str, State]]:
            c = invocations.c
            query = select(c.id, c.state).where(c.batch_id == batch_id).order_by(c.id)
            return [(row[0], State(row[1])) for row in conn.execute(query)]

        return await self._read(run)

    async def ended_among(self, invocation_ids: Sequence[str]) -> list[Invocation]:
        def run(conn: Connection) -> list[Invocation]:
            c = invocations.c
            found: list[Invocation] = []
            for ids in id_batches(invocation_ids):
                query = select(*LIST_COLUMNS).where(c.id.in_(ids), c.state.in_(_TERMINAL)).order_by(c.id)
                found += [
                    rows.invocation_from_row({**r, "result": None}) for r in conn.execute(query).mappings()
                ]
            return found

        return await self._read(run)


def _batch_by_key(conn: Connection, function: str, key: str) -> Batch | None:
    row = (
        conn.execute(select(batches).where(batches.c.function == function, batches.c.idempotency_key == key))
        .mappings()
        .first()
    )
    return None if row is None else _batch_from_row(row)


def _invocations_of(conn: Connection, batch_id: str) -> list[Invocation]:
    """A batch's invocations in input order, without their results (a replay needs their ids:
    a thousand results of up to 1 MiB each are not read for it)."""
    c = invocations.c
    query = select(*LIST_COLUMNS).where(c.batch_id == batch_id).order_by(c.id)
    return [rows.invocation_from_row({**r, "result": None}) for r in conn.execute(query).mappings()]


def _batch_row(batch: Batch) -> dict[str, Any]:
    return {
        "id": batch.id,
        "function": batch.function,
        "created_at": batch.created_at,
        "count": batch.count,
        "idempotency_key": batch.idempotency_key,
    }


def _batch_from_row(row: Any) -> Batch:
    return Batch(
        id=row["id"],
        function=row["function"],
        created_at=row["created_at"],
        count=row["count"],
        idempotency_key=row["idempotency_key"],
    )
