"""Taking an invocation's Job back: cancel it (its end is told as the Job goes), preempt it
(nothing that attempt's Job says is told again), or withdraw it to spill the invocation over to
another GPU type (wait until it and its Secret are gone, telling no end)."""

from __future__ import annotations

import logging

from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.manifests import job_name
from elasticityops.backends.kubernetes.observe import Progress, observe_job_deleted
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import EopsError, NotFound
from elasticityops.domain.events import BackendEvent, Finished
from elasticityops.domain.invocations import FailureReason, Invocation

log = logging.getLogger(__name__)

WITHDRAW_TIMEOUT_SECONDS = 120.0  # a pending pod has no container to stop: it goes in seconds


class Stopper:
    def __init__(self, clock: Clock, workloads: Workloads, followed: Followed, outlet: Outlet) -> None:
        self._clock = clock
        self._workloads = workloads
        self._followed = followed
        self._outlet = outlet

    async def cancel(self, invocation: Invocation) -> None:
        w, progresses = self._workloads, self._followed.progress
        progress = progresses.get(invocation.id, Progress())._replace(cancelling=True)
        progresses[invocation.id] = progress
        path = f"{w.workload_path}/{job_name(invocation.id, invocation.attempt)}"
        deleted = await w.api.delete(path, "Background")
        if not deleted:
            now = self._clock.now()
            event, progresses[invocation.id] = observe_job_deleted(invocation.id, progress, now)
            await self._outlet.deliver(event)

    async def preempt(self, invocation: Invocation) -> None:
        """Delete this attempt's Job (its pod and Secret go with it) and forget it: from now on
        whatever that Job or its pod says is dropped, so its end is never reported (the
        dispatcher records the preemption) and the next attempt starts from nothing."""
        self._followed.supersede(invocation.id, invocation.attempt)
        path = f"{self._workloads.workload_path}/{job_name(invocation.id, invocation.attempt)}"
        await self._workloads.api.delete(path, "Background")  # False: gone already, which is as good

    async def withdraw(self, invocation: Invocation) -> bool:
        """Take back the Job of a pending invocation so that it can be launched again on another
        GPU type (spillover): delete the Job (foreground: its pod goes first) and its payload
        Secret and wait until both are gone, reporting no end for them. Only then may a Job of the
        same name be created, so there is never a second one. False when they did not go within
        WITHDRAW_TIMEOUT_SECONDS: the invocation is then failed (no_capacity), as its Job is going
        and nothing would launch it again."""
        w = self._workloads
        inv = invocation.id
        self._followed.withdrawing(inv)
        name = job_name(inv, invocation.attempt)
        deadline = self._clock.monotonic() + WITHDRAW_TIMEOUT_SECONDS
        job_gone = secret_gone = False
        pause = 0.25  # doubling up to 5 s: a pending pod goes at once, a stuck one is not hammered
        while self._clock.monotonic() < deadline:
            try:
                if not job_gone:
                    # Deleting again is harmless and also covers a delete the API server lost.
                    await w.api.delete(f"{w.workload_path}/{name}", "Foreground")
                    job_gone = await self._gone(f"{w.workload_path}/{name}")
                if job_gone and not secret_gone:
                    # This gateway may only create and delete Secrets: a delete answering 404 is
                    # how it learns the Secret is gone (the GC may have taken it first).
                    secret_gone = not await w.api.delete(f"{w.secrets_path}/{name}", "Background")
                if job_gone and secret_gone:
                    return True
            except EopsError as exc:
                log.warning("withdrawing the Job of %s: %s", inv, exc)
            await self._clock.sleep(pause)
            pause = min(5.0, pause * 2)
        self._followed.progress[inv] = Progress(job_seen=True, finished=True)
        failed = Finished.failed(
            self._clock.now(),
            FailureReason.no_capacity,
            f"its Job on {invocation.gpu_type} did not go within {WITHDRAW_TIMEOUT_SECONDS:g} s "
            "of being withdrawn to spill it over to another GPU type",
        )
        await self._outlet.deliver(BackendEvent(inv, finished=failed))
        return False

    async def _gone(self, path: str) -> bool:
        try:
            await self._workloads.api.get(path)
        except NotFound:
            return True
        return False
