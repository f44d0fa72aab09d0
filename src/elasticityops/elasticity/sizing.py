"""How many warm GPU nodes to hold: the one headroom sizing decision.

`size_headroom(observation, policy)` is a pure function over plain frozen dataclasses. The
planner calls it on its virtual clock; the gateway's headroom controller will call it with
observed data. It returns the number of placeholder pods (one GPU each, priority -10, i.e.
just above the cluster autoscaler's expendable cutoff) that should exist right now. A
placeholder holds one GPU node warm: real pods preempt it and start at once, and the evicted
placeholder, now pending, makes the autoscaler add a node to replace the consumed headroom.

Units: seconds for times and durations, requests per second for rates, node counts as int.
One node carries one GPU (one request runs per node).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class HeadroomObservation:
    """What the controller knows at one decision point.

    now_s: seconds since the start of the trace (planner) or the Unix epoch (controller).
    time_of_day_s: seconds since local midnight, in [0, 86400); scheduled policies use it.
    arrival_rate_per_s: requests per second over the recent window (e.g. the last 60 s).
    departure_rate_per_s: requests finished per second over the same window (each frees a node).
    busy_nodes: nodes running a real request.
    free_nodes: ready nodes with no real request (empty or holding a placeholder).
    pending_requests: real requests waiting for a node.
    provisioning_nodes: nodes requested from the cloud and not yet ready.
    """

    now_s: float
    time_of_day_s: float
    arrival_rate_per_s: float
    departure_rate_per_s: float = 0.0
    busy_nodes: int = 0
    free_nodes: int = 0
    pending_requests: int = 0
    provisioning_nodes: int = 0


@dataclass(frozen=True)
class NoHeadroom:
    """Pure auto-provisioning: no placeholders; every request on a cold cluster waits for a node."""


@dataclass(frozen=True)
class StaticBaseline:
    """A fixed node pool of `nodes` that never scales down. The pool is a node-pool minimum, not
    placeholders, so the headroom asked for is 0; `nodes` is carried here for reporting."""

    nodes: int


@dataclass(frozen=True)
class WarmHeadroom:
    """Always keep `nodes` placeholder pods (warm GPU nodes) on top of the busy ones."""

    nodes: int


@dataclass(frozen=True)
class ScheduledHeadroom:
    """Placeholders by time of day.

    table: (start second of day, nodes) pairs sorted by start; an entry holds from its start to
    the next entry's start, and the last entry wraps round midnight to the first one.
    """

    table: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.table:
            raise ValueError("a schedule needs at least one entry")
        starts = [s for s, _ in self.table]
        if starts != sorted(starts) or len(set(starts)) != len(starts):
            raise ValueError("schedule entries must have distinct start times in increasing order")
        if any(not 0 <= s < SECONDS_PER_DAY or n < 0 for s, n in self.table):
            raise ValueError("schedule starts must be within a day and node counts >= 0")


@dataclass(frozen=True)
class PredictiveHeadroom:
    """Size the headroom from the recent arrival rate to meet a time-to-start target.

    target_wait_s: the time-to-start the `quantile` of requests must meet (e.g. p95 <= 10 s).
    lead_time_s: seconds from a placeholder being consumed to its replacement node being ready:
        the autoscaler's GPU-pod delay (30 s) + half a scan interval (5 s) + the node's
        provisioning time (a high percentile, e.g. 420 s).
    quantile: the share of requests that must start within target_wait_s (0.95 for p95).
    max_nodes: upper bound on the answer (quota guard).
    """

    target_wait_s: float
    lead_time_s: float
    quantile: float = 0.95
    max_nodes: int = 5000

    def __post_init__(self) -> None:
        if not 0.0 < self.quantile < 1.0:
            raise ValueError("quantile must be in (0, 1)")
        if self.target_wait_s < 0 or self.lead_time_s < 0 or self.max_nodes < 0:
            raise ValueError("target_wait_s, lead_time_s and max_nodes must be >= 0")


HeadroomPolicy = NoHeadroom | StaticBaseline | WarmHeadroom | ScheduledHeadroom | PredictiveHeadroom


def size_headroom(observation: HeadroomObservation, policy: HeadroomPolicy) -> int:
    """Number of placeholder pods (warm GPU nodes) to hold now; always >= 0.

    Predictive model: a replacement node is ready `lead_time_s` after it is asked for, so the
    free nodes held now must absorb the net demand over the next lead time: arrivals
    A ~ Poisson(rate x lead) less the nodes freed by departures D ~ Poisson(departures x lead).
    The answer is the `quantile` of A - D (normal approximation with continuity correction), or,
    for small counts or no observed departures, the `quantile` of A alone: with H warm nodes and
    every arrival consuming one, a request waits exactly when more than H replacements are in
    flight (an M/G/inf occupancy). If the target is at least the lead time, a cold start meets it
    and no headroom is needed.
    """
    match policy:
        case NoHeadroom() | StaticBaseline():
            return 0
        case WarmHeadroom(nodes=n):
            return max(0, n)
        case ScheduledHeadroom(table=table):
            return _scheduled(table, observation.time_of_day_s)
        case PredictiveHeadroom():
            if policy.target_wait_s >= policy.lead_time_s:
                return 0
            arrivals = max(0.0, observation.arrival_rate_per_s) * policy.lead_time_s
            departures = max(0.0, observation.departure_rate_per_s) * policy.lead_time_s
            if departures == 0.0 or arrivals + departures < 20.0:
                need = poisson_quantile(arrivals, policy.quantile)
            else:
                spread = normal_ppf(policy.quantile) * math.sqrt(arrivals + departures)
                need = max(0, math.ceil(arrivals - departures + spread + 0.5))
            return min(policy.max_nodes, need)
    raise TypeError(f"unknown headroom policy {policy!r}")  # pragma: no cover


def _scheduled(table: tuple[tuple[int, int], ...], time_of_day_s: float) -> int:
    tod = time_of_day_s % SECONDS_PER_DAY
    current = table[-1][1]  # before the first entry of the day, the last one still holds
    for start, nodes in table:
        if start <= tod:
            current = nodes
        else:
            break
    return current


def poisson_quantile(mean: float, quantile: float) -> int:
    """Smallest h with P(X >= h) <= 1 - quantile for X ~ Poisson(mean); i.e. P(X < h) >= quantile.

    Exact summation up to a mean of 500, then the normal approximation with continuity
    correction (relative error well under 1% there).
    """
    if mean <= 0.0:
        return 0
    if mean > 500.0:
        z = normal_ppf(quantile)
        return max(0, math.ceil(mean + z * math.sqrt(mean) + 0.5))
    term = math.exp(-mean)  # P(X = 0)
    cdf = term
    k = 0
    while cdf < quantile:
        k += 1
        term *= mean / k
        cdf += term
    return k + 1


def normal_ppf(p: float) -> float:
    """Inverse of the standard normal CDF (Acklam's rational approximation, |error| < 1.2e-9)."""
    a = (
        -39.69683028665376,
        220.9460984245205,
        -275.9285104469687,
        138.3577518672690,
        -30.66479806614716,
        2.506628277459239,
    )
    b = (-54.47609879822406, 161.5858368580409, -155.6989798598866, 66.80131188771972, -13.28068155288572)
    c = (
        -0.007784894002430293,
        -0.3223964580411365,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    )
    d = (0.007784695709041462, 0.3224671290700398, 2.445134137142996, 3.754408661907416)
    lo = 0.02425
    if p < lo:
        q = math.sqrt(-2 * math.log(p))
        return (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    if p > 1 - lo:
        q = math.sqrt(-2 * math.log(1 - p))
        return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) / (
            (((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1
        )
    q = p - 0.5
    r = q * q
    return (
        (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5])
        * q
        / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
    )
