"""The dev cluster's autoscaler knobs as the planner's cluster settings (pure).

The dev cluster splits a new node's delay in two (boot to Ready, then the driver until the GPU
is allocatable); the planner has one delay, from the scale-up decision to a schedulable GPU
node, so the two are added. A sum of two spec'd delays is exact when at most one of them varies
and that one is fixed or uniform; otherwise it is a lognormal with the same mean and variance,
and a note says so."""

from __future__ import annotations

import math
from dataclasses import dataclass

from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.devcluster.kwok_provider import POOL_SIZE_LIMIT
from elasticityops.devcluster.nodes import ZONES
from elasticityops.planner.distributions import Distribution, parse_distribution
from elasticityops.planner.settings import ClusterSettings

_Z95 = 1.6448536269514722

TIMELINE_STEP_S = 10.0
"""The planner samples its demand/nodes timeline this often: a rehearsal lasts minutes, not days."""


@dataclass(frozen=True)
class Mapped:
    settings: ClusterSettings
    notes: tuple[str, ...]


def mean_var(d: Distribution) -> tuple[float, float]:
    """Mean and variance of a delay, in seconds and seconds squared."""
    if d.kind == "fixed":
        return d.a, 0.0
    if d.kind == "uniform":
        return (d.a + d.b) / 2, (d.b - d.a) ** 2 / 12
    if d.kind == "lognormal":
        s2 = d.b**2
        return math.exp(d.a + s2 / 2), (math.exp(s2) - 1) * math.exp(2 * d.a + s2)
    return d.a, d.a**2


def add_delays(first: Distribution, second: Distribution) -> tuple[Distribution, bool]:
    """The delay of `first` then `second`; True when that is exact, False for the lognormal
    fitted to its mean and variance."""
    if first.kind == "fixed" and second.kind == "fixed":
        total = first.a + second.a
        return Distribution("fixed", total, spec=f"fixed:{total:g}"), True
    varying, shift = (second, first.a) if first.kind == "fixed" else (first, second.a)
    if first.kind == "fixed" or second.kind == "fixed":
        if shift == 0:
            return varying, True
        if varying.kind == "uniform":
            lo, hi = varying.a + shift, varying.b + shift
            return Distribution("uniform", lo, hi, spec=f"uniform:{lo:g},{hi:g}"), True
    (m1, v1), (m2, v2) = mean_var(first), mean_var(second)
    mean, var = m1 + m2, v1 + v2
    sigma2 = math.log1p(var / mean**2) if mean > 0 else 0.0
    mu = math.log(mean) - sigma2 / 2 if mean > 0 else 0.0
    median, p95 = math.exp(mu), math.exp(mu + _Z95 * math.sqrt(sigma2))
    spec = f"lognormal:median={median:.3g},p95={p95:.3g}"
    return Distribution("lognormal", mu, math.sqrt(sigma2), spec=spec), False


# kube-scheduler (1.35-1.36) takes the first node of a feasible list that up to 16 goroutines fill
# from the node list, so how random its pick among equal nodes is depends on its cores: nearly the
# list's first free node on 2 (measured: BENCHMARKS.md, "Which empty node a pod takes, again"),
# in effect random on many. Up to this many, the planner predicts a dev cluster with first-fit.
FIRST_FIT_MAX_CORES = 4


def empty_node_pick(scheduler_cores: int | None) -> tuple[str, str | None]:
    """The planner's `empty_node_pick` for a kube-scheduler on this many cores (None: unknown),
    and a note saying why when it is not the planner's default."""
    if scheduler_cores is None:
        return "random", None
    if scheduler_cores <= FIRST_FIT_MAX_CORES:
        return "first-fit", (
            f"kube-scheduler on {scheduler_cores} core(s) gives a pod nearly the first free GPU node "
            "in its list: the prediction picks empty nodes first-fit"
        )
    return "random", (
        f"kube-scheduler on {scheduler_cores} cores: the prediction picks among empty nodes at "
        f"random (first-fit, measured on 2 cores, is used up to {FIRST_FIT_MAX_CORES})"
    )


def planner_settings(
    autoscaler: AutoscalerSettings, seed: int = 0, scheduler_cores: int | None = None
) -> Mapped:
    """What the planner should assume to predict a rehearsal on a dev cluster with these knobs.

    Each dev-cluster flag maps to the planner knob of the same meaning (components.py sets
    scale-down-delay-after-add to the unneeded time, so both take scale_down_after); the T4
    node groups are one per zone, each capped at the pool size limit and the quota. Billing
    has no minimum, since the measured idle time counts node objects second by second.
    `scheduler_cores`, the cores of the machine the dev cluster's kube-scheduler runs on, decides
    how it picks among empty nodes (`empty_node_pick`)."""
    boot = parse_distribution(autoscaler.provision_delay, "--provision-delay")
    driver = parse_distribution(autoscaler.driver_delay, "--driver-delay")
    delay, exact = add_delays(boot, driver)
    notes = []
    if not exact:
        notes.append(
            f"provision delay {autoscaler.provision_delay} + driver delay {autoscaler.driver_delay} "
            f"modelled as {delay.spec} (same mean and variance)"
        )
    if autoscaler.stockout_zones:
        notes.append(
            f"stocked-out zones ({', '.join(autoscaler.stockout_zones)}) are not modelled by the "
            "planner: the prediction assumes every zone serves"
        )
    if not autoscaler.enabled:
        notes.append("the cluster runs no autoscaler: the planner still models one")
    pick, why = empty_node_pick(scheduler_cores)
    if why:
        notes.append(why)
    notes.append(
        "kube-scheduler's queue gives a freed node to a newer pod while older ones back off: the "
        "prediction serves waiting requests newest first"
    )
    settings = ClusterSettings(
        baseline=autoscaler.baseline,
        max_nodes=max(autoscaler.max_nodes, autoscaler.baseline),
        node_pools=len(ZONES),
        pool_size_limit=max(1, min(POOL_SIZE_LIMIT, autoscaler.max_nodes)),
        scan_interval_s=autoscaler.scan_interval,
        provision_delay=delay,
        max_provision_time_s=autoscaler.max_node_provision_time,
        scale_down_after_s=autoscaler.scale_down_after,
        scale_down_parallelism=autoscaler.max_scale_down_parallelism,
        empty_node_pick=pick,
        # the order that reproduced the waits of every rehearsal so far (BENCHMARKS.md, "The ramp
        # rehearsed on a quiet machine")
        pending_order="newest-first",
        scale_down_delay_after_add_s=autoscaler.scale_down_after,
        backoff_initial_s=autoscaler.backoff_initial,
        backoff_max_s=autoscaler.backoff_max,
        min_billed_s=0.0,
        timeline_step_s=TIMELINE_STEP_S,
        seed=seed if seed else autoscaler.seed,
    )
    return Mapped(settings, tuple(notes))
