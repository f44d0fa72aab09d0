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
from bisect import bisect_right
from dataclasses import dataclass, field

SECONDS_PER_DAY = 86_400


@dataclass(frozen=True)
class HeadroomObservation:
    """What the controller knows at one decision point.

    now_s: seconds since the start of the trace (planner) or the Unix epoch (controller).
    time_of_day_s: seconds since local midnight, in [0, 86400); scheduled policies use it.
    arrival_rate_per_s: requests per second over the recent window (e.g. the last 60 s).
    rate_window_s: the length of that recent window.
    departure_rate_per_s: requests finished per second over the same window (each frees a node).
    busy_nodes: nodes running a real request.
    free_nodes: ready nodes with no real request (empty or holding a placeholder).
    pending_requests: real requests waiting for a node.
    provisioning_nodes: nodes requested from the cloud and not yet ready.
    placeholders_running: placeholder pods holding a node (part of free_nodes).
    placeholders_pending: placeholder pods waiting for a node.
    arrival_rate_slow_per_s: requests per second over a longer window (e.g. the last 30 min), or
        None if not observed.
    busy_mean_slow: mean of busy_nodes over that longer window, or None; with the slow rate it
        gives the mean run time by Little's law where run_time_mean_s is missing.
    slow_window_s: the length of that window (its rate is the rate half a window ago).
    arrival_trend_per_s2: how fast the arrival rate changes (requests per second, per second),
        e.g. from the rates over the last two hours; 0 when unknown.
    arrival_trends: the same measured over shorter windows too: (window_s, trend) pairs, the
        trend from the rates over the last two windows of that length (0 until two have
        passed), shortest window first; the predictive rule picks the shortest it can trust
        (`trend_for`). Empty: arrival_trend_per_s2 is the only one.
    run_time_mean_s: mean run time of a request, measured on those that started within a
        recent window (e.g. 2 h), those still running counted by their time so far
        (domain/headroom/run_times.py: the ended ones alone are the short ones in a young
        cluster), or None before enough have ended (e.g. 100); it uses no request's future
        (when a running request will end is not known).
    run_time_means: the same measured over shorter windows too: (window_s, mean run time s,
        ended runs) for each window with enough ended runs, shortest first; the predictive rule
        takes the shortest it can trust (`run_time_for`). Empty: run_time_mean_s is the only one.
    late_share: share of the requests that arrived in a recent window (e.g. the last day) that
        started, or are still waiting, later than the policy's target wait; None before any
        request has arrived. The controller's own SLO measure, used to steer the sizing.
    lead_time_s: measured seconds from a placeholder being evicted to its replacement node being
        ready (the autoscaler's reaction plus the recent mean provisioning time), or None before
        any node has been provisioned; the policy's configured lead time stands in until then.
    scale_down_in_s: for the free nodes that no placeholder holds and that the autoscaler will
        remove once they have been empty for its scale-down window, the seconds until then
        (window less the time empty, >= 0), ascending; at least those that go within the lead
        time (measured or configured) are listed, later ones may be left out. Baseline nodes
        never go and are not listed.
    """

    now_s: float
    time_of_day_s: float
    arrival_rate_per_s: float
    departure_rate_per_s: float = 0.0
    rate_window_s: float = 60.0
    busy_nodes: int = 0
    free_nodes: int = 0
    pending_requests: int = 0
    provisioning_nodes: int = 0
    placeholders_running: int = 0
    placeholders_pending: int = 0
    arrival_rate_slow_per_s: float | None = None
    busy_mean_slow: float | None = None
    slow_window_s: float = 0.0
    arrival_trend_per_s2: float = 0.0
    arrival_trends: tuple[tuple[float, float], ...] = ()
    run_time_mean_s: float | None = None
    late_share: float | None = None
    lead_time_s: float | None = None
    scale_down_in_s: tuple[float, ...] = ()
    history_s: float | None = None
    since_last_s: float | None = None
    run_time_means: tuple[tuple[float, float, int], ...] = ()


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
class WarmBounds:
    """What a predictive rule may order, whatever it estimates: bounded by what was observed.

    A rule's estimates (rates, trend, run time, lead time) can be wrong by any factor on a young
    or unusual stream: 692 arrivals in a gateway's first minute, extrapolated over the lead time
    with no request ended yet, asked for the whole quota. These bounds hold whatever the
    estimate (`bound_warm_units`):

    floor: warm units held at least while the shape is in use (a request busy, waiting, or
        arrived within the slow window): the first request of a lull finds a node, and a
        pending placeholder lets the autoscaler scale up for the requests that find none
        without its 30 s GPU-pod delay, which upstream counts from the oldest pending pod.
    busy_ratio: warm units never exceed floor + busy_ratio x the recent busy GPUs (the larger
        of those busy now and the slow window's mean).
    young_s, young_ratio: until the windows hold young_s of traffic, busy_ratio is young_ratio
        (nothing from the first minutes is trusted further).
    growth_per_min: per sizing, the units may grow above those held by at most
        growth_per_min x (busy + held) x the minutes since the previous sizing (at most one),
        and by the floor at least.
    """

    floor: int = 1
    busy_ratio: float = 1.0
    young_s: float = 600.0
    young_ratio: float = 0.0
    growth_per_min: float = 0.5

    def __post_init__(self) -> None:
        if self.floor < 0 or self.young_s < 0:
            raise ValueError("floor and young_s must be >= 0")
        if not (self.busy_ratio >= 0.0 and 0.0 <= self.young_ratio <= self.busy_ratio):
            raise ValueError("busy_ratio must be >= 0 and young_ratio in [0, busy_ratio]")
        if not self.growth_per_min > 0.0:
            raise ValueError("growth_per_min must be > 0")


