"""The planner's prediction of one rehearsal: the same trace, the cluster's settings, the same
policy spec (pure; the planner's model on a virtual clock)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.model.result import SimResult, SimTimeSeries
from elasticityops.planner.policies import PolicyChoice, parse_policy
from elasticityops.planner.runner import run_policy
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.summary import wait_times
from elasticityops.planner.trace import Trace
from elasticityops.rehearse.measure import Metrics, wait_percentiles

FLAG = "--headroom"


@dataclass(frozen=True)
class Prediction:
    metrics: Metrics
    waits: tuple[float, ...]
    timeline: SimTimeSeries
    name: str  # the planner's label of the policy (e.g. baseline:2 for none over a baseline)


def check_policy(spec: str, settings: ClusterSettings, target_wait_s: float = 10.0) -> PolicyChoice:
    """The policy `spec` in the planner's syntax, or PlannerInputError naming --headroom.

    `static` is refused: it is the cluster's own baseline pool, which no gateway flag sets."""
    if spec.strip().lower() == "static":
        raise PlannerInputError(
            f"{FLAG}: static is the cluster's baseline pool, not a gateway policy; start the dev "
            "cluster with `eops dev-cluster up --baseline N` and rehearse `none`"
        )
    try:
        return parse_policy(spec, settings, target_wait_s)
    except PlannerInputError as exc:
        raise PlannerInputError(str(exc).replace("--policy", FLAG, 1)) from None


def predicted_metrics(
    trace: Trace, result: SimResult, start_s: float = 0.0, end_s: float | None = None
) -> Metrics:
    """The simulated run's row over the window the measurement uses: from `start_s` to `end_s`
    (default the horizon, the last request's end), node time without a billing minimum."""
    end = result.horizon_s if end_s is None else min(end_s, result.horizon_s)
    waits = wait_times(trace, result)[trace.arrival_s >= start_s]
    p50, p95, p99 = wait_percentiles(waits.tolist())
    busy = sum(
        max(0.0, min(e, end) - max(b, start_s)) for b, e in zip(result.start_s, result.end_s, strict=True)
    )
    lives = list(zip(result.node_created_s, result.node_deleted_s, strict=True))
    node_s = sum(max(0.0, min(d, end) - max(c, start_s)) for c, d in lives)
    within = [(c, d) for c, d in lives if c <= end]
    return Metrics(p50, p95, p99, max(0.0, node_s - busy), busy, _peak(within, start_s))


def _peak(lives: list[tuple[float, float]], start_s: float) -> int:
    """Most nodes alive at once from `start_s` on; a node is alive on [created, deleted), so
    a deletion and a creation at one instant do not overlap."""
    alive = sum(1 for c, d in lives if c <= start_s < d)
    peak = alive
    events = [(c, 1) for c, _ in lives if c > start_s] + [(d, -1) for _, d in lives if start_s < d < math.inf]
    for _, step in sorted(events):
        alive += step
        peak = max(peak, alive)
    return peak


def predict(
    trace: Trace, settings: ClusterSettings, spec: str, start_s: float = 0.0, end_s: float | None = None
) -> Prediction:
    outcome = run_policy(trace, settings, check_policy(spec, settings))
    waits = wait_times(trace, outcome.result)[trace.arrival_s >= start_s]
    return Prediction(
        predicted_metrics(trace, outcome.result, start_s, end_s),
        tuple(float(w) for w in waits.tolist()),
        outcome.result.timeline,
        outcome.summary.policy,
    )
