"""MultiKueue on Kueue v0.17.0: a manager's Job can keep counting a pod (`status.active`) that no
longer exists anywhere. MultiKueue mirrors each worker copy's status onto the manager's Job; when
the worker's Kueue evicts the work (a stocked-out region: no node within waitForPodsReady) and
MultiKueue deletes that copy before the copy's suspension was mirrored back, the last word stays
`active: 1` (kueue#15380 reports it for RayJobs; seen here with batch Jobs, the stockout bench
at 200 invocations leaving 99 so). Kueue evicting the manager's Workload waits for its Job to be
inactive before it frees the quota, so the work never goes back to the queue.

The gateway made the Job; once its Workload has stayed evicted with its quota held for
STALE_AFTER_S, in no worker, and the Job is suspended yet still counts a pod, the gateway writes
the count MultiKueue would have mirrored (`active: 0`), and Kueue's eviction finishes."""

from __future__ import annotations

import logging

from elasticityops.backends.kubernetes.labels import MULTIKUEUE_CONTROLLER
from elasticityops.backends.kubernetes.manifests import job_name
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.errors import EopsError, NotFound

log = logging.getLogger(__name__)

STALE_AFTER_S = 20.0
"""How long a Workload stays evicted with its quota held before its Job is looked at: Kueue's
own eviction takes well under a second once the Job is inactive."""


def stale_active(job: KubeObject) -> bool:
    """A MultiKueue Job suspended (Kueue stopped it) that still counts a pod."""
    spec = job.get("spec") or {}
    active = (job.get("status") or {}).get("active")
    return (
        spec.get("managedBy") == MULTIKUEUE_CONTROLLER
        and spec.get("suspend") is True
        and isinstance(active, int)
        and active > 0
    )


class StaleJobs:
    def __init__(self, workloads: Workloads) -> None:
        self._workloads = workloads

    async def clear(self, invocation_id: str, attempt: int) -> bool:
        """Set the Job's pod count to what it is (none) where it is stale; whether it was."""
        w = self._workloads
        path = f"{w.jobs_path}/{job_name(invocation_id, attempt)}"
        try:
            job = await w.api.get(path)
            if not stale_active(job):
                return False
            await w.api.patch(f"{path}/status", {"status": {"active": 0, "ready": 0}})
        except NotFound:
            return False
        except EopsError as exc:
            log.warning("could not clear the stale pod count of %s's Job: %s", invocation_id, exc)
            return False
        return True