def warm_floor(obs: HeadroomObservation, bounds: WarmBounds) -> int:
    """The floor while the shape is in use (a request busy, waiting, or arrived within the slow
    window); none for a shape no traffic has reached lately."""
    active = (
        obs.busy_nodes > 0
        or obs.pending_requests > 0
        or obs.arrival_rate_per_s > 0.0
        or (obs.arrival_rate_slow_per_s or 0.0) > 0.0
    )
    return bounds.floor if active else 0


def warm_ceiling(obs: HeadroomObservation, bounds: WarmBounds) -> int:
    """The most warm units the observation allows: the floor plus a share of the recent busy
    GPUs (a smaller one while the windows are young), and no more than the held units plus the
    growth allowed since the previous sizing."""
    floor = warm_floor(obs, bounds)
    busy = max(obs.busy_nodes, obs.busy_mean_slow or 0.0, 0.0)
    young = obs.history_s is None or obs.history_s < bounds.young_s
    ratio = bounds.young_ratio if young else bounds.busy_ratio
    proportion = floor + math.floor(ratio * busy)
    held = max(0, obs.placeholders_running) + max(0, obs.placeholders_pending)
    minutes = 1.0 if obs.since_last_s is None else min(1.0, max(0.0, obs.since_last_s) / 60.0)
    step = max(floor, math.ceil(bounds.growth_per_min * (obs.busy_nodes + held) * minutes))
    return min(proportion, held + step)


def bound_warm_units(
    wanted: int, obs: HeadroomObservation, bounds: WarmBounds, max_nodes: int, spare: int = 0
) -> int:
    """`wanted` warm units as ordered: at most `warm_ceiling` and the quota, and at least what
    the floor (while the shape is in use) asks beyond the `spare` free capacity that lasts."""
    floor = max(0, warm_floor(obs, bounds) - spare)
    return max(0, min(max_nodes, max(floor, min(wanted, warm_ceiling(obs, bounds)))))


