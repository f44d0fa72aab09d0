"""Numbers from one run: time-to-start percentiles, node-hours, cost, peaks. Pure (numpy only)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from elasticityops.planner.model.result import SimResult
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.trace import Trace


@dataclass(frozen=True)
class WaitStats:
    """Time-to-start (start - arrival) in seconds."""

    p50: float
    p95: float
    p99: float
    max: float
    mean: float


@dataclass(frozen=True)
class Summary:
    """One policy's outcome. Hours are node-hours (= GPU-hours: one GPU per node); cost in USD.

    waited_share: share of requests that waited for a node at all (wait > 0).
    idle_gpu_hours: billed minus busy, i.e. provisioning plus empty plus placeholder-held time.
    quota_hits: autoscaler loops whose scale-up was cut short by --max-nodes or pool limits.
    """

    policy: str
    requests: int
    time_to_start_s: WaitStats
    waited_share: float
    node_hours_billed: float
    busy_gpu_hours: float
    idle_gpu_hours: float
    provisioning_node_hours: float
    cost_usd: float
    cost_per_1000_requests_usd: float
    peak_nodes: int
    quota_hits: int
    scale_up_failures: int
    provision_timeouts: int
    preemptions: int
    restarted_requests: int
    horizon_hours: float
    price_per_node_hour: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def wait_times(trace: Trace, result: SimResult) -> np.ndarray:
    waits: np.ndarray = np.asarray(result.start_s, dtype=np.float64) - trace.arrival_s
    return waits


def summarize(policy: str, trace: Trace, result: SimResult, settings: ClusterSettings) -> Summary:
    waits = wait_times(trace, result)
    n = len(waits)
    if n:
        p50, p95, p99 = (float(x) for x in np.percentile(waits, [50, 95, 99]))
        stats = WaitStats(p50, p95, p99, float(waits.max()), float(waits.mean()))
        waited = float(np.count_nonzero(waits > 1e-9)) / n
    else:
        stats = WaitStats(0.0, 0.0, 0.0, 0.0, 0.0)
        waited = 0.0
    billed_h = result.billed_node_s(settings.min_billed_s) / 3600.0
    busy_h = result.busy_node_s / 3600.0
    price = settings.node_price_per_hour
    cost = billed_h * price
    return Summary(
        policy=policy,
        requests=n,
        time_to_start_s=stats,
        waited_share=waited,
        node_hours_billed=billed_h,
        busy_gpu_hours=busy_h,
        idle_gpu_hours=max(0.0, billed_h - busy_h),
        provisioning_node_hours=result.provisioning_node_s() / 3600.0,
        cost_usd=cost,
        cost_per_1000_requests_usd=cost * 1000.0 / n if n else 0.0,
        peak_nodes=result.peak_nodes,
        quota_hits=result.quota_hits,
        scale_up_failures=result.scale_up_failures,
        provision_timeouts=result.provision_timeouts,
        preemptions=result.preemptions,
        restarted_requests=sum(1 for k in result.restarts if k),
        horizon_hours=result.horizon_s / 3600.0,
        price_per_node_hour=price,
    )
