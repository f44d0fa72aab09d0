"""Function specs in SQL: the current version of each name (a deleted one stays as a tombstone)
and every version ever deployed, with the counter that tells replicas a function changed."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, insert, select, update

from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.ports import FunctionRecord, SpecChange
from elasticityops.store import rows
from elasticityops.store.database import Database
from elasticityops.store.tables import function_versions, functions, gateway_generations

_FUNCTIONS = "functions"


class SqlFunctions(Database):
    """The FunctionStore of the port (domain/ports/store.py)."""

    async def put_function(self, spec: FunctionSpec, at: datetime) -> tuple[FunctionRecord, SpecChange]:
        """A changed spec is a new version, kept in `function_versions` beside the ones before
        it; a name deleted before goes on from its tombstone's version. Specs compare as their
        canonical JSON (`spec_to_json`): the same spec again keeps its version."""
        text = rows.function_row(spec)

        def run(conn: Connection) -> tuple[FunctionRecord, SpecChange]:
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
                outcome = SpecChange.created
            elif row["deleted_at"] is None and row["spec"] == text:
                return rows.function_from_row(row), SpecChange.unchanged
            else:
                outcome = SpecChange.changed if row["deleted_at"] is None else SpecChange.created
                values = {**row, "spec": text, "version": row["version"] + 1, "updated_at": at}
                if outcome is SpecChange.created:
                    values.update(created_at=at, deleted_at=None)
                conn.execute(update(functions).where(functions.c.name == spec.name).values(**values))
            conn.execute(
                insert(function_versions).values(
                    name=spec.name, version=values["version"], spec=text, created_at=at
                )
            )
            _bump_functions_generation(conn)
            return rows.function_from_row(values), outcome

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


def _bump_functions_generation(conn: Connection) -> None:
    """In the transaction of a function write, so no replica sees the write without the bump."""
    query = (
        update(gateway_generations)
        .where(gateway_generations.c.name == _FUNCTIONS)
        .values(value=gateway_generations.c.value + 1)
    )
    if conn.execute(query).rowcount == 0:  # the seeded row was removed by hand: make it again
        conn.execute(insert(gateway_generations).values(name=_FUNCTIONS, value=1))
