"""A MultiKueue Job whose pod count Kueue v0.17.0 left stale (stale_jobs.py): seen through the
manager's Workload watch (kueue_watching.py) on a stand-in manager API. The real case, the
stockout bench (bench/multicluster.py --phases stockout), is in BENCHMARKS.md."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.kueue_watching import KueueWatching
from elasticityops.backends.kubernetes.labels import (
    ATTEMPT_LABEL,
    INSTANCE_LABEL,
    INVOCATION_LABEL,
    MULTIKUEUE_CONTROLLER,
)
from elasticityops.backends.kubernetes.observe import Progress
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.stale_jobs import STALE_AFTER_S, StaleJobs, stale_active
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.errors import NotFound
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.kueue_notes import JOB_UNSTUCK

INV = "inv-a"
JOB = f"/apis/batch/v1/namespaces/default/jobs/eops-{INV}"


def _job(*, suspend: bool = True, active: int | None = 1, managed: bool = True) -> dict[str, Any]:
    spec: dict[str, Any] = {"suspend": suspend}
    if managed:
        spec["managedBy"] = MULTIKUEUE_CONTROLLER
    return {"spec": spec, "status": {} if active is None else {"active": active}}


def test_a_suspended_multikueue_job_that_counts_a_pod_is_stale_and_nothing_else_is() -> None:
    assert stale_active(_job())
    assert not stale_active(_job(suspend=False)), "running: its count is MultiKueue's mirror"
    assert not stale_active(_job(active=0))
    assert not stale_active(_job(active=None))
    assert not stale_active(_job(managed=False)), "a Job of this cluster: its own Job controller's"


class _Manager:
    """The manager's API as StaleJobs uses it: the Job read (each look the next of `jobs`, the
    last one after), its status patched."""

    jobs_path = "/apis/batch/v1/namespaces/default/jobs"

    def __init__(self, *jobs: dict[str, Any] | None) -> None:
        self.api = self
        self.jobs = list(jobs)
        self.gets: list[str] = []
        self.patches: list[tuple[str, Any]] = []

    async def get(self, path: str) -> dict[str, Any]:
        self.gets.append(path)
        job = self.jobs.pop(0) if len(self.jobs) > 1 else self.jobs[0]
        if job is None:
            raise NotFound(path)
        return job

    async def patch(self, path: str, body: Any) -> dict[str, Any]:
        self.patches.append((path, body))
        return {}


EVICTED_THERE = (
    'Workload evicted on worker cluster: "worker-1", resetting for re-admission. Previously: "Ready"'
)


def _workload(
    *, evicted: bool, reserved: bool = True, cluster: str | None = None, check: str | None = None
) -> dict[str, Any]:
    labels = {INVOCATION_LABEL: INV, ATTEMPT_LABEL: "0", INSTANCE_LABEL: "gw1"}
    conditions = [
        {"type": "QuotaReserved", "status": str(reserved), "reason": "", "message": ""},
        {"type": "Evicted", "status": str(evicted), "reason": "AdmissionCheck", "message": ""},
    ]
    status: dict[str, Any] = {"conditions": conditions}
    if cluster is not None:
        status["clusterName"] = cluster
    if check is not None:
        status["admissionChecks"] = [{"name": "eops-multikueue", "state": "Retry", "message": check}]
    return {
        "metadata": {"name": f"job-eops-{INV}-1a2b3"},
        "spec": {
            "queueName": "eops",
            "podSets": [{"name": "main", "template": {"metadata": {"labels": labels}}}],
        },
        "status": status,
    }


async def _watch(manager: _Manager, *workloads: dict[str, Any], wait_s: float) -> list[BackendEvent]:
    """The manager's watch shows `workloads` in turn; then `wait_s` pass on the clock."""
    clock = ManualClock()
    followed = Followed()
    followed.launching(INV, 0, "nvidia-tesla-t4")
    followed.progress[INV] = Progress(job_seen=True)
    events: list[BackendEvent] = []

    async def sink(event: BackendEvent) -> None:
        events.append(event)

    outlet = Outlet(followed, cast(Any, None))
    await outlet.open(sink)
    watching = KueueWatching(
        "default", "gw1", cast(Any, clock), followed, outlet, stale_jobs=StaleJobs(cast(Any, manager))
    )
    for workload in workloads:
        await watching.on_workload("MODIFIED", workload)
    for _ in range(5):
        await asyncio.sleep(0)
    while wait_s > 0:  # a look at a time: each one sleeps again from where it woke
        clock.advance(min(wait_s, STALE_AFTER_S))
        wait_s -= STALE_AFTER_S
        for _ in range(10):
            await asyncio.sleep(0)
    for task in list(outlet.chores):
        task.cancel()  # a look still going on: what it did so far is what counts
    await asyncio.gather(*outlet.chores, return_exceptions=True)
    return events


