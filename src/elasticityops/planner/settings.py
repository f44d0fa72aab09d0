"""The cluster model's settings: every knob once, with its unit, default and where the default
comes from (`../shared/notes/gke-gpu-facts.md`: upstream cluster-autoscaler defaults, GKE limits
and us-central1 prices). Each knob is also a CLI flag of `eops plan run` / `recommend`
(`--scale-down-after` for `scale_down_after_s`) and a YAML key spelled like the flag; see
elasticityops/knobs.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elasticityops.domain.headroom.cluster_defaults import (
    DEFAULT_MAX_NODES,
    DEFAULT_PROVISION_DELAY,
    GPU_SCALE_UP_DELAY_S,
    SCAN_INTERVAL_S,
)
from elasticityops.knobs import knob, knob_factory, problems
from elasticityops.planner.distributions import Distribution, parse_distribution
from elasticityops.planner.errors import PlannerInputError
from elasticityops.pricing.table import Capacity, required

# $/h of one n1-standard-4 + T4 node, us-central1: the shared price table's rows (pricing/).
ON_DEMAND_NODE_PRICE = required("nvidia-tesla-t4", Capacity.on_demand)
SPOT_NODE_PRICE = required("nvidia-tesla-t4", Capacity.spot)

# Help panels of the knobs in `eops plan run/recommend --help`.
_POOLS = "Cluster: quota and pools"
_AUTOSCALER = "Cluster: autoscaler"
_SCALE_DOWN = "Cluster: scale-down"
_FAILURES = "Cluster: failures and back-off"
_PRICES = "Cluster: prices"
_SIMULATION = "Simulation"


# The choices of `empty_node_pick` and `pending_order`, declared once for the knobs and the model.
EMPTY_NODE_PICKS = ("random", "first-fit")
PENDING_ORDERS = ("fifo", "newest-first", "random")


def _delay(raw: Any) -> Distribution:
    return raw if isinstance(raw, Distribution) else parse_distribution(str(raw))


@dataclass(frozen=True)
class ClusterSettings:
    """One node = one GPU = one request at a time (n1-standard-4 + one T4 by default)."""

    baseline: int = knob(
        0,
        unit="nodes",
        ge=0,
        le=1_000_000,
        help="Fixed pool nodes, ready at t=0, never scaled down.",
        panel=_POOLS,
    )
    max_nodes: int = knob(
        DEFAULT_MAX_NODES,
        unit="nodes",
        ge=0,
        le=1_000_000,
        help="GPU quota / autoscaler max-nodes-total, baseline included (5,000: the largest cluster "
        "the autoscaler is supported for).",
        panel=_POOLS,
    )
    node_pools: int = knob(
        5,
        unit="pools",
        ge=1,
        le=1000,
        help="Auto-provisioned node pools (pool-zones) the autoscaler may grow.",
        panel=_POOLS,
    )
    pool_size_limit: int = knob(
        1000,
        unit="nodes",
        ge=1,
        le=1_000_000,
        help="Nodes per auto-provisioned pool (GKE limit).",
        panel=_POOLS,
    )
    scan_interval_s: float = knob(
        SCAN_INTERVAL_S,
        flag="scan-interval",
        unit="seconds",
        gt=0,
        le=3600,
        help="Autoscaler loop period (CA scan-interval).",
        panel=_AUTOSCALER,
    )
    gpu_scale_up_delay_s: float = knob(
        GPU_SCALE_UP_DELAY_S,
        flag="gpu-scale-up-delay",
        unit="seconds",
        ge=0,
        le=86_400,
        help="The autoscaler ignores unschedulable pods until the oldest is this old when any asks "
        "for a GPU (upstream; 2 s without GPUs).",
        panel=_AUTOSCALER,
    )
    provision_delay: Distribution = knob_factory(
        lambda: parse_distribution(DEFAULT_PROVISION_DELAY),
        metavar="DISTRIBUTION",
        shown=DEFAULT_PROVISION_DELAY,
        parse=_delay,
        help="Seconds from scale-up decision to a schedulable GPU node (boot, driver, device "
        "plugin): fixed:120, uniform:80,120, exponential:mean=200 or lognormal:median=M,p95=P "
        "(CA FAQ 3-4 min on GCE; GKE cold starts 4-6 min P50-P99).",
        panel=_AUTOSCALER,
    )
    max_provision_time_s: float = knob(
        900.0,
        flag="max-provision-time",
        unit="seconds",
        gt=0,
        le=86_400,
        help="A node not ready by then is given up and the pool backed off (max-node-provision-time).",
        panel=_AUTOSCALER,
    )
    scale_down_after_s: float = knob(
        600.0,
        flag="scale-down-after",
        unit="seconds",
        ge=0,
        le=604_800,
        help="An empty node is removed after this long (scale-down-unneeded-time).",
        panel=_SCALE_DOWN,
    )
    scale_down_parallelism: int = knob(
        10,
        unit="nodes",
        ge=1,
        le=10_000,
        help="Most node deletions in flight at once (max-scale-down-parallelism / max-empty-bulk-delete).",
        panel=_SCALE_DOWN,
    )
    soft_taint_count: int = knob(
        10,
        flag="max-bulk-soft-taint-count",
        unit="nodes",
        ge=0,
        le=10_000,
        help="Empty nodes the autoscaler marks PreferNoSchedule (or unmarks) per loop, so that new "
        "pods avoid them and they idle out (upstream's --max-bulk-soft-taint-count); 0: none are "
        "marked and pods spread over every empty node.",
        panel=_SCALE_DOWN,
    )
    empty_node_pick: str = knob(
        "random",
        choices=EMPTY_NODE_PICKS,
        help="Which of the equally good empty GPU nodes kube-scheduler gives a pod: random "
        "(up to 1.34, and 1.35+ on a control plane with many cores) or first-fit (1.35-1.36 on "
        "a small control plane, such as the dev cluster's: the first free node in its list, so "
        "the nodes at its end idle out).",
        panel=_SCALE_DOWN,
    )
    pending_order: str = knob(
        "fifo",
        choices=PENDING_ORDERS,
        help="Which waiting request a node that frees goes to: fifo (first come, first served); "
        "newest-first, as kube-scheduler's queue does when pods compete for nodes that free (a "
        "pod that found no node backs off for up to 10 s while newer ones take them); random, "
        "as measured while pods wait for new nodes.",
        panel=_SCALE_DOWN,
    )
    node_delete_time_s: float = knob(
        0.0,
        flag="node-delete-time",
        unit="seconds",
        ge=0,
        le=86_400,
        help="How long one deletion is in flight (billed, unusable, holding a quota and a parallelism "
        "slot); 0: within the loop. No published figure; try 30-90 s.",
        panel=_SCALE_DOWN,
    )
    scale_down_delay_after_add_s: float = knob(
        600.0,
        flag="scale-down-delay-after-add",
        unit="seconds",
        ge=0,
        le=604_800,
        help="No scale-down this long after any scale-up.",
        panel=_SCALE_DOWN,
    )
    scale_down_delay_after_failure_s: float = knob(
        180.0,
        flag="scale-down-delay-after-failure",
        unit="seconds",
        ge=0,
        le=604_800,
        help="No scale-down this long after a failed scale-up.",
        panel=_SCALE_DOWN,
    )
    stockout_probability: float = knob(
        0.0,
        unit="probability",
        ge=0,
        lt=1,
        help="Chance that one scale-up attempt fails (stockout, quota).",
        panel=_FAILURES,
    )
    backoff_initial_s: float = knob(
        300.0,
        flag="backoff-initial",
        unit="seconds",
        ge=0,
        le=86_400,
        help="First pool back-off after a failed scale-up; doubles up to --backoff-max.",
        panel=_FAILURES,
    )
    backoff_max_s: float = knob(
        1800.0,
        flag="backoff-max",
        unit="seconds",
        ge=0,
        le=604_800,
        help="Longest back-off.",
        panel=_FAILURES,
    )
    backoff_reset_s: float = knob(
        10800.0,
        flag="backoff-reset",
        unit="seconds",
        ge=0,
        le=604_800,
        help="A back-off is forgotten after this long.",
        panel=_FAILURES,
    )
    preemption_rate_per_hour: float = knob(
        0.0,
        flag="preemption-rate",
        unit="per node-hour",
        ge=0,
        le=3600,
        help="Spot preemptions; a preempted request restarts from the beginning on another node.",
        panel=_FAILURES,
    )
    spot: bool = knob(
        False,
        off="on-demand",
        help=f"Price nodes at the spot price (${SPOT_NODE_PRICE}/h) instead of on demand "
        f"(${ON_DEMAND_NODE_PRICE}/h).",
        panel=_PRICES,
    )
    price_per_node_hour: float | None = knob(
        None,
        flag="price",
        unit="USD/node-hour",
        ge=0,
        le=10_000,
        shown="by --spot",
        help="Price of one node-hour; overrides --spot.",
        panel=_PRICES,
    )
    min_billed_s: float = knob(
        60.0,
        flag="min-billed",
        unit="seconds",
        ge=0,
        le=86_400,
        help="Per-second billing with this minimum per node.",
        panel=_PRICES,
    )
    headroom_interval_s: float = knob(
        10.0,
        flag="headroom-interval",
        unit="seconds",
        gt=0,
        le=3600,
        help="How often the headroom controller re-sizes placeholders.",
        panel=_SIMULATION,
    )
    rate_window_s: float = knob(
        60.0,
        flag="rate-window",
        unit="seconds",
        gt=0,
        le=604_800,
        help="Window of the recent arrival rate given to the sizing function.",
        panel=_SIMULATION,
    )
    slow_window_s: float = knob(
        1800.0,
        flag="slow-window",
        unit="seconds",
        gt=0,
        le=604_800,
        help="Window of the slow arrival rate and mean busy nodes given to the sizing function "
        "(predictive sizes on them; the recent rate only drives it in a burst).",
        panel=_SIMULATION,
    )
    trend_window_s: float = knob(
        7200.0,
        flag="trend-window",
        unit="seconds",
        gt=0,
        le=2_419_200,
        help="The sizing function gets the arrival rate's trend from the rates over the last "
        "two windows of this length.",
        panel=_SIMULATION,
    )
    feedback_window_s: float = knob(
        86400.0,
        flag="feedback-window",
        unit="seconds",
        gt=0,
        le=2_592_000,
        help="The sizing function gets the share of the requests that arrived within this "
        "window and started later than the policy's target wait (predictive steers on it).",
        panel=_SIMULATION,
    )
    run_time_window_s: float = knob(
        7200.0,
        flag="run-time-window",
        unit="seconds",
        gt=0,
        le=2_592_000,
        help="The sizing function gets the mean run time of the requests that started within "
        "this window, those still running counted by their time so far.",
        panel=_SIMULATION,
    )
    run_time_min_ended: int = knob(
        100,
        flag="run-time-min-ended",
        unit="requests",
        ge=1,
        le=1_000_000,
        help="Ended requests in that window before the mean run time counts; until then "
        "predictive sizes as if none ended within the lead time.",
        panel=_SIMULATION,
    )
    horizon_s: float = knob(
        0.0,
        flag="horizon",
        unit="seconds",
        ge=0,
        le=604_800,
        help="Simulate at least until this time from the trace start; 0: until the last request "
        "ends. Nodes are billed up to the end of the simulation.",
        panel=_SIMULATION,
    )
    timeline_step_s: float = knob(
        60.0,
        flag="timeline-step",
        unit="seconds",
        gt=0,
        le=86_400,
        help="Sampling period of the demand/nodes timeline.",
        panel=_SIMULATION,
    )
    seed: int = knob(
        0,
        ge=0,
        le=4_294_967_295,
        help="Seeds provisioning delays, stockouts and preemptions.",
        panel=_SIMULATION,
    )

    def __post_init__(self) -> None:
        found = problems(self, lambda k: k.flag)
        if found:
            raise PlannerInputError(found[0].render())
        if self.max_nodes < self.baseline:
            raise PlannerInputError("--max-nodes must be >= --baseline")

    @property
    def node_price_per_hour(self) -> float:
        if self.price_per_node_hour is not None:
            return self.price_per_node_hour
        return SPOT_NODE_PRICE if self.spot else ON_DEMAND_NODE_PRICE

    @property
    def autoscaled_cap(self) -> int:
        """Most autoscaled nodes at once: quota less the baseline, and the pools' size limit."""
        return min(self.max_nodes - self.baseline, self.node_pools * self.pool_size_limit)
