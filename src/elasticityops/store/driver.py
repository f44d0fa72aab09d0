"""Statements handed to the driver directly, past SQLAlchemy's per-statement machinery (the hot
paths: a burst's inserts and compare-and-set updates, see new_invocations.py and
compare_and_set.py): the dialect's parameter mark and each column's own converter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Column, Dialect


def mark(dialect: Dialect) -> str:
    return "?" if dialect.paramstyle == "qmark" else "%s"


def converter(dialect: Dialect, column: Column[Any]) -> Callable[[Any], Any]:
    """The converter SQLAlchemy itself would apply to the column's values (timestamps to
    SQLite's text, for one)."""
    processor = column.type.dialect_impl(dialect).bind_processor(dialect)
    return processor or _same


def _same(value: Any) -> Any:
    return value
