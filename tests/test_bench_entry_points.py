"""Every benchmark under bench/ starts: its imports resolve and `--help` answers.

Benchmarks are not run by the suite (they take minutes to hours), so a refactor that renames
what one imports would otherwise go unnoticed until someone runs it (planner_calibration.py
imported a parser moved elsewhere for a session)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Not commands: an app the accept benchmark starts; the SimPy model planner_speed.py imports
# (its import is checked through planner_speed.py and tests/planner); the machine description
# every bench imports; the rehearsal-store reader two rehearsal benches import.
HELPERS = {"bare_app.py", "planner_simpy.py", "machine_info.py", "rehearsal_store.py"}
BENCHES = sorted(p.name for p in (ROOT / "bench").glob("*.py") if p.name not in HELPERS)


def test_every_benchmark_is_listed() -> None:
    assert "devcluster_stuck_loop.py" in BENCHES
    assert len(BENCHES) >= 7


@pytest.mark.parametrize("name", BENCHES)
def test_benchmark_answers_help(name: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "usage:" in done.stdout
