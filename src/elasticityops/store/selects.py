"""Reading invocation rows inside a caller's connection: the columns every read takes, one row by
id, and ids in slices small enough for one IN (...)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sqlalchemy import Connection, LargeBinary, func, select

from elasticityops.domain.invocations import Invocation
from elasticityops.domain.results import PREVIEW_BYTES
from elasticityops.store import rows
from elasticityops.store.tables import invocations

# Every column but the payload: listings never drag payloads (up to the size limit each) along.
COLUMNS = tuple(column for column in invocations.c if column.name != "payload")
# A list's columns: neither the payload nor the result, but the result's size and its head, all a
# list's summary needs (domain/results.py). length() of a blob reads no more than its header on
# either database; the head is its own column (migration 0015), and is cut from the result only
# in a row an earlier release wrote without one.
RESULT_BYTES = func.length(invocations.c.result).label("result_bytes")
RESULT_HEAD = func.coalesce(
    invocations.c.result_head,
    func.substr(invocations.c.result, 1, PREVIEW_BYTES, type_=LargeBinary),
    type_=LargeBinary,
).label("result_head_or_cut")
LIST_COLUMNS = (
    *(column for column in COLUMNS if column.name not in ("result", "result_head")),
    RESULT_BYTES,
    RESULT_HEAD,
)


def get(conn: Connection, invocation_id: str) -> Invocation | None:
    row = conn.execute(select(*COLUMNS).where(invocations.c.id == invocation_id)).mappings().first()
    return None if row is None else rows.invocation_from_row(row)


def id_batches(ids: Sequence[str], size: int = 500) -> Iterator[Sequence[str]]:
    """`ids` in slices small enough for one IN (...): SQLite and drivers cap bound parameters."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]
