"""TTL reaping of bare pods (the `pod` workload), what a Job's ttlSecondsAfterFinished does for
a Job: when each of our bare pods ended (from the pod watch, whose first list refills it after a
restart), and its deletion ttl_after_finished_seconds later; the logs stay readable until then."""

from __future__ import annotations

import asyncio
import logging

from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.observe import pod_ended_at
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.errors import EopsError

log = logging.getLogger(__name__)

REAP_CONCURRENCY = 16  # ended bare pods deleted at once (the client's rate limit still applies)


class Reaper:
    def __init__(self, settings: KubernetesSettings, workloads: Workloads) -> None:
        self._settings = settings
        self._workloads = workloads
        self.ended: dict[str, float] = {}  # ended bare pods and when they ended, until deleted

    def track(self, kind: str, name: str, pod: KubeObject) -> None:
        """Remember when each of our bare pods ended, for `reap`."""
        if kind == "DELETED" or (pod.get("metadata") or {}).get("deletionTimestamp"):
            self.ended.pop(name, None)
            return
        ended = pod_ended_at(pod)
        if ended is not None and name not in self.ended:
            self.ended[name] = ended.timestamp()

    def forget(self, name: str) -> None:
        self.ended.pop(name, None)

    async def reap(self, now: float) -> None:
        """Delete the bare pods that ended ttl_after_finished_seconds ago; their Secrets go with
        them (owned). A pod that would not go now is tried again at the next sweep."""
        ttl = self._settings.ttl_after_finished_seconds
        due = [name for name, ended in self.ended.items() if now - ended >= ttl]
        # Side by side, as the launches are: a burst's thousands of pods end within seconds, and
        # one delete after another would hold the sweep (and every deadline it checks) that long.
        gate = asyncio.Semaphore(REAP_CONCURRENCY)
        w = self._workloads

        async def delete(name: str) -> None:
            async with gate:
                try:
                    await w.api.delete(f"{w.pods_path}/{name}", "Background")
                    self.ended.pop(name, None)
                except EopsError as exc:
                    log.warning("could not delete the ended pod %s: %s", name, exc)

        await asyncio.gather(*(delete(name) for name in due))
