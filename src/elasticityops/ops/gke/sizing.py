"""Every number of the render (limits, quota, pools, IP ranges) and the rule that produced it,
which the script's header repeats so the reviewer sees why."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from elasticityops.ops.gke.inputs import GPU_SHAPES, GkeInputs

NODES_PER_POOL_PER_ZONE = 1_000
# GPU nodes run one job pod plus a handful of DaemonSets; 32 pods per node gives each node a /26
# and keeps the pod range small enough for thousands of nodes.
MAX_PODS_PER_NODE = 32
SYSTEM_MACHINE_TYPE = "e2-standard-4"
SYSTEM_NODES_PER_ZONE = 1
SYSTEM_NODE_VCPUS = 4
SYSTEM_NODE_MEMORY_GB = 16


@dataclass(frozen=True)
class GkeSizing:
    """Every number in the render and the rule that produced it."""

    gpu_limit: int
    fallback_gpu_limit: int
    pool_zones_needed: int
    pool_zones_available: int
    baseline_per_zone: int
    baseline_total: int
    system_nodes: int
    max_nodes: int
    nap_cpu_limit: int
    nap_memory_limit_gb: int
    pod_range_prefix: int
    node_subnet_prefix: int
    quota: dict[str, int]
    rules: tuple[str, ...]


def _step(peak: int) -> int:
    """5 in the peak's second significant digit: 4,000 -> 500, 60 -> 5."""
    return int(5 * 10 ** max(0, len(str(peak)) - 2))


def gpu_limit_for_peak(peak: int, margin_pct: int = 10) -> int:
    """peak x (1 + margin), rounded up to a step of 5 in the peak's second significant digit."""
    wanted = math.ceil(peak * (100 + margin_pct) / 100)
    step = _step(peak)
    return int(math.ceil(wanted / step) * step)


def pool_zones_needed(peak: int) -> int:
    return math.ceil(peak / NODES_PER_POOL_PER_ZONE)


def _prefix_for(count: int, reserved: int = 0) -> int:
    """Smallest IPv4 prefix whose block holds `count + reserved` addresses."""
    return 32 - math.ceil(math.log2(count + reserved))


_NODE_POD_PREFIX = _prefix_for(2 * MAX_PODS_PER_NODE)  # GKE gives each node twice max-pods addresses


def size(inputs: GkeInputs) -> GkeSizing:
    shape = GPU_SHAPES[inputs.gpu_type]
    gpu_limit = gpu_limit_for_peak(inputs.peak, inputs.margin_pct)
    zones = len(inputs.zones)
    # The fallback GPU may absorb a stockout of the primary, not the whole peak on top of it:
    # the CPU limit below caps both together at gpu_limit machines.
    fallback_limit = gpu_limit if inputs.fallback_gpu_type else 0
    system_nodes = SYSTEM_NODES_PER_ZONE * zones
    baseline_per_zone = math.ceil(inputs.baseline / zones) if inputs.baseline else 0
    max_nodes = gpu_limit + system_nodes
    biggest = max(
        [GPU_SHAPES[inputs.gpu_type]]
        + ([GPU_SHAPES[inputs.fallback_gpu_type]] if inputs.fallback_gpu_type else []),
        key=lambda s: s.memory_gb,
    )
    sizing = GkeSizing(
        gpu_limit=gpu_limit,
        fallback_gpu_limit=fallback_limit,
        pool_zones_needed=pool_zones_needed(inputs.peak),
        pool_zones_available=zones,
        baseline_per_zone=baseline_per_zone,
        baseline_total=baseline_per_zone * zones,
        system_nodes=system_nodes,
        max_nodes=max_nodes,
        nap_cpu_limit=gpu_limit * max(shape.vcpus, biggest.vcpus) + system_nodes * SYSTEM_NODE_VCPUS,
        nap_memory_limit_gb=gpu_limit * biggest.memory_gb + system_nodes * SYSTEM_NODE_MEMORY_GB,
        pod_range_prefix=_NODE_POD_PREFIX - math.ceil(math.log2(max_nodes)),
        node_subnet_prefix=_prefix_for(max_nodes, reserved=4),  # GCP reserves 4 addresses per subnet
        quota=_quota(inputs, gpu_limit, fallback_limit, system_nodes),
        rules=(),
    )
    return replace(sizing, rules=_rules(inputs, sizing))


