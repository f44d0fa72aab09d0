"""The planner's prediction of a rehearsal, and the policy refusals that name --headroom."""

from __future__ import annotations

import numpy as np
import pytest

from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.policies import parse_policy
from elasticityops.planner.runner import run_policy
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.trace import Trace
from elasticityops.rehearse.predict import check_policy, predict

SETTINGS = ClusterSettings(baseline=1, min_billed_s=0.0, timeline_step_s=10.0)
TRACE = Trace(np.array([0.0, 5.0, 12.0, 200.0]), np.array([30.0, 20.0, 40.0, 10.0]))


@pytest.mark.parametrize(
    ("spec", "words"),
    [("warm:x", "whole number"), ("bogus", "cannot parse"), ("static", "baseline pool")],
)
def test_bad_policies_name_headroom(spec: str, words: str) -> None:
    with pytest.raises(PlannerInputError) as caught:
        check_policy(spec, SETTINGS)
    assert str(caught.value).startswith("--headroom")
    assert words in str(caught.value)


@pytest.mark.parametrize("spec", ["none", "warm:2", "predictive", "predictive:5", "scheduled:00:00=1"])
def test_predicted_metrics_are_the_planners(spec: str) -> None:
    got = predict(TRACE, SETTINGS, spec)
    summary = run_policy(TRACE, SETTINGS, parse_policy(spec, SETTINGS)).summary
    assert got.metrics.p95_wait_s == pytest.approx(summary.time_to_start_s.p95)
    assert got.metrics.busy_gpu_s == pytest.approx(100.0)
    assert got.metrics.idle_gpu_s == pytest.approx(summary.idle_gpu_hours * 3600)
    assert got.metrics.peak_nodes == summary.peak_nodes >= 1
    assert len(got.waits) == len(TRACE)
    assert got.timeline.t_s  # the nodes-vs-demand plot has a predicted line
