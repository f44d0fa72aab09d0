"""`eops` as a user runs it: by default a real subprocess; `in_process=True` runs the same entry
point (`elasticityops.cli.main:main`, the console script's target) inside this pytest, with the
environment, working directory, argv and standard streams a subprocess would get.

In-process is for tests of what a command does and says (about 0.2 s a call instead of 0.7-1.2 s
of interpreter start and imports; most of tests/cli's time went to those). Each command family
keeps tests on a real process too (`eops_process` in conftest.py), for what only a process
shows: the interpreter's start, its exit status, its streams as the operating system sees them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from typer.testing import CliRunner

from elasticityops.cli.main import main
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
            return _in_process(list(args), full, cwd)
        done = subprocess.run(
            [EOPS, *args], capture_output=True, text=True, env=full, cwd=cwd, timeout=timeout, check=False
        )
        return Result(done.returncode, done.stdout, done.stderr)


def _in_process(args: list[str], env: dict[str, str], cwd: Path) -> Result:
    # os.environ becomes exactly `env` for the call (what a subprocess would have had), and
    # is put back after it, as are the working directory and argv.
    overrides: dict[str, str | None] = {name: None for name in os.environ if name not in env}
    overrides.update(env)
    with _argv_and_cwd(["eops", *args], cwd), CliRunner().isolation(env=overrides) as (out, err, _):
        try:
            main()
            code = 0
        except SystemExit as exited:
            code = _exit_status(exited.code)
        sys.stdout.flush()
        sys.stderr.flush()
        return Result(code, out.getvalue().decode(), err.getvalue().decode())


def _exit_status(code: object) -> int:
    """The status `sys.exit(code)` gives a process: None is 0, a message is 1 (the message on
    stderr, as the interpreter prints it)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


@contextmanager
def _argv_and_cwd(argv: list[str], cwd: Path) -> Iterator[None]:
    old_argv, old_cwd = sys.argv, os.getcwd()
    sys.argv = argv
    os.chdir(cwd)
    try:
        yield
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)


@dataclass(frozen=True)
class Writer:
    """Writes test files (function specs, payloads) under a temp dir."""

    root: Path

    def __call__(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path
