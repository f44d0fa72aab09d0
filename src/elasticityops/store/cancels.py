"""Cancel requests in SQL: a cancel asked of a replica whose dispatcher does not run is kept in
the invocation's row (cancel_requested_at) for the replica that runs it, and cleared by the end."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection, select, update

from elasticityops.domain.changes import cancel_requested
from elasticityops.domain.invocations import Invocation, State
from elasticityops.store import rows, selects
from elasticityops.store.compare_and_set import fold_many
from elasticityops.store.database import Database
from elasticityops.store.selects import COLUMNS, id_batches
from elasticityops.store.tables import invocations


class SqlCancels(Database):
    """The CancelStore of the port (domain/ports/store.py)."""

    async def request_cancel(self, invocation_id: str, at: datetime) -> Invocation | None:
        """Record a cancel for the running dispatcher to carry out, as a compare-and-set: only
        on a pending or running invocation without one. The invocation as it is then (with the
        request, or as it moved on: queued again, ended); None for an unknown id."""

        def run(conn: Connection) -> Invocation | None:
            def step(before: Invocation, _: None) -> Invocation | None:
                return cancel_requested(before, at)

            outcome = fold_many(conn, [(invocation_id, None)], step)[0]
            return outcome[1] if outcome is not None else selects.get(conn, invocation_id)

        found: Invocation | None = await self._write(run)
        return found

    async def cancel_requests(self, limit: int) -> list[Invocation]:
        """Invocations with a recorded cancel request, oldest request first (one range of the
        cancel_requested_at index, empty nearly always)."""

        def run(conn: Connection) -> list[Invocation]:
            c = invocations.c
            query = (
                select(*COLUMNS)
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
            for ids in id_batches(invocation_ids):
                query = (
                    update(invocations)
                    .where(invocations.c.id.in_(ids), invocations.c.state.in_(ended))
                    .values(cancel_requested_at=None)
                )
                dropped += conn.execute(query).rowcount
            return dropped

        return await self._write(run)
