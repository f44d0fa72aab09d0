"""MultiKueue with the gateway as its external dispatcher (`--kube-nominate-wait`, Kueue's
`multiKueue.dispatcherName` set to one of its own, docs/multi-cluster.md): for each of this
gateway's Workloads on the manager that has quota and no worker yet, it writes the workers Kueue
may copy it to (`status.nominatedClusterNames`), one at a time, as domain/nomination.py decides,
and says so in the timeline. A Workload no worker admits within the wait gets the next worker
too; a re-check is scheduled for each one nominated, so a quiet watch does not stall it."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.kueue_workloads import (
    KUEUE_ADMISSION_MANAGER,
    WorkloadView,
    nomination_apply,
)
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import Conflict, EopsError, NotFound, TemporaryError
from elasticityops.domain.events import note_event
from elasticityops.domain.kueue_notes import NOMINATED, NOT_NOMINATED
from elasticityops.domain.nomination import next_nomination, recheck_after, shun, wait_began

log = logging.getLogger(__name__)
APPLY_PATCH = "application/apply-patch+yaml"  # JSON is YAML: a server-side apply


class Nominator:
    def __init__(
        self,
        api: Callable[[], KubeApi],
        path: str,
        workers: Sequence[str],
        clock: Clock,
        outlet: Outlet,
        wait_s: float,
    ) -> None:
        """`api`: the manager's client as it is now (made again after a stop); `path`: the
        manager's Workloads in the gateway's namespace."""
        self._api = api
        self._path = path
        self._workers = sorted(workers)
        self._clock = clock
        self._outlet = outlet
        self._wait_s = wait_s
        self._views: dict[str, tuple[WorkloadView, KubeObject]] = {}  # by name: waiting for a worker
        self._nominated: dict[str, tuple[tuple[str, ...], float]] = {}  # by name: (workers, since)
        # `_nominated`'s workers counted, kept with it (`_keep`, `forget`): read at each choice,
        # which a burst of thousands of Workloads would otherwise pay for in a count of all.
        self._waiting: Counter[str] = Counter()
        self._shunned: dict[str, float] = {}
        # Workers MultiKueue took work back from, until when no Workload has them added (only
        # a first nomination with nothing else left takes one).
        self._barred: dict[str, float] = {}
        self._rechecks: set[str] = set()
        self._refused: dict[str, str] = {}  # by name: why its nomination was refused, as told
        # By name, the workers where MultiKueue's copy of it appeared, and when (monotonic); by
        # worker, when the last copy of any appeared there (the worker's watch, `copied`).
        self._copied: dict[str, dict[str, float]] = {}
        self._progress: dict[str, float] = {}
        self._taken: dict[str, set[str]] = {}  # by name: the workers whose copy has quota there

    def waiting(self) -> Counter[str]:
        """This gateway's Workloads nominated to each worker and not admitted yet."""
        return +self._waiting

    async def seen(self, view: WorkloadView, workload: KubeObject) -> None:
        """A manager's Workload of ours as the watch shows it now (`view` its reading)."""
        name = view.name
        if not name:
            return
        if (
            view.cluster is not None
            or view.finished
            or view.deactivated is not None
            or not view.reserved
            or view.evicted
        ):
            # Admitted in a worker (or done, or back to waiting for quota: Kueue clears the
            # nomination then, and the next reservation starts afresh). Not while an eviction is
            # under way either (its quota still held): a copy made then is deactivated at once
            # and stays so in Kueue v0.17.0 (kueue#11598 has dispatchers skip that moment).
            self.forget(name)
            return
        self._views[name] = (view, workload)
        await self._decide(name)

    def copied(self, name: str, worker: str, admitted: bool = False) -> None:
        """MultiKueue's copy of the Workload `name` is in `worker` (its watch saw it), and
        whether the worker's Kueue admitted it there: the worker took it, and only MultiKueue's
        own backlog stands between that and `status.clusterName` on the manager, so no other
        worker is nominated while it holds. Admitted, not merely given quota: MultiKueue picks
        the first worker that admits (MultiKueueWaitForWorkloadAdmitted, on since v0.16), and a
        worker whose capacity check (DWS) finds no GPU in its region reserves quota all the
        same, so a copy with quota alone must not keep the next worker from being nominated."""
        now = self._clock.monotonic()
        self._copied.setdefault(name, {}).setdefault(worker, now)
        self._progress[worker] = now
        taken = self._taken.setdefault(name, set())
        if admitted:
            taken.add(worker)
        else:
            taken.discard(worker)

    def left(self, worker: str) -> None:
        """MultiKueue took a Workload back from `worker` (lost, or its Kueue evicted the work:
        its pod got no node in time, a stocked-out region): the work that follows, this one's
        next dispatch too, goes elsewhere first for a while."""
        taken_back = shun([worker], self._clock.monotonic(), self._wait_s)
        self._shunned.update(taken_back)
        self._barred.update(taken_back)

    def clear(self) -> None:
        """Begin again (the backend starts: a new leader): the watch's first list shows what
        waits now; what this replica knew before may have ended meanwhile."""
        self._views.clear()
        self._nominated.clear()
        self._waiting.clear()
        self._refused.clear()
        self._copied.clear()
        self._progress.clear()
        self._taken.clear()

    def forget(self, name: str) -> None:
        """The Workload is gone (its Job deleted: the work ended, or was cancelled)."""
        self._views.pop(name, None)
        self._refused.pop(name, None)
        self._copied.pop(name, None)
        self._taken.pop(name, None)
        self._unkeep(name)

    def _keep(self, name: str, workers: tuple[str, ...], since: float) -> None:
        self._unkeep(name)
        self._nominated[name] = (workers, since)
        self._waiting.update(workers)

    def _unkeep(self, name: str) -> None:
        if (was := self._nominated.pop(name, None)) is not None:
            self._waiting.subtract(was[0])

    async def _decide(self, name: str) -> None:
        seen = self._views.get(name)
        if seen is None:
            return
        view, workload = seen
        now = self._clock.monotonic()
        nominated, since = self._nominated_since(name, view.nominated, now)
        if self._taken.get(name):
            # A worker took it: nothing to add while it holds (looked at again after the wait,
            # or at the Workload's next event, should its copy lose the quota).
            if len(nominated) < len(self._workers):
                self._recheck(name, self._wait_s)
            return
        step = next_nomination(
            self._workers, nominated, since, now, self._waiting, self._shunned, self._wait_s, self._barred
        )
        if step is None:
            if nominated and len(nominated) < len(self._workers):
                after = recheck_after(self._workers, nominated, since, now, self._barred, self._wait_s)
                self._recheck(name, after)
            return
        at = self._clock.now()
        if not await self._write(view, workload, step.clusters, step.added):
            return
        if nominated:
            self._shunned.update(shun(nominated, now, self._wait_s))
        # Said even where the worker admitted it while the write was on its way (MultiKueue and
        # an idle worker take well under a second): the nomination is what sent it there.
        note = note_event(view.invocation, at, NOMINATED, f"Kueue: {step.why}")
        if name not in self._views:
            await self._outlet.deliver(note)
            return  # admitted, or gone, meanwhile: nothing to keep
        self._keep(name, step.clusters, now)
        await self._outlet.deliver(note)
        if len(step.clusters) < len(self._workers):
            self._recheck(name, self._wait_s)

    def _nominated_since(
        self, name: str, nominated: tuple[str, ...], now: float
    ) -> tuple[tuple[str, ...], float]:
        """The workers the Workload is nominated to, and since when the wait for the last of
        them counts (wait_began)."""
        ours = self._nominated.get(name)
        if ours is not None and len(ours[0]) >= len(nominated):
            nominated, since = ours  # our write may be ahead of the watch
        else:
            since = now  # nominated by someone else (a gateway before this one): from now on
            if nominated:
                self._keep(name, nominated, since)
        if not nominated:
            return nominated, since
        last = nominated[-1]
        return nominated, wait_began(since, self._copied.get(name, {}).get(last), self._progress.get(last))

    async def _write(
        self, view: WorkloadView, workload: KubeObject, clusters: Sequence[str], added: str
    ) -> bool:
        """Apply the nomination; False when it was not written (tried again later, or the
        Workload is gone)."""
        name = view.name
        try:
            await self._api().request(
                "PATCH",
                f"{self._path}/{name}/status",
                params={"fieldManager": KUEUE_ADMISSION_MANAGER, "force": "true"},
                body=nomination_apply(workload, clusters),
                content_type=APPLY_PATCH,
            )
        except NotFound:
            self.forget(name)
            return False
        except EopsError as exc:
            # A 409 (the Workload changed since it was read) or a failed write (a Role without
            # `patch` on workloads/status: 403): tried again at the Workload's next event, or at
            # the re-check below; meanwhile Kueue, waiting for a nomination, dispatches nothing.
            log.warning("MultiKueue: could not nominate %s for %s: %s", added, name, exc)
            self._recheck(name, min(self._wait_s, 5.0))
            await self._refusal(view, added, exc)
            return False
        self._refused.pop(name, None)
        return True

    async def _refusal(self, view: WorkloadView, added: str, exc: EopsError) -> None:
        """A refusal that trying again will not mend by itself (not a 409, not a busy server)
        is told in the timeline, once while it says the same: the work waits for it."""
        if isinstance(exc, Conflict | TemporaryError) or self._refused.get(view.name) == str(exc):
            return
        self._refused[view.name] = str(exc)
        message = (
            f"Kueue: the gateway could not nominate cluster {added} to MultiKueue, which "
            f"dispatches nothing until it can (tried again every {min(self._wait_s, 5.0):g} s): {exc}"
        )
        await self._outlet.deliver(note_event(view.invocation, self._clock.now(), NOT_NOMINATED, message))

    def _recheck(self, name: str, after_s: float) -> None:
        if name in self._rechecks:
            return
        self._rechecks.add(name)
        self._outlet.chore(self._later(name, max(0.0, after_s)))

    async def _later(self, name: str, after_s: float) -> None:
        try:
            await self._clock.sleep(after_s)
        finally:
            self._rechecks.discard(name)
        await self._decide(name)
