"""GPUs held by pending and running invocations, counted from the store's active counts and the
spec of the version each runs: admission, preemption, the queue's explanation, the metrics and
the headroom controller all count them here. Pure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from elasticityops.domain.functions import FunctionSpec

ActiveCounts = Mapping[tuple[str, int, str | None], int]
"""Pending and running invocations by (function, spec version, GPU type admitted on; None for
rows from before the gateway kept it), as `Store.active_counts_by_type` counts them."""
UNKNOWN_GPU_TYPE = "unknown"
"""The type GPUs held by a version whose spec is not kept count under: no per-type cap names it,
the overall budget counts it."""


def gpus_held_by_type(active: ActiveCounts, versions: Mapping[tuple[str, int], FunctionSpec]) -> Counter[str]:
    """GPUs held by pending and running invocations, per GPU type: from the store's active counts
    per (function, version, type) and the gpu count of the version each runs, under the type it
    was admitted on (its spec's first type for a row from before that was kept; one GPU each of
    UNKNOWN_GPU_TYPE, at least, for a version whose spec is not kept)."""
    held: Counter[str] = Counter()
    for (name, version, kind), count in active.items():
        spec = versions.get((name, version))
        if spec is None:
            held[kind or UNKNOWN_GPU_TYPE] += count
        else:
            held[kind or spec.gpu.type] += count * spec.gpu.count
    return held


def by_version(active: ActiveCounts) -> dict[tuple[str, int], int]:
    """The active counts per (function, version), all GPU types together."""
    out: Counter[tuple[str, int]] = Counter()
    for (name, version, _kind), count in active.items():
        out[(name, version)] += count
    return dict(out)


def gpus_held_by_cluster(
    active: Mapping[tuple[str, str, int, str | None], int], versions: Mapping[tuple[str, int], FunctionSpec]
) -> dict[str, Counter[str]]:
    """GPUs held per cluster and GPU type, from the store's active counts per (cluster,
    function, version, type), counted as `gpus_held_by_type` counts them."""
    per: dict[str, dict[tuple[str, int, str | None], int]] = {}
    for (cluster, name, version, kind), count in active.items():
        per.setdefault(cluster, {})[(name, version, kind)] = count
    return {cluster: gpus_held_by_type(counts, versions) for cluster, counts in sorted(per.items())}
