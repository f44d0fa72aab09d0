"""Fixtures: one real `eops serve` for all of tests/cli, and `eops` itself run against it (or
against nothing): in this process (`eops`, `server_less`), or as a real subprocess
(`eops_process`, `server_less_process`), which each command family keeps some tests on
(runner.py says why both)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from elasticityops.client import Client
from helpers.server import RunningServer, free_port, running_server

from .runner import Eops, Writer

# Small enough that the payload-limit test stays quick, large enough for any function spec.
MAX_PAYLOAD = 65536


@pytest.fixture(scope="package")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    data = tmp_path_factory.mktemp("cli-gateway")
    with running_server(data, "--gpus", "2", "--max-payload-bytes", str(MAX_PAYLOAD)) as srv:
        yield srv


@pytest.fixture
def eops(server: RunningServer) -> Eops:
    return Eops(server, in_process=True)


@pytest.fixture
def eops_process(server: RunningServer) -> Eops:
    return Eops(server)


def _nowhere() -> dict[str, str]:
    return {"EOPS_URL": f"http://127.0.0.1:{free_port()}", "EOPS_TOKEN": "unused"}


@pytest.fixture
def server_less() -> Eops:
    """`eops` pointed at a port where nothing listens."""
    return Eops(None, _nowhere(), in_process=True)


@pytest.fixture
def server_less_process() -> Eops:
    return Eops(None, _nowhere())


@pytest.fixture
def api(server: RunningServer) -> Iterator[Client]:
    """The Python client, for setting up and checking what the CLI did."""
    with Client(server.url, server.token) as client:
        yield client


@pytest.fixture
def write(tmp_path: Path) -> Writer:
    return Writer(tmp_path)
