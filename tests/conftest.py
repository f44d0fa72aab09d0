"""Fixtures every test directory may use: the dev cluster's (its pytest plugin), one real
PostgreSQL server for the session, started on first use, and a server of a test's own
(tests/helpers/pg_cluster.py)."""

from __future__ import annotations

import functools
import inspect
import signal
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Any

import anyio
import pytest

from helpers.multikueue import multikueue_set  # noqa: F401  (a fixture)
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


# pytest-timeout's signal cannot end an async test that hangs: its exception is raised in an
# event-loop callback, which asyncio catches and logs, and the loop goes on waiting. Each async
# test is bounded on its own loop instead, so a hang fails with the stack it awaited on.
ASYNC_TEST_LIMIT_S = 300


def _bounded(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., Coroutine[Any, Any, None]]:
    @functools.wraps(test)
    async def bounded(*args: Any, **kwargs: Any) -> None:
        with anyio.fail_after(ASYNC_TEST_LIMIT_S):
            await test(*args, **kwargs)

    return bounded


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        test = getattr(item, "obj", None)
        # Hypothesis wraps its own tests (and anyio drives them through that wrapper).
        if inspect.iscoroutinefunction(test) and not hasattr(test, "hypothesis"):
            item.obj = _bounded(test)  # type: ignore[attr-defined]


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
