"""A real `eops serve` for tests, the one helper that starts it: a subprocess on a free
127.0.0.1 port with its own data dir, its output captured to a log file there, ready once it
has printed its admin token and /readyz says so, stopped by its PID.

    with running_server(tmp_path / "data", "--gpus", "2", env={"EOPS_MAX_WAIT_SECONDS": "2"}) as srv:
        with srv.client() as http:                      # httpx.Client with the admin token
            http.get("/v1/functions")
        subprocess.run([EOPS, "fn", "ls"], env=srv.env())

`start_server` / `RunningServer.stop()` / `.kill()` / `.again()` are there for tests that
restart it (a SIGKILL, then a second start on the same data dir)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

# A free port for a server a test starts next (below the kernel's ephemeral range: see there).
# `start_server` needs none: the gateway binds port 0 and says its port.
from elasticityops.devcluster.procs import free_port as free_port

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
EOPS = str(VENV_BIN / "eops")
HOST = "127.0.0.1"  # tests talk to nothing else
_TOKEN_LINE = re.compile(r"EOPS_TOKEN=(\S+)")
_BANNER = re.compile(r"ElasticityOps gateway on http://[^\s]*:(\d+) ")


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for `eops` subprocesses: this venv first on PATH (so a function's
    `python` is the project's), no inherited EOPS_* settings (EOPS_DATA_DIR among them), no
    terminal width; `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOPS_") and k != "COLUMNS"}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


@dataclass
class RunningServer:
    process: subprocess.Popen[bytes]
    port: int
    data_dir: Path
    log_path: Path
    args: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    cwd: Path = REPO
    token: str = ""  # the admin token, as the server printed it

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def client(self, token: str | None = None, timeout: float = 30.0) -> httpx.Client:
        """An httpx client for this server, with the admin token (or `token`)."""
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {token or self.token}"}, timeout=timeout
        )

    def env(self, **overrides: str) -> dict[str, str]:
        """Environment for a CLI subprocess pointed at this server."""
        return base_env({"EOPS_URL": self.url, "EOPS_TOKEN": self.token, **overrides})

    def output(self) -> str:
        """What the server printed so far (stdout and stderr)."""
        return self.log_path.read_text(errors="replace")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM by PID, then SIGKILL if it has not ended within `timeout`; its exit code."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                return self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
        return self.process.wait(timeout)

    def kill(self) -> int:
        """SIGKILL by PID: no shutdown, no flush; what a crash looks like (restart tests)."""
        if self.process.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        return self.process.wait(20.0)

    def again(self, *, port: int | None = None, ready_timeout: float = 180.0) -> RunningServer:
        """A new `eops serve` on the same data dir with the same arguments and environment
        (on a fresh port unless given); this one must have ended (`kill` or `stop` it)."""
        if self.process.poll() is None:
            raise RuntimeError(f"eops serve (pid {self.pid}) is still running; stop or kill it first")
        return start_server(
            self.data_dir,
            *self.args,
            port=port,
            env=self.extra_env,
            cwd=self.cwd,
            ready_timeout=ready_timeout,
        )


def start_server(
    data_dir: Path,
    *args: str,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
    ready_timeout: float = 180.0,
) -> RunningServer:
    """Start `eops serve --host 127.0.0.1 --port P --data-dir DATA_DIR ARGS...` with `env` on
    top of `base_env()`, and return once /readyz answers 200 and the admin token is printed.
    Raises with the server's output if it exits or is not ready in time (the process is
    stopped first)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    # Without a port the gateway binds port 0 and its banner says which port it got: a port
    # picked here first could be taken by another process before the gateway binds it.
    port = port or 0
    log_path = data_dir / f"serve-{port or 'any'}-{time.monotonic_ns()}.log"
    command = [EOPS, "serve", "--host", HOST, "--port", str(port), "--data-dir", str(data_dir), *args]
    extra = dict(env or {})
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=base_env(extra),
            stdin=subprocess.DEVNULL,
        )
    server = RunningServer(process, port, data_dir, log_path, tuple(args), extra, cwd)
    try:
        _await_ready(server, ready_timeout)
    except BaseException:
        server.stop()
        raise
    return server


def _await_ready(server: RunningServer, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise RuntimeError(f"eops serve exited with {server.process.returncode}:\n{server.output()}")
        text = server.output()
        token = _TOKEN_LINE.search(text)
        banner = _BANNER.search(text)
        if token and banner:
            server.port = int(banner.group(1))
            server.token = token.group(1)
            try:
                if httpx.get(server.url + "/readyz", timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"eops serve not ready after {timeout}s:\n{text}")
        time.sleep(0.1)


@contextmanager
def running_server(
    data_dir: Path,
    *args: str,
    port: int | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path = REPO,
    ready_timeout: float = 180.0,
) -> Iterator[RunningServer]:
    """`start_server` for the length of a with block; stopped by PID at its end."""
    server = start_server(data_dir, *args, port=port, env=env, cwd=cwd, ready_timeout=ready_timeout)
    try:
        yield server
    finally:
        server.stop()
