"""The Kubernetes backend: every invocation becomes one GPU Job on a node of its own (or, with
the `pod` workload, one bare Pod that the gateway times and deletes itself).

I/O lives here and in api.py; every decision (what a Job looks like, what an observed object
means) is a pure function in manifests.py and observe.py. The only state kept in memory is one
`Progress` record per invocation (what was reported already), which the watches' first lists
rebuild after a restart, and the GPU node watch's view, whose past it reads back from the
store's node records (gpu_nodes.py); Job, Secret and pod names derive from the invocation id,
so no map of names is needed. The backend reports; the store decides what a report does
(events.apply_event)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from typing import Any

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.decode import decode_event, decode_job, decode_pod
from elasticityops.backends.kubernetes.gpu_nodes import NODES_PATH, GpuNodes, Occupant
from elasticityops.backends.kubernetes.labels import (
    ACCELERATOR_LABEL,
    ATTEMPT_LABEL,
    FUNCTION_LABEL,
    GPU_TYPE_LABEL,
    INVOCATION_LABEL,
    selector,
)
from elasticityops.backends.kubernetes.manifests import (
    CALLBACK_TOKEN_BYTES,
    CONTAINER_NAME,
    SECRET_DATA_LIMIT,
    build_payload_secret,
    build_workload,
    gpu_type_of,
    job_name,
    owned_by,
)
from elasticityops.backends.kubernetes.objects import KubeObject, parse_time
from elasticityops.backends.kubernetes.observe import (
    Progress,
    attempt_of,
    attempt_of_job_name,
    container_started,
    events_field_selector,
    invocation_of,
    job_name_of_pod,
    job_over,
    no_capacity,
    observe_event,
    observe_job,
    observe_job_deleted,
    observe_job_event,
    observe_pod,
    observe_pod_deleted,
    overdue,
    past_deadline,
    pod_ended_at,
    pod_over,
    pod_timed_out,
)
from elasticityops.backends.kubernetes.ratelimit import backoff_delay
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.watch import KindWatch
from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.domain.errors import Conflict, EopsError, NotFound, PermanentError, TemporaryError
from elasticityops.domain.events import BackendEvent, Finished, note_event
from elasticityops.domain.invocations import FailureReason, Invocation, Note, State
from elasticityops.domain.node_seconds import Charge
from elasticityops.domain.ports import ClientCounters, EventSink, LaunchRequest, NodeHistorySource

log = logging.getLogger(__name__)

# How often a log follow on a backend without watches asks the API whether the pod started.
_UNWATCHED_POLL_S = 1.0


class KubernetesBackend:
    name = "kubernetes"

    def __init__(
        self,
        settings: KubernetesSettings,
        clock: Clock | None = None,
        api: KubeApi | None = None,
        *,
        watch_gpu_nodes: bool = False,
        node_history: NodeHistorySource | None = None,
    ) -> None:
        self.settings = settings
        self._clock = clock or SystemClock()
        self._api = api
        ns = settings.namespace
        self.jobs_path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        self.pods_path = f"/api/v1/namespaces/{ns}/pods"
        # Bare pods: the gateway makes each invocation's pod itself, so a throttled Job
        # controller (a stock controller-manager's 20 QPS) does not pace a burst.
        self.bare_pods = settings.workload == "pod"
        self.workload_path = self.pods_path if self.bare_pods else self.jobs_path
        self._workload = "pod" if self.bare_pods else "Job"
        # Ended bare pods and when they ended, until they are deleted ttl_after_finished_seconds
        # later (a Job's ttlSecondsAfterFinished); the pod watch's first list refills it.
        self._ended_pods: dict[str, float] = {}
        self.secrets_path = f"/api/v1/namespaces/{ns}/secrets"
        self.events_path = f"/api/v1/namespaces/{ns}/events"
        self._selector = selector(settings.instance)
        self._sink: EventSink | None = None
        self._progress: dict[str, Progress] = {}
        # The GPU type of the Job each invocation has now (what it was launched on last): a Job or
        # pod labelled with another is one withdrawn for a spill, and what it does tells nothing.
        self._gpu_types: dict[str, str] = {}
        # The attempt `_progress` is about, per invocation: the newest launched or seen. What a
        # Job or pod of an older attempt (preempted, being deleted) says is dropped.
        self._attempts: dict[str, int] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._chores: set[asyncio.Task[None]] = set()
        self._pending_events: list[BackendEvent] = []
        self.watches: list[KindWatch] = []
        self._launches: asyncio.Queue[tuple[LaunchRequest, KubeObject, KubeObject]] = asyncio.Queue()
        self._launchers: list[asyncio.Task[None]] = []
        self.workloads_created = 0  # Jobs, or bare pods (settings.workload)
        self._counted_before: tuple[Counter[str], int, Counter[str], int] = (Counter(), 0, Counter(), 0)
        # The GPU nodes and which of them our pods use: for the headroom controller, and to tell
        # each invocation whether it found a warm node. Off unless asked: it needs the right to
        # watch Nodes (the rendered ClusterRole gives it).
        self.gpu_nodes: GpuNodes | None = GpuNodes() if watch_gpu_nodes else None
        # Where the nodes' records are read at each start (the store; they are written through
        # the sink, with the charges they close). None: nothing kept across a restart.
        self._node_history = node_history

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            self._api = KubeApi.connect(self.settings, self._clock)
        return self._api

    def client_counters(self) -> ClientCounters:
        """Since this backend was made: a stop (a leader stepping down) closes the client and
        its watches, so what they counted is kept here first and the counters never go back."""
        errors, retries, restarts, refreshes = self._counted_before
        api = self._api
        if api is not None:
            errors, retries = errors + api.errors, retries + api.retries
            refreshes += api.credential_refreshes
        restarts = restarts.copy()
        for watch in self.watches:
            stats = watch.stats
            restarts.update(ended=stats.resumes, expired=stats.expired, dropped=stats.dropped)
        return ClientCounters(dict(errors), retries, dict(+restarts), refreshes)

    async def start(self, sink: EventSink) -> None:
        self._sink = sink
        held, self._pending_events = self._pending_events, []
        for event in held:
            await self._emit(event)
        api = self.api
        by_label = {"labelSelector": self._selector}
        node_watch = []
        if self.gpu_nodes is not None:
            await self._restore_nodes(self.gpu_nodes)
            # First, so a pod bound to a node in the first lists finds the node known.
            node_watch = [
                KindWatch(api, NODES_PATH, {"labelSelector": ACCELERATOR_LABEL}, self._on_node, self._clock)
            ]
        self.watches = [
            *node_watch,
            # Pods first, so the first list sees a finished pod (and its result) before its Job.
            KindWatch(api, self.pods_path, by_label, self._on_pod, self._clock, decode=decode_pod),
            *(
                []
                if self.bare_pods
                else [KindWatch(api, self.jobs_path, by_label, self._on_job, self._clock, decode=decode_job)]
            ),
            KindWatch(
                api,
                self.events_path,
                # About Pods and Jobs (one watch per kind: Events of both), routine ones left out.
                {"fieldSelector": events_field_selector()},
                self._on_event,
                self._clock,
                track_deletes=False,
                list_everything=False,
                decode=decode_event,
            ),
        ]
        # The first lists happen before start returns, so launches and adoptions that follow
        # meet a complete picture.
        for watch in self.watches:
            await watch.relist()
            if self.gpu_nodes is not None and watch.path == NODES_PATH:
                await self._node_news(self.gpu_nodes.listed(self._clock.now().timestamp()))
        self._tasks = [asyncio.create_task(w.run(), name=f"watch {w.path}") for w in self.watches]
        self._tasks.append(asyncio.create_task(self._sweep(), name="no-capacity sweep"))

    async def stop(self) -> None:
        tasks = [*self._tasks, *self._launchers, *self._chores]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks, self._launchers = [], []
        counted = self.client_counters()
        self._counted_before = (
            Counter(counted.errors),
            counted.retries,
            Counter(counted.watch_restarts),
            counted.credential_refreshes,
        )
        self.watches = []
        if self._api is not None:
            await self._api.close()
            self._api = None

    # -- capacity ----------------------------------------------------------------------------

    def free_gpus(self) -> int | None:
        """No fixed limit: the cluster provisions nodes, and the one GPU cap (the GPU budget)
        is the dispatcher's, counted from the store."""
        return None

    def total_gpus(self) -> int | None:
        return None

    def max_payload_bytes(self) -> int:
        """The largest payload a launch can carry: it travels in a Secret beside the token."""
        return SECRET_DATA_LIMIT - CALLBACK_TOKEN_BYTES

    # -- operations --------------------------------------------------------------------------

    async def launch(self, request: LaunchRequest) -> None:
        """Build the Job and its Secret and check every limit now, before anything is created
        (a bad spec or payload fails here, at once, as a launch_error event), then hand the
        creation to the launch workers, so a burst of admissions is not serialised on API round
        trips. A failure to create comes back as a launch_error event too; a gateway that dies
        before creating it finds the invocation without a Job on restart and launches it again."""
        inv = request.invocation
        self._current(inv.id, inv.attempt)
        self._progress.setdefault(inv.id, Progress())
        self._gpu_types[inv.id] = gpu_type_of(request.spec, inv)
        try:
            job = build_workload(request.spec, inv, self.settings, request.callback_url)
            secret = build_payload_secret(
                inv.id, request.payload, request.callback_token, _UID_UNKNOWN, self.settings, inv.attempt
            )
        except EopsError as exc:
            await self._fail_launch(inv.id, f"could not build its {self._workload}: {exc.message}")
            return
        self._ensure_launchers()
        await self._launches.put((request, job, secret))

    def _ensure_launchers(self) -> None:
        if not self._launchers:
            self._launchers = [
                asyncio.create_task(self._launcher(), name=f"launcher {n}")
                for n in range(self.settings.concurrency)
            ]

    async def _launcher(self) -> None:
        while True:
            request, job, secret = await self._launches.get()
            try:
                await self.create_job(request, job, secret)
            except TemporaryError as exc:
                # The client's retries are spent (a server throttling a burst with 429s, or
                # answering 5xx while its etcd is away, for longer than they last): nothing is
                # wrong with the invocation, so it stays pending and its launch is tried again.
                self._chore(self._launch_later(request, job, secret, exc, self._clock.monotonic()))
            except EopsError as exc:
                await self._fail_launch(
                    request.invocation.id, f"could not create its {self._workload}: {exc.message}"
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
        failures = 1
        while True:
            if self._clock.monotonic() - since >= self.settings.provisioning_timeout_seconds:
                await self._fail_launch(inv.id, f"could not create its {self._workload}: {exc.message}")
                return
            delay = backoff_delay(failures, LAUNCH_RETRY_BASE_SECONDS, LAUNCH_RETRY_CAP_SECONDS)
            log.warning(
                "could not create the %s of %s yet (%s); again in %.1f s",
                self._workload,
                inv.id,
                exc.message,
                delay,
            )
            await self._clock.sleep(delay)
            progress = self._progress.get(inv.id)
            if (
                progress is None
                or progress.finished
                or progress.cancelling
                or self._attempts.get(inv.id) != inv.attempt
            ):
                return  # cancelled, ended or superseded meanwhile: no Job wanted any more
            try:
                await self.create_job(request, job, secret)
                return
            except TemporaryError as again:
                exc, failures = again, failures + 1
            except EopsError as refused:
                await self._fail_launch(inv.id, f"could not create its {self._workload}: {refused.message}")
                return

    async def _fail_launch(self, inv: str, message: str) -> None:
        self._progress[inv] = self._progress.get(inv, Progress())._replace(finished=True)
        failed = Finished.failed(self._clock.now(), FailureReason.launch_error, message)
        await self._deliver(BackendEvent(inv, finished=failed))

    async def create_job(self, request: LaunchRequest, job: KubeObject, secret: KubeObject) -> None:
        """Create the Job (or bare pod), then its payload Secret owned by it; 409 means "already
        there"."""
        inv = request.invocation
        name = job["metadata"]["name"]
        try:
            created = await self.api.create(self.workload_path, job)
        except Conflict:
            # Created before a crash or by a retried request: the same Job, never a second.
            created = await self.api.get(f"{self.workload_path}/{name}")
            if invocation_of(created) != inv.id:
                raise PermanentError(
                    f"{self._workload} {name} exists but belongs to another invocation; delete it or use "
                    "another namespace"
                ) from None
        with contextlib.suppress(Conflict):
            await self.api.create(self.secrets_path, owned_by(secret, created["metadata"]["uid"]))
        self.workloads_created += 1

    async def drain_launches(self) -> None:
        """Wait until every launch handed over so far has been created (or failed)."""
        await self._launches.join()

    async def cancel(self, invocation: Invocation) -> None:
        progress = self._progress.get(invocation.id, Progress())._replace(cancelling=True)
        self._progress[invocation.id] = progress
        path = f"{self.workload_path}/{job_name(invocation.id, invocation.attempt)}"
        deleted = await self.api.delete(path, "Background")
        if not deleted:
            now = self._clock.now()
            event, self._progress[invocation.id] = observe_job_deleted(invocation.id, progress, now)
            await self._deliver(event)

    async def withdraw(self, invocation: Invocation) -> bool:
        """Take back the Job of a pending invocation so that it can be launched again on another
        GPU type (spillover): delete the Job (foreground: its pod goes first) and its payload
        Secret and wait until both are gone, reporting no end for them. Only then may a Job of the
        same name be created, so there is never a second one. False when they did not go within
        WITHDRAW_TIMEOUT_SECONDS: the invocation is then failed (no_capacity), as its Job is going
        and nothing would launch it again."""
        inv = invocation.id
        self._gpu_types[inv] = _WITHDRAWN
        # No pending_since: the no-capacity sweep leaves it alone until it is launched again.
        self._progress[inv] = Progress(job_seen=True)
        name = job_name(inv, invocation.attempt)
        deadline = self._clock.monotonic() + WITHDRAW_TIMEOUT_SECONDS
        job_gone = secret_gone = False
        pause = 0.25  # doubling up to 5 s: a pending pod goes at once, a stuck one is not hammered
        while self._clock.monotonic() < deadline:
            try:
                if not job_gone:
                    # Deleting again is harmless and also covers a delete the API server lost.
                    await self.api.delete(f"{self.workload_path}/{name}", "Foreground")
                    job_gone = await self._gone(f"{self.workload_path}/{name}")
                if job_gone and not secret_gone:
                    # This gateway may only create and delete Secrets: a delete answering 404 is
                    # how it learns the Secret is gone (the GC may have taken it first).
                    secret_gone = not await self.api.delete(f"{self.secrets_path}/{name}", "Background")
                if job_gone and secret_gone:
                    return True
            except EopsError as exc:
                log.warning("withdrawing the Job of %s: %s", inv, exc)
            await self._clock.sleep(pause)
            pause = min(5.0, pause * 2)
        self._progress[inv] = Progress(job_seen=True, finished=True)
        failed = Finished.failed(
            self._clock.now(),
            FailureReason.no_capacity,
            f"its Job on {invocation.gpu_type} did not go within {WITHDRAW_TIMEOUT_SECONDS:g} s "
            "of being withdrawn to spill it over to another GPU type",
        )
        await self._deliver(BackendEvent(inv, finished=failed))
        return False

    async def _gone(self, path: str) -> bool:
        try:
            await self.api.get(path)
        except NotFound:
            return True
        return False

    def _stale(self, inv: str, obj: KubeObject) -> bool:
        """A Job or pod of a GPU type the invocation no longer has a Job on: withdrawn."""
        kind = ((obj.get("metadata") or {}).get("labels") or {}).get(GPU_TYPE_LABEL)
        expected = self._gpu_types.get(inv)
        return kind is not None and expected is not None and kind != expected

    async def preempt(self, invocation: Invocation) -> None:
        """Delete this attempt's Job (its pod and Secret go with it) and forget it: from now on
        whatever that Job or its pod says is dropped, so its end is never reported (the
        dispatcher records the preemption) and the next attempt starts from nothing."""
        superseded = max(self._attempts.get(invocation.id, 0), invocation.attempt + 1)
        self._attempts[invocation.id] = superseded
        self._progress.pop(invocation.id, None)
        path = f"{self.workload_path}/{job_name(invocation.id, invocation.attempt)}"
        await self.api.delete(path, "Background")  # False: gone already, which is as good

    async def adopt(self, active: Sequence[Invocation]) -> list[str]:
        """Re-attach to the Jobs of `active`. The watches' first lists (made in `start`) have
        replayed what the Jobs and pods did while the gateway was away; nothing is listed again.

        Returns the ids to launch again: those without a Job, and pending ones whose container
        has not started, since their payload Secret may never have been made if the gateway died
        between the two creates. Launching is idempotent (409 on both), and this needs no right to
        read Secrets."""
        missing = []
        for inv in active:
            progress = self._progress.get(inv.id, Progress())
            if self._attempts.get(inv.id, 0) != inv.attempt:
                # What was seen is another attempt's Job (an older one, preempted): this
                # attempt's was never made.
                progress = Progress()
            if not progress.job_seen or (
                inv.state is State.pending and not progress.started and not progress.finished
            ):
                missing.append(inv.id)
        return missing

    async def logs(self, invocation: Invocation, follow: bool) -> AsyncIterator[bytes]:
        pod = await self._wait_for_pod(invocation.id, follow)
        if pod is None:
            return
        params: dict[str, str | int] = {"container": CONTAINER_NAME}
        if follow:
            params["follow"] = "true"
        async for chunk in self.api.stream(f"{self.pods_path}/{pod}/log", params, follow):
            yield chunk

    async def _wait_for_pod(self, invocation_id: str, follow: bool) -> str | None:
        """The name of the invocation's newest pod; with follow, once its container has started
        (there is nothing to follow before). None when it has no pod (not yet, or any more).

        A backend whose watches do not run (a gateway replica whose dispatcher does not: the
        Jobs are another replica's) has no progress to go by: it asks the API every
        `_UNWATCHED_POLL_S` and gives up once the invocation's Job has ended or is gone, which
        Kubernetes itself bounds (the Job's activeDeadlineSeconds is its function's timeout)."""
        selector = {"labelSelector": f"{self._selector},{INVOCATION_LABEL}={invocation_id}"}
        while True:
            pods, _ = await self.api.list(self.pods_path, selector)
            if pods:
                pods.sort(key=lambda p: (p.get("metadata") or {}).get("creationTimestamp", ""))
                newest = pods[-1]
                if not follow or container_started(newest):
                    return str(newest["metadata"]["name"])
            if not follow or self._progress.get(invocation_id, Progress()).finished:
                return None  # never started, and never will
            if not self._tasks:
                if self.bare_pods:
                    over = all(pod_over(pod) for pod in pods)
                else:
                    jobs, _ = await self.api.list(self.jobs_path, selector)
                    over = all(job_over(job) for job in jobs)
                if over:
                    return None  # its Jobs ended (or were deleted) before a container started
                await self._clock.sleep(_UNWATCHED_POLL_S)
                continue
            # Waiting for the container to start: the watches update progress, so look at the
            # API again only when they say something changed (or after a few seconds).
            for _ in range(20):
                await self._clock.sleep(0.25)
                progress = self._progress.get(invocation_id, Progress())
                if progress.started or progress.finished:
                    break

    # -- observations ------------------------------------------------------------------------

    async def _on_job(self, kind: str, job: KubeObject) -> None:
        name = (job.get("metadata") or {}).get("name", "")
        named = attempt_of_job_name(name)
        inv = invocation_of(job) or (None if named is None else named[0])
        if inv is None or self._stale(inv, job):
            return
        labelled = ATTEMPT_LABEL in ((job.get("metadata") or {}).get("labels") or {})
        attempt = attempt_of(job) if labelled or named is None else named[1]
        followed = self._attempts.get(inv)
        if kind == "DELETED" and followed is not None and attempt < followed:
            if not (job.get("status") or {}).get("active"):
                # A preempted attempt's Job gone with no pod of its own: no GPU was held.
                # (With a pod, that pod's own deletion says when its GPU is free.)
                gone = Finished.cancelled(self._clock.now(), "the preempted attempt's Job is gone")
                await self._emit(BackendEvent(inv, attempt=attempt, finished=gone))
            return
        if not self._current(inv, attempt):
            return
        now = self._clock.now()
        progress = self._progress.get(inv, Progress())
        if kind == "DELETED":
            event, _ = observe_job_deleted(inv, progress, now)
            self._progress.pop(inv, None)
            self._gpu_types.pop(inv, None)
            await self._deliver(event)
            self._attempts.pop(inv, None)
            return
        progress = progress._replace(job_seen=True)
        if progress.pending_since is None and not progress.capacity_ready:
            created = parse_time((job.get("metadata") or {}).get("creationTimestamp"))
            progress = progress._replace(pending_since=created or now)
        event, after = observe_job(job, progress, now)
        if event is not None and event.finished is not None and event.finished.state is State.succeeded:
            # Complete, but the pod's own end (with the termination message, the small result)
            # may still be on its way through the pod watch: give it a moment to arrive first.
            if not progress.success_seen:
                self._chore(self._finish_later(inv, event))
            self._progress[inv] = progress._replace(success_seen=True)
            return
        self._progress[inv] = after
        await self._deliver(event)

    async def _finish_later(self, inv: str, event: BackendEvent) -> None:
        await self._clock.sleep(SUCCESS_GRACE_SECONDS)
        progress = self._progress.get(inv)
        if progress is None or progress.finished:
            return
        self._progress[inv] = progress._replace(finished=True)
        await self._deliver(event)

    async def _on_pod(self, kind: str, pod: KubeObject) -> None:
        name = str((pod.get("metadata") or {}).get("name", ""))
        inv = invocation_of(pod)
        attempt = attempt_of(pod)
        if inv is None and self.bare_pods and pod.get("gone"):
            # Gone while the watch was down: a relist tells only the name, which is the Job's.
            named = attempt_of_job_name(name)
            if named is None or self._gpu_types.get(named[0]) == _WITHDRAWN:
                self._ended_pods.pop(name, None)
                return
            inv, attempt = named
        if inv is None:
            return  # not an invocation's (a warm-capacity placeholder): never ours to reap
        if self.bare_pods:
            self._track_end(kind, name, pod)
        if self._stale(inv, pod):
            return
        followed = self._attempts.get(inv)
        if kind == "DELETED" and followed is not None and attempt < followed:
            # A preempted attempt's pod is gone: its GPU is free now (the dispatcher waits for
            # that before the work it made way for counts it free). Its end, as the old
            # attempt's, changes nothing in the store.
            gone = Finished.cancelled(self._clock.now(), "the preempted attempt's pod is gone")
            await self._emit(BackendEvent(inv, attempt=attempt, finished=gone))
            node = (pod.get("spec") or {}).get("nodeName")
            if self.gpu_nodes is not None and isinstance(node, str) and node:
                self.gpu_nodes.vacated(node, inv, self._clock.now().timestamp(), _occupant(inv, pod))
                await self._node_news([])
            return
        if inv not in self._progress and (
            kind == "DELETED" or (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            # A pod going with its Job (TTL, cancel, preemption): nothing to tell.
            return
        if not self._current(inv, attempt):
            return  # a preempted attempt's pod, while it goes
        before = self._progress.get(inv, Progress())
        if self.bare_pods:
            before = before._replace(job_seen=True)  # the pod is the workload: adoption needs no relaunch
        now = self._clock.now()
        event, self._progress[inv] = observe_pod(pod, before, now)
        extra = None
        if self.gpu_nodes is not None:
            event, extra = await self._track_node(kind, inv, pod, event)
        await self._deliver(event)
        await self._deliver(extra)
        if self.bare_pods and kind == "DELETED":
            # Nothing outlives a bare pod (a Job's deletion says this in the Job mode).
            ended, self._progress[inv] = observe_pod_deleted(inv, self._progress[inv], now)
            await self._deliver(ended)
            self._progress.pop(inv, None)
            self._gpu_types.pop(inv, None)
            self._attempts.pop(inv, None)

    def _track_end(self, kind: str, name: str, pod: KubeObject) -> None:
        """Remember when each of our bare pods ended, for `_reap`."""
        if kind == "DELETED" or (pod.get("metadata") or {}).get("deletionTimestamp"):
            self._ended_pods.pop(name, None)
            return
        ended = pod_ended_at(pod)
        if ended is not None and name not in self._ended_pods:
            self._ended_pods[name] = ended.timestamp()

    async def _on_node(self, kind: str, node: KubeObject) -> None:
        if self.gpu_nodes is not None:
            await self._node_news(self.gpu_nodes.on_node(kind, node, self._clock.now().timestamp()))

    async def _restore_nodes(self, nodes: GpuNodes) -> None:
        """The nodes' records, before the node watch's first list. A store that cannot be read
        now leaves them as they are: this start keeps none (what it would write would be its
        own partial view over what another gateway knew) and charges only what it sees."""
        if self._node_history is None:
            return
        try:
            records = await self._node_history.gpu_node_history()
        except EopsError as exc:
            log.warning("GPU node records not read (%s): nodes' past before this start is not charged", exc)
            nodes.records.keeping = False
            return
        nodes.restore(records)

    async def _track_node(
        self, kind: str, inv: str, pod: KubeObject, event: BackendEvent | None
    ) -> tuple[BackendEvent | None, BackendEvent | None]:
        """Which GPU node our pod holds. On its binding the pod's event gains where its node
        time starts (and what the node is priced as), so that even a pod first seen ended is
        charged from its node's start; a note says if the node was warm (the second event
        returned, when the first has a note of its own). The node time the binding closes (the
        idle time after the node's last job, or its time before that no one used) goes out with
        the node's record (`_node_news`)."""
        nodes = self.gpu_nodes
        node = (pod.get("spec") or {}).get("nodeName")
        if nodes is None or not isinstance(node, str) or not node:
            return event, None
        meta = pod.get("metadata") or {}
        now = self._clock.now().timestamp()
        extra = None
        news: list[Charge] = []
        if event is not None and event.capacity_ready is not None:
            placed = event.capacity_ready
            pod_created = parse_time(meta.get("creationTimestamp"))
            told = nodes.warm_note(node, pod_created)
            where = nodes.placement(node, pod_created, placed)
            unused = None if where is None or where.unused_until is None else where.unused_until.timestamp()
            news = nodes.occupied(node, inv, now, unused)
            note = None if told is None else Note(at=placed, kind=told[0], message=told[1])
            if note is not None and event.note is not None:
                extra, note = note_event(inv, placed, note.kind, note.message, node=node), None
            event = replace(
                event,
                note=event.note or note,
                node_since=None if where is None else where.node_since,
                warm=None if where is None else where.warm,
                node_capacity=None if where is None else where.capacity,
            )
        if kind == "DELETED" or meta.get("deletionTimestamp") or self._progress[inv].finished:
            nodes.vacated(node, inv, now, _occupant(inv, pod))
        elif event is None or event.capacity_ready is None:
            # Seen on its node without news of the binding (a relist after a restart).
            news.extend(nodes.occupied(node, inv, now))
        await self._node_news(news)
        return event, extra

    async def _node_news(self, charges: list[Charge]) -> None:
        """Node time about no event of an invocation of its own (see GpuNodes), with the changes
        of the nodes' records it goes with: one event, so one transaction, and all on one lane
        (invocation_id ""), so the records are written in the order they changed."""
        nodes = self.gpu_nodes
        writes = () if nodes is None else tuple(nodes.history_writes())
        if charges or writes:
            await self._emit(BackendEvent("", charges=tuple(charges), node_history=writes))

    async def _on_event(self, kind: str, event: KubeObject) -> None:
        if kind == "DELETED":
            return
        involved = event.get("involvedObject") or {}
        name = str(involved.get("name", ""))
        if involved.get("kind") == "Job":
            observe = observe_job_event
        elif involved.get("kind") == "Pod":
            # A bare pod has its Job's name; a Job's pods add a suffix.
            observe, name = observe_event, (name if self.bare_pods else job_name_of_pod(name))
        else:
            return
        named = attempt_of_job_name(name)
        if named is None or named[0] not in self._progress or self._attempts.get(named[0], 0) != named[1]:
            return
        inv = named[0]
        told, self._progress[inv] = observe(event, inv, self._progress[inv], self._clock.now())
        await self._deliver(told)

    async def _sweep(self) -> None:
        """Fail invocations whose pod found no node within the provisioning timeout."""
        timeout = self.settings.provisioning_timeout_seconds
        period = max(0.5, min(5.0, timeout / 4))
        while True:
            await self._clock.sleep(period)
            now = self._clock.now()
            for inv, progress in list(self._progress.items()):
                if past_deadline(progress, now):
                    # A bare pod at its timeout (waiting for a node included): the kubelet's own
                    # deadline counts only from its start on a node, and a Job's would be here.
                    self._progress[inv] = progress._replace(finished=True)
                    await self._deliver(BackendEvent(inv, finished=pod_timed_out(now, progress)))
                    self._chore(self._delete_job(inv))
                elif overdue(progress, now, timeout):
                    self._progress[inv] = progress._replace(finished=True)
                    await self._deliver(no_capacity(inv, progress, now, timeout))
            if self._ended_pods:
                await self._reap(now.timestamp())

    def _current(self, inv: str, attempt: int) -> bool:
        """Whether an observation of `attempt` is about the attempt `_progress` follows. A newer
        one than followed so far (launched by another gateway before a restart) replaces it."""
        followed = self._attempts.get(inv)
        if followed is not None and attempt < followed:
            return False
        if followed is not None and attempt > followed:
            self._progress.pop(inv, None)
        self._attempts[inv] = attempt
        return True

    async def _deliver(self, event: BackendEvent | None) -> None:
        if event is None:
            return
        event = replace(event, attempt=self._attempts.get(event.invocation_id, 0))
        if event.finished is not None and event.finished.reason in _STOP_JOB_ON:
            # The Job would linger (a pod stuck pulling or waiting for a node): stop it.
            self._chore(self._delete_job(event.invocation_id))
        await self._emit(event)

    async def _emit(self, event: BackendEvent) -> None:
        if self._sink is None:
            self._pending_events.append(event)
            return
        try:
            await self._sink(event)
        except Exception:
            # A failing sink (the store, say) must not kill the watch; the next relist or
            # adoption replays what matters.
            log.exception("delivering an event of %s failed: %s", event.invocation_id, event)

    def _chore(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._chores.add(task)
        task.add_done_callback(self._chores.discard)

    async def _delete_job(self, invocation_id: str) -> None:
        try:
            attempt = self._attempts.get(invocation_id, 0)
            await self.api.delete(f"{self.workload_path}/{job_name(invocation_id, attempt)}", "Background")
        except (NotFound, EopsError) as exc:
            log.warning("could not delete the %s of %s: %s", self._workload, invocation_id, exc)

    async def _reap(self, now: float) -> None:
        """Delete the bare pods that ended ttl_after_finished_seconds ago (a Job's TTL; the logs
        stay readable until then); their Secrets go with them (owned). A pod that would not go
        now is tried again at the next sweep."""
        ttl = self.settings.ttl_after_finished_seconds
        due = [name for name, ended in self._ended_pods.items() if now - ended >= ttl]
        # Side by side, as the launches are: a burst's thousands of pods end within seconds, and
        # one delete after another would hold the sweep (and every deadline it checks) that long.
        gate = asyncio.Semaphore(REAP_CONCURRENCY)

        async def delete(name: str) -> None:
            async with gate:
                try:
                    await self.api.delete(f"{self.pods_path}/{name}", "Background")
                    self._ended_pods.pop(name, None)
                except EopsError as exc:
                    log.warning("could not delete the ended pod %s: %s", name, exc)

        await asyncio.gather(*(delete(name) for name in due))


SUCCESS_GRACE_SECONDS = 2.0
REAP_CONCURRENCY = 16  # ended bare pods deleted at once (the client's rate limit still applies)
# A launch whose create outlasted the client's retries is tried again after 1 s, doubling to 30 s
# (with jitter, so a throttled burst does not come back as one herd).
LAUNCH_RETRY_BASE_SECONDS = 1.0
LAUNCH_RETRY_CAP_SECONDS = 30.0
WITHDRAW_TIMEOUT_SECONDS = 120.0  # a pending pod has no container to stop: it goes in seconds
_WITHDRAWN = ""  # the GPU type of an invocation whose Job is being withdrawn: every labelled one is stale
_STOP_JOB_ON = frozenset({FailureReason.image_pull, FailureReason.no_capacity, FailureReason.launch_error})
_UID_UNKNOWN = "unknown-until-the-job-exists"  # the Secret's owner uid, set once the Job is created


def _occupant(inv: str, pod: KubeObject) -> Occupant:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    gpu_type = labels.get(GPU_TYPE_LABEL)
    return Occupant(
        invocation_id=inv,
        attempt=attempt_of(pod),
        function=str(labels.get(FUNCTION_LABEL, "")),
        gpu_type=gpu_type if isinstance(gpu_type, str) else None,
    )
