"""Fixtures: real `eops serve` processes. `gateway` runs functions (2 virtual GPU slots);
`paused_gateway` accepts and stores but admits nothing, so invocations stay queued."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from helpers.server import RunningServer, running_server


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(tmp_path_factory.mktemp("gateway"), "--gpus", "2") as gw:
        yield gw


@pytest.fixture(scope="session")
def paused_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with running_server(
        tmp_path_factory.mktemp("paused"),
        "--paused",
        "--max-payload-bytes",
        "4096",
        env={"EOPS_MAX_WAIT_SECONDS": "2"},
    ) as gw:
        yield gw
