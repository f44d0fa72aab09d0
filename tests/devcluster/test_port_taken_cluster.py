"""A dev cluster whose port is taken between its pick and its process's bind (another cluster
starting beside it: the test lanes, a MultiKueue set) starts again on fresh ports instead of
failing: here etcd's client port is held by this test when etcd binds it."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from elasticityops.devcluster import procs
from elasticityops.devcluster.build import ensure_built
from elasticityops.devcluster.cluster import DevCluster, down
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig

pytestmark = [pytest.mark.cluster]


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield held.getsockname()[1]


def test_a_port_taken_meanwhile_is_picked_again(
    tmp_path: Path, taken_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    picks = iter([taken_port])
    pick = procs.free_port
    monkeypatch.setattr(procs, "free_port", lambda: next(picks, None) or pick())
    steps: list[str] = []
    tc = ensure_built(allow_build=False, autoscaler="if-found")
    cfg = ClusterConfig(state_dir=tmp_path, autoscaler=AutoscalerSettings(enabled=False, baseline=0))
    try:
        cluster = DevCluster.start(cfg, tc, steps.append)
        assert cluster.state.ports.etcd_client != taken_port
        assert all(cluster.processes_alive().values())
    finally:
        down(tmp_path)
    [again] = [s for s in steps if s.startswith("a port was taken meanwhile")]
    assert "etcd exited during start-up" in again
