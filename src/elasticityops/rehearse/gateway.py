"""One `eops serve --backend kubernetes` per policy: a subprocess on 127.0.0.1 (a port the
kernel picks), SQLite in its own data dir, the policy's namespace, and `--headroom P` unless P
is `none`; stopped by its PID. Its output goes to a log file beside its data dir."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from elasticityops.client import AsyncClient, ClientError

_URL = re.compile(r"gateway on (http://\S+)")
_TOKEN = re.compile(r"EOPS_TOKEN=(\S+)")
HOST = "127.0.0.1"


class GatewayFailed(RuntimeError):
    """The gateway exited or did not become ready; the message ends with its output's tail."""


def serve_command(data_dir: Path, kubeconfig: Path, namespace: str, policy: str) -> list[str]:
    """The argv of the gateway for one policy (the current interpreter runs `eops`)."""
    argv = [
        sys.executable,
        "-m",
        "elasticityops.cli.main",
        "serve",
        "--host",
        HOST,
        "--port",
        "0",
        "--data-dir",
        str(data_dir),
        "--backend",
        "kubernetes",
        "--kubeconfig",
        str(kubeconfig),
        "--namespace",
        namespace,
    ]
    if policy.strip().lower() != "none":
        argv += ["--headroom", policy]
    return argv


def gateway_env() -> dict[str, str]:
    """Our environment without EOPS_* settings: the command line says everything the gateway
    is to use, so a variable left in the shell cannot change one run and not the next."""
    return {k: v for k, v in os.environ.items() if not k.startswith("EOPS_")}


@dataclass
class Gateway:
    process: subprocess.Popen[bytes]
    log_path: Path
    url: str = ""
    token: str = ""

    def output(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM by PID, SIGKILL after `timeout`; its exit code."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
        return self.process.wait(timeout)


def start_gateway(data_dir: Path, kubeconfig: Path, namespace: str, policy: str) -> Gateway:
    data_dir.mkdir(parents=True, exist_ok=True)
    log_path = data_dir.with_name(data_dir.name + ".log")
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            serve_command(data_dir, kubeconfig, namespace, policy),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=gateway_env(),
            # Its own session: a Ctrl-C reaches us, and we stop it by PID after cleaning up.
            start_new_session=True,
        )
    return Gateway(process, log_path)


async def await_ready(gateway: Gateway, within_s: float, poll_s: float = 0.2) -> None:
    """Until the banner is printed and /readyz answers; GatewayFailed if it exits first or
    `within_s` passes (it is stopped then)."""
    deadline = time.monotonic() + within_s
    while True:
        code = gateway.process.poll()
        if code is not None:
            raise GatewayFailed(f"eops serve exited with {code}:\n{gateway.output()}")
        text = gateway.output(100_000)
        url, token = _URL.search(text), _TOKEN.search(text)
        if url and token:
            gateway.url, gateway.token = url.group(1), token.group(1)
            try:
                async with AsyncClient(gateway.url, gateway.token) as client:
                    await client.health()
                return
            except ClientError:
                pass
        if time.monotonic() > deadline:
            gateway.stop()
            raise GatewayFailed(f"eops serve not ready after {within_s:g} s:\n{gateway.output()}")
        await asyncio.sleep(poll_s)
