"""The logs kept of attempts whose pods go as they end (domain/kept_logs.py) in SQL: a row per
attempt and worker cluster, written before the gateway lets the pod go, read by a logs request
once the pod is gone."""

from __future__ import annotations

from sqlalchemy import Connection, select

from elasticityops.domain.kept_logs import KeptLog
from elasticityops.store.database import Database
from elasticityops.store.dialect_insert import dialect_insert
from elasticityops.store.tables import kept_logs


class SqlKeptLogs(Database):
    """The LogKeeper of the port (domain/ports/store.py)."""

    async def keep_log(self, log: KeptLog) -> None:
        row = {
            "invocation_id": log.invocation_id,
            "attempt": log.attempt,
            "cluster": log.cluster,
            "data": log.data,
            "dropped": int(log.dropped),
            "kept_at": log.kept_at,
        }

        def run(conn: Connection) -> None:
            statement = dialect_insert(conn, kept_logs).values(**row)
            conn.execute(
                statement.on_conflict_do_update(
                    index_elements=["invocation_id", "attempt", "cluster"],
                    set_={k: statement.excluded[k] for k in ("data", "dropped", "kept_at")},
                )
            )

        await self._write(run)

    async def kept_log(self, invocation_id: str, attempt: int, cluster: str | None = None) -> KeptLog | None:
        def run(conn: Connection) -> KeptLog | None:
            query = select(kept_logs).where(
                kept_logs.c.invocation_id == invocation_id, kept_logs.c.attempt == attempt
            )
            rows = {r.cluster: r for r in conn.execute(query)}
            if cluster is not None:
                row = rows.get(cluster)
            else:
                row = max(rows.values(), key=lambda r: r.kept_at, default=None)
            if row is None:
                return None
            return KeptLog(
                invocation_id=row.invocation_id,
                attempt=row.attempt,
                cluster=row.cluster,
                data=bytes(row.data),
                dropped=bool(row.dropped),
                kept_at=row.kept_at,
            )

        return await self._read(run)
