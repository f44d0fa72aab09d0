"""The database itself: the gateway-wide secrets every replica shares, a readiness round trip,
and its server's clock (replicas stamp milestones on one time, ha/shared_clock.py)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Connection, select

from elasticityops.domain.ports import ClockReading
from elasticityops.store.database import Database
from elasticityops.store.dialect_insert import dialect_insert
from elasticityops.store.tables import gateway_secrets


class SqlHousekeeping(Database):
    """The Housekeeping of the port (domain/ports/store.py)."""

    async def gateway_secret(self, name: str, candidate: bytes, at: datetime) -> bytes:
        """The secret `name` as the database keeps it; when it keeps none, `candidate` becomes
        it. Atomic on both databases (INSERT .. ON CONFLICT DO NOTHING, then a read in the same
        transaction), so replicas starting together all get the one that was stored first."""

        def run(conn: Connection) -> bytes:
            conn.execute(
                dialect_insert(conn, gateway_secrets)
                .values(name=name, value=candidate, created_at=at)
                .on_conflict_do_nothing(index_elements=["name"])
            )
            query = select(gateway_secrets.c.value).where(gateway_secrets.c.name == name)
            return bytes(conn.execute(query).scalar_one())

        return await self._write(run)

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
