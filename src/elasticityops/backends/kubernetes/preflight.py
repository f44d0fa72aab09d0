"""Checks `eops serve --backend kubernetes` makes once before it starts serving.

Without its namespace or its PriorityClasses every Job the gateway creates is refused by the API
server, and every invocation ends as launch_error; one clear message at start names the fix
instead.
"""

from __future__ import annotations

import asyncio

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.labels import PRIORITY_CLASSES
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.errors import NotFound

PRIORITY_CLASS_PATH = "/apis/scheduling.k8s.io/v1/priorityclasses"


async def missing_priority_classes(api: KubeApi) -> list[str]:
    """The PriorityClasses the gateway's Jobs name that the cluster does not have.

    Only a 404 counts as missing; any other failure (unreachable, forbidden) propagates, since
    it says nothing about whether they exist."""
    missing = []
    for name in PRIORITY_CLASSES.values():
        try:
            await api.get(f"{PRIORITY_CLASS_PATH}/{name}")
        except NotFound:
            missing.append(name)
    return missing


async def namespace_missing(api: KubeApi, namespace: str) -> bool:
    """The namespace the gateway's Jobs go into is not there (only a 404 says so)."""
    try:
        await api.get(f"/api/v1/namespaces/{namespace}")
    except NotFound:
        return True
    return False


def namespace_message(namespace: str) -> str:
    return (
        f"the cluster has no namespace {namespace!r}, where this gateway creates its Jobs: create "
        f"it (`kubectl create namespace {namespace}`; `eops dev-cluster up` makes 'elasticityops'), "
        "or pass --namespace NAME"
    )


def missing_message(missing: list[str]) -> str:
    return (
        f"the cluster has no PriorityClass {', '.join(missing)}, which every Job of this gateway "
        "names: on the dev cluster run `eops dev-cluster up` (it installs them), on GKE apply the "
        "priorityclasses.yaml that `eops render gke` writes (or `eops render deploy`)"
    )


BUFFERS_MESSAGE = (
    "--headroom-mechanism buffer needs CapacityBuffers (autoscaling.x-k8s.io/v1beta1), which this "
    "cluster does not serve: use --headroom-mechanism placeholders, or a cluster whose autoscaler "
    "serves them (GKE from 1.35.2-gke.1842000; `eops dev-cluster up` installs the CRD)"
)


async def cluster_problems(
    settings: KubernetesSettings, seconds: float, *, need_buffers: bool = False
) -> list[str]:
    """What the cluster lacks for this gateway's Jobs (and, with `need_buffers`, for its warm
    capacity as CapacityBuffers), each as the message that names its fix."""
    from elasticityops.backends.kubernetes.warm_capacity import buffers_served

    api = KubeApi.connect(settings)
    try:

        async def look() -> list[str]:
            problems = []
            if await namespace_missing(api, settings.namespace):
                problems.append(namespace_message(settings.namespace))
            missing = await missing_priority_classes(api)
            if missing:
                problems.append(missing_message(missing))
            if need_buffers and not await buffers_served(api):
                problems.append(BUFFERS_MESSAGE)
            return problems

        return await asyncio.wait_for(look(), seconds)
    finally:
        await api.close()
