"""A run MultiKueue takes back from its worker (kueue_watching.py): when the manager's Workload
stops naming the worker its attempt ran in, the timeline says so once, and a dispatch anywhere,
the same worker too, is noted (and its payload Secret placed) again; an end that came from a
run in another worker than the one the manager names now deletes the Job (MultiKueue then removes
the copy that would wait for its payload Secret forever).
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


def _workload(
    cluster: str | None, *, evicted: bool = False, attempt: int = 0, check: str | None = None
) -> dict[str, Any]:
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
    if check is not None:  # the MultiKueue check's message
        status["admissionChecks"] = [{"name": "eops-multikueue", "state": "Retry", "message": check}]
    return {
        "metadata": {"name": f"job-eops-{INV}-1a2b3", "creationTimestamp": "2026-12-06T10:00:00Z"},
        "spec": {
            "queueName": "eops",
            "priority": 200,
            "podSets": [{"name": "main", "count": 1, "template": {"metadata": {"labels": labels}}}],
        },
        "status": status,
    }


class _Deletes:
    """The part of Workloads the outlet's stop_job uses: each delete sent is kept."""

    workload_path = "/apis/batch/v1/namespaces/default/jobs"
    kind = "Job"

    def __init__(self) -> None:
        self.api = self
        self.deleted: list[str] = []

    async def delete(self, path: str, propagation: str) -> None:
        self.deleted.append(path)


class _Watched:
    def __init__(self) -> None:
        self.followed = Followed()
        self.followed.launching(INV, 0, "nvidia-tesla-t4")
        self.followed.progress[INV] = Progress(job_seen=True, started=True)
        self.events: list[BackendEvent] = []
        self.placed: list[tuple[str, int, str]] = []
        self.jobs = _Deletes()
        self.outlet = Outlet(self.followed, cast(Any, self.jobs))
        asyncio.run(self.outlet.open(self._sink))
        self.kueue = KueueWatching(
            "default", "gw1", cast(Any, _Clock()), self.followed, self.outlet, self._place
        )

    async def _sink(self, event: BackendEvent) -> None:
        self.events.append(event)

    def _place(self, inv: str, attempt: int, cluster: str) -> None:
        self.placed.append((inv, attempt, cluster))

    def see(self, workload: dict[str, Any]) -> None:
        async def seen() -> None:
            await self.kueue.on_workload("MODIFIED", workload)
            await asyncio.gather(*self.outlet.chores)

        asyncio.run(seen())

    def ended_in(self, worker: str, attempt: int = 0) -> None:
        """The end of `attempt` came from a pod in `worker` (watching.py tells this)."""

        async def ended() -> None:
            self.followed.progress[INV] = Progress(job_seen=True, started=True, finished=True)
            self.kueue.run_ended(INV, attempt, worker)
            await asyncio.gather(*self.outlet.chores)

        asyncio.run(ended())

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


JOB = "/apis/batch/v1/namespaces/default/jobs/eops-inv-a"


def test_an_end_from_the_lost_worker_while_the_manager_names_another_deletes_the_job_once() -> None:
    w = _Watched()
    w.see(_workload("worker-1"))
    w.see(_workload("worker-2"))  # taken back and admitted again in worker-2
    w.ended_in("worker-1")  # the lost worker's run went on and ended first
    assert w.jobs.deleted == [JOB]
    w.see(_workload("worker-2"))  # seen again while the Job goes: no second delete
    assert w.jobs.deleted == [JOB]


def test_an_end_heard_before_the_manager_names_the_other_worker_deletes_the_job_then() -> None:
    w = _Watched()
    w.see(_workload("worker-1"))
    w.ended_in("worker-1")  # the end's pod event comes first: nothing strays yet
    assert w.jobs.deleted == []
    w.see(_workload("worker-2"))
    assert w.jobs.deleted == [JOB]


def test_an_end_from_the_worker_the_manager_names_or_a_finished_workload_deletes_nothing() -> None:
    same = _Watched()
    same.see(_workload("worker-1"))
    same.ended_in("worker-1")
    same.see(_workload("worker-1"))
    assert same.jobs.deleted == []

    finished = _Watched()
    finished.see(_workload("worker-1"))
    finished.ended_in("worker-1")
    done = _workload("worker-2")
    done["status"]["conditions"].append({"type": "Finished", "status": "True", "reason": "", "message": ""})
    finished.see(done)
    assert finished.jobs.deleted == []

    older = _Watched()
    older.see(_workload("worker-1"))
    older.ended_in("worker-2", attempt=1)  # another attempt's end: not this Workload's
    assert older.jobs.deleted == []


