"""`eops serve` as a real subprocess on a free 127.0.0.1 port, stopped by its PID."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

EOPS = str(Path(sys.executable).parent / "eops")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@dataclass
class Gateway:
    data_dir: Path
    port: int
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return (self.data_dir / "admin-token").read_text().strip()

    @property
    def log(self) -> str:
        path = self.data_dir / "gateway.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def client(self, token: str | None = None, timeout: float = 30.0) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {token or self.token}"},
            timeout=timeout,
        )

    def start(self, timeout: float = 60.0) -> Gateway:
        env = {**os.environ, **self.env}
        env.pop("EOPS_DATA_DIR", None)
        with (self.data_dir / "gateway.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [EOPS, "serve", "--port", str(self.port), "--data-dir", str(self.data_dir), *self.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"eops serve exited with {self.proc.returncode}:\n{self.log}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"eops serve was not ready within {timeout}s:\n{self.log}")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; what a crash looks like."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.kill(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


@contextlib.contextmanager
def running_gateway(data_dir: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[Gateway]:
    gateway = Gateway(data_dir, free_port(), list(args), env or {})
    gateway.start()
    try:
        yield gateway
    finally:
        gateway.stop()