@dataclass(frozen=True)
class WaitTargetHeadroom:
    """What the predictive rules share: a wait target to meet, and the lead time to size for.

    target_wait_s: the time-to-start the `quantile` of requests must meet (e.g. p95 <= 10 s).
    lead_time_s: seconds from a placeholder being consumed to its replacement node being ready,
        used until the observation carries a measured one: the autoscaler's GPU-pod delay (30 s)
        + a scan interval + the node's provisioning time (a high percentile, e.g. 420 s).
    quantile: the share of requests that must start within target_wait_s (0.95 for p95).
    max_nodes: upper bound on the answer (quota guard).
    bounds: what the answer may be at most, given what has been observed (`WarmBounds`).
    """

    target_wait_s: float
    lead_time_s: float
    quantile: float = 0.95
    max_nodes: int = 5000
    bounds: WarmBounds = field(default_factory=WarmBounds)

    def __post_init__(self) -> None:
        if not 0.0 < self.quantile < 1.0:
            raise ValueError("quantile must be in (0, 1)")
        if self.target_wait_s < 0 or self.lead_time_s < 0 or self.max_nodes < 0:
            raise ValueError("target_wait_s, lead_time_s and max_nodes must be >= 0")


@dataclass(frozen=True)
class PredictiveHeadroom(WaitTargetHeadroom):
    """Hold a pool sized for the load forecast one lead time ahead, to meet a wait target.

    Fields of WaitTargetHeadroom, and:
    surge_ratio: when the recent arrival rate exceeds the slow one by this factor, the recent one
        drives the forecast (a burst's onset); below it the slow rate does, as the recent one is
        mostly sampling noise at the normal load.
    fall_z: when the recent rate is this many Poisson standard deviations (of its own window's
        count) below the slow one, the load is falling and the recent one drives the forecast
        too: the slow rate is the rate of a quarter of an hour ago, and after a peak it held
        the peak's pool for that long.
    trend_noise: the trend is taken over the shortest window whose noise, carried to the
        forecast, is at most this share of the load's own Poisson spread (`trend_for`).
    slack: the pool is sized for slack x (1 - quantile) late requests in the Erlang C model, which
        counts as late some requests that nodes idling in their scale-down window above the
        pool serve at once (calibrated on the default synthetic trace, seed 0).
    margin, gain: the measured late share steers that: it is scaled by
        ((1 - quantile) x margin / measured) ** gain, so the cluster aims at margin x the
        allowed late share (0.9: 4.5% late for p95).
    """

    surge_ratio: float = 2.0
    fall_z: float = 3.0
    trend_noise: float = 0.25
    slack: float = 2.5
    margin: float = 0.9
    gain: float = 2.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.surge_ratio >= 1.0:
            raise ValueError("surge_ratio must be >= 1")
        if not (self.fall_z > 0.0 and self.trend_noise > 0.0):
            raise ValueError("fall_z and trend_noise must be > 0")
        if not 0.0 < self.slack * (1.0 - self.quantile) < 1.0:
            raise ValueError("slack x (1 - quantile) must be in (0, 1)")
        if not (self.margin > 0.0 and self.gain >= 0.0):
            raise ValueError("margin must be > 0 and gain >= 0")


@dataclass(frozen=True)
class ArrivalRateHeadroom(WaitTargetHeadroom):
    """The predictive rule before issue 15, kept for comparison (`predictive-rate[:W]`): hold the
    `quantile` of Poisson(arrivals x lead) - Poisson(departures x lead) placeholders, from the
    recent (60 s) rates, on top of whatever nodes are free. Fields of WaitTargetHeadroom; its
    bounds have no floor (it held none), but the same ceiling: it runs live too."""

    bounds: WarmBounds = field(default_factory=lambda: WarmBounds(floor=0))


HeadroomPolicy = (
    NoHeadroom | StaticBaseline | WarmHeadroom | ScheduledHeadroom | PredictiveHeadroom | ArrivalRateHeadroom
)


