"""A run MultiKueue takes back from its worker (kueue_watching.py): when the manager's Workload
stops naming the worker its attempt ran in, the timeline says so once, and a dispatch anywhere,
the same worker too, is noted (and its payload Secret placed) again.
tests/backends/kubernetes/test_multikueue_faults_cluster.py proves it with a worker lost on
real control planes; here the decisions alone, on Workloads of Kueue v0.17.0's shape."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any, cast

from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.kueue_watching import KueueWatching
from elasticityops.backends.kubernetes.observe import Progress
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.kueue_notes import DISPATCHED, LEFT_WORKER

INV = "inv-a"
LEFT = (
    "Kueue: MultiKueue took it back from cluster worker-1: it is admitted again, in whichever "
    "worker takes it first; its run in worker-1 may go on, and the first run to end is its end"
)


class _Clock:
    def now(self) -> datetime:
        return datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _workload(cluster: str | None, *, evicted: bool = False, attempt: int = 0) -> dict[str, Any]:
    labels = {
        "elasticityops.dev/invocation": INV,
        "elasticityops.dev/attempt": str(attempt),
        "elasticityops.dev/instance": "gw1",
    }
    conditions = [
        {"type": "QuotaReserved", "status": "False" if evicted else "True", "reason": "", "message": ""}
    ]
    if evicted:
        conditions.append(
            {
                "type": "Evicted",
                "status": "True",
                "reason": "AdmissionCheck",
                "message": "At least one admission check is false",
            }
        )
    status: dict[str, Any] = {"conditions": conditions}
    if cluster is not None:
        status["clusterName"] = cluster
    return {
        "metadata": {"name": f"job-eops-{INV}-1a2b3", "creationTimestamp": "2026-12-06T10:00:00Z"},
        "spec": {
            "queueName": "eops",
            "priority": 200,
            "podSets": [{"name": "main", "count": 1, "template": {"metadata": {"labels": labels}}}],
        },
        "status": status,
    }


class _Watched:
    def __init__(self) -> None:
        self.followed = Followed()
        self.followed.launching(INV, 0, "nvidia-tesla-t4")
        self.followed.progress[INV] = Progress(job_seen=True, started=True)
        self.events: list[BackendEvent] = []
        self.placed: list[tuple[str, int, str]] = []
        outlet = Outlet(self.followed, cast(Any, None))  # no Job is stopped here
        asyncio.run(outlet.open(self._sink))
        self.kueue = KueueWatching("default", "gw1", cast(Any, _Clock()), self.followed, outlet, self._place)

    async def _sink(self, event: BackendEvent) -> None:
        self.events.append(event)

    def _place(self, inv: str, attempt: int, cluster: str) -> None:
        self.placed.append((inv, attempt, cluster))

    def see(self, workload: dict[str, Any]) -> None:
        asyncio.run(self.kueue.on_workload("MODIFIED", workload))

    def said(self, *kinds: str) -> list[tuple[str, str]]:
        return [
            (e.note.kind, e.note.message) for e in self.events if e.note is not None and e.note.kind in kinds
        ]


def test_a_worker_the_manager_stops_naming_is_said_once() -> None:
    w = _Watched()
    w.see(_workload("worker-1"))
    w.see(_workload(None, evicted=True))
    w.see(_workload(None, evicted=True))  # seen again: no second note
    assert w.said(DISPATCHED, LEFT_WORKER) == [
        (DISPATCHED, "Kueue: MultiKueue runs it in cluster worker-1"),
        (LEFT_WORKER, LEFT),
    ]


def test_a_dispatch_after_it_left_is_news_the_same_worker_too_with_its_secret_placed_again() -> None:
    w = _Watched()
    w.see(_workload("worker-1"))
    w.see(_workload(None, evicted=True))
    w.see(_workload("worker-1"))
    assert w.said(DISPATCHED, LEFT_WORKER) == [
        (DISPATCHED, "Kueue: MultiKueue runs it in cluster worker-1"),
        (LEFT_WORKER, LEFT),
        (DISPATCHED, "Kueue: MultiKueue runs it in cluster worker-1"),
    ]
    assert w.placed == [(INV, 0, "worker-1"), (INV, 0, "worker-1")]


def test_a_moved_worker_straight_to_another_is_left_too() -> None:
    w = _Watched()
    w.see(_workload("worker-1"))
    w.see(_workload("worker-2"))
    assert [k for k, _ in w.said(DISPATCHED, LEFT_WORKER)] == [DISPATCHED, LEFT_WORKER, DISPATCHED]


def test_an_ended_invocation_or_a_preempted_one_leaves_no_note() -> None:
    ended = _Watched()
    ended.see(_workload("worker-1"))
    ended.followed.progress[INV] = Progress(job_seen=True, started=True, finished=True)
    ended.see(_workload(None, evicted=True))
    assert ended.said(LEFT_WORKER) == []

    preempted = _Watched()
    preempted.see(_workload("worker-1"))
    workload = _workload(None, evicted=True)
    workload["status"]["conditions"][-1].update(reason="Preempted", message="Preempted by a higher one")
    preempted.see(workload)
    assert preempted.said(LEFT_WORKER) == []
