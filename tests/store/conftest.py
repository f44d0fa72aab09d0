"""The store tests run twice: against a SQLite file and against a real PostgreSQL server (the
session's `postgres` fixture, tests/conftest.py). `store_url` is an empty database of the test's
own; `store` (on `migrated_url`) one that has the schema already."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from elasticityops.store.sql import SqlStore
from helpers.pg_cluster import PgCluster, create_database, fresh_database


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


async def _migrate(url: str) -> None:
    await (await SqlStore.open(url)).close()


@pytest.fixture(scope="session")
def _sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("migrated") / "eops.db"
    asyncio.run(_migrate(f"sqlite:///{path}"))
    return path


@pytest.fixture(scope="session")
def _postgres_template(postgres: PgCluster) -> str:
    name = f"eops_migrated_{os.getpid()}"
    asyncio.run(_migrate(create_database(postgres, name)))
    return name


@pytest.fixture(params=["sqlite", "postgres"])
def migrated_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """As `store_url`, a database of this test's own, but with the schema in it already: a copy
    of one the session migrated once (a tenth of the time of migrating each; migrating is what
    test_migrations.py tests, on `store_url`)."""
    if request.param == "sqlite":
        template: Path = request.getfixturevalue("_sqlite_template")
        path = tmp_path / "eops.db"
        with closing(sqlite3.connect(template)) as source, closing(sqlite3.connect(path)) as copy:
            source.backup(copy)
        return f"sqlite:///{path}"
    cluster: PgCluster = request.getfixturevalue("postgres")
    return fresh_database(cluster, template=request.getfixturevalue("_postgres_template"))


@pytest.fixture
def store(migrated_url: str, run: asyncio.Runner) -> Iterator[SqlStore]:
    s = run.run(open_store(migrated_url))
    try:
        yield s
    finally:
        run.run(s.close())
