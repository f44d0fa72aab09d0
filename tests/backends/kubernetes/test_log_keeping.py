"""The gateway keeps the log of each pod MultiKueue runs in a worker before it lets the pod go
(log_keeping.py): once the pod has ended it reads the log's last bytes, keeps them (committed)
and only then takes its finalizer off; a log that cannot be read lets the pod go all the same, a
store that is away holds the pod until it is back, a pod seen again meanwhile is read once; and
a read of the logs once the pod is gone answers what was kept. Against a stand-in worker API
server (the real one: test_multikueue_gateway_cluster.py)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.backend import KubernetesBackend
from elasticityops.backends.kubernetes.decode import decode_pod
from elasticityops.backends.kubernetes.labels import ATTEMPT_LABEL, KEEP_LOG_FINALIZER
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.errors import TemporaryError
from elasticityops.domain.kept_logs import KeptLog

from .builders import INV, T0, invocation, pod, ts
from .scripted_server import Reply, ScriptedServer, scripted
from .test_worker_rbac import NS, PODS, quiet_routes, worker_kubeconfig

pytestmark = pytest.mark.anyio

POD = f"eops-{INV}-x7k2p"
LOG = f"^GET {re.escape(PODS)}/{POD}/log"
PATCH = f"^PATCH {re.escape(PODS)}/{POD}$"


class _Keeper:
    """The store as far as kept logs go: kept in memory, or refused while `away`."""

    def __init__(self) -> None:
        self.logs: list[KeptLog] = []
        self.away = 0  # refuse this many keeps with a TemporaryError first

    async def keep_log(self, log: KeptLog) -> None:
        if self.away:
            self.away -= 1
            raise TemporaryError("the store is restarting")
        self.logs.append(log)

    async def kept_log(self, invocation_id: str, attempt: int, cluster: str | None = None) -> KeptLog | None:
        found = [k for k in self.logs if (k.invocation_id, k.attempt) == (invocation_id, attempt)]
        return found[-1] if found else None


def _ended(phase: str = "Succeeded", **meta: Any) -> dict[str, Any]:
    ended = pod(node="n", phase=phase, state={"terminated": {"exitCode": 0 if phase == "Succeeded" else 1}})
    ended["metadata"] = {**ended["metadata"], "finalizers": [KEEP_LOG_FINALIZER], **meta}
    return ended


async def _backend(
    tmp_path: Path, worker: ScriptedServer, clock: ManualClock, keeper: _Keeper, keep: int = 16
) -> KubernetesBackend:
    settings = KubernetesSettings(
        namespace=NS,
        max_retries=0,
        concurrency=4,
        local_queue="eops",
        workers=f"worker-1={worker_kubeconfig(tmp_path, worker.url)}",
        keep_log_bytes=keep,
    )
    return KubernetesBackend(
        settings, clock, KubeApi.at("http://127.0.0.1:9", settings, clock), log_keeper=keeper
    )


async def _settled(worker: ScriptedServer, method: str, count: int = 1) -> None:
    for _ in range(400):
        if sum(s.method == method for s in worker.seen) >= count:
            await asyncio.sleep(0.05)  # and what follows it
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no {method} seen: {[(s.method, s.target) for s in worker.seen]}")


@pytest.fixture
async def worker() -> AsyncIterator[ScriptedServer]:
    routes = quiet_routes(
        **{LOG: [Reply(200, raw=b"line 1\nline 2\nthe end of it\n")], PATCH: [Reply(200, {})]}
    )
    async with scripted([], routes) as server:
        yield server


async def test_an_ended_pods_last_bytes_are_kept_and_then_it_is_let_go(
    tmp_path: Path, worker: ScriptedServer
) -> None:
    clock = ManualClock(T0)
    keeper = _Keeper()
    backend = await _backend(tmp_path, worker, clock, keeper, keep=16)
    watching = backend._watching
    # Running, or without the finalizer (a pod of a gateway that kept no logs): nothing to do.
    running = pod(node="n", phase="Running", state={"running": {"startedAt": "x"}})
    running["metadata"]["finalizers"] = [KEEP_LOG_FINALIZER]
    await watching.on_worker_pod("worker-1", "MODIFIED", running)
    plain = _ended()
    plain["metadata"]["finalizers"] = ["batch.kubernetes.io/job-tracking"]
    await watching.on_worker_pod("worker-1", "MODIFIED", plain)
    await asyncio.sleep(0.1)
    assert worker.seen == []

    # As the watch hands it over (decoded to the fields the gateway reads: the finalizers too).
    _, ended = decode_pod(orjson.dumps({"type": "MODIFIED", "object": _ended()}))
    await watching.on_worker_pod("worker-1", "MODIFIED", ended)
    await watching.on_worker_pod("worker-1", "MODIFIED", ended)  # seen again while kept: read once
    await _settled(worker, "PATCH")
    assert [(k.invocation_id, k.attempt, k.cluster, k.data, k.dropped) for k in keeper.logs] == [
        (INV, 0, "worker-1", b"the end of it\n", True)
    ]
    [read] = [s for s in worker.seen if s.method == "GET"]
    # The last lines only (an eighth of a line per byte kept): not the kubelet's whole file.
    assert read.target == f"{PODS}/{POD}/log?container=job&tailLines=2"
    [patch] = [s for s in worker.seen if s.method == "PATCH"]
    assert patch.headers["content-type"] == "application/strategic-merge-patch+json"
    assert json.loads(patch.body) == {
        "metadata": {"$deleteFromPrimitiveList/finalizers": [KEEP_LOG_FINALIZER]}
    }
    assert worker.seen.index(read) < worker.seen.index(patch)

    # The pod gone (MultiKueue deleted the worker's Job): a read of the logs answers what was kept.
    gone = replace(invocation(), cluster="worker-1")
    logs = b"".join([chunk async for chunk in backend.logs(gone, follow=False)])
    assert logs == b"[eops: the log was longer; its last 14 bytes were kept]\nthe end of it\n"


async def test_a_store_away_holds_the_pod_until_its_log_is_kept(
    tmp_path: Path, worker: ScriptedServer
) -> None:
    clock = ManualClock(T0)
    keeper = _Keeper()
    keeper.away = 2
    backend = await _backend(tmp_path, worker, clock, keeper, keep=1024)
    await backend._watching.on_worker_pod("worker-1", "MODIFIED", _ended("Failed"))
    await _settled(worker, "GET")
    for _ in range(2):
        assert not [s for s in worker.seen if s.method == "PATCH"], "not let go before its log is kept"
        clock.advance(5)
        await asyncio.sleep(0.05)
    await _settled(worker, "PATCH")
    assert [k.data for k in keeper.logs] == [b"line 1\nline 2\nthe end of it\n"]


async def test_a_pod_whose_log_cannot_be_read_is_let_go_without_one(tmp_path: Path) -> None:
    routes = quiet_routes(
        **{
            LOG: [Reply(400, {"message": 'container "job" in pod is waiting to start: ContainerCreating'})],
            PATCH: [Reply(404, {"message": "gone"})],
        }
    )
    async with scripted([], routes) as worker:
        keeper = _Keeper()
        clock = ManualClock(T0)
        backend = await _backend(tmp_path, worker, clock, keeper)
        # Cancelled before it started: deleted (no grace period left), never ran.
        deleting = pod(node="n", phase="Pending")
        deleting["metadata"] = {
            **deleting["metadata"],
            "finalizers": [KEEP_LOG_FINALIZER],
            "deletionTimestamp": ts(0),
        }
        await backend._watching.on_worker_pod("worker-1", "MODIFIED", deleting)
        await asyncio.sleep(0.05)
        clock.advance(2)
        await _settled(worker, "PATCH")
        assert keeper.logs == []
        # Already gone when let go (404): nothing more is asked.
        await asyncio.sleep(0.1)
        assert [s.method for s in worker.seen] == ["GET", "PATCH"]


def test_only_a_multikueue_managers_jobs_carry_the_finalizer() -> None:
    from elasticityops.backends.kubernetes.manifests import build_job

    from .builders import spec

    def finalizers(**settings: Any) -> list[str]:
        job = build_job(spec(), invocation(), KubernetesSettings(namespace=NS, **settings))
        return list(job["spec"]["template"]["metadata"].get("finalizers", []))

    assert finalizers() == []
    assert finalizers(local_queue="eops") == []
    workers = {"local_queue": "eops", "workers": "worker-1=/dev/null"}
    assert finalizers(**workers) == [KEEP_LOG_FINALIZER]
    assert finalizers(**workers, keep_log_bytes=0) == [], "keeping none adds none"


async def test_a_gateway_that_keeps_no_logs_still_lets_go_the_pods_made_while_it_did(
    tmp_path: Path, worker: ScriptedServer
) -> None:
    keeper = _Keeper()
    backend = await _backend(tmp_path, worker, ManualClock(T0), keeper, keep=0)
    await backend._watching.on_worker_pod("worker-1", "MODIFIED", _ended())
    await _settled(worker, "PATCH")
    assert [s.method for s in worker.seen] == ["PATCH"], "not read"
    assert keeper.logs == []


async def test_pods_ending_together_are_each_kept_and_a_failed_step_is_tried_again(tmp_path: Path) -> None:
    """Two pods of one burst end at once: each read and let go (a pod is known by its uid). A
    read the API server answered 503 and a let-go it refused are tried again after 5 s."""
    other = f"eops-{INV}-2-q9z8w"
    routes = quiet_routes(
        **{
            LOG: [Reply(503, {"message": "busy"}), Reply(200, raw=b"first\n")],
            f"^GET {re.escape(PODS)}/{other}/log": [Reply(200, raw=b"second\n")],
            PATCH: [Reply(200, {})],
            f"^PATCH {re.escape(PODS)}/{other}$": [Reply(500, {"message": "etcd"}), Reply(200, {})],
        }
    )
    async with scripted([], routes) as worker:
        clock = ManualClock(T0)
        keeper = _Keeper()
        backend = await _backend(tmp_path, worker, clock, keeper, keep=1024)
        second = _ended(name=other, uid="uid-2")
        second["metadata"]["labels"] = {**second["metadata"]["labels"], ATTEMPT_LABEL: "2"}
        await backend._watching.on_worker_pod("worker-1", "MODIFIED", _ended())
        await backend._watching.on_worker_pod("worker-1", "MODIFIED", second)
        await _settled(worker, "PATCH")
        clock.advance(5)
        await _settled(worker, "PATCH", 3)
        assert sorted((k.attempt, k.data) for k in keeper.logs) == [(0, b"first\n"), (2, b"second\n")]
        patched = [s.target for s in worker.seen if s.method == "PATCH"]
        assert sorted(patched) == sorted([f"{PODS}/{POD}", f"{PODS}/{other}", f"{PODS}/{other}"])


async def test_a_pod_deleted_while_running_is_read_once_its_grace_period_is_over(
    tmp_path: Path, worker: ScriptedServer
) -> None:
    """A cancel or a timeout: what it prints after SIGTERM, within its grace period, is kept too."""
    clock = ManualClock(T0)
    keeper = _Keeper()
    backend = await _backend(tmp_path, worker, clock, keeper, keep=1024)
    deleting = pod(node="n", phase="Running", state={"running": {"startedAt": "x"}})
    deleting["metadata"] = {
        **deleting["metadata"],
        "finalizers": [KEEP_LOG_FINALIZER],
        "deletionTimestamp": (T0 + timedelta(seconds=30)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    await backend._watching.on_worker_pod("worker-1", "MODIFIED", deleting)
    await asyncio.sleep(0.1)
    clock.advance(31)
    await asyncio.sleep(0.1)
    assert worker.seen == [], "not before its grace period and a margin"
    clock.advance(1)
    await _settled(worker, "PATCH")
    assert [k.data for k in keeper.logs] == [b"line 1\nline 2\nthe end of it\n"]


async def test_at_most_eight_logs_are_read_at_once(tmp_path: Path) -> None:
    """A burst's pods end together: their logs are read a few at a time, not all at once."""
    routes = quiet_routes(**{f"^GET {re.escape(PODS)}/[^/?]+/log": [Reply(hold=True)]})
    async with scripted([], routes) as worker:
        backend = await _backend(tmp_path, worker, ManualClock(T0), _Keeper())
        try:
            for i in range(12):
                ended = _ended(name=f"eops-{INV}-{i}-abcde", uid=f"uid-{i}")
                await backend._watching.on_worker_pod("worker-1", "MODIFIED", ended)
            await _settled(worker, "GET", 8)
            await asyncio.sleep(0.2)
            assert sum(s.method == "GET" for s in worker.seen) == 8
        finally:
            await backend.stop()