def size_headroom(observation: HeadroomObservation, policy: HeadroomPolicy) -> int:
    """Number of placeholder pods (warm GPU nodes) to hold now; always >= 0.

    Predictive: a node asked for now is ready one lead time L from now, so the cluster should
    hold the pool that the load forecast for t + L needs (`nodes_needed`); placeholders make up
    what the busy nodes, the free nodes that no placeholder holds and that outlast L (in their
    scale-down window), and the surplus nodes on their way do not already give. Counting those
    is what keeps the headroom from sitting on top of nodes that are idle anyway. If the target
    is at least the lead time, a cold start meets it and no headroom is needed.
    """
    match policy:
        case NoHeadroom() | StaticBaseline():
            return 0
        case WarmHeadroom(nodes=n):
            return max(0, n)
        case ScheduledHeadroom(table=table):
            return _scheduled(table, observation.time_of_day_s)
        case PredictiveHeadroom():
            return _predictive(observation, policy)
        case ArrivalRateHeadroom():
            return _arrival_rate(observation, policy)
    raise TypeError(f"unknown headroom policy {policy!r}")  # pragma: no cover


def _predictive(obs: HeadroomObservation, policy: PredictiveHeadroom) -> int:
    lead = obs.lead_time_s if obs.lead_time_s is not None else policy.lead_time_s
    if policy.target_wait_s >= lead:
        return 0  # a cold start meets the target
    pool = nodes_needed(obs, policy, lead)
    spare = unheld_supply(obs, lead, demand_rate(obs, policy.surge_ratio, policy.fall_z))
    return bound_warm_units(pool - obs.busy_nodes - spare, obs, policy.bounds, policy.max_nodes, spare)


def nodes_needed(obs: HeadroomObservation, policy: PredictiveHeadroom, lead_s: float) -> int:
    """Nodes (busy or free) that serve the forecast load within the target wait at `quantile`.

    The forecast load is an offered load of a = lambda S: the arrival rate carried one lead
    time ahead along its trend, times the mean run time. The rate is the slow window's, which
    is the rate half a slow window ago and is carried that much further; or, at a burst's onset
    or on a fall (`demand_rate`), the recent one, which is the rate now. Sized as a pool of c
    servers with FIFO waiting (Erlang C), a request waits past the target w with probability
    C(c, a) exp(-(c - a) w / S): when the pool is full, running requests end at c / S per
    second, so a short queue clears within the target and a pool need not be so big that no
    request ever queues. The pool is held steady at this size instead of chasing the busy
    count, so that a blip of load does not order nodes that arrive after it has passed and
    then sit out their scale-down window.
    Without a run-time estimate (no busy node or arrival seen yet), the load is the busy nodes
    plus the arrivals over the lead time that nothing frees: Poisson(lambda L) at `quantile`
    (which the bounds trust no further than the floor plus the busy GPUs).
    """
    rate = demand_rate(obs, policy.surge_ratio, policy.fall_z)
    run_s = run_time_for(obs, rate, policy.trend_noise)
    if run_s is None:
        return obs.busy_nodes + poisson_quantile(rate * lead_s, policy.quantile)
    slow = obs.arrival_rate_slow_per_s
    back = obs.slow_window_s / 2.0 if slow is not None and rate == max(0.0, slow) else 0.0
    horizon = back + lead_s
    ahead = rate + trend_for(obs, horizon, run_s, policy.trend_noise) * horizon
    late = model_late_share(obs.late_share, policy)
    return erlang_pool(max(0.0, ahead) * run_s, policy.target_wait_s / run_s, late)