EVICTED_THERE = (
    'Workload evicted on worker cluster: "worker-1", resetting for re-admission. Previously: "Ready"'
)


def test_work_its_worker_evicted_is_said_so_and_its_wait_for_a_node_starts_again() -> None:
    """waitForPodsReady in worker-1 (its pod got no node in time: the region is stocked out):
    the run there is gone, not going on, and the next pod's wait for a node counts from now."""
    w = _Watched()
    w.followed.progress[INV] = Progress(job_seen=True, pending_since=datetime(2026, 12, 6, 11, 0, tzinfo=UTC))
    w.see(_workload("worker-1"))
    # The check says so while the Workload still names worker-1; the update that takes it back
    # only says it was reset (as Kueue v0.17.0 does).
    w.see(_workload("worker-1", check=EVICTED_THERE))
    w.see(_workload(None, evicted=True, check="Reset to Pending after eviction. Previously: Retry"))
    assert w.said(LEFT_WORKER) == [
        (
            LEFT_WORKER,
            "Kueue: MultiKueue took it back from cluster worker-1, whose Kueue evicted it "
            f"({EVICTED_THERE}): it is admitted again, in whichever worker takes it first",
        )
    ]
    assert w.followed.progress[INV].pending_since == _Clock().now()


def test_a_run_that_had_its_node_keeps_its_wait_as_it_was() -> None:
    w = _Watched()
    w.followed.progress[INV] = Progress(job_seen=True, started=True, capacity_ready=True)
    w.see(_workload("worker-1"))
    w.see(_workload(None, evicted=True))
    assert w.said(LEFT_WORKER) == [(LEFT_WORKER, LEFT)]
    assert w.followed.progress[INV].pending_since is None


def test_a_stray_copy_of_an_attempt_a_retry_has_replaced_still_goes() -> None:
    """Attempt 0 ended (failed) from its run in the lost worker-1 while the manager named no
    worker; the function's retry launched attempt 1; then MultiKueue admitted attempt 0's
    Workload again, in worker-2. That copy goes: attempt 0's Job, not attempt 1's."""
    w = _Watched()
    w.see(_workload("worker-1"))
    w.see(_workload(None, evicted=True))
    w.ended_in("worker-1")
    w.followed.launching(INV, 1, "nvidia-tesla-t4")  # the retry
    w.see(_workload("worker-2"))  # attempt 0's Workload, no longer followed
    assert w.jobs.deleted == [JOB]


def test_a_dispatch_seen_after_the_end_places_no_payload() -> None:
    """The lost worker's run ended it; the manager then names worker-2: no payload Secret goes
    there (that copy is to go, not to run the work again)."""
    w = _Watched()
    w.see(_workload("worker-1"))
    w.see(_workload(None, evicted=True))
    w.ended_in("worker-1")
    w.see(_workload("worker-2"))
    assert w.placed == [(INV, 0, "worker-1")]
    assert w.jobs.deleted == [JOB]


def test_an_eviction_said_of_one_attempt_is_not_told_of_the_next() -> None:
    w = _Watched()
    w.see(_workload("worker-1", check=EVICTED_THERE))  # attempt 0 evicted there, then preempted
    w.followed.launching(INV, 1, "nvidia-tesla-t4")
    w.followed.progress[INV] = Progress(job_seen=True, started=True, capacity_ready=True)
    w.see(_workload("worker-1", attempt=1))
    w.see(_workload(None, evicted=True, attempt=1))  # attempt 1: worker-1 lost, not evicting
    assert w.said(LEFT_WORKER) == [(LEFT_WORKER, LEFT)]


def test_an_evicted_pod_that_had_a_node_but_never_started_leaves_the_next_one_a_wait_of_its_own() -> None:
    """Its node never turned ready (or its image never came) within waitForPodsReady: the next
    pod, in another worker, is timed out on its own wait for a node."""
    w = _Watched()
    w.followed.progress[INV] = Progress(job_seen=True, capacity_ready=True)
    w.see(_workload("worker-1", check=EVICTED_THERE))
    w.see(_workload(None, evicted=True, check="Reset to Pending after eviction. Previously: Retry"))
    after = w.followed.progress[INV]
    assert (after.capacity_ready, after.pending_since) == (False, _Clock().now())
