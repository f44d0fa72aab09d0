"""One policy over one trace: simulate and summarise. The seam between CLI/search and the model."""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.planner.model import SimResult, simulate
from elasticityops.planner.policies import PolicyChoice
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.summary import Summary, summarize
from elasticityops.planner.trace import Trace


@dataclass(frozen=True)
class RunOutcome:
    choice: PolicyChoice
    settings: ClusterSettings
    result: SimResult
    summary: Summary


def run_policy(trace: Trace, settings: ClusterSettings, choice: PolicyChoice) -> RunOutcome:
    result = simulate(trace.arrival_s.tolist(), trace.duration_s.tolist(), settings, choice.sizing)
    return RunOutcome(choice, settings, result, summarize(choice.name, trace, result, settings))
