"""Which backend runs invocations: a small registry from name to factory, so a new backend
(kubernetes) plugs in with one `register()` call and `eops serve --backend NAME` finds it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Protocol

from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.domain.invocations import callback_token
from elasticityops.domain.ports import Backend, LogKeeper, NodeHistorySource, PayloadSource
from elasticityops.ha.elector import LeaseStore
from elasticityops.headroom.controller import WarmUnits
from elasticityops.settings import Settings


class BackendStore(NodeHistorySource, PayloadSource, LogKeeper, Protocol):
    """What a backend reads of the store: its GPU node records, and payloads (a Secret made
    again where MultiKueue runs the Job); and where it keeps the logs of pods that go as they
    end (MultiKueue's workers)."""


BackendFactory = Callable[[Settings, Clock, BackendStore], Backend]

_FACTORIES: dict[str, BackendFactory] = {}


def register(name: str, factory: BackendFactory) -> None:
    _FACTORIES[name] = factory


def names() -> list[str]:
    return sorted(_FACTORIES)


def build_backend(settings: Settings, clock: Clock, store: BackendStore) -> Backend:
    """The backend of `settings`; `store`: where a backend keeps what must outlive it (the
    Kubernetes backend's GPU node records)."""
    factory = _FACTORIES.get(settings.backend)
    if factory is None:
        raise InvalidInput(
            [
                FieldProblem(
                    "backend",
                    f"unknown backend {settings.backend!r}",
                    f"use one of: {', '.join(names())} (--backend / EOPS_BACKEND)",
                )
            ]
        )
    return factory(settings, clock, store)


def _local(settings: Settings, clock: Clock, store: BackendStore) -> Backend:
    # Imported on use: the local backend pulls in process handling the API does not need.
    from elasticityops.backends.local.backend import LocalBackend

    return LocalBackend(replace(settings.local, run_dir=settings.data_dir / "runs"), clock)


register("local", _local)


def _kubernetes(settings: Settings, clock: Clock, store: BackendStore) -> Backend:
    # Issue 4: one GPU Job per invocation. Imported on use (the HTTP client and lightkube).
    from elasticityops.backends.kubernetes.backend import KubernetesBackend

    secret = settings.dispatch.server_secret

    async def launch_material(invocation_id: str) -> tuple[bytes, str]:
        return (await store.get_payload(invocation_id) or b""), callback_token(secret, invocation_id)

    watch_nodes = settings.headroom.enabled or settings.kubernetes.node_costs == "watch"
    return KubernetesBackend(
        settings.kubernetes,
        clock,
        watch_gpu_nodes=watch_nodes,
        node_history=store,
        launch_material=launch_material,
        log_keeper=store,
    )


register("kubernetes", _kubernetes)


def build_lease_store(settings: Settings, clock: Clock) -> tuple[LeaseStore, Callable[[], Awaitable[None]]]:
    """The Lease of --leader-elect on the cluster, and how to close its client. Its own client,
    with no retries of its own: a renewal must not queue behind a burst's Job creations in the
    backend's rate limiter, nor sit in back-off past the renew deadline (the elector retries
    every retry period, and a late answer is as good as none)."""
    from elasticityops.backends.kubernetes.api import KubeApi
    from elasticityops.backends.kubernetes.lease_store import KubeLeaseStore

    kube = replace(settings.kubernetes, max_retries=0, concurrency=2, qps=50.0, burst=50)
    api = KubeApi.connect(kube, clock)
    namespace = settings.leader.lease_namespace or settings.kubernetes.namespace
    return KubeLeaseStore(api, namespace, settings.leader.lease_name), api.close


def build_warm_units(settings: Settings, backend: Backend, clock: Clock) -> WarmUnits:
    """The warm units of `backend` for the headroom controller (--headroom); InvalidInput for a
    backend that has none."""
    from elasticityops.backends.kubernetes.backend import KubernetesBackend

    if isinstance(backend, KubernetesBackend) and backend.gpu_nodes is not None:
        from elasticityops.backends.kubernetes.warm_units import KubernetesWarmUnits

        return KubernetesWarmUnits(
            backend.api,
            settings.kubernetes,
            backend.gpu_nodes,
            clock,
            mechanism=settings.kubernetes.headroom_mechanism,
            reaction_s=settings.headroom.reaction_s,
            scale_down_after_s=settings.headroom.scale_down_after_s,
        )
    from elasticityops.backends.local.backend import LocalBackend

    if isinstance(backend, LocalBackend):
        from elasticityops.backends.local.warm_units import LocalWarmUnits

        return LocalWarmUnits(backend)
    raise InvalidInput(
        [
            FieldProblem(
                "headroom",
                f"the {backend.name} backend cannot hold warm capacity",
                "use --backend kubernetes or local, or --headroom none",
            )
        ]
    )
