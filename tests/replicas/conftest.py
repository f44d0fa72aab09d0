"""Replicas share one PostgreSQL database (a fresh one per test) on the session's server."""

from __future__ import annotations

import pytest

from helpers.pg_cluster import PgCluster, fresh_database


@pytest.fixture
def database_url(postgres: PgCluster) -> str:
    return fresh_database(postgres)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
