"""The gateway as MultiKueue's external dispatcher (`--kube-nominate-wait`, the manager's Kueue
with `multiKueue.dispatcherName: eops.dev/gateway`), on the session's MultiKueue set (the real
Kueue v0.17.0): Kueue copies each Workload only to the workers the gateway nominates; one whose
worker lets it wait gets the next worker after the wait, and the work that follows goes to the
other worker first."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from elasticityops.devcluster.cluster_set import ClusterSet
from elasticityops.domain.kueue_notes import DISPATCHED, IN_WORKER, NOMINATED
from helpers.multikueue import hold_queue
from helpers.server import RunningServer

from .cluster_support import deploy, invoke, runs, wait_state
from .nominating_support import nominating_gateway

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("multikueue")]

NS = "default"
WAIT_S = 8.0


@pytest.fixture(scope="module")
def nominating(
    multikueue_set: ClusterSet, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    with nominating_gateway(multikueue_set, NS, tmp_path_factory, WAIT_S) as server:
        yield server


def _notes(record: dict[str, object], kind: str) -> list[str]:
    notes = record["notes"]
    assert isinstance(notes, list)
    return [n["message"] for n in notes if n["kind"] == kind]


def test_a_worker_that_lets_the_work_wait_gets_a_second_and_the_next_work_goes_elsewhere_first(
    multikueue_set: ClusterSet, nominating: RunningServer
) -> None:
    deploy(nominating, name="picked", annotations=runs(2))
    hold_queue(multikueue_set, "worker-1", True)
    try:
        # Nothing waits anywhere: worker-1 first (the name breaks the tie), which holds it.
        first = wait_state(nominating, invoke(nominating, "picked"), {"succeeded"}, timeout=180)
        assert _notes(first, NOMINATED) == [
            "Kueue: the gateway nominated cluster worker-1 to MultiKueue (0 of its workloads waiting there)",
            f"Kueue: no worker admitted it within {WAIT_S:g} s: the gateway nominated cluster worker-2 too "
            "(now worker-1, worker-2)",
        ], first["notes"]
        assert first["cluster"] == "worker-2"
        assert _notes(first, DISPATCHED) == ["Kueue: MultiKueue runs it in cluster worker-2"], first["notes"]
        # worker-1 let it wait: the next goes to worker-2 alone, and Kueue copies it nowhere else.
        second = wait_state(nominating, invoke(nominating, "picked"), {"succeeded"}, timeout=180)
        assert _notes(second, NOMINATED) == [
            "Kueue: the gateway nominated cluster worker-2 to MultiKueue (0 of its workloads waiting there)"
        ], second["notes"]
        assert second["cluster"] == "worker-2"
        assert not [m for m in _notes(second, IN_WORKER) if m.startswith("worker-1:")], (
            "worker-1's Kueue never saw a copy of it",
            second["notes"],
        )
    finally:
        hold_queue(multikueue_set, "worker-1", False)