def trend_for(obs: HeadroomObservation, horizon_s: float, run_s: float, noise: float) -> float:
    """The arrival trend from the shortest window that can be trusted over `horizon_s`.

    A trend over two windows of W carries the Poisson noise of their counts, sqrt(2 lambda / W)
    on the rate difference, into the forecast as (horizon / W) of it; in nodes that is S times
    as much, and the load's own spread is sqrt(lambda S). Their ratio, (horizon / W)
    sqrt(2 S / W), does not depend on the rate: the trend of a window W is used when it is at
    most `noise`. Short runs (a busy count that turns over in seconds) can follow the trend of
    the last half-hours; long ones need hours, or the trend's noise orders nodes. A ramp of
    real traffic (busy 41 -> 204 in an hour) is over before a two-hour trend sees it."""
    for window, trend in obs.arrival_trends:
        if window > 0.0 and (horizon_s / window) * math.sqrt(2.0 * run_s / window) <= noise:
            return trend
    return obs.arrival_trend_per_s2


def model_late_share(measured: float | None, policy: PredictiveHeadroom) -> float:
    """The late share to size the model's pool for: slack x (1 - quantile), scaled by how far
    the measured late share is from the goal (1 - quantile) x margin, to the power `gain`.
    The model ignores the nodes idling in their scale-down window above the pool, which serve
    some requests it counts as late, and by how much depends on the load's shape; the measured
    share closes that loop (a slow one: the window is long). Bounded to a factor of 4 each way."""
    base = policy.slack * (1.0 - policy.quantile)
    if measured is None:
        return base
    goal = (1.0 - policy.quantile) * policy.margin
    scale: float = (goal / max(measured, goal / 4.0)) ** policy.gain
    return min(0.5, base * 4.0, max(base / 4.0, base * scale))


UNBOUNDED_POOL = 1 << 31
"""`erlang_pool` of an infinite load: more than any quota, which the caller's bounds then cap."""


def erlang_pool(load: float, wait_in_runs: float, late_share: float) -> int:
    """Smallest c servers of an M/M/c queue with offered load `load` (erlangs) for which
    P(wait > w) = ErlangC(c, load) exp(-(c - load) w) <= late_share, w in mean service times.

    Erlang B by its recurrence B(c) = a B(c-1) / (c + a B(c-1)), then C = B / (1 - (a / c)(1 - B));
    one pass up to the answer, which is near a + a few sqrt(a). Above 2,000 erlangs (bursts)
    the square-root rule a + z sqrt(a) stands in, as the exact pass would cost a few ms.
    """
    if not load > 0.0:  # NaN too: the loop below would never end on it
        return 0
    if math.isinf(load):
        return UNBOUNDED_POOL
    if load > 2000.0:
        return math.ceil(load + normal_ppf(1.0 - late_share) * math.sqrt(load))
    blocking = 1.0
    c = 0
    while True:
        c += 1
        blocking = load * blocking / (c + load * blocking)
        if c <= load:
            continue
        queued = blocking / (1.0 - (load / c) * (1.0 - blocking))
        if queued * math.exp(-(c - load) * wait_in_runs) <= late_share:
            return c


def demand_rate(obs: HeadroomObservation, surge_ratio: float, fall_z: float = 3.0) -> float:
    """The arrival rate the forecast uses: the slow window's (a 60 s count at 0.4/s is +-16%
    noise, and sizing on it ratchets nodes up on every upward blip), unless the recent rate is
    `surge_ratio` times that, which is a burst and no blip, or `fall_z` standard deviations of
    a count of the recent window under it, which is a fall."""
    recent = max(0.0, obs.arrival_rate_per_s)
    slow = obs.arrival_rate_slow_per_s
    if slow is None or recent > surge_ratio * slow:
        return recent
    if recent < slow - fall_z * math.sqrt(max(0.0, slow) / max(obs.rate_window_s, 1e-9)):
        return recent
    return max(0.0, slow)


