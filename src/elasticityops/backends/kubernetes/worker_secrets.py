"""MultiKueue copies an invocation's Job to the worker cluster that admits it, not the payload
Secret its pod mounts (the pod would wait in ContainerCreating for it). So once the manager's
Workload names the worker, the gateway makes the Secret there, rebuilt from what it was made of
(the stored payload, the token derived from the invocation), owned by the worker's copy of the
Job so that it goes with it (MultiKueue deletes that copy when the work ends). Idempotent: a
restart that sees the same Workload again finds the Secret there (409)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.manifests import build_payload_secret, job_name, owned_by
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import Conflict, EopsError, NotFound
from elasticityops.domain.events import note_event

log = logging.getLogger(__name__)

LaunchMaterial = Callable[[str], Awaitable[tuple[bytes, str]]]
"""An invocation's payload and callback token, as its launch had them (the store's payload,
the token derived from its id)."""

WORKER_SECRET = "WorkerSecret"  # the note kind of a Secret that could not be put in its worker
# MultiKueue makes the worker's Job right after the worker admits the Workload; a worker that
# does not show it within this long has not got it (or is not reachable).
JOB_WAIT_SECONDS = 120.0
_POLL_SECONDS = 0.5


class WorkerSecrets:
    def __init__(
        self,
        settings: KubernetesSettings,
        clock: Clock,
        workloads: Workloads,
        outlet: Outlet,
        material: LaunchMaterial | None,
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._workloads = workloads
        self._outlet = outlet
        self._material = material

    def place(self, invocation_id: str, attempt: int, cluster: str) -> None:
        """Put the attempt's payload Secret in `cluster`, in the background."""
        self._outlet.chore(self._place(invocation_id, attempt, cluster))

    async def _place(self, invocation_id: str, attempt: int, cluster: str) -> None:
        api = self._workloads.worker_api(cluster)
        if api is None or self._material is None:
            await self._say(
                invocation_id,
                f"MultiKueue runs it in cluster {cluster}, which this gateway has no kubeconfig of: "
                "its pod there cannot mount its payload, and its progress, result and logs are not "
                f"seen (add {cluster}=KUBECONFIG to --kube-workers / EOPS_KUBE_WORKERS)",
            )
            return
        name = job_name(invocation_id, attempt)
        try:
            uid = await self._worker_job_uid(api, name)
            if uid is None:
                await self._say(
                    invocation_id,
                    f"MultiKueue's copy of Job {name} did not appear in cluster {cluster} within "
                    f"{JOB_WAIT_SECONDS:.0f} s: its payload Secret was not put there",
                )
                return
            payload, token = await self._material(invocation_id)
            secret = build_payload_secret(invocation_id, payload, token, uid, self._settings, attempt)
            await api.create(self._workloads.secrets_path, owned_by(secret, uid))
        except Conflict:
            return  # put there already (a restart, or a Workload seen again)
        except EopsError as exc:
            log.warning("could not put the payload Secret of %s in %s: %s", invocation_id, cluster, exc)
            await self._say(
                invocation_id, f"could not put its payload Secret in cluster {cluster}: {exc.message}"
            )

    async def _worker_job_uid(self, api: KubeApi, name: str) -> str | None:
        deadline = self._clock.monotonic() + JOB_WAIT_SECONDS
        while True:
            try:
                job = await api.get(f"{self._workloads.jobs_path}/{name}")
                return str((job.get("metadata") or {}).get("uid") or "") or None
            except NotFound:
                if self._clock.monotonic() >= deadline:
                    return None
                await self._clock.sleep(_POLL_SECONDS)

    async def _say(self, invocation_id: str, message: str) -> None:
        await self._outlet.deliver(note_event(invocation_id, self._clock.now(), WORKER_SECRET, message))
