"""The cluster model's settings: every knob once, with its unit, default and where the default
comes from (`../shared/notes/gke-gpu-facts.md`: upstream cluster-autoscaler defaults, GKE limits
and us-central1 prices). Each field is also a CLI flag (`--scale-down-after` for
`scale_down_after_s`, see `FLAGS`) and a YAML key spelled like the flag."""

from __future__ import annotations

from dataclasses import dataclass, field

from elasticityops.planner.distributions import Distribution, parse_distribution
from elasticityops.planner.errors import PlannerInputError

ON_DEMAND_NODE_PRICE = 0.54  # $/h, n1-standard-4 (0.19) + T4 (0.35), us-central1
SPOT_NODE_PRICE = 0.24  # $/h, n1-standard-4 spot (0.067) + T4 spot (0.175)
DEFAULT_PROVISION_DELAY = "lognormal:median=240,p95=420"


@dataclass(frozen=True)
class ClusterSettings:
    """One node = one GPU = one request at a time (n1-standard-4 + one T4 by default).

    baseline: nodes in a fixed pool that never scales down (ready at t=0). Default 0.
    max_nodes: GPU quota / autoscaler max-nodes-total, baseline included. Default 5000, the
        largest cluster the autoscaler is supported for.
    node_pools: auto-provisioned node pools (pool-zones) the autoscaler may grow. Default 5.
    pool_size_limit: nodes per auto-provisioned pool. Default 1000 (GKE limit).
    scan_interval_s: autoscaler loop period. Default 10 s (upstream scan-interval).
    gpu_scale_up_delay_s: the autoscaler ignores unschedulable pods until the oldest one is this
        old when any pending pod asks for a GPU. Default 30 s (upstream, 2 s for non-GPU pods).
    provision_delay: seconds from scale-up decision to a schedulable GPU node (boot, driver,
        device plugin). Default lognormal median 240 s, p95 420 s (CA FAQ 3-4 min on GCE; GKE
        cold starts 4-6 min P50-P99).
    max_provision_time_s: a node not ready by then is given up and the pool backed off.
        Default 900 s (max-node-provision-time 15 min).
    scale_down_after_s: an empty node is removed after this long. Default 600 s
        (scale-down-unneeded-time 10 min).
    scale_down_parallelism: most node deletions in flight at once. Default 10
        (max-scale-down-parallelism / max-empty-bulk-delete).
    node_delete_time_s: how long one deletion is in flight (billed, unusable, holding a quota
        slot and a parallelism slot). Default 0: deletions complete within the loop, so at most
        `scale_down_parallelism` nodes go per 10 s loop. No published figure; try 30-90 s.
    scale_down_delay_after_add_s: no scale-down this long after any scale-up. Default 600 s.
    scale_down_delay_after_failure_s: no scale-down this long after a failed scale-up. Default 180 s.
    stockout_probability: chance that one scale-up attempt fails (stockout, quota). Default 0.
    backoff_initial_s / backoff_max_s / backoff_reset_s: pool back-off after a failed scale-up,
        doubling from initial to max, forgotten after reset. Defaults 300 / 1800 / 10800 s.
    preemption_rate_per_hour: spot preemptions per node-hour; a preempted request restarts from
        the beginning on another node. Default 0.
    spot: price nodes at the spot price. Default False (on demand).
    price_per_node_hour: overrides the price; None = $0.54/h on demand, $0.24/h spot.
    min_billed_s: per-second billing with this minimum per node. Default 60 s.
    headroom_interval_s: how often the headroom controller re-sizes placeholders. Default 10 s.
    rate_window_s: window for the recent arrival rate given to the sizing function. Default 60 s.
    horizon_s: simulate at least until this time (seconds from trace start). Default 0: until the
        last request ends; nodes are billed up to the end of the simulation.
    timeline_step_s: sampling period of the demand/nodes timeline. Default 60 s.
    seed: seeds provisioning delays, stockouts and preemptions. Default 0.
    """

    baseline: int = 0
    max_nodes: int = 5000
    node_pools: int = 5
    pool_size_limit: int = 1000
    scan_interval_s: float = 10.0
    gpu_scale_up_delay_s: float = 30.0
    provision_delay: Distribution = field(default_factory=lambda: parse_distribution(DEFAULT_PROVISION_DELAY))
    max_provision_time_s: float = 900.0
    scale_down_after_s: float = 600.0
    scale_down_parallelism: int = 10
    node_delete_time_s: float = 0.0
    scale_down_delay_after_add_s: float = 600.0
    scale_down_delay_after_failure_s: float = 180.0
    stockout_probability: float = 0.0
    backoff_initial_s: float = 300.0
    backoff_max_s: float = 1800.0
    backoff_reset_s: float = 10800.0
    preemption_rate_per_hour: float = 0.0
    spot: bool = False
    price_per_node_hour: float | None = None
    min_billed_s: float = 60.0
    headroom_interval_s: float = 10.0
    rate_window_s: float = 60.0
    horizon_s: float = 0.0
    timeline_step_s: float = 60.0
    seed: int = 0

    def __post_init__(self) -> None:
        checks = [
            (self.baseline >= 0, "--baseline must be >= 0"),
            (self.max_nodes >= self.baseline, "--max-nodes must be >= --baseline"),
            (self.node_pools >= 1, "--node-pools must be >= 1"),
            (self.pool_size_limit >= 1, "--pool-size-limit must be >= 1"),
            (self.scan_interval_s > 0, "--scan-interval must be > 0"),
            (self.gpu_scale_up_delay_s >= 0, "--gpu-scale-up-delay must be >= 0"),
            (self.max_provision_time_s > 0, "--max-provision-time must be > 0"),
            (self.scale_down_after_s >= 0, "--scale-down-after must be >= 0"),
            (self.scale_down_parallelism >= 1, "--scale-down-parallelism must be >= 1"),
            (self.node_delete_time_s >= 0, "--node-delete-time must be >= 0"),
            (0.0 <= self.stockout_probability < 1.0, "--stockout-probability must be in [0, 1)"),
            (self.preemption_rate_per_hour >= 0, "--preemption-rate must be >= 0"),
            (self.price_per_node_hour is None or self.price_per_node_hour >= 0, "--price must be >= 0"),
            (self.headroom_interval_s > 0, "--headroom-interval must be > 0"),
            (self.rate_window_s > 0, "--rate-window must be > 0"),
            (self.timeline_step_s > 0, "--timeline-step must be > 0"),
        ]
        for ok, message in checks:
            if not ok:
                raise PlannerInputError(message)

    @property
    def node_price_per_hour(self) -> float:
        if self.price_per_node_hour is not None:
            return self.price_per_node_hour
        return SPOT_NODE_PRICE if self.spot else ON_DEMAND_NODE_PRICE

    @property
    def autoscaled_cap(self) -> int:
        """Most autoscaled nodes at once: quota less the baseline, and the pools' size limit."""
        return min(self.max_nodes - self.baseline, self.node_pools * self.pool_size_limit)
