"""The Kubernetes backend: every invocation becomes one GPU Job on a node of its own (or, with
the `pod` workload, one bare Pod that the gateway times and deletes itself).

This class is the `Backend` port over its parts, each a module of one job: launching.py (the
launch workers), watching.py (the watches and what they see), node_tracking.py (the GPU nodes),
stopping.py (cancel, preemption, withdrawal), pod_logs.py, sweep.py and reaping.py (deadlines and
TTLs); outlet.py is where their events go, workloads.py where the objects live. Every decision
(what a Job looks like, what an observed object means) is a pure function in manifests.py and
observe.py. The only state kept in memory is what followed.py keeps per invocation (what was
reported already), which the watches' first lists rebuild after a restart, and the GPU node
watch's view, whose past it reads back from the store's node records (gpu_nodes.py); Job,
Secret and pod names derive from the invocation id, so no map of names is needed. The backend
reports; the store decides what a report does (events.apply_event)."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Sequence

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.gpu_nodes import GpuNodes
from elasticityops.backends.kubernetes.kueue_watching import KueueWatching
from elasticityops.backends.kubernetes.kueue_workloads import KUEUE_API
from elasticityops.backends.kubernetes.launching import Launcher
from elasticityops.backends.kubernetes.log_keeping import LogKeeping
from elasticityops.backends.kubernetes.manifests import CALLBACK_TOKEN_BYTES, SECRET_DATA_LIMIT
from elasticityops.backends.kubernetes.node_tracking import NodeTracking
from elasticityops.backends.kubernetes.nominating import Nominator
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.pod_logs import PodLogs
from elasticityops.backends.kubernetes.reaping import Reaper
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.stale_jobs import StaleJobs
from elasticityops.backends.kubernetes.stopping import Stopper
from elasticityops.backends.kubernetes.sweep import Sweep
from elasticityops.backends.kubernetes.watching import Watching
from elasticityops.backends.kubernetes.worker_secrets import LaunchMaterial, WorkerSecrets
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.domain.invocations import Invocation, State
from elasticityops.domain.ports import ClientCounters, EventSink, LaunchRequest, LogKeeper, NodeHistorySource
from elasticityops.domain.queue import QueueStatus


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
        launch_material: LaunchMaterial | None = None,
        log_keeper: LogKeeper | None = None,
    ) -> None:
        """`launch_material`: an invocation's payload and callback token again, for the payload
        Secret MultiKueue does not copy to the worker that runs its Job (worker_secrets.py).
        `log_keeper`: where the logs of MultiKueue's workers' pods are kept as they end, for a
        read after MultiKueue deleted the pod (log_keeping.py; the store)."""
        self.settings = settings
        clock = clock or SystemClock()
        self._workloads = Workloads(settings, clock, api)
        self._followed = followed = Followed()
        self._outlet = outlet = Outlet(followed, self._workloads)
        # The GPU nodes and which of them our pods use: for the headroom controller, and to tell
        # each invocation whether it found a warm node. Off unless asked: it needs the right to
        # watch Nodes (the rendered ClusterRole gives it).
        self.gpu_nodes: GpuNodes | None = GpuNodes() if watch_gpu_nodes else None
        self._nodes = (
            None
            if self.gpu_nodes is None
            else NodeTracking(self.gpu_nodes, node_history, clock, followed, outlet)
        )
        # MultiKueue's workers' GPU nodes, each watched in its worker (the manager has none):
        # their states for the capacity page, and the node time they add to the invocations run
        # on them, their records kept in the store under the worker's name.
        self.worker_gpu_nodes: dict[str, GpuNodes] = (
            {} if self.gpu_nodes is None else {name: GpuNodes() for name in self._workloads.workers}
        )
        worker_nodes = {
            name: NodeTracking(nodes, node_history, clock, followed, outlet, cluster=name)
            for name, nodes in self.worker_gpu_nodes.items()
        }
        self._reaper = Reaper(settings, self._workloads)
        self._worker_secrets = WorkerSecrets(settings, clock, self._workloads, outlet, launch_material)
        workloads_path = f"{KUEUE_API}/namespaces/{settings.namespace}/workloads"
        self._nominator = nominator = (
            Nominator(
                lambda: self._workloads.api,
                workloads_path,
                list(self._workloads.workers),
                clock,
                outlet,
                settings.nominate_wait_s,
            )
            if settings.nominate_wait_s > 0 and self._workloads.workers
            else None
        )
        self._kueue = (
            None
            if settings.local_queue is None
            else KueueWatching(
                settings.namespace,
                settings.instance,
                clock,
                followed,
                outlet,
                self._worker_secrets.place,
                nominator=nominator,
                stale_jobs=StaleJobs(self._workloads) if self._workloads.workers else None,
            )
        )
        # MultiKueue's workers' Kueue: why each did or did not take the work (notes only).
        worker_kueue = (
            {}
            if self._kueue is None
            else {
                name: KueueWatching(
                    settings.namespace,
                    settings.instance,
                    clock,
                    followed,
                    outlet,
                    worker=name,
                    nominator=nominator,
                )
                for name in self._workloads.workers
            }
        )
        self._watching = Watching(
            clock,
            self._workloads,
            followed,
            outlet,
            self._nodes,
            self._reaper,
            self._kueue,
            worker_kueue,
            worker_nodes,
            # With workers, always: a pod made while logs were kept carries the finalizer still.
            LogKeeping(self._workloads, log_keeper, clock, outlet, settings.keep_log_bytes)
            if self._workloads.workers
            else None,
        )
        self._sweep = Sweep(settings, clock, followed, outlet, self._reaper)
        self._launcher = Launcher(settings, clock, self._workloads, followed, outlet)
        self._stopper = Stopper(clock, self._workloads, followed, outlet)
        self._tasks: list[asyncio.Task[None]] = []  # the watches and the sweep, while started
        self._logs = PodLogs(
            clock,
            self._workloads,
            followed,
            lambda: bool(self._tasks),
            settings.ttl_after_finished_seconds,
            log_keeper,
        )
        self._counted_before: tuple[Counter[str], int, Counter[str], int] = (Counter(), 0, Counter(), 0)

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def api(self) -> KubeApi:
        return self._workloads.api

    def client_counters(self) -> ClientCounters:
        """Since this backend was made: a stop (a leader stepping down) closes the client and
        its watches, so what they counted is kept here first and the counters never go back."""
        errors, retries, restarts, refreshes = self._counted_before
        connected = self._workloads.connected
        for api in [*([] if connected is None else [connected]), *self._workloads.connected_workers]:
            errors, retries = errors + api.errors, retries + api.retries
            refreshes += api.credential_refreshes
        restarts = restarts.copy()
        restarts.update(self._watching.restarts())
        return ClientCounters(dict(errors), retries, dict(+restarts), refreshes)

    async def start(self, sink: EventSink) -> None:
        await self._outlet.open(sink)
        if self._nominator is not None:
            self._nominator.clear()
        # The first lists happen before start returns, so launches and adoptions that follow
        # meet a complete picture.
        await self._watching.start()
        self._tasks = self._watching.run()
        self._tasks.append(asyncio.create_task(self._sweep.run(), name="no-capacity sweep"))

    async def stop(self) -> None:
        tasks = [*self._tasks, *self._launcher.workers, *self._outlet.chores]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks, self._launcher.workers = [], []
        counted = self.client_counters()
        self._counted_before = (
            Counter(counted.errors),
            counted.retries,
            Counter(counted.watch_restarts),
            counted.credential_refreshes,
        )
        self._watching.watches = []
        await self._workloads.close()

    # -- capacity ----------------------------------------------------------------------------

    def free_gpus(self) -> int | None:
        """No fixed limit: the cluster provisions nodes, and the one GPU cap (the GPU budget)
        is the dispatcher's, counted from the store."""
        return None

    def total_gpus(self) -> int | None:
        return None

    def queue_status(self, invocation: Invocation) -> QueueStatus | None:
        """With Kueue admission, where a pending invocation's Workload waits for quota."""
        if self._kueue is None or invocation.state is not State.pending:
            return None
        place = self._kueue.position(invocation.id)
        return None if place is None else QueueStatus(*place)

    def max_payload_bytes(self) -> int:
        """The largest payload a launch can carry: it travels in a Secret beside the token."""
        return SECRET_DATA_LIMIT - CALLBACK_TOKEN_BYTES

    # -- operations --------------------------------------------------------------------------

    async def launch(self, request: LaunchRequest) -> None:
        await self._launcher.launch(request)

    async def cancel(self, invocation: Invocation) -> None:
        await self._stopper.cancel(invocation)

    async def withdraw(self, invocation: Invocation) -> bool:
        return await self._stopper.withdraw(invocation)

    async def preempt(self, invocation: Invocation) -> None:
        await self._stopper.preempt(invocation)

    async def adopt(self, active: Sequence[Invocation]) -> list[str]:
        """Re-attach to the Jobs of `active`. The watches' first lists (made in `start`) have
        replayed what the Jobs and pods did while the gateway was away; nothing is listed again.

        Returns the ids to launch again (followed.py `to_relaunch`). Launching is idempotent
        (409 on both), and this needs no right to read Secrets."""
        return self._followed.to_relaunch(active)

    def logs(self, invocation: Invocation, follow: bool, attempt: int | None = None) -> AsyncIterator[bytes]:
        return self._logs.logs(invocation, follow, attempt)
