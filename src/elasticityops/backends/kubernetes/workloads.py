"""Where the invocations' objects live in the gateway's namespace (their Jobs or, with the `pod`
workload, bare pods; pods, payload Secrets, Events), and the client that reaches them: made on
first use, and made again after a stop closed it."""

from __future__ import annotations

from dataclasses import replace

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.labels import selector
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.worker_clusters import parse_workers
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import PermanentError


class Workloads:
    def __init__(self, settings: KubernetesSettings, clock: Clock, api: KubeApi | None) -> None:
        self._settings = settings
        self._clock = clock
        self._api = api
        ns = settings.namespace
        self.jobs_path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        self.pods_path = f"/api/v1/namespaces/{ns}/pods"
        # Bare pods: the gateway makes each invocation's pod itself, so a throttled Job
        # controller (a stock controller-manager's 20 QPS) does not pace a burst.
        self.bare_pods = settings.workload == "pod"
        self.workload_path = self.pods_path if self.bare_pods else self.jobs_path
        self.kind = "pod" if self.bare_pods else "Job"  # as messages name the workload
        self.secrets_path = f"/api/v1/namespaces/{ns}/secrets"
        self.events_path = f"/api/v1/namespaces/{ns}/events"
        self.selector = selector(settings.instance)
        # MultiKueue's workers (settings.py checked the list): their clients, made on first use.
        self.workers: dict[str, str] = parse_workers(settings.workers)[0]
        self._worker_apis: dict[str, KubeApi] = {}

    @property
    def api(self) -> KubeApi:
        if self._api is None:
            self._api = KubeApi.connect(self._settings, self._clock)
        return self._api

    @property
    def connected(self) -> KubeApi | None:
        """The client if one is made, without making one."""
        return self._api

    def worker_api(self, name: str) -> KubeApi | None:
        """The client of MultiKueue's worker `name`; None for a worker not configured."""
        path = self.workers.get(name)
        if path is None:
            return None
        api = self._worker_apis.get(name)
        if api is None:
            settings = replace(self._settings, kubeconfig=path, context=None)
            try:
                api = self._worker_apis[name] = KubeApi.connect(settings, self._clock)
            except PermanentError as exc:
                raise PermanentError(f"worker cluster {name} ({path}): {exc}") from None
        return api

    def api_for(self, cluster: str | None) -> KubeApi:
        """Where an invocation's pod is: the worker MultiKueue runs it in, else this cluster."""
        worker = None if cluster is None else self.worker_api(cluster)
        return self.api if worker is None else worker

    @property
    def connected_workers(self) -> list[KubeApi]:
        return list(self._worker_apis.values())

    async def close(self) -> None:
        if self._api is not None:
            await self._api.close()
            self._api = None
        workers, self._worker_apis = list(self._worker_apis.values()), {}
        for api in workers:
            await api.close()
