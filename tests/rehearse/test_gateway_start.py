"""Starting, finding and stopping a gateway subprocess (a local-backend `eops serve`, so no
cluster is needed): the banner is read for its URL and token and /readyz is asked."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from elasticityops.rehearse.gateway import Gateway, GatewayFailed, await_ready, gateway_env


def _spawn(tmp_path: Path, *args: str) -> Gateway:
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "elasticityops.cli.main", "serve", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=gateway_env(),
        )
    return Gateway(process, log)


def test_a_gateway_is_found_ready_and_stopped(tmp_path: Path) -> None:
    gw = _spawn(
        tmp_path, "--host", "127.0.0.1", "--port", "0", "--data-dir", str(tmp_path / "d"), "--gpus", "1"
    )
    try:
        asyncio.run(await_ready(gw, 90.0))
        assert gw.url.startswith("http://127.0.0.1:")
        assert not gw.url.endswith(":0")
        assert gw.token
    finally:
        code = gw.stop()
    # uvicorn shuts down, then re-raises the SIGTERM it caught: -15, not a SIGKILL's -9.
    assert code in (0, -15)


def test_a_gateway_that_refuses_to_start_is_reported_with_its_output(tmp_path: Path) -> None:
    gw = _spawn(tmp_path, "--port", "0", "--data-dir", str(tmp_path / "d"), "--no-such-flag")
    with pytest.raises(GatewayFailed, match="no-such-flag"):
        asyncio.run(await_ready(gw, 60.0))
