"""Reading invocation rows inside a caller's connection: the columns every read takes, one row by
id, and ids in slices small enough for one IN (...)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sqlalchemy import Connection, select

from elasticityops.domain.invocations import Invocation
from elasticityops.store import rows
from elasticityops.store.tables import invocations

# Every column but the payload: listings never drag payloads (up to the size limit each) along.
COLUMNS = tuple(column for column in invocations.c if column.name != "payload")


def get(conn: Connection, invocation_id: str) -> Invocation | None:
    row = conn.execute(select(*COLUMNS).where(invocations.c.id == invocation_id)).mappings().first()
    return None if row is None else rows.invocation_from_row(row)


def id_batches(ids: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    """`ids` in slices small enough for one IN (...): SQLite and drivers cap bound parameters."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]
