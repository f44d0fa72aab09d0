"""The store tests run twice: against a SQLite file and against a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from elasticityops.store.sql import SqlStore

from .pg_cluster import PgCluster, pg_cluster

_databases = itertools.count()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PgCluster]:
    # No skip: a missing PostgreSQL fails these tests loudly (scripts/test installs it).
    with pg_cluster() as cluster:
        yield cluster


def _fresh_database(cluster: PgCluster) -> str:
    name = f"eops_test_{next(_databases)}"
    with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return cluster.url(name)


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'eops.db'}"
    cluster: PgCluster = request.getfixturevalue("postgres")
    return _fresh_database(cluster)


@pytest.fixture
def run() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as runner:
        yield runner


async def open_store(url: str, **kwargs: int) -> SqlStore:
    return await SqlStore.open(url, **kwargs)


@pytest.fixture
def store(store_url: str, run: asyncio.Runner) -> Iterator[SqlStore]:
    s = run.run(open_store(store_url))
    try:
        yield s
    finally:
        run.run(s.close())
