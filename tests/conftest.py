"""Fixtures every test directory may use: the dev cluster's (its pytest plugin), and one real
PostgreSQL server for the session, started on first use (tests/store/pg_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from store.pg_cluster import PgCluster, pg_cluster

pytest_plugins = ["elasticityops.devcluster.pytest_plugin", "pytester"]


@pytest.fixture(scope="session")
def postgres() -> Iterator[PgCluster]:
    # No skip: a missing PostgreSQL fails these tests loudly (scripts/test installs it).
    with pg_cluster() as cluster:
        yield cluster
