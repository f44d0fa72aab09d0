"""Durable state: SQLAlchemy tables and the SqlStore (SQLite by default, PostgreSQL by URL)."""

from elasticityops.store.sql import SqlStore

__all__ = ["SqlStore"]
