"""GPUs held now, per GPU type, as admission counts them: one grouped read of the store and the
specs from the function cache. The metrics and the headroom controller read the same figure."""

from __future__ import annotations

from collections import Counter

from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.domain.gpus_held import by_version, gpus_held_by_cluster, gpus_held_by_type
from elasticityops.domain.ports import InvocationStore


async def gpus_in_use(store: InvocationStore, functions: FunctionCache) -> Counter[str]:
    """GPUs held by pending and running invocations, per GPU type, as admission counts them (one
    grouped read of the store, the specs from the cache): the metrics and the headroom
    controller read the same figure."""
    active = await store.active_counts_by_type()
    return gpus_held_by_type(active, await functions.versions(by_version(active)))


async def gpus_in_use_by_cluster(store: InvocationStore, functions: FunctionCache) -> dict[str, Counter[str]]:
    """GPUs held per cluster (MultiKueue's workers) and GPU type, by the invocations whose record
    names their cluster; empty where none does (one cluster)."""
    active = await store.active_counts_by_cluster()
    if not active:
        return {}
    versions = await functions.versions({(name, version) for _where, name, version, _kind in active})
    return gpus_held_by_cluster(active, versions)