def run_time_for(obs: HeadroomObservation, rate: float, noise: float) -> float | None:
    """The mean run time from the shortest window that can be trusted for an offered load of
    `rate` x S, else `mean_run_time`.

    The estimate over n ended runs (those still going counted by their time so far, as an
    exponential's maximum-likelihood mean) is off by about S / sqrt(n); carried into the load
    a = lambda S it is off by a / sqrt(n) nodes, and the load's own Poisson spread is sqrt(a).
    Their ratio, sqrt(a / n), is at most `noise` (the trend's rule, `trend_for`) once n >=
    a / noise^2. Short runs at a high rate qualify within minutes and follow a mix that changes
    within the hours: on real traffic (GenTD26) the 2-hour window said 33-36 s at the first big
    peak for runs of 28.5 s, and the pool sized on it held 36 warm units on a plateau that 4
    served (BENCHMARKS.md). Long runs at a low rate keep the longest window."""
    for _, mean, ended in obs.run_time_means:
        if mean > 0.0 and ended > 0 and max(0.0, rate) * mean <= noise * noise * ended:
            return mean
    return mean_run_time(obs)


def mean_run_time(obs: HeadroomObservation) -> float | None:
    """Mean seconds a request runs: as measured on ended requests, else by Little's law over
    the slow window (busy = rate x time), else None (no arrival or no busy node seen yet)."""
    if obs.run_time_mean_s is not None and obs.run_time_mean_s > 0.0:
        return obs.run_time_mean_s
    rate, busy = obs.arrival_rate_slow_per_s, obs.busy_mean_slow
    if rate is None or busy is None or rate <= 0.0 or busy <= 0.0:
        return None
    run_s = busy / rate
    # A rate too small to divide by (a subnormal float) says no more than no rate at all.
    return run_s if math.isfinite(run_s) else None


def unheld_supply(obs: HeadroomObservation, lead_s: float, arrival_rate_per_s: float) -> int:
    """Free capacity that lasts the lead time without placeholders: ready free nodes that no
    placeholder holds and that the autoscaler will not remove within `lead_s` (one it removes
    sooner cannot be replaced in time), and nodes on their way beyond what waiting requests and
    placeholders will take.

    An empty node is removed once its scale-down window has run out, unless a pod lands on it
    first and starts the window again. kube-scheduler picks among identical empty nodes at
    random, so arrivals at rate lambda spread over the F free unheld nodes reach each one at
    lambda / F, and one whose window runs out in r seconds goes with probability
    exp(-lambda r / F): the expected count of those is what leaves. With no arrivals every node
    listed within the lead time goes; under a steady stream over a few free nodes almost none
    does (BENCHMARKS.md, "Which empty node a pod takes": counting every listed node as gone
    made the rule order 60-70 warm units in the hours after a peak, on top of free nodes that
    the traffic kept)."""
    unheld = max(0, obs.free_nodes - obs.placeholders_running)
    within = obs.scale_down_in_s[: bisect_right(obs.scale_down_in_s, lead_s)]
    per_node = max(0.0, arrival_rate_per_s) / max(unheld, 1)
    leaving = round(sum(math.exp(-per_node * left) for left in within))
    spare = obs.provisioning_nodes - obs.pending_requests - obs.placeholders_pending
    return max(0, unheld - leaving) + max(0, spare)


def _arrival_rate(obs: HeadroomObservation, policy: ArrivalRateHeadroom) -> int:
    """The rule before issue 15: the quantile of A - D over the lead time (normal approximation
    with continuity correction), or of A alone for small counts or no observed departures."""
    if policy.target_wait_s >= policy.lead_time_s:
        return 0
    arrivals = max(0.0, obs.arrival_rate_per_s) * policy.lead_time_s
    departures = max(0.0, obs.departure_rate_per_s) * policy.lead_time_s
    if departures == 0.0 or arrivals + departures < 20.0:
        need = poisson_quantile(arrivals, policy.quantile)
    else:
        spread = normal_ppf(policy.quantile) * math.sqrt(arrivals + departures)
        need = max(0, math.ceil(arrivals - departures + spread + 0.5))
    return bound_warm_units(need, obs, policy.bounds, policy.max_nodes)


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
