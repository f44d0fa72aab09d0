"""Dev clusters shared by the processes of one parallel test run (pytest-xdist).

Cluster tests mostly wait on simulated time, so a run spreads them over several processes.
Tests are sorted into lanes: most share the lane `shared`, one cluster with a namespace per
test; the tests that change or read what the whole cluster shares (the static pool, stockouts,
the API server's life, cluster-scoped objects) run one after another in a lane of their own,
on a cluster no other lane touches. A lane's cluster is started by the first process of the run
that needs it, under a file lock in the run's pool directory, and attached by the others; the
run's controller stops every cluster of the pool by PID when the run ends (`stop_all`).

A start that failed is recorded, so the other processes fail at once with its reason instead
of each trying again for minutes.
"""

from __future__ import annotations

import fcntl
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from elasticityops.devcluster import procs
from elasticityops.devcluster.cluster import DevCluster, down, load_state
from elasticityops.devcluster.errors import DevClusterError

SHARED_LANE = "shared"
_LANE_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
_FAILED = "start-failed.txt"


def check_lane(name: str) -> str:
    """A lane's name: lower-case letters, digits and dashes (it names a directory)."""
    if not _LANE_NAME.fullmatch(name):
        raise ValueError(f"lane {name!r}: use lower-case letters, digits and '-', at most 40")
    return name


def lane_dir(pool: Path, lane: str) -> Path:
    """Where the cluster of `lane` keeps its state in the pool."""
    return pool / check_lane(lane)


@contextmanager
def _locked(path: Path, timeout: float | None = None) -> Iterator[None]:
    """An exclusive flock on `path`; with `timeout`, go on without it after that many seconds
    (the run's end must stop clusters even where a process died holding the lock mid-start)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if deadline is None else fcntl.LOCK_NB))
                break
            except BlockingIOError:
                assert deadline is not None
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def acquire(pool: Path, lane: str, start: Callable[[Path], DevCluster]) -> DevCluster:
    """The running cluster of `lane`: attached where another process started it, else started
    here with `start(state_dir)`. Raises DevClusterError where a start failed (here or in
    another process) or the lane's cluster is no longer whole."""
    state_dir = lane_dir(pool, lane)
    with _locked(pool / f"{lane}.lock"):
        failed = state_dir / _FAILED
        if failed.is_file():
            raise DevClusterError(f"the {lane!r} lane's dev cluster did not start: {failed.read_text()}")
        state = load_state(state_dir)
        if state is None:
            state_dir.mkdir(parents=True, exist_ok=True)
            try:
                return start(state_dir)
            except BaseException as exc:
                failed.write_text(str(exc) or type(exc).__name__)
                raise
        dead = [rec.name for rec in state.processes if not procs.is_alive(rec)]
        if dead:
            raise DevClusterError(f"the {lane!r} lane's dev cluster lost {', '.join(dead)} ({state_dir})")
        return DevCluster.attach(state_dir)


def stop_all(pool: Path) -> dict[str, list[str]]:
    """Stop every cluster of the pool by PID; the processes stopped, by lane."""
    stopped: dict[str, list[str]] = {}
    if not pool.is_dir():
        return stopped
    for state_dir in sorted(p for p in pool.iterdir() if p.is_dir()):
        with _locked(pool / f"{state_dir.name}.lock", timeout=30.0):
            stopped[state_dir.name] = down(state_dir)
    return stopped