def _quota(inputs: GkeInputs, gpu_limit: int, fallback_limit: int, system_nodes: int) -> dict[str, int]:
    """The regional quota to request, per metric."""
    shape = GPU_SHAPES[inputs.gpu_type]
    # With --spot the ComputeClass falls back from spot to on-demand (and the baseline pool is
    # on-demand), so both metrics must cover the limit: the fallback is useless without quota.
    quota = {shape.quota_metric: gpu_limit}
    if inputs.spot:
        quota[shape.spot_quota_metric] = gpu_limit
    if inputs.fallback_gpu_type:
        fb = GPU_SHAPES[inputs.fallback_gpu_type]
        quota[fb.quota_metric] = fallback_limit
        if inputs.spot:
            quota[fb.spot_quota_metric] = fallback_limit
    if shape.machine_type.startswith("n1-"):
        # N1 and the E2 system pool both count against the regional CPUS quota.
        quota["CPUS"] = gpu_limit * shape.vcpus + system_nodes * SYSTEM_NODE_VCPUS
    return quota


def _rules(inputs: GkeInputs, s: GkeSizing) -> tuple[str, ...]:
    """The sizing's numbers, each with the rule that produced it."""
    zones = s.pool_zones_available
    return (
        f"GPU limit {s.gpu_limit} = {inputs.peak} peak x {100 + inputs.margin_pct}%, rounded up to a step "
        f"of {_step(inputs.peak)}: margin for retried requests and nodes still draining.",
        f"NAP CPU limit {s.nap_cpu_limit} vCPU / memory {s.nap_memory_limit_gb} GB = {s.gpu_limit} GPU "
        f"machines + {s.system_nodes} system nodes: NAP limits count every node pool, and the CPU limit "
        "is what caps primary + fallback together.",
        f"Pool-zones: {inputs.peak} nodes need {s.pool_zones_needed} at "
        f"{NODES_PER_POOL_PER_ZONE} nodes per node pool per zone; {zones} zone(s) give {zones} per "
        "auto-provisioned pool.",
        f"Baseline: {inputs.baseline} nodes over {zones} zone(s) = {s.baseline_per_zone} per zone "
        f"({s.baseline_total} in total).",
        f"Pod range /{s.pod_range_prefix} = {s.max_nodes} nodes x /{_NODE_POD_PREFIX} ({MAX_PODS_PER_NODE} "
        f"pods per node); node subnet /{s.node_subnet_prefix} for {s.max_nodes} nodes + 4 reserved "
        "addresses.",
    )


def warnings_for(inputs: GkeInputs, sizing: GkeSizing) -> tuple[str, ...]:
    found: list[str] = []
    if sizing.pool_zones_available < sizing.pool_zones_needed:
        found.append(
            f"{inputs.peak} nodes need {sizing.pool_zones_needed} pool-zones ({NODES_PER_POOL_PER_ZONE} "
            f"nodes per node pool per zone) but {sizing.pool_zones_available} zone(s) were given: one "
            f"auto-provisioned pool tops out at {sizing.pool_zones_available * NODES_PER_POOL_PER_ZONE}. "
            "Add zones (--zones) or rely on the ComputeClass rules, each of which NAP turns into pools of "
            "its own."
        )
    if inputs.peak > NODES_PER_POOL_PER_ZONE:
        found.append(
            "The upstream cluster autoscaler is performance-tested to 1,000 nodes and GKE supports up to "
            "5,000 with autoscaling on a regional cluster: rehearse the peak (eops plan) before relying on "
            "it."
        )
    if inputs.baseline and inputs.baseline % len(inputs.zones):
        found.append(
            f"Baseline {inputs.baseline} does not divide over {len(inputs.zones)} zones: the pool gets "
            f"{sizing.baseline_per_zone} per zone, {sizing.baseline_total} in total."
        )
    return tuple(found)
