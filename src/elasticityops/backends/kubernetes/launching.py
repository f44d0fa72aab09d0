"""Launching an invocation on Kubernetes: its Job (or bare pod) and payload Secret are built and
every limit checked at once, then created by a pool of launch workers, so a burst of admissions
is not serialised on API round trips; a create the API server keeps refusing for a while
(throttling, or away) is tried again later."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.manifests import (
    build_payload_secret,
    build_workload,
    gpu_type_of,
    owned_by,
)
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.observe import Progress, invocation_of
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.ratelimit import backoff_delay
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import Conflict, EopsError, PermanentError, TemporaryError
from elasticityops.domain.events import BackendEvent, Finished
from elasticityops.domain.invocations import FailureReason
from elasticityops.domain.ports import LaunchRequest

log = logging.getLogger(__name__)

# A launch whose create outlasted the client's retries is tried again after 1 s, doubling to 30 s
# (with jitter, so a throttled burst does not come back as one herd).
LAUNCH_RETRY_BASE_SECONDS = 1.0
LAUNCH_RETRY_CAP_SECONDS = 30.0
_UID_UNKNOWN = "unknown-until-the-job-exists"  # the Secret's owner uid, set once the Job is created


class Launcher:
    def __init__(
        self,
        settings: KubernetesSettings,
        clock: Clock,
        workloads: Workloads,
        followed: Followed,
        outlet: Outlet,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._workloads = workloads
        self._followed = followed
        self._outlet = outlet
        self._launches: asyncio.Queue[tuple[LaunchRequest, KubeObject, KubeObject]] = asyncio.Queue()
        self.workers: list[asyncio.Task[None]] = []
        self.created = 0  # Jobs, or bare pods (settings.workload)

    async def launch(self, request: LaunchRequest) -> None:
        """Build the Job and its Secret and check every limit now, before anything is created
        (a bad spec or payload fails here, at once, as a launch_error event), then hand the
        creation to the launch workers, so a burst of admissions is not serialised on API round
        trips. A failure to create comes back as a launch_error event too; a gateway that dies
        before creating it finds the invocation without a Job on restart and launches it again."""
        inv = request.invocation
        self._followed.launching(inv.id, inv.attempt, gpu_type_of(request.spec, inv))
        try:
            job = build_workload(request.spec, inv, self._settings, request.callback_url)
            secret = build_payload_secret(
                inv.id, request.payload, request.callback_token, _UID_UNKNOWN, self._settings, inv.attempt
            )
        except EopsError as exc:
            await self._fail(inv.id, f"could not build its {self._workloads.kind}: {exc.message}")
            return
        self._ensure_workers()
        await self._launches.put((request, job, secret))

    async def drain(self) -> None:
        """Wait until every launch handed over so far has been created (or failed)."""
        await self._launches.join()

    def _ensure_workers(self) -> None:
        if not self.workers:
            self.workers = [
                asyncio.create_task(self._worker(), name=f"launcher {n}")
                for n in range(self._settings.concurrency)
            ]

    async def _worker(self) -> None:
        while True:
            request, job, secret = await self._launches.get()
            try:
                await self._create(request, job, secret)
            except TemporaryError as exc:
                # The client's retries are spent (a server throttling a burst with 429s, or
                # answering 5xx while its etcd is away, for longer than they last): nothing is
                # wrong with the invocation, so it stays pending and its launch is tried again.
                self._outlet.chore(self._launch_later(request, job, secret, exc, self._clock.monotonic()))
            except EopsError as exc:
                await self._fail(
                    request.invocation.id, f"could not create its {self._workloads.kind}: {exc.message}"
                )
            finally:
                self._launches.task_done()

    async def _launch_later(
        self, request: LaunchRequest, job: KubeObject, secret: KubeObject, exc: TemporaryError, since: float
    ) -> None:
        """Create the Job again after a pause, until it is made or the provisioning timeout has
        passed since the first failure (then it is a launch_error, as a refused create is).
        A create that reached the server before its answer was lost finds its Job (409)."""
        inv = request.invocation
        kind = self._workloads.kind
        failures = 1
        while True:
            if self._clock.monotonic() - since >= self._settings.provisioning_timeout_seconds:
                await self._fail(inv.id, f"could not create its {kind}: {exc.message}")
                return
            delay = backoff_delay(failures, LAUNCH_RETRY_BASE_SECONDS, LAUNCH_RETRY_CAP_SECONDS)
            log.warning(
                "could not create the %s of %s yet (%s); again in %.1f s", kind, inv.id, exc.message, delay
            )
            await self._clock.sleep(delay)
            progress = self._followed.progress.get(inv.id)
            if (
                progress is None
                or progress.finished
                or progress.cancelling
                or self._followed.attempts.get(inv.id) != inv.attempt
            ):
                return  # cancelled, ended or superseded meanwhile: no Job wanted any more
            try:
                await self._create(request, job, secret)
                return
            except TemporaryError as again:
                exc, failures = again, failures + 1
            except EopsError as refused:
                await self._fail(inv.id, f"could not create its {kind}: {refused.message}")
                return

    async def _fail(self, inv: str, message: str) -> None:
        progress = self._followed.progress
        progress[inv] = progress.get(inv, Progress())._replace(finished=True)
        failed = Finished.failed(self._clock.now(), FailureReason.launch_error, message)
        await self._outlet.deliver(BackendEvent(inv, finished=failed))

    async def _create(self, request: LaunchRequest, job: KubeObject, secret: KubeObject) -> None:
        """Create the Job (or bare pod), then its payload Secret owned by it; 409 means "already
        there"."""
        w = self._workloads
        inv = request.invocation
        name = job["metadata"]["name"]
        try:
            created = await w.api.create(w.workload_path, job)
        except Conflict:
            # Created before a crash or by a retried request: the same Job, never a second.
            created = await w.api.get(f"{w.workload_path}/{name}")
            if invocation_of(created) != inv.id:
                raise PermanentError(
                    f"{w.kind} {name} exists but belongs to another invocation; delete it or use "
                    "another namespace"
                ) from None
        with contextlib.suppress(Conflict):
            await w.api.create(w.secrets_path, owned_by(secret, created["metadata"]["uid"]))
        self.created += 1
