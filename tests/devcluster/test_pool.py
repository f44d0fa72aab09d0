"""The pool of a parallel run's dev clusters (devcluster/pool.py): one start per lane however many
processes ask at once, the others attach; a failed start is told to the rest at once; a lane
whose processes died is refused, naming them; the run's end stops every lane by PID.

The "cluster" here is a real process recorded as a dev cluster records its own (state.json),
so the lock, the attach and the stop are the real ones without the minutes a cluster takes."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from elasticityops.devcluster import procs
from elasticityops.devcluster.cluster import ClusterState, DevCluster, _save
from elasticityops.devcluster.components import Layout, Ports
from elasticityops.devcluster.errors import DevClusterError
from elasticityops.devcluster.pool import acquire, check_lane, lane_dir, stop_all


class Starts:
    """A `start` for acquire(): records each call; the 'cluster' is one sleeping process."""

    def __init__(self, fail: str = "", takes: float = 0.0) -> None:
        self.calls: list[Path] = []
        self.fail, self.takes = fail, takes

    def __call__(self, state_dir: Path) -> DevCluster:
        self.calls.append(state_dir)
        time.sleep(self.takes)  # a start takes a while: the others wait on the lock meanwhile
        if self.fail:
            raise DevClusterError(self.fail)
        lay = Layout(state_dir)
        rec = procs.start("sleeper", ["sleep", "300"], lay.logs / "sleeper.log")
        state = ClusterState(
            state_dir, "https://127.0.0.1:1", Ports(1, 2, 3, 4, 5, 6), state_dir, (rec,), 0.0
        )
        _save(lay, state)
        return DevCluster(state)


def _acquire_all(pool: Path, lane: str, start: Starts, count: int) -> list[DevCluster | BaseException]:
    got: list[DevCluster | BaseException] = []

    def one() -> None:
        try:
            got.append(acquire(pool, lane, start))
        except BaseException as exc:
            got.append(exc)

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return got


def test_a_lane_is_started_once_and_attached_by_the_others_and_the_end_stops_it(tmp_path: Path) -> None:
    start = Starts(takes=0.5)
    try:
        got = _acquire_all(tmp_path, "shared", start, 4)
        assert start.calls == [lane_dir(tmp_path, "shared")]
        clusters = [c for c in got if isinstance(c, DevCluster)]
        assert len(clusters) == 4, got
        assert {c.state_dir for c in clusters} == {lane_dir(tmp_path, "shared").resolve()}
        [pid] = {rec.pid for c in clusters for rec in c.state.processes}
        other = acquire(tmp_path, "nodes", start)  # another lane: a cluster of its own
        assert other.state.processes[0].pid != pid
    finally:
        stopped = stop_all(tmp_path)
    assert stopped == {"nodes": ["sleeper"], "shared": ["sleeper"]}
    assert not any(procs.is_alive(rec) for c in clusters for rec in c.state.processes)
    assert not procs.is_alive(other.state.processes[0])
    assert stop_all(tmp_path) == {"nodes": [], "shared": []}  # nothing left to stop


def test_a_failed_start_is_told_to_the_others_at_once(tmp_path: Path) -> None:
    start = Starts(fail="kube-apiserver not ready after 120s", takes=0.2)
    got = _acquire_all(tmp_path, "faults", start, 3)
    assert len(start.calls) == 1  # one try, not one per process
    assert all(isinstance(e, DevClusterError) for e in got), got
    assert all("kube-apiserver not ready after 120s" in str(e) for e in got)
    with pytest.raises(DevClusterError, match="'faults' lane's dev cluster did not start"):
        acquire(tmp_path, "faults", start)


def test_a_lane_whose_processes_died_is_refused_naming_them(tmp_path: Path) -> None:
    cluster = acquire(tmp_path, "shared", Starts())
    procs.stop(cluster.state.processes[0])
    with pytest.raises(DevClusterError, match="lost sleeper"):
        acquire(tmp_path, "shared", Starts())


@pytest.mark.parametrize("name", ["", "Nodes", "a/b", "..", "x" * 41, "-a"])
def test_a_lane_name_must_be_a_plain_directory_name(name: str) -> None:
    with pytest.raises(ValueError, match="lower-case letters"):
        check_lane(name)
