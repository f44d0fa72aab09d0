"""Checks `eops serve --backend kubernetes` makes once before it starts serving.

Without its namespace or its PriorityClasses every Job the gateway creates is refused by the API
server, and every invocation ends as launch_error; one clear message at start names the fix
instead.
"""

from __future__ import annotations

import asyncio

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.labels import ACCELERATOR_LABEL, PRIORITY_CLASSES
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
    settings: KubernetesSettings,
    seconds: float,
    *,
    need_buffers: bool = False,
    budget_types: set[str] | None = None,
) -> list[str]:
    """What the cluster lacks for this gateway's Jobs (and, with `need_buffers`, for its warm
    capacity as CapacityBuffers), each as the message that names its fix."""
    from elasticityops.backends.kubernetes.warm_units import buffers_served

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
            if budget_types:
                offered = await provisionable_gpu_types(api)
                said = None if offered is None else budget_types_problem(budget_types, offered)
                if said:
                    problems.append(said)
            return problems

        return await asyncio.wait_for(look(), seconds)
    finally:
        await api.close()


# The dev cluster's autoscaler (kwok provider) reads its node groups from this ConfigMap: one
# template Node per group. GKE's node auto-provisioning has no such object (it may create a
# pool of any type within its limits), so where it is absent nothing is refused.
KWOK_TEMPLATES = "/api/v1/namespaces/kube-system/configmaps/kwok-provider-templates"


def gpu_types_of_templates(text: str) -> set[str]:
    """The GPU types of the template Nodes in the kwok provider's `templates` text (YAML)."""
    import yaml

    doc = yaml.safe_load(text) or {}
    items = doc.get("items") if isinstance(doc, dict) else None
    types = set()
    for node in items or ():
        labels = ((node or {}).get("metadata") or {}).get("labels") or {}
        kind = labels.get(ACCELERATOR_LABEL)
        if isinstance(kind, str) and kind:
            types.add(kind)
    return types


def budget_types_problem(budget_types: set[str], offered: set[str]) -> str | None:
    """Why a per-type GPU budget names a type the cluster cannot provision, or None."""
    missing = sorted(budget_types - offered)
    if not missing:
        return None
    have = ", ".join(sorted(offered)) or "none"
    return (
        f"--gpu-budget names {', '.join(missing)}, for which the cluster has no node group (its "
        f"autoscaler can add: {have}): drop it from the budget, or add a node group of that type"
    )


async def provisionable_gpu_types(api: KubeApi) -> set[str] | None:
    """The GPU types the cluster's node groups (and its nodes) offer, where the autoscaler
    says (the dev cluster's kwok provider); None where it cannot be known (GKE's NAP)."""
    try:
        cm = await api.get(KWOK_TEMPLATES)
    except NotFound:
        return None
    offered = gpu_types_of_templates(str((cm.get("data") or {}).get("templates", "")))
    nodes, _ = await api.list("/api/v1/nodes", {"labelSelector": ACCELERATOR_LABEL})
    for node in nodes:
        kind = ((node.get("metadata") or {}).get("labels") or {}).get(ACCELERATOR_LABEL)
        if isinstance(kind, str) and kind:
            offered.add(kind)
    return offered
