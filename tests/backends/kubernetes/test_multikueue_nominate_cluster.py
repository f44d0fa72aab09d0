"""The gateway as MultiKueue's external dispatcher (`--kube-nominate-wait`, the manager's Kueue
with `multiKueue.dispatcherName: eops.dev/gateway`), on the session's MultiKueue set (the real
Kueue v0.17.0): Kueue copies each Workload only to the workers the gateway nominates; one whose
worker lets it wait gets the next worker after the wait, and the work that follows goes to the
other worker first."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from elasticityops.devcluster.cluster_set import ClusterSet
from elasticityops.domain.errors import NotFound
from elasticityops.domain.kueue_notes import DISPATCHED, IN_WORKER, NOMINATED
from helpers.kueue import wait_for
from helpers.multikueue import GATEWAY_DISPATCHER, dispatched_by, gateway_env, hold_queue
from helpers.server import RunningServer

from .cluster_support import deploy, invoke, runs, start_k8s_gateway, wait_state

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("multikueue")]

NS = "default"
WAIT_S = 8.0


@pytest.fixture(scope="module")
def nominating(
    multikueue_set: ClusterSet, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    env = {
        **gateway_env(multikueue_set, NS, tmp_path_factory.mktemp("workers")),
        "EOPS_KUBE_NOMINATE_WAIT": f"{WAIT_S:g}",
    }
    with dispatched_by(multikueue_set, GATEWAY_DISPATCHER):
        _no_work_left(multikueue_set)
        server = start_k8s_gateway(multikueue_set.manager, NS, tmp_path_factory.mktemp("gw"), env=env)
        try:
            yield server
        finally:
            server.stop()


def _no_work_left(clusters: ClusterSet) -> None:
    """The set is the lane's: an earlier test's Job whose Workload has not finished would be
    this gateway's to nominate too (it follows every Job of its instance in the namespace), and
    its count of Workloads waiting would not start at 0. Each one is shown (for what left it)
    and its Job deleted, and the test starts once their Workloads are gone."""
    path = f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{NS}/workloads"

    def unfinished() -> list[dict[str, Any]]:
        with clusters.manager.api() as api:
            workloads, _ = api.list(path)
        return [
            w
            for w in workloads
            if not any(
                c.get("type") == "Finished" and c.get("status") == "True"
                for c in (w.get("status") or {}).get("conditions") or []
            )
        ]

    left = unfinished()
    for workload in left:
        status = workload.get("status") or {}
        print(
            "left by an earlier test:",
            workload["metadata"]["name"],
            [(c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []],
            status.get("clusterName"),
            status.get("nominatedClusterNames"),
        )
        for owner in workload["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == "Job":
                with clusters.manager.api() as api, contextlib.suppress(NotFound):
                    api.delete(f"/apis/batch/v1/namespaces/{NS}/jobs/{owner['name']}")
    if left:
        wait_for(lambda: not unfinished(), 90, "the earlier tests' Workloads to go")


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
