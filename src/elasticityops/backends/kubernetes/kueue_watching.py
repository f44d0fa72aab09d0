"""With Kueue admission, the watch of Kueue's Workloads in the gateway's namespace: each step
Kueue takes with an invocation's Job becomes a note on its timeline (once: a Workload is updated
far more often than what it says changes), a preemption by Kueue ends the attempt (its
function's retries decide what follows, as for the gateway's own preemption) and deletes its Job
(else Kueue would run the old attempt again), and the pending Workloads give queue positions."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime

from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.kueue_workloads import (
    KUEUE_API,
    WorkloadView,
    evicted_in_worker,
    queue_position,
    read_workload,
)
from elasticityops.backends.kubernetes.nominating import Nominator
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.stale_jobs import STALE_AFTER_S, StaleJobs
from elasticityops.domain.clock import Clock
from elasticityops.domain.events import BackendEvent, Finished, note_event
from elasticityops.domain.invocations import FailureReason, State
from elasticityops.domain.kueue_notes import DISPATCHED, IN_WORKER, JOB_UNSTUCK, LEFT_WORKER, QUEUED

KUEUE = "Kueue"

log = logging.getLogger(__name__)


class KueueWatching:
    def __init__(
        self,
        namespace: str,
        instance: str,
        clock: Clock,
        followed: Followed,
        outlet: Outlet,
        dispatched: Callable[[str, int, str], None] | None = None,
        worker: str | None = None,
        nominator: Nominator | None = None,
        stale_jobs: StaleJobs | None = None,
    ) -> None:
        """`worker`: the watch of that MultiKueue worker's Workloads, which only tells what its
        Kueue says (IN_WORKER notes: why the work went to another worker, or waited) and, to
        the `nominator`, that MultiKueue's copy is there; the manager's Workloads decide the
        rest."""
        self.path = f"{KUEUE_API}/namespaces/{namespace}/workloads"
        self._instance = instance
        self._clock = clock
        self._followed = followed
        self._outlet = outlet
        # MultiKueue named the worker that runs (invocation, attempt): its payload goes there.
        self._dispatched = dispatched
        self._worker = worker
        # MultiKueue with the gateway as its external dispatcher: it nominates the workers.
        self._nominator = nominator
        # MultiKueue's manager: Jobs whose stale pod count keeps an eviction from finishing.
        self._stale_jobs = stale_jobs
        # By (invocation, attempt): the look at its Job while its eviction lasts, and whether the
        # eviction is its worker's Kueue's (the copy there gone), not a worker lost (whose pod
        # may still run: its count is then true, and MultiKueue's to settle).
        self._unsticking: dict[tuple[str, int], asyncio.Task[None]] = {}
        self._evicted_there: set[tuple[str, int]] = set()
        self._views: dict[str, WorkloadView] = {}  # by invocation: its current attempt's
        self._told: dict[str, dict[str, str]] = {}  # by invocation: the last message of each kind
        # By invocation: the MultiKueue check's word that a worker's Kueue evicted it.
        self._evicted: dict[str, str] = {}
        # By (invocation, attempt): the MultiKueue worker whose run ended that attempt.
        self._ended_in: dict[tuple[str, int], str] = {}

    async def on_workload(self, kind: str, workload: KubeObject) -> None:
        view = read_workload(workload, self._instance)
        if view is None:
            if kind == "DELETED" and self._nominator is not None:
                # Gone while the watch was away: a relist tells only its name.
                self._nominator.forget(str((workload.get("metadata") or {}).get("name", "")))
            return
        inv = view.invocation
        if kind == "DELETED":
            self._gone(view)
            return
        if inv not in self._followed.attempts or not self._followed.current(inv, view.attempt):
            # Not followed: its Job is gone (a Workload outlives it while it is collected); the
            # Jobs are listed before the Workloads, so every live one is followed by now. Or an
            # older attempt's, while it goes: one whose run ended in another worker than the
            # one this names still goes (a retry follows the next attempt meanwhile).
            if self._worker is None:
                self._stop_stray_run(view)
            return
        if (before := self._views.get(inv)) is not None and before.attempt != view.attempt:
            self._told.pop(inv, None)
            self._evicted.pop(inv, None)
        self._views[inv] = view
        now = self._clock.now()
        if self._worker is None:
            await self._where_it_runs(before, view, workload, now)
        told = self._told.setdefault(inv, {})
        fresh = [(k, m) for k, m in view.notes if told.get(k) != m]
        told.update(fresh)
        if self._worker is not None:
            await self._in_worker(self._worker, view, fresh, now)
            return
        for note_kind, message in fresh:
            await self._outlet.deliver(self._manager_note(view, now, note_kind, message))
        await self._go_on(view, workload, now)

    async def _where_it_runs(
        self, before: WorkloadView | None, view: WorkloadView, workload: KubeObject, now: datetime
    ) -> None:
        """The manager's Workload: whether MultiKueue took the work back from its worker, and
        whether a run elsewhere has ended it already."""
        if view.cluster is not None:
            self._evicted_there.discard((view.invocation, view.attempt))  # dispatched again
        if (why := evicted_in_worker(workload)) is not None:
            # Said while it still names the worker; the update that takes it back says only
            # "Reset to Pending after eviction". (_left_worker checks it names that worker.)
            self._evicted[view.invocation] = why
        if before is not None:
            await self._left_worker(before, view, now)
        self._stop_stray_run(view)

    async def _in_worker(
        self, worker: str, view: WorkloadView, fresh: list[tuple[str, str]], now: datetime
    ) -> None:
        """A worker's copy of the Workload: there (for the nominator), and what its Kueue says."""
        if self._nominator is not None:
            self._nominator.copied(view.name, worker, view.admitted)
        for _, message in fresh:
            await self._outlet.deliver(note_event(view.invocation, now, IN_WORKER, f"{worker}: {message}"))

    def _gone(self, view: WorkloadView) -> None:
        if self._nominator is not None:
            self._nominator.forget(view.name)
        inv = view.invocation
        if (mine := self._views.get(inv)) is not None and mine.attempt <= view.attempt:
            self._views.pop(inv, None)
            self._told.pop(inv, None)
            self._ended_in.pop((inv, view.attempt), None)
            self._evicted.pop(inv, None)
            self._evicted_there.discard((inv, view.attempt))
            self._unsticking.pop((inv, view.attempt), None)

    def run_ended(self, invocation_id: str, attempt: int, worker: str) -> None:
        """The end of `attempt` came from its run in MultiKueue's `worker` (the watch of that
        worker's pods says so as it tells the end)."""
        self._ended_in[(invocation_id, attempt)] = worker
        if (view := self._views.get(invocation_id)) is not None and view.attempt == attempt:
            self._stop_stray_run(view)

    def _stop_stray_run(self, view: WorkloadView) -> None:
        """An attempt that ended from its run in one worker while the manager's Workload names
        another: MultiKueue took the work back from the first (a worker lost a while) and
        admitted it again in the second, and that copy still runs or waits, holding a node,
        for a payload Secret the gateway makes no more (it follows an invocation to its end
        only). Its Job on the manager is deleted, once: MultiKueue then removes every copy."""
        key = (view.invocation, view.attempt)
        ended = self._ended_in.get(key)
        if ended is None:
            return
        if view.finished:
            del self._ended_in[key]  # MultiKueue removes its copies itself
            return
        if view.cluster in (None, ended):
            return
        del self._ended_in[key]
        log.info(
            "%s ended from its run in %s while MultiKueue runs it again in %s: its Job goes",
            view.invocation,
            ended,
            view.cluster,
        )
        self._outlet.stop_job(view.invocation, view.attempt)

    async def _left_worker(self, before: WorkloadView, view: WorkloadView, now: datetime) -> None:
        """The manager's Workload no longer names the worker its attempt ran in: MultiKueue took
        it back, to be admitted again in whichever worker takes it first. Either the worker was
        lost past workerLostTimeout (its run may go on, and Kueue may yet take its end as the
        work's: the first run to end is its end), or the worker's Kueue evicted it (its pod was
        not ready in time, waitForPodsReady: a stocked-out region), and that run is gone. The
        timeline says which; a dispatch anywhere, that worker too, is news again (with a
        payload Secret of its own); the wait for a node starts again; and the nominator, if
        any, passes that worker over for a while."""
        inv = view.invocation
        left = before.cluster
        progress = self._followed.progress.get(inv)
        if (
            left is None
            or view.cluster == left
            or before.attempt != view.attempt
            or view.preempted is not None
            or view.deactivated is not None
            or progress is None
            or progress.finished
        ):
            return
        self._told.get(inv, {}).pop(DISPATCHED, None)
        evicted = self._evicted.pop(inv, None)
        if evicted is not None and f'"{left}"' not in evicted:
            evicted = None  # said of another worker it left before
        if not progress.capacity_ready or (evicted is not None and not progress.started):
            # Its next pod, in whichever worker, waits for a node of its own: the provisioning
            # timeout counts from now, not from the pod that waited in vain (an evicted one
            # that had a node but never started, too: that node is gone with it).
            self._followed.progress[inv] = progress._replace(pending_since=now, capacity_ready=False)
        if self._nominator is not None:
            self._nominator.left(left)
        if evicted is not None:
            self._evicted_there.add((inv, view.attempt))
            message = (
                f"Kueue: MultiKueue took it back from cluster {left}, whose Kueue evicted it "
                f"({evicted}): it is admitted again, in whichever worker takes it first"
            )
        else:
            message = (
                f"Kueue: MultiKueue took it back from cluster {left}: it is admitted again, in "
                f"whichever worker takes it first; its run in {left} may go on, and the first run "
                "to end is its end"
            )
        await self._outlet.deliver(note_event(inv, now, LEFT_WORKER, message))

    def _manager_note(self, view: WorkloadView, now: datetime, kind: str, message: str) -> BackendEvent:
        event = note_event(view.invocation, now, kind, message)
        if kind == DISPATCHED and view.cluster is not None:
            # The record of where it ran outlives MultiKueue's copy in the worker.
            event = replace(event, cluster=view.cluster)
            progress = self._followed.progress.get(view.invocation)
            if self._dispatched is not None and not (progress is not None and progress.finished):
                # No payload for a dispatch after its end (a run in a lost worker ended it): that
                # copy is to go, not to run the work again.
                self._dispatched(view.invocation, view.attempt, view.cluster)
        return event

    async def _go_on(self, view: WorkloadView, workload: KubeObject, now: datetime) -> None:
        """What the manager's Workload asks of the gateway: to end the attempt Kueue took, or
        (the gateway as MultiKueue's dispatcher) to nominate the workers of one waiting."""
        await self._end_if_taken(view, now)
        if self._nominator is not None:
            await self._nominator.seen(view, workload)
        key = (view.invocation, view.attempt)
        if self._stale_jobs is None or not self._stuck_maybe(view):
            return
        if (task := self._unsticking.get(key)) is None or task.done():
            self._unsticking[key] = self._outlet.chore(self._unstick(*key))

    def _stuck_maybe(self, view: WorkloadView) -> bool:
        """Evicting after its worker's Kueue evicted it: the copy there is gone, so a pod its
        Job still counts may be no pod at all (stale_jobs.py)."""
        return _evicting(view) and (view.invocation, view.attempt) in self._evicted_there

    async def _unstick(self, inv: str, attempt: int) -> None:
        """Every STALE_AFTER_S while the eviction lasts: its Job's pod count may be stale. A
        Workload stuck so gets no more updates, so this looks again by itself."""
        while True:
            await self._clock.sleep(STALE_AFTER_S)
            view = self._views.get(inv)
            if view is None or view.attempt != attempt or not self._stuck_maybe(view):
                return
            if self._stale_jobs is not None and await self._stale_jobs.clear(inv, attempt):
                message = (
                    "Kueue: its Job on the manager still counted a pod of a worker copy MultiKueue had "
                    "deleted (kueue#15380), which kept Kueue from taking its quota back to admit it "
                    "again; the gateway set that count to 0"
                )
                await self._outlet.deliver(note_event(inv, self._clock.now(), JOB_UNSTUCK, message))
                return

    async def _end_if_taken(self, view: WorkloadView, now: datetime) -> None:
        """Preempted by Kueue, or deactivated: the attempt ends here, and its Job goes."""
        if view.preempted is None and view.deactivated is None:
            return
        inv = view.invocation
        progress = self._followed.progress.get(inv)
        if progress is None or progress.finished:
            return
        if view.preempted is not None:
            ended = Finished(
                State.failed,
                now,
                reason=FailureReason.preempted,
                message=view.preempted,
                exit_code=progress.exit_code,
                preempted_by=KUEUE,
            )
        else:
            ended = Finished.failed(now, FailureReason.no_capacity, str(view.deactivated))
        self._followed.progress[inv] = progress._replace(finished=True)
        self._outlet.stop_job(inv)
        await self._outlet.deliver(BackendEvent(inv, finished=ended))

    def position(self, invocation_id: str) -> tuple[int, str] | None:
        """Its place among the pending Workloads of its LocalQueue, and the note that says why
        it waits; None where it has no Workload waiting for quota."""
        view = self._views.get(invocation_id)
        if view is None:
            return None
        place = queue_position(view, self._views.values())
        if place is None:
            return None
        said = self._told.get(invocation_id, {}).get(QUEUED)
        return place, said or f"Kueue: waiting in LocalQueue {view.queue}"


def _evicting(view: WorkloadView) -> bool:
    """Kueue is taking the manager's Workload's quota back, to admit it again, in no worker now."""
    return view.evicted and view.reserved and view.cluster is None and not view.finished
