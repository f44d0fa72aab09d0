"""Fixtures every test directory may use: the dev cluster's (its pytest plugin), one real
PostgreSQL server for the session, started on first use, and a server of a test's own
(tests/helpers/pg_cluster.py)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from types import FrameType

import pytest

from helpers.pg_cluster import PgCluster, pg_cluster

pytest_plugins = ["elasticityops.devcluster.pytest_plugin", "pytester"]


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    # A run stopped by SIGTERM (a cancelled CI job; scripts/test stopping the cluster half it
    # runs in the background) tears down as Ctrl-C does, so the session's fixtures stop the
    # processes they started (dev cluster, PostgreSQL) by their PIDs. A background job of a
    # script inherits SIGINT ignored; Ctrl-C should stop it too.
    signal.signal(signal.SIGTERM, _interrupt)
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PgCluster]:
    # No skip: a missing PostgreSQL fails these tests loudly (scripts/test installs it).
    with pg_cluster() as cluster:
        yield cluster


@pytest.fixture
def own_postgres() -> Iterator[PgCluster]:
    """A server of this test's own, not the session's: for a test that stops it, or that loads
    it more than the tests sharing the session's should see."""
    with pg_cluster() as cluster:
        yield cluster
