"""The planner's prediction of one rehearsal: the same trace, the cluster's settings, the same
policy spec (pure; the planner's model on a virtual clock)."""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.model.result import SimTimeSeries
from elasticityops.planner.policies import PolicyChoice, parse_policy
from elasticityops.planner.runner import run_policy
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.summary import wait_times
from elasticityops.planner.trace import Trace
from elasticityops.rehearse.measure import Metrics

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


def predict(trace: Trace, settings: ClusterSettings, spec: str) -> Prediction:
    outcome = run_policy(trace, settings, check_policy(spec, settings))
    s = outcome.summary
    metrics = Metrics(
        p50_wait_s=s.time_to_start_s.p50,
        p95_wait_s=s.time_to_start_s.p95,
        p99_wait_s=s.time_to_start_s.p99,
        idle_gpu_s=s.idle_gpu_hours * 3600.0,
        busy_gpu_s=s.busy_gpu_hours * 3600.0,
        peak_nodes=s.peak_nodes,
    )
    waits = tuple(float(w) for w in wait_times(trace, outcome.result).tolist())
    return Prediction(metrics, waits, outcome.result.timeline, s.policy)
