"""`eops` as a user runs it: by default a real subprocess; `in_process=True` runs the same entry
point inside this pytest (tests/helpers/eops_in_process.py), for tests of what a command does
and says. Each command family keeps tests on a real process too (`eops_process` and
`server_less_process` in conftest.py; tests/api/test_tokens.py for `eops token`), for what only a
process shows: the interpreter's start, its exit status, its streams as the OS sees them."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from helpers.eops_in_process import run_eops
from helpers.server import EOPS, REPO, RunningServer, base_env


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


@dataclass(frozen=True)
class Eops:
    """Runs `.venv/bin/eops ARGS` in `cwd` (the checkout unless given) with EOPS_URL / EOPS_TOKEN
    pointed at `server`, if any, and `extra` on top; as a subprocess, or in this process when
    `in_process`."""

    server: RunningServer | None
    extra: Mapping[str, str] = field(default_factory=dict)
    in_process: bool = False

    def __call__(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        drop: tuple[str, ...] = (),
        timeout: float = 180,
        cwd: Path = REPO,
    ) -> Result:
        full = self.server.env() if self.server is not None else base_env()
        full.update(self.extra)
        full.update(env or {})
        for name in drop:
            full.pop(name, None)
        if self.in_process:
            return Result(*run_eops(list(args), full, cwd))
        done = subprocess.run(
            [EOPS, *args], capture_output=True, text=True, env=full, cwd=cwd, timeout=timeout, check=False
        )
        return Result(done.returncode, done.stdout, done.stderr)


@dataclass(frozen=True)
class Writer:
    """Writes test files (function specs, payloads) under a temp dir."""

    root: Path

    def __call__(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path
