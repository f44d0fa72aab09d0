"""The Kubernetes backend's sweep, every few seconds: an invocation whose pod found no node within
the provisioning timeout fails (no_capacity), a bare pod at its function's timeout ends
(timeout), and the bare pods past their TTL are deleted (reaping.py)."""

from __future__ import annotations

from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.observe import no_capacity, overdue, past_deadline, pod_timed_out
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.reaping import Reaper
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.clock import Clock
from elasticityops.domain.events import BackendEvent


class Sweep:
    def __init__(
        self, settings: KubernetesSettings, clock: Clock, followed: Followed, outlet: Outlet, reaper: Reaper
    ) -> None:
        self._settings = settings
        self._clock = clock
        self._followed = followed
        self._outlet = outlet
        self._reaper = reaper

    async def run(self) -> None:
        timeout = self._settings.provisioning_timeout_seconds
        period = max(0.5, min(5.0, timeout / 4))
        followed = self._followed
        while True:
            await self._clock.sleep(period)
            now = self._clock.now()
            for inv, progress in list(followed.progress.items()):
                if past_deadline(progress, now):
                    # A bare pod at its timeout (waiting for a node included): the kubelet's own
                    # deadline counts only from its start on a node, and a Job's would be here.
                    followed.progress[inv] = progress._replace(finished=True)
                    await self._outlet.deliver(BackendEvent(inv, finished=pod_timed_out(now, progress)))
                    self._outlet.stop_job(inv)
                elif overdue(progress, now, timeout):
                    followed.progress[inv] = progress._replace(finished=True)
                    await self._outlet.deliver(no_capacity(inv, progress, now, timeout))
            if self._reaper.ended:
                await self._reaper.reap(now.timestamp())
