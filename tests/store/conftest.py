"""The store tests run twice: against a SQLite file and against a real PostgreSQL server (the
session's `postgres` fixture, tests/conftest.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from elasticityops.store.sql import SqlStore
from helpers.pg_cluster import PgCluster, fresh_database


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'eops.db'}"
    cluster: PgCluster = request.getfixturevalue("postgres")
    return fresh_database(cluster)


@pytest.fixture
def run() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as runner:
        yield runner


async def open_store(url: str) -> SqlStore:
    return await SqlStore.open(url)


@pytest.fixture
def store(store_url: str, run: asyncio.Runner) -> Iterator[SqlStore]:
    s = run.run(open_store(store_url))
    try:
        yield s
    finally:
        run.run(s.close())
