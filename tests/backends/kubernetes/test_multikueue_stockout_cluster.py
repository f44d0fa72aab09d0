"""A region out of GPUs (issue 40, "spill on stockout"), on the session's MultiKueue set (the real
Kueue v0.17.0): worker-1's simulated cloud stocks out in every zone of its region and its T4
nodes are taken, the gateway nominates workers (`--kube-nominate-wait`, the manager's Kueue with
an external dispatcher). The first invocation goes to worker-1, whose Kueue evicts it when its
pod gets no node within waitForPodsReady (tests/helpers/multikueue.PODS_READY_S); MultiKueue takes
it back and the gateway nominates worker-2, where it runs, once; the next goes to worker-2
straight away. The timeline says each step."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, GPU_RESOURCE
from elasticityops.devcluster.cluster import DevCluster
from elasticityops.devcluster.cluster_set import ClusterSet
from elasticityops.devcluster.nodes import zones_of
from elasticityops.domain.errors import NotFound
from elasticityops.domain.kueue_notes import DISPATCHED, LEFT_WORKER, NOMINATED
from helpers.kueue import wait_for
from helpers.multikueue import PODS_READY_S
from helpers.server import RunningServer

from .cluster_support import deploy, invoke, pods_of, runs, wait_state
from .nominating_support import nominating_gateway

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.cluster_lane("multikueue")]

NS = "default"
WAIT_S = 8.0
T4 = "nvidia-tesla-t4"
STOCKED = "worker-1"
HOLDER = "eops-test-holder"


@pytest.fixture(scope="module")
def nominating(
    multikueue_set: ClusterSet, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    with nominating_gateway(multikueue_set, NS, tmp_path_factory, WAIT_S) as server:
        yield server


@contextlib.contextmanager
def _region_out(worker: DevCluster) -> Iterator[int]:
    """`worker`'s cloud stocked out in every zone of its region, and each of its T4 nodes taken
    by a holder pod bound to it (what a region at its peak looks like: nothing free, nothing new);
    yields how many were taken. Both undone afterwards."""
    region = worker.autoscaler_settings.region
    worker.configure_cloud(stockout_zones=zones_of(region))
    with worker.api() as api:
        try:
            # A node the cloud was making before the stockout registers within its delays (3 s + 2 s).
            wait_for(lambda: _settled_t4_nodes(api), 60, f"{worker.state_dir.name}'s T4 nodes to settle")
            nodes = _settled_t4_nodes(api) or []
            for node in nodes:
                api.create(f"/api/v1/namespaces/{NS}/pods", _holder(node))
            yield len(nodes)
        finally:
            worker.configure_cloud(stockout_zones=())
            holders, _ = api.list(f"/api/v1/namespaces/{NS}/pods", {"labelSelector": f"app={HOLDER}"})
            for pod in holders:
                with contextlib.suppress(NotFound):
                    api.delete(f"/api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}")


def _settled_t4_nodes(api: Any) -> list[str] | None:
    """The T4 nodes' names once the same ones are seen twice 6 s apart; None before."""
    import time

    def names() -> list[str]:
        nodes, _ = api.list("/api/v1/nodes", {"labelSelector": f"{ACCELERATOR_LABEL}={T4}"})
        return sorted(n["metadata"]["name"] for n in nodes)

    first = names()
    time.sleep(6)
    return first if names() == first else None


def _holder(node: str) -> dict[str, Any]:
    """A pod bound to `node` (no scheduler: it takes the node as it is) holding its GPU."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{HOLDER}-{node}", "labels": {"app": HOLDER}},
        "spec": {
            "nodeName": node,
            # Not below the invocation's priority, else the scheduler preempts it for the work.
            "priorityClassName": "eops-high",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "hold",
                    "image": "holder:1",
                    "resources": {"limits": {GPU_RESOURCE: "1"}, "requests": {GPU_RESOURCE: "1"}},
                }
            ],
        },
    }


def _nominated(worker: str) -> tuple[str, str]:
    return (
        NOMINATED,
        f"Kueue: the gateway nominated cluster {worker} to MultiKueue (0 of its workloads waiting there)",
    )


def _notes(record: dict[str, Any], *kinds: str) -> list[tuple[str, str]]:
    return [(n["kind"], n["message"]) for n in record["notes"] if n["kind"] in kinds]


def test_work_in_a_stocked_out_region_is_taken_back_and_runs_in_the_other_once(
    multikueue_set: ClusterSet, nominating: RunningServer
) -> None:
    deploy(nominating, name="spill", annotations=runs(2))
    with _region_out(multikueue_set.cluster(STOCKED)) as held:
        print(f"{held} T4 nodes of {STOCKED} taken, its region stocked out")
        # Nothing waits anywhere: worker-1 first (the name breaks the tie). It admits the work
        # (its quota is free), and the pod waits there for a node that never comes.
        first = invoke(nominating, "spill")
        done = wait_state(nominating, first, {"succeeded"}, timeout=PODS_READY_S + 150)
        said = _notes(done, NOMINATED, DISPATCHED, LEFT_WORKER)
        assert said[:3] == [
            _nominated("worker-1"),
            (DISPATCHED, "Kueue: MultiKueue runs it in cluster worker-1"),
            (
                LEFT_WORKER,
                "Kueue: MultiKueue took it back from cluster worker-1, whose Kueue evicted it (Workload "
                'evicted on worker cluster: "worker-1", resetting for re-admission. Previously: "Ready"): '
                "it is admitted again, in whichever worker takes it first",
            ),
        ], done["notes"]
        # In either order: an idle worker-2 may admit it before the gateway's write returns.
        assert sorted(said[3:]) == [
            (DISPATCHED, "Kueue: MultiKueue runs it in cluster worker-2"),
            _nominated("worker-2"),
        ], done["notes"]
        assert done["cluster"] == "worker-2"
        assert done["attempt"] == 0, "taken back before it ran: the same attempt, run once"
        # The region's own word on why: the worker's Kueue evicted it for its pod's readiness.
        worker_says = [m for k, m in _notes(done, "KueueInWorker") if m.startswith(f"{STOCKED}:")]
        assert any("PodsReadyTimeout" in m for m in worker_says), worker_says
        # worker-1 let the work down: the next goes to worker-2 alone, and runs at once.
        second = wait_state(nominating, invoke(nominating, "spill"), {"succeeded"}, timeout=120)
        assert _notes(second, NOMINATED) == [_nominated("worker-2")], second["notes"]
        assert second["cluster"] == "worker-2"
    # No pod of either is left in the stocked-out worker.
    wait_for(lambda: not pods_of(multikueue_set.cluster(STOCKED), NS, first), 60, "worker-1's pod to go")
