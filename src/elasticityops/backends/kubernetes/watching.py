"""The Kubernetes backend's watches: the invocations' pods, their Jobs (none with bare pods) and
Events, and, when it watches GPU nodes, the nodes (node_tracking.py); their first lists, made
before the backend's start returns; and what each Job, pod or Event seen means for the
invocation it belongs to (observe.py decides that; here it is checked against the attempt
followed and told)."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.decode import decode_event, decode_job, decode_pod
from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.gpu_nodes import NODES_PATH
from elasticityops.backends.kubernetes.kueue_watching import KueueWatching
from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, ATTEMPT_LABEL
from elasticityops.backends.kubernetes.log_keeping import LogKeeping
from elasticityops.backends.kubernetes.node_tracking import NodeTracking
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.observe import (
    Progress,
    attempt_of,
    attempt_of_job_name,
    container_started,
    events_field_selector,
    invocation_of,
    job_name_of_pod,
    observe_event,
    observe_job,
    observe_job_deleted,
    observe_job_event,
    observe_pod,
    observe_pod_deleted,
    run_span,
    waiting_for_a_node,
)
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.reaping import Reaper
from elasticityops.backends.kubernetes.watch import Handler, KindWatch
from elasticityops.backends.kubernetes.worker_runs import WorkerRuns
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.clock import Clock
from elasticityops.domain.events import BackendEvent, Finished, note_event
from elasticityops.domain.invocations import State
from elasticityops.domain.kueue_notes import RAN_AGAIN
from elasticityops.domain.node_seconds import WorkerRun

SUCCESS_GRACE_SECONDS = 2.0


class Watching:
    def __init__(
        self,
        clock: Clock,
        workloads: Workloads,
        followed: Followed,
        outlet: Outlet,
        nodes: NodeTracking | None,
        reaper: Reaper,
        kueue: KueueWatching | None = None,
        worker_kueue: Mapping[str, KueueWatching] | None = None,
        worker_nodes: Mapping[str, NodeTracking] | None = None,
        log_keeping: LogKeeping | None = None,
    ) -> None:
        self._clock = clock
        self._log_keeping = log_keeping  # MultiKueue's workers' pods: their logs kept as they end
        self._workloads = workloads
        self._followed = followed
        self._outlet = outlet
        self._nodes = nodes
        self._reaper = reaper
        self._kueue = kueue
        self._worker_kueue = dict(worker_kueue or {})  # by MultiKueue worker: its Workloads' watch
        self._worker_nodes = dict(worker_nodes or {})  # by MultiKueue worker: its GPU nodes
        # By invocation: the MultiKueue workers its attempt ran in (two: it ran twice), kept past
        # its end for the second run's charge.
        self._worker_runs = WorkerRuns()
        self.watches: list[KindWatch] = []
        # By id of a watch: what it waits for before it runs (a worker's pods: its nodes' list).
        self._after: dict[int, asyncio.Event] = {}

    async def start(self) -> None:
        """Make the watches and their first lists, so launches and adoptions that follow meet a
        complete picture."""
        if self._log_keeping is not None:
            self._log_keeping.clear()
        w = self._workloads
        api = w.api
        by_label = {"labelSelector": w.selector}
        workers = await self._worker_watches()
        node_watch = []
        if self._nodes is not None:
            await self._nodes.restore()
            # First, so a pod bound to a node in the first lists finds the node known.
            node_watch = [self._node_watch(api, self._nodes)]
        self.watches = [
            *node_watch,
            # Pods first, so the first list sees a finished pod (and its result) before its Job.
            self._pods_watch(api, self.on_pod),
            *(
                []
                if w.bare_pods
                else [KindWatch(api, w.jobs_path, by_label, self.on_job, self._clock, decode=decode_job)]
            ),
            self._events_watch(api),
            *workers,
            # After the Jobs': a Workload's note is about a Job already followed.
            *(
                []
                if self._kueue is None
                else [KindWatch(api, self._kueue.path, {}, self._kueue.on_workload, self._clock)]
            ),
        ]
        for watch in self.watches:
            if watch in workers:
                # A worker cluster down must not keep the gateway from starting: its watches make
                # their first list when they run (and keep trying, as after any lost watch).
                continue
            await watch.relist()

    def _node_watch(
        self, api: KubeApi, nodes: NodeTracking, listed: asyncio.Event | None = None
    ) -> KindWatch:
        """`listed`: set once its first list is in (what a worker's pod watch waits for)."""

        async def on_listed() -> None:
            await nodes.listed()
            if listed is not None:
                listed.set()

        return KindWatch(
            api,
            NODES_PATH,
            {"labelSelector": ACCELERATOR_LABEL},
            nodes.on_node,
            self._clock,
            on_listed=on_listed,
        )

    def _pods_watch(self, api: KubeApi, handler: Handler) -> KindWatch:
        w = self._workloads
        return KindWatch(
            api, w.pods_path, {"labelSelector": w.selector}, handler, self._clock, decode=decode_pod
        )

    def _events_watch(self, api: KubeApi) -> KindWatch:
        return KindWatch(
            api,
            self._workloads.events_path,
            # About Pods and Jobs (one watch per kind: Events of both), routine ones left out.
            {"fieldSelector": events_field_selector()},
            self.on_event,
            self._clock,
            track_deletes=False,
            list_everything=False,
            decode=decode_event,
        )

    async def _worker_watches(self) -> list[KindWatch]:
        """MultiKueue's workers: their GPU nodes (when nodes are watched), the pods of the Jobs
        it runs there, their Events (the worker's scheduler and autoscaler explain the wait
        there) and the workers' copies of the Workloads (each worker's Kueue says why it did or
        did not take the work). The manager has no pods of ours; its Jobs' status is the
        workers' mirrored."""
        w = self._workloads
        watches: list[KindWatch] = []
        self._after = {}
        for name in w.workers:
            api = w.worker_api(name)
            assert api is not None  # a configured worker
            pods = self._pods_watch(api, functools.partial(self.on_worker_pod, name))
            if (nodes := self._worker_nodes.get(name)) is not None:
                await nodes.restore()
                # The nodes' first list before the pods': a pod bound to a node then finds the
                # node known, as in the gateway's own cluster (each worker lists when it runs).
                listed = self._after[id(pods)] = asyncio.Event()
                watches.append(self._node_watch(api, nodes, listed))
            watches += [pods, self._events_watch(api)]
            if (kueue := self._worker_kueue.get(name)) is not None:
                watches.append(KindWatch(api, kueue.path, {}, kueue.on_workload, self._clock))
        return watches

    def run(self) -> list[asyncio.Task[None]]:
        """The watches, from where their first lists left off."""
        return [asyncio.create_task(self._run(w), name=f"watch {w.path}") for w in self.watches]

    async def _run(self, watch: KindWatch) -> None:
        if (first := self._after.get(id(watch))) is not None:
            await first.wait()
        await watch.run()

    def restarts(self) -> Counter[str]:
        """Watches started again, by why, since they were made."""
        restarts: Counter[str] = Counter()
        for watch in self.watches:
            stats = watch.stats
            restarts.update(ended=stats.resumes, expired=stats.expired, dropped=stats.dropped)
        return restarts

    async def on_job(self, kind: str, job: KubeObject) -> None:
        followed = self._followed
        name = (job.get("metadata") or {}).get("name", "")
        named = attempt_of_job_name(name)
        inv = invocation_of(job) or (None if named is None else named[0])
        if inv is None or followed.stale(inv, job):
            return
        labelled = ATTEMPT_LABEL in ((job.get("metadata") or {}).get("labels") or {})
        attempt = attempt_of(job) if labelled or named is None else named[1]
        latest = followed.attempts.get(inv)
        if kind == "DELETED" and latest is not None and attempt < latest:
            if not (job.get("status") or {}).get("active"):
                # A preempted attempt's Job gone with no pod of its own: no GPU was held.
                # (With a pod, that pod's own deletion says when its GPU is free.)
                gone = Finished.cancelled(self._clock.now(), "the preempted attempt's Job is gone")
                await self._outlet.emit(BackendEvent(inv, attempt=attempt, finished=gone))
            return
        if not followed.current(inv, attempt):
            return
        now = self._clock.now()
        progress = followed.progress.get(inv, Progress())
        if kind == "DELETED":
            event, _ = observe_job_deleted(inv, progress, now)
            followed.progress.pop(inv, None)
            followed.gpu_types.pop(inv, None)
            await self._outlet.deliver(event)
            followed.attempts.pop(inv, None)
            return
        progress = progress._replace(job_seen=True)
        progress = waiting_for_a_node(job, progress, now)
        event, after = observe_job(job, progress, now)
        if event is not None and event.finished is not None and event.finished.state is State.succeeded:
            # Complete, but the pod's own end (with the termination message, the small result)
            # may still be on its way through the pod watch: give it a moment to arrive first.
            if not progress.success_seen:
                self._outlet.chore(self._finish_later(inv, event))
            followed.progress[inv] = progress._replace(success_seen=True)
            return
        followed.progress[inv] = after
        await self._outlet.deliver(event)

    async def _finish_later(self, inv: str, event: BackendEvent) -> None:
        await self._clock.sleep(SUCCESS_GRACE_SECONDS)
        progress = self._followed.progress.get(inv)
        if progress is None or progress.finished:
            return
        self._followed.progress[inv] = progress._replace(finished=True)
        await self._outlet.deliver(event)

    async def on_pod(self, kind: str, pod: KubeObject) -> None:
        await self._on_pod(kind, pod, self._nodes)

    async def on_worker_pod(self, worker: str, kind: str, pod: KubeObject) -> None:
        """A pod in MultiKueue's `worker`: what it says of its invocation, as of a pod here, and
        that it runs in `worker` (a run MultiKueue moved away from a lost worker may go on there
        and end first: the record names where the run it ended with ran); its node is one of
        the worker's, followed by that worker's GPU node watch (when nodes are watched)."""
        if self._log_keeping is not None and kind != "DELETED":
            self._log_keeping.on_pod(worker, pod)
        nodes = self._worker_nodes.get(worker)
        await self._on_pod(kind, pod, nodes, worker)
        # After the pod's own event: a run that ended the invocation is then the record's own.
        await self._run_elsewhere(worker, pod, nodes)

    async def _run_elsewhere(self, worker: str, pod: KubeObject, nodes: NodeTracking | None) -> None:
        """A run of an attempt that ran in two workers (MultiKueue dispatched it again after
        taking it back), over: every run of it over so far is told, even long after the
        invocation's end, and the store charges what they held beyond the record's run as
        `run_again` (node_seconds.run_again_charge)."""
        inv = invocation_of(pod)
        if inv is None or not container_started(pod):
            return
        attempt = attempt_of(pod)
        self._worker_runs.ran(inv, attempt, worker)
        span = run_span(pod)
        uid = str((pod.get("metadata") or {}).get("uid", ""))
        if span is None or not uid:
            return
        capacity = None if nodes is None else nodes.capacity_of((pod.get("spec") or {}).get("nodeName"))
        runs = self._worker_runs.over(inv, attempt, uid, WorkerRun(worker, span[0], span[1], capacity))
        if runs:
            await self._outlet.emit(BackendEvent(inv, attempt=attempt, worker_runs=runs))

    async def _on_pod(
        self, kind: str, pod: KubeObject, nodes: NodeTracking | None, worker: str | None = None
    ) -> None:
        followed = self._followed
        bare = self._workloads.bare_pods
        if pod.get("gone") and nodes is not None:
            # Its node, known from before: a name is all a relist tells of a pod gone meanwhile.
            await nodes.pod_gone(str((pod.get("metadata") or {}).get("name", "")))
        named = self._whose(pod)
        if named is None:
            return
        inv, attempt = named
        if bare:
            self._reaper.track(kind, str((pod.get("metadata") or {}).get("name", "")), pod)
        if followed.stale(inv, pod):
            return
        latest = followed.attempts.get(inv)
        if kind == "DELETED" and latest is not None and attempt < latest:
            await self._preempted_pod_gone(inv, attempt, pod, nodes)
            return
        if inv not in followed.progress and (
            kind == "DELETED" or (pod.get("metadata") or {}).get("deletionTimestamp")
        ):
            # A pod going with its Job (TTL, cancel, preemption): nothing to tell.
            return
        if not followed.current(inv, attempt):
            return  # a preempted attempt's pod, while it goes
        before = followed.progress.get(inv, Progress())
        if bare:
            before = before._replace(job_seen=True)  # the pod is the workload: adoption needs no relaunch
        now = self._clock.now()
        event, followed.progress[inv] = observe_pod(pod, before, now)
        event, extra = await self._where(kind, inv, pod, event, nodes, worker)
        await self._outlet.deliver(event)
        await self._outlet.deliver(extra)
        if bare and kind == "DELETED":
            # Nothing outlives a bare pod (a Job's deletion says this in the Job mode).
            ended, followed.progress[inv] = observe_pod_deleted(inv, followed.progress[inv], now)
            await self._outlet.deliver(ended)
            followed.forget(inv)

    async def _where(
        self,
        kind: str,
        inv: str,
        pod: KubeObject,
        event: BackendEvent | None,
        nodes: NodeTracking | None,
        worker: str | None,
    ) -> tuple[BackendEvent | None, BackendEvent | None]:
        """The pod's event with what its node and its worker cluster (MultiKueue) add, and the
        node tracking's own event, if any."""
        extra = None
        if nodes is not None:
            event, extra = await nodes.on_pod(kind, inv, pod, event)
        if worker is not None:
            if event is not None and event.finished is not None and self._kueue is not None:
                # Before the end is told: a retry it starts would be the attempt followed then.
                self._kueue.run_ended(inv, attempt_of(pod), worker)
            again = self._ran_in(inv, attempt_of(pod), worker, pod)
            if event is not None:
                event = replace(event, cluster=worker)
            if again is not None:
                # Its own event, after the pod's: the pod's may carry a note of its own.
                await self._outlet.deliver(event)
                event = again
        return event, extra

    def _ran_in(self, inv: str, attempt: int, worker: str, pod: KubeObject) -> BackendEvent | None:
        """The note that the attempt's work runs in a second worker (MultiKueue dispatched it
        again after taking it back from a lost worker, whose run went on), when this pod is the
        first of `attempt` that ran in `worker`; None otherwise. A later attempt (a retry, a
        preemption's) starts afresh wherever it runs."""
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Running", "Succeeded", "Failed") or pod.get("gone"):
            return None
        if not self._worker_runs.ran(inv, attempt, worker):
            return None  # known already, or an older attempt's pod while it goes
        ran = self._worker_runs.workers(inv, attempt)
        if len(ran) < 2:
            return None
        where = ", ".join(sorted(ran))
        message = (
            f"Kueue: its work ran in {len(ran)} workers ({where}): MultiKueue took it back from one "
            "and dispatched it again, and the run there had begun too (a lost worker's goes on, "
            "an evicted one stops); both are this attempt of its one Job, and the run it does not "
            "end with is charged as run_again"
        )
        return note_event(inv, self._clock.now(), RAN_AGAIN, message)

    def _whose(self, pod: KubeObject) -> tuple[str, int] | None:
        """The invocation and attempt a pod runs; None for a pod that is not an invocation's (a
        warm-capacity placeholder: never ours to reap) or a bare one withdrawn."""
        name = str((pod.get("metadata") or {}).get("name", ""))
        inv = invocation_of(pod)
        if inv is None and self._workloads.bare_pods and pod.get("gone"):
            # Gone while the watch was down: a relist tells only the name, which is the Job's.
            named = attempt_of_job_name(name)
            if named is None or self._followed.withdrawn(named[0]):
                self._reaper.forget(name)
                return None
            return named
        return None if inv is None else (inv, attempt_of(pod))

    async def _preempted_pod_gone(
        self, inv: str, attempt: int, pod: KubeObject, nodes: NodeTracking | None
    ) -> None:
        """A preempted attempt's pod is gone: its GPU is free now (the dispatcher waits for that
        before the work it made way for counts it free). Its end, as the old attempt's, changes
        nothing in the store."""
        gone = Finished.cancelled(self._clock.now(), "the preempted attempt's pod is gone")
        await self._outlet.emit(BackendEvent(inv, attempt=attempt, finished=gone))
        if nodes is not None:
            await nodes.vacated(inv, pod)

    async def on_event(self, kind: str, event: KubeObject) -> None:
        if kind == "DELETED":
            return
        involved = event.get("involvedObject") or {}
        name = str(involved.get("name", ""))
        if involved.get("kind") == "Job":
            observe = observe_job_event
        elif involved.get("kind") == "Pod":
            # A bare pod has its Job's name; a Job's pods add a suffix.
            observe, name = observe_event, (name if self._workloads.bare_pods else job_name_of_pod(name))
        else:
            return
        named = attempt_of_job_name(name)
        followed = self._followed
        if (
            named is None
            or named[0] not in followed.progress
            or followed.attempts.get(named[0], 0) != named[1]
        ):
            return
        inv = named[0]
        told, followed.progress[inv] = observe(event, inv, followed.progress[inv], self._clock.now())
        await self._outlet.deliver(told)
