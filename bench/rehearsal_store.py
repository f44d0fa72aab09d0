"""The invocations a rehearsal gateway's SQLite store holds (`eops rehearse --out DIR` keeps it in
DIR/gateway-NAMESPACE/eops.db), read by the benches that study a rehearsal's placements and
waits: each started invocation's times in seconds from the first of them was accepted."""

from __future__ import annotations

import datetime as dt
import sqlite3
from dataclasses import dataclass
from pathlib import Path

STORE_HELP = "the rehearsal gateway's eops.db"


@dataclass(frozen=True)
class Started:
    accepted_s: float
    started_s: float
    finished_s: float | None
    node: str | None


def missing_store(db: Path) -> str | None:
    """Why `db` cannot be read as a rehearsal's store, or None."""
    if db.is_file():
        return None
    return f"no such file {db}: give DIR/gateway-NAMESPACE/eops.db of a rehearsal"


def started_invocations(db: Path, *, on_a_node: bool = False) -> list[Started]:
    """The invocations that started (with `on_a_node`, only those that name their node), in the
    store's order, their times from the first acceptance among them."""
    query = "select accepted_at, started_at, finished_at, node from invocations where started_at is not null"
    if on_a_node:
        query += " and node is not null"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        rows = con.execute(query).fetchall()
    if not rows:
        return []
    t0 = min(dt.datetime.fromisoformat(r[0]) for r in rows)

    def at(text: str) -> float:
        return (dt.datetime.fromisoformat(text) - t0).total_seconds()

    return [Started(at(a), at(s), at(f) if f else None, node) for a, s, f, node in rows]
