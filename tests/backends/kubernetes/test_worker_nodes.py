"""A MultiKueue worker's GPU nodes, watched in the worker through its kubeconfig: their states
per cluster (the capacity page), where a worker's pod starts its node time, and the node time
they close charged to that worker. Two stand-in API servers: the manager (no nodes) and one
worker."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from elasticityops.api.console.capacity import gather
from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.backend import KubernetesBackend
from elasticityops.backends.kubernetes.labels import ATTEMPT_LABEL
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.kueue_notes import RAN_AGAIN
from elasticityops.domain.node_history import NodeHistory, NodeHistoryWrite
from elasticityops.domain.node_seconds import Phase
from elasticityops.pricing.table import Capacity

from .builders import INV, T0, gpu_node, pod, scheduled, ts
from .scripted_server import Reply, scripted
from .test_backend import Sink
from .test_worker_rbac import NODES, NS, quiet_routes, worker_kubeconfig

pytestmark = pytest.mark.anyio


def _routes(nodes: list[dict[str, object]] | None = None) -> dict[str, list[Reply]]:
    """A cluster with nothing of ours but these GPU nodes."""
    listed = {"items": nodes or [], "metadata": {"resourceVersion": "1"}}
    return quiet_routes(
        **{f"^GET {NODES}\\?.*watch=true": [Reply(hold=True)], f"^GET {NODES}\\?": [Reply(200, listed)]}
    )


class _Records:
    """The store's node records as the backend reads them at its start, by cluster."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def gpu_node_history(self, cluster: str = "") -> list[NodeHistory]:
        self.asked.append(cluster)
        return []


class _Store:
    """What the capacity page reads of the store and the function cache: nothing in flight."""

    async def counts_by_state(self) -> dict[object, int]:
        return {}

    async def queued(self, limit: int) -> list[object]:
        return []

    async def active_counts_by_type(self) -> dict[object, int]:
        return {}

    async def versions(self, keys: object) -> dict[object, object]:
        return {}


@contextlib.asynccontextmanager
async def _worker_backend(
    tmp_path: Path, clock: ManualClock, worker_nodes: list[dict[str, object]]
) -> AsyncIterator[tuple[KubernetesBackend, Sink, _Records]]:
    """A gateway on a stand-in MultiKueue manager with one stand-in worker (`worker-1`) that has
    these GPU nodes, started; its worker's node watch has made its first list."""
    async with scripted([], _routes()) as manager, scripted([], _routes(worker_nodes)) as worker:
        settings = KubernetesSettings(
            namespace=NS,
            max_retries=1,
            concurrency=4,
            local_queue="eops",
            workers=f"worker-1={worker_kubeconfig(tmp_path, worker.url)}",
        )
        records = _Records()
        backend = KubernetesBackend(
            settings,
            clock,
            KubeApi.at(manager.url, settings, clock),
            watch_gpu_nodes=True,
            node_history=records,
        )
        sink = Sink()
        await backend.start(sink)
        try:
            nodes = backend.worker_gpu_nodes["worker-1"]
            for _ in range(400):
                if nodes.synced:
                    break
                await asyncio.sleep(0.025)
            assert nodes.synced, "the worker's node watch made its first list"
            yield backend, sink, records
        finally:
            await backend.stop()