# Taken back from worker-1 after its Kueue evicted it (the check says so while it names worker-1),
# and now evicting on the manager, its quota still held, in no worker.
EVICTED_IN_WORKER_1 = (
    _workload(evicted=False, cluster="worker-1"),
    _workload(evicted=False, cluster="worker-1", check=EVICTED_THERE),
    _workload(evicted=True),
)


@pytest.mark.anyio
async def test_an_eviction_stuck_on_a_stale_pod_count_is_freed_and_said() -> None:
    manager = _Manager(_job())
    events = await _watch(manager, *EVICTED_IN_WORKER_1, wait_s=STALE_AFTER_S)
    assert manager.patches == [(f"{JOB}/status", {"status": {"active": 0, "ready": 0}})]
    said = [e.note.message for e in events if e.note is not None and e.note.kind == JOB_UNSTUCK]
    [message] = said
    assert "kueue#15380" in message


@pytest.mark.anyio
async def test_a_stuck_eviction_is_looked_at_again_until_it_is_freed() -> None:
    """A Workload stuck so gets no more updates: a first look that finds the count still
    mirrored (or the API server busy) is not the last."""
    manager = _Manager(_job(active=0), _job())
    await _watch(manager, *EVICTED_IN_WORKER_1, wait_s=2 * STALE_AFTER_S)
    assert manager.gets == [JOB, JOB]
    assert manager.patches == [(f"{JOB}/status", {"status": {"active": 0, "ready": 0}})]


@pytest.mark.anyio
async def test_a_lost_worker_or_an_eviction_that_finishes_or_a_true_count_is_left_alone() -> None:
    lost = _Manager(_job())
    lost_worker = (_workload(evicted=False, cluster="worker-1"), _workload(evicted=True))
    await _watch(lost, *lost_worker, wait_s=STALE_AFTER_S)
    assert lost.gets == [], "a lost worker's pod may still run: its count is true"

    finished = _Manager(_job())
    await _watch(finished, *EVICTED_IN_WORKER_1, _workload(evicted=False), wait_s=STALE_AFTER_S)
    assert (finished.gets, finished.patches) == ([], []), "the eviction finished: nothing read"

    counted_right = _Manager(_job(active=0))
    await _watch(counted_right, *EVICTED_IN_WORKER_1, wait_s=STALE_AFTER_S)
    assert (counted_right.gets, counted_right.patches) == ([JOB], [])

    again_in_a_worker = _Manager(_job())
    moved = (*EVICTED_IN_WORKER_1, _workload(evicted=True, cluster="worker-2"))
    await _watch(again_in_a_worker, *moved, wait_s=STALE_AFTER_S)
    assert again_in_a_worker.gets == [], "in a worker again: MultiKueue mirrors its count"

    gone = _Manager(None)
    await _watch(gone, *EVICTED_IN_WORKER_1, wait_s=STALE_AFTER_S)
    assert gone.patches == []
