"""Fixtures: real `eops serve` processes. `gateway` runs functions (2 virtual GPU slots);
`paused_gateway` accepts and stores but admits nothing, so invocations stay queued;
`fuzzed_gateway`, paused too, is each fuzzing module's own."""

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


@pytest.fixture(scope="module")
def fuzzed_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    # Paused: generated functions are stored but never run (their commands are random strings),
    # and their invocations stay queued, so cancel and logs see them. A short wait bound keeps
    # generated ?wait= values from holding requests for minutes. A module's own: what one
    # module's generated calls leave behind is not another's to meet.
    with running_server(
        tmp_path_factory.mktemp("fuzz"), "--paused", env={"EOPS_MAX_WAIT_SECONDS": "1"}
    ) as gw:
        yield gw