async def test_a_workers_gpu_nodes_are_watched_there_and_its_pod_is_placed_and_charged_there(
    tmp_path: Path,
) -> None:
    clock = ManualClock(T0 + timedelta(seconds=60))
    old = gpu_node("w1-old", T0 - timedelta(seconds=600), spot=True)  # up before the pod was made
    async with _worker_backend(tmp_path, clock, [old]) as (backend, sink, records):
        nodes = backend.worker_gpu_nodes["worker-1"]
        assert backend.gpu_nodes is not None
        assert backend.gpu_nodes.nodes == {}, "the manager has none"
        assert nodes.by_state() == {"provisioning": 0, "ready": 0, "idle": 1, "scaling_down": 0}

        # Our pod bound to the worker's node: its node time starts where that node's does.
        await backend._watching.on_worker_pod(
            "worker-1", "ADDED", pod(node="w1-old", conditions=[scheduled(30)])
        )
        [placed] = [e for e in sink.events if e.invocation_id == INV]
        assert placed.cluster == "worker-1"
        assert (placed.node_capacity, placed.warm) == (Capacity.spot, True)
        assert nodes.by_state()["ready"] == 1

        # A node made after the first list and gone unused: its time is charged, to the worker.
        clock.advance(10)
        fresh = gpu_node("w1-fresh", clock.now())
        await backend._watching._worker_nodes["worker-1"].on_node("ADDED", fresh)
        clock.advance(120)
        await backend._watching._worker_nodes["worker-1"].on_node("DELETED", fresh)
        [closed] = [e for e in sink.events if e.charges]
        assert [(c.source, c.spans[0].phase, c.spans[0].seconds, c.cluster) for c in closed.charges] == [
            ("node/w1-fresh", Phase.warm_unused, 120, "worker-1")
        ]
        # Its record goes as the worker's: kept across a restart, apart from the manager's.
        assert closed.node_history == (NodeHistoryWrite("w1-fresh", None, cluster="worker-1"),)
        assert sorted(records.asked) == ["", "worker-1"], "each cluster's records read at the start"
        writes = [w for e in sink.events for w in e.node_history]
        assert {w.cluster for w in writes} == {"worker-1"}, writes

        capacity = await gather(_Store(), _Store(), backend, None, None, clock)  # type: ignore[arg-type]

        # The same attempt's work running in a second worker too (MultiKueue dispatched it
        # again after taking it back from a lost one): said once, naming both.
        running = {"running": {"startedAt": ts(40)}}
        await backend._watching.on_worker_pod(
            "worker-1", "MODIFIED", pod(node="w1-old", phase="Running", state=running)
        )
        again = pod(node="w2-a", phase="Running", state=running)
        again["metadata"]["name"] = f"eops-{INV}-q9z8w"
        await backend._watching.on_worker_pod("worker-2", "ADDED", again)
        await backend._watching.on_worker_pod("worker-2", "MODIFIED", again)
        # Each run over is told with those over before it (the store charges what they held
        # beyond the record's run as run_again): worker-2's stopped while it ran (its deletion
        # asked at 90 s), then worker-1's finished, which ends the invocation.
        stopped = {**again, "metadata": {**again["metadata"], "uid": "b2", "deletionTimestamp": ts(120)}}
        stopped["metadata"]["deletionGracePeriodSeconds"] = 30
        await backend._watching.on_worker_pod("worker-2", "MODIFIED", stopped)
        await backend._watching.on_worker_pod("worker-2", "DELETED", stopped)
        done = {"terminated": {"startedAt": ts(40), "finishedAt": ts(100), "exitCode": 0}}
        await backend._watching.on_worker_pod(
            "worker-1", "MODIFIED", pod(node="w1-old", phase="Succeeded", state=done)
        )
        told = [
            [
                (e.attempt, r.worker, (r.started - T0).seconds, (r.ended - T0).seconds, r.capacity)
                for r in e.worker_runs
            ]
            for e in sink.events
            if e.worker_runs
        ]
        w2, w1 = (0, "worker-2", 40, 90, None), (0, "worker-1", 40, 100, Capacity.spot)
        assert told == [[w2], [w2, w1]], told
        # The pod's own event goes first: a run that ends the invocation is the record's by then.
        kinds = [e.parts for e in sink.events if e.finished is not None or e.worker_runs][-2:]
        assert kinds == [("finished",), ("worker_runs",)], kinds
        # A later attempt (a retry) running in another worker is no second run of this one.
        retried = pod(node="w3-a", phase="Running", state=running)
        retried["metadata"]["name"] = f"eops-{INV}-1-k2j4h"
        retried["metadata"]["labels"][ATTEMPT_LABEL] = "1"
        await backend._watching.on_worker_pod("worker-3", "ADDED", retried)
        said = [e.note.message for e in sink.events if e.note is not None and e.note.kind == RAN_AGAIN]
        assert said == [
            "Kueue: its work ran in 2 workers (worker-1, worker-2): MultiKueue took it back from one "
            "and dispatched it again, and the run there had begun too (a lost worker's goes on, "
            "an evicted one stops); both are this attempt of its one Job, and the run it does not "
            "end with is charged as run_again"
        ]

    assert capacity.nodes_by_cluster == {
        "worker-1": {"provisioning": 0, "ready": 1, "idle": 0, "scaling_down": 0}
    }
    assert capacity.nodes == {"provisioning": 0, "ready": 1, "idle": 0, "scaling_down": 0}, "all clusters'"


async def test_a_worker_pod_gone_while_the_watch_was_away_frees_its_node(tmp_path: Path) -> None:
    """A relist after a 410 tells a pod deleted meanwhile by its name alone: its node, known
    from before, is idle again, and the next job there charges the idle time after this one."""
    clock = ManualClock(T0 + timedelta(seconds=60))
    old = gpu_node("w1-old", T0 - timedelta(seconds=600))
    async with _worker_backend(tmp_path, clock, [old]) as (backend, sink, _):
        nodes = backend.worker_gpu_nodes["worker-1"]
        first = pod(node="w1-old", conditions=[scheduled(30)])
        await backend._watching.on_worker_pod("worker-1", "ADDED", first)
        assert nodes.by_state()["ready"] == 1
        gone = {"metadata": {"name": first["metadata"]["name"]}, "gone": True}
        await backend._watching.on_worker_pod("worker-1", "DELETED", gone)
        assert nodes.by_state() == {"provisioning": 0, "ready": 0, "idle": 1, "scaling_down": 0}
        # Told twice (a second relist) it frees nothing more.
        await backend._watching.on_worker_pod("worker-1", "DELETED", gone)

        clock.advance(45)
        await backend._watching.on_worker_pod(
            "worker-1", "ADDED", pod(node="w1-old", conditions=[scheduled(110)], inv="inv-next")
        )
        idle = [
            (c.source, c.spans[0].phase, c.spans[0].seconds, c.cluster)
            for e in sink.events
            for c in e.charges
        ]
        assert idle == [(INV, Phase.idle_after, 45, "worker-1")], idle
