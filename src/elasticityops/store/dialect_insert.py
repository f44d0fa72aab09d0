"""The INSERT of the connection's database with its ON CONFLICT clauses (PostgreSQL and SQLite
each have their own; the core one has none)."""

from __future__ import annotations

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def dialect_insert(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    return postgresql.insert(table) if conn.dialect.name == "postgresql" else sqlite.insert(table)
