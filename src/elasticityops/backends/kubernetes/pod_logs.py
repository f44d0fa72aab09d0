"""An invocation's logs on Kubernetes: the container log of one attempt's newest pod (each
attempt is a Job, or a bare pod, of its own, labelled with its attempt), read or followed
through the API server once the container has started. Kubernetes keeps a pod only so long: a
preempted attempt's Job is deleted at once, a pod goes with its lost node, a finished Job
after ttl_after_finished_seconds; logs asked of a pod that is gone are a NotFound that says so."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.labels import INVOCATION_LABEL
from elasticityops.backends.kubernetes.manifests import CONTAINER_NAME
from elasticityops.backends.kubernetes.observe import (
    Progress,
    attempt_of,
    container_started,
    job_over,
    pod_over,
)
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import NotFound
from elasticityops.domain.invocations import Invocation
from elasticityops.domain.ports import LogKeeper

# How often a log follow on a backend without watches asks the API whether the pod started.
_UNWATCHED_POLL_S = 1.0


class PodLogs:
    def __init__(
        self,
        clock: Clock,
        workloads: Workloads,
        followed: Followed,
        watched: Callable[[], bool],
        ttl_after_finished_s: int,
        keeper: LogKeeper | None = None,
    ) -> None:
        """`keeper`: where the logs of pods that went as they ended were kept (MultiKueue's
        workers, log_keeping.py): read once the pod is gone."""
        self._clock = clock
        self._workloads = workloads
        self._followed = followed
        self._watched = watched  # whether this backend's watches run (they update the progress)
        self._ttl_s = ttl_after_finished_s
        self._keeper = keeper

    async def logs(
        self, invocation: Invocation, follow: bool, attempt: int | None = None
    ) -> AsyncIterator[bytes]:
        """The log of `attempt` (None: the current one). Nothing for one with no pod yet; a
        NotFound for one whose pod is gone (see _gone)."""
        wanted = invocation.attempt if attempt is None else attempt
        follow = follow and wanted == invocation.attempt  # an earlier attempt is over
        # MultiKueue runs it in a worker: its pod is there (the cluster is the current attempt's).
        cluster = invocation.cluster if wanted == invocation.attempt else None
        api = self._workloads.api_for(cluster)
        pod = await self._wait_for_pod(api, invocation.id, wanted, follow)
        if pod is None:
            kept = (
                None if self._keeper is None else await self._keeper.kept_log(invocation.id, wanted, cluster)
            )
            if kept is not None:
                yield kept.shown()
                return
            if _gone(invocation, wanted):
                raise NotFound(
                    f"attempt {wanted} of {invocation.id} has no pod any more, so no logs: Kubernetes "
                    "deletes a preempted attempt's Job at once, a pod with its lost node, and a "
                    f"finished Job {self._ttl_s} s after its end (EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS "
                    "keeps them longer); read logs before, or from the cluster's log collection"
                )
            return
        params: dict[str, str | int] = {"container": CONTAINER_NAME}
        if follow:
            params["follow"] = "true"
        async for chunk in api.stream(f"{self._workloads.pods_path}/{pod}/log", params, follow):
            yield chunk

    async def _wait_for_pod(self, api: KubeApi, invocation_id: str, attempt: int, follow: bool) -> str | None:
        """The name of the newest pod of the invocation's `attempt`; with follow, once its
        container has started (there is nothing to follow before). None when it has no pod
        (not yet, or any more).

        A backend whose watches do not run (a gateway replica whose dispatcher does not: the
        Jobs are another replica's) has no progress to go by: it asks the API every
        `_UNWATCHED_POLL_S` and gives up once the invocation's Job has ended or is gone, which
        Kubernetes itself bounds (the Job's activeDeadlineSeconds is its function's timeout)."""
        w = self._workloads
        selector = {"labelSelector": f"{w.selector},{INVOCATION_LABEL}={invocation_id}"}
        while True:
            listed, _ = await api.list(w.pods_path, selector)
            pods = [pod for pod in listed if attempt_of(pod) == attempt]
            if pods:
                pods.sort(key=lambda p: (p.get("metadata") or {}).get("creationTimestamp", ""))
                newest = pods[-1]
                if not follow or container_started(newest):
                    return str(newest["metadata"]["name"])
            if not follow or self._followed.progress.get(invocation_id, Progress()).finished:
                return None  # never started, and never will
            if not self._watched():
                if w.bare_pods:
                    over = all(pod_over(pod) for pod in pods)
                else:
                    jobs, _ = await w.api.list(w.jobs_path, selector)
                    over = all(job_over(job) for job in jobs if attempt_of(job) == attempt)
                if over:
                    return None  # its Jobs ended (or were deleted) before a container started
                await self._clock.sleep(_UNWATCHED_POLL_S)
                continue
            # Waiting for the container to start: the watches update progress, so look at the
            # API again only when they say something changed (or after a few seconds).
            for _ in range(20):
                await self._clock.sleep(0.25)
                progress = self._followed.progress.get(invocation_id, Progress())
                if progress.started or progress.finished:
                    break


def _gone(invocation: Invocation, attempt: int) -> bool:
    """Whether an attempt without a pod had one: an earlier attempt (one preempted before its
    pod was made is told the same: there is no telling them apart once it is deleted), or the
    current one of an invocation that ended after it started. Otherwise it has none yet."""
    if attempt < invocation.attempt:
        return True
    return invocation.state.terminal and invocation.timeline.started is not None
