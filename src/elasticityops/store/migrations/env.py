"""Alembic's environment: how a migration gets its connection.

The store (store/migrate.py) hands over the connection it has locked and opened a transaction
on, in `config.attributes["connection"]`; the `alembic` command line (alembic.ini at the
repository root, for writing migrations) connects to `sqlalchemy.url` instead."""

from __future__ import annotations

from typing import Any, Literal

from alembic import context
from alembic.autogenerate.api import AutogenContext
from sqlalchemy import Connection, create_engine, pool

from elasticityops.store.tables import UtcDateTime, metadata

config = context.config


def _render_item(kind: str, obj: Any, autogen: AutogenContext) -> str | Literal[False]:
    # A generated migration must not import the live tables.py (which goes on changing after
    # the migration is written): UtcDateTime is plain DateTime(timezone=True) in the DDL.
    if kind == "type" and isinstance(obj, UtcDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _migrate(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        # SQLite can ALTER almost nothing in place: autogenerate writes batch operations
        # (copy, alter, swap), which work on PostgreSQL too.
        render_as_batch=True,
        render_item=_render_item,
    )
    # A no-op when the store opened the transaction (it commits or rolls back all at once).
    with context.begin_transaction():
        context.run_migrations()


def _run() -> None:
    if context.is_offline_mode():
        raise SystemExit("offline (--sql) migrations are not supported: run them against a database")
    given = config.attributes.get("connection")
    if isinstance(given, Connection):
        _migrate(given)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("no database: pass -x url=... or set sqlalchemy.url in alembic.ini")
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        with engine.connect() as connection:
            _migrate(connection)
    finally:
        engine.dispose()


_run()
