"""The leader elector on a real coordination.k8s.io/v1 Lease of the dev cluster's API server:
two electors with short timings, a leader killed without release, a graceful release, and the
Lease read back as the API server keeps it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.lease_store import KubeLeaseStore
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.errors import Conflict
from elasticityops.domain.lease import LeaseRecord
from elasticityops.ha.elector import LeaderElector
from elasticityops.ha.settings import JITTER_FACTOR, LeaderElectionSettings

pytestmark = [pytest.mark.cluster, pytest.mark.anyio]

FAST = LeaderElectionSettings(
    leader_elect=True, lease_name="ha-test", lease_duration_s=3, renew_deadline_s=2.0, retry_period_s=0.5
)
LOOK = FAST.retry_period_s * (1 + JITTER_FACTOR)  # the longest a follower waits between looks


@asynccontextmanager
async def client(dev_cluster: Any) -> AsyncIterator[KubeApi]:
    settings = KubernetesSettings(kubeconfig=str(dev_cluster.kubeconfig_path), max_retries=0)
    api = KubeApi.connect(settings)
    try:
        yield api
    finally:
        await api.close()


async def _wait(event: asyncio.Event, seconds: float) -> float:
    """Seconds until `event` is set (fails past `seconds`)."""
    start = time.monotonic()
    await asyncio.wait_for(event.wait(), seconds)
    return time.monotonic() - start


async def test_two_electors_one_lease_kill_then_release(dev_cluster: Any, dev_namespace: str) -> None:
    clock = SystemClock()
    async with client(dev_cluster) as api:
        store = KubeLeaseStore(api, dev_namespace, FAST.lease_name)
        starts: list[str] = []

        def elector(name: str) -> LeaderElector:
            async def started() -> None:
                starts.append(name)

            return LeaderElector(store, name, FAST, clock, on_started_leading=started)

        a, b = elector("a"), elector("b")
        a.start()
        await _wait(a.started_leading, 10)
        b.start()
        await asyncio.sleep(3 * FAST.lease_duration_s)
        assert a.is_leader
        assert not b.is_leader, "a renews: b never takes over"
        assert b.leader == "a"

        lease = await api.get(store.path)
        assert lease["apiVersion"] == "coordination.k8s.io/v1"
        assert lease["kind"] == "Lease"
        spec = lease["spec"]
        assert spec["holderIdentity"] == "a"
        assert spec["leaseDurationSeconds"] == 3
        assert spec["leaseTransitions"] == 0
        # MicroTime as the API server keeps it: RFC 3339, UTC, microseconds.
        assert len(spec["renewTime"]) == len("2026-12-02T01:00:00.123456Z")
        assert spec["renewTime"][-1] == "Z"

        # a is SIGKILLed: its task ends without a release, its lease goes silent.
        assert a._election.task is not None
        a._election.task.cancel()
        took = await _wait(b.started_leading, 30)
        assert took <= FAST.lease_duration_s + 2 * LOOK + 1.0, took
        after_kill = (await store.get()) or LeaseRecord("", 0, None, None, -1)
        assert after_kill.holder == "b"
        assert after_kill.transitions == 1

        # b stops gracefully: released (no holder, 1 s), and a new elector c takes over at its next look.
        c = elector("c")
        c.start()
        await asyncio.sleep(2 * LOOK)
        assert not c.is_leader
        released_at = time.monotonic()
        await b.stop(release=True)
        lease = await api.get(store.path)
        assert lease["spec"]["holderIdentity"] == ""
        assert lease["spec"]["leaseDurationSeconds"] == 1
        await asyncio.wait_for(c.started_leading.wait(), 10)
        assert time.monotonic() - released_at <= LOOK + 1.0
        final = await store.get()
        assert final is not None
        assert final.holder == "c"
        assert final.transitions == 2
        assert starts == ["a", "b", "c"]

        # A write at an old resourceVersion is the API server's 409, translated.
        with pytest.raises(Conflict):
            await store.update(after_kill)
        await c.stop(release=True)
        await a.stop(release=False)
