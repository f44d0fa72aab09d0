"""`eops ARGS` run inside this pytest: the console script's own entry point
(`elasticityops.cli.main:main`) with the environment, working directory, argv and standard
streams a subprocess would get, each put back after the call.

About 0.2 s a call instead of the 0.7-1.2 s of a new interpreter's start and imports, which is
where most of the time of the tests running many `eops` commands went. What only a real process
shows (the interpreter's start, the exit status the OS sees, the streams' ends) stays covered by
the tests that run `eops` as one (tests/cli/runner.py says which). What a CLI module reads once,
at its import (a rich Console's width from COLUMNS), is what the first call that imported it had:
a test that depends on such a setting passes it on every call, or runs a real process."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from typer.testing import CliRunner

from elasticityops.cli.main import main


def run_eops(args: list[str], env: Mapping[str, str], cwd: Path) -> tuple[int, str, str]:
    """Exit status, stdout and stderr of `eops ARGS` in `cwd` with exactly `env` as its
    environment."""
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
        return code, out.getvalue().decode(), err.getvalue().decode()


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
