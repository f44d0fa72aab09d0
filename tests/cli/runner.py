"""`eops` run as a real subprocess, the way a user runs it."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

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
    pointed at `server`, if any, and `extra` on top."""

    server: RunningServer | None
    extra: Mapping[str, str] = field(default_factory=dict)

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
