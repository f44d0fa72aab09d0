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


def test_without_warmup_the_row_is_the_planners_summary_on_a_real_load() -> None:
    from elasticityops.planner.distributions import parse_distribution
    from elasticityops.rehearse.loads import compressed_day

    trace = compressed_day(20.0, seed=2)
    settings = ClusterSettings(
        provision_delay=parse_distribution("lognormal:median=60,p95=120"),
        scale_down_after_s=120.0,
        min_billed_s=0.0,
    )
    for spec in ("none", "warm:10"):
        got = predict(trace, settings, spec).metrics
        summary = run_policy(trace, settings, parse_policy(spec, settings)).summary
        assert got.idle_gpu_s == pytest.approx(summary.idle_gpu_hours * 3600)
        assert got.busy_gpu_s == pytest.approx(summary.busy_gpu_hours * 3600)
        assert got.peak_nodes == summary.peak_nodes
        assert got.p99_wait_s == pytest.approx(summary.time_to_start_s.p99)


def test_a_warmup_leaves_out_the_requests_before_it_and_the_time_before_it() -> None:
    whole = predict(TRACE, SETTINGS, "none")
    later = predict(TRACE, SETTINGS, "none", start_s=100.0)
    assert len(later.waits) == 1  # only the request arriving at 200 s
    assert later.metrics.busy_gpu_s == pytest.approx(10.0)
    assert later.metrics.idle_gpu_s < whole.metrics.idle_gpu_s
    assert later.metrics.p95_wait_s == pytest.approx(later.waits[0])


def test_a_window_that_ends_at_the_last_arrival_leaves_out_the_tail() -> None:
    whole = predict(TRACE, SETTINGS, "none")
    cut = predict(TRACE, SETTINGS, "none", end_s=100.0)
    # Runs 0-30, 5-25 and 12-52 (or later, if they waited) all end before 100 s.
    assert cut.metrics.busy_gpu_s == pytest.approx(90.0)
    assert cut.metrics.idle_gpu_s < whole.metrics.idle_gpu_s
    assert cut.metrics.idle_gpu_s >= 100.0 - 90.0  # the baseline node alone is up all along
