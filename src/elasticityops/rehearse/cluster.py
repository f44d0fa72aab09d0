"""What a rehearsal asks of the cluster, through the backend's Kubernetes client: a namespace
per policy (made, then deleted), the GPU nodes sampled over the run, and the wait for the
cluster to shrink back to its baseline between policies. `node_seen` is the one pure part."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import datetime

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, GPU_RESOURCE, MANAGED_BY_LABEL
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.devcluster.nodes import node_ready
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import Conflict, EopsError
from elasticityops.rehearse.measure import NodeSample, NodeSeen

NODES = "/api/v1/nodes"
GPU_NODES = {"labelSelector": ACCELERATOR_LABEL}
"""GKE's GPU nodes, real or simulated, carry the accelerator label (whatever its value)."""


def _epoch(stamp: str | None) -> float | None:
    if not stamp:
        return None
    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def node_seen(node: KubeObject, origin_epoch: float, now_s: float) -> NodeSeen:
    """A Node object as a sample entry: times relative to `origin_epoch`; ready when Ready with
    its GPU allocatable (GKE's driver installer sets it after Ready)."""
    meta = node.get("metadata") or {}
    created = _epoch(meta.get("creationTimestamp"))
    allocatable = ((node.get("status") or {}).get("allocatable") or {}).get(GPU_RESOURCE, "0")
    try:
        gpus = int(str(allocatable))
    except ValueError:
        gpus = 0
    return NodeSeen(
        name=str(meta.get("name", "")),
        created_s=now_s if created is None else created - origin_epoch,
        ready=node_ready(node) and gpus > 0,
    )


async def gpu_nodes(api: KubeApi) -> list[KubeObject]:
    nodes, _ = await api.list(NODES, GPU_NODES, 1000)
    return nodes


async def sample(api: KubeApi, origin_epoch: float, now_epoch: float) -> NodeSample:
    now_s = now_epoch - origin_epoch
    return NodeSample(now_s, tuple(node_seen(n, origin_epoch, now_s) for n in await gpu_nodes(api)))


async def sample_until(
    api: KubeApi,
    clock: Clock,
    origin_epoch: float,
    interval_s: float,
    stop: asyncio.Event,
    into: list[NodeSample],
    on_sample: Callable[[NodeSample], None] | None = None,
) -> None:
    """Append a sample every `interval_s` until `stop` is set (and one more then). A failed
    list is skipped: the next sample covers the gap, and node-seconds interpolate across it."""
    while True:
        try:
            taken = await sample(api, origin_epoch, clock.now().timestamp())
        except EopsError:
            taken = None
        if taken is not None:
            into.append(taken)
            if on_sample is not None:
                on_sample(taken)
        if stop.is_set():
            return
        # The clock's sleep (virtual in tests), cut short when `stop` is set.
        pause = asyncio.ensure_future(clock.sleep(interval_s))
        stopped = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({pause, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            pause.cancel()
            stopped.cancel()


async def create_namespace(api: KubeApi, name: str) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: "eops-rehearse"}},
    }
    with contextlib.suppress(Conflict):
        await api.create("/api/v1/namespaces", body)


async def delete_namespace(api: KubeApi, name: str, clock: Clock, timeout_s: float = 120.0) -> bool:
    """Delete it (the namespace controller deletes its Jobs, pods and Secrets) and wait until it
    is gone; False when it is still there after `timeout_s` (terminating: it still goes)."""
    await api.delete(f"/api/v1/namespaces/{name}")
    start = clock.monotonic()
    while clock.monotonic() - start < timeout_s:
        if not await namespace_exists(api, name):
            return True
        await clock.sleep(1.0)
    return False


async def namespace_exists(api: KubeApi, name: str) -> bool:
    return await api.ok(f"/api/v1/namespaces/{name}")


async def wait_for_baseline(
    api: KubeApi,
    clock: Clock,
    baseline: int,
    timeout_s: float,
    on_wait: Callable[[int, float], None] | None = None,
    poll_s: float = 5.0,
) -> tuple[float, bool]:
    """Until at most `baseline` GPU nodes are left (the autoscaler has removed the rest), for at
    most `timeout_s`: (seconds waited, reached)."""
    start = clock.monotonic()
    while True:
        count = len(await gpu_nodes(api))
        waited = clock.monotonic() - start
        if count <= baseline:
            return waited, True
        if waited >= timeout_s:
            return waited, False
        if on_wait is not None:
            on_wait(count, waited)
        await clock.sleep(min(poll_s, max(0.1, timeout_s - waited)))
