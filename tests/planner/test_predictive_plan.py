"""Predictive headroom on a replayed synthetic day: it meets its p95 target for less idle GPU time
than the cheapest warm:K that meets it and than the rule before issue 15. Assertions are on the
model's outputs (waits and idle GPU-hours), never on wall time.

A whole day, not a few hours: in its first hours the rule runs on windows that are still filling
and on a mean run time biased short (only short requests have ended), and on the morning rise
alone the cheapest warm:K is about as cheap (BENCHMARKS.md, "Predictive headroom vs static")."""

from __future__ import annotations

import pytest

from elasticityops.planner.policies import parse_policy
from elasticityops.planner.runner import run_policy
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.summary import Summary
from elasticityops.planner.synthetic import SyntheticSpec, generate
from elasticityops.planner.trace import Trace

TARGET_S = 10.0


@pytest.fixture(scope="module")
def day() -> Trace:
    # seed 5 was not one the defaults were tuned on (0, and 1-4 looked at)
    return generate(SyntheticSpec(days=1.0, bursts_per_day=0.0, seed=5))


def _run(trace: Trace, spec: str) -> Summary:
    settings = ClusterSettings()
    return run_policy(trace, settings, parse_policy(spec, settings, TARGET_S)).summary


def _cheapest_warm_meeting_target(trace: Trace) -> Summary:
    # p95 falls as K grows, so the first K that meets the target is the cheapest (warm runs take
    # ~0.1 s: the engine skips the sizing call for constant policies)
    for k in range(0, 40):
        summary = _run(trace, f"warm:{k}")
        if summary.time_to_start_s.p95 <= TARGET_S:
            return summary
    raise AssertionError("no warm:K up to 40 meets the target")


def test_predictive_meets_the_target_for_far_less_idle_than_the_old_rule(day: Trace) -> None:
    new = _run(day, f"predictive:{TARGET_S:g}")
    old = _run(day, f"predictive-rate:{TARGET_S:g}")
    assert new.time_to_start_s.p95 <= TARGET_S
    assert new.idle_gpu_hours < old.idle_gpu_hours / 4  # the old rule idles more than it runs
    assert new.busy_gpu_hours == pytest.approx(old.busy_gpu_hours)


@pytest.mark.xfail(
    strict=True,
    reason="issue 42, open: since the model spreads pods over empty nodes as kube-scheduler does "
    "(planner/model/empty_nodes.py), predictive:10 idles 563.9 GPU-h here against warm:1's 559.6 "
    "(+0.77%; seeds 0 and 1: -0.3%, +0.9%; BENCHMARKS.md, 'Which empty node a pod takes'; runs of "
    "5 minutes keep the 2-hour run-time window, BENCHMARKS.md 'The run time from the shortest window'); "
    "strict, so a fix shows as a pass to un-mark",
)
def test_predictive_meets_the_target_for_less_idle_than_the_cheapest_static_setting(day: Trace) -> None:
    new = _run(day, f"predictive:{TARGET_S:g}")
    warm = _cheapest_warm_meeting_target(day)
    assert new.time_to_start_s.p95 <= TARGET_S
    assert new.idle_gpu_hours < warm.idle_gpu_hours, (new.idle_gpu_hours, warm.policy, warm.idle_gpu_hours)
    assert new.busy_gpu_hours == pytest.approx(warm.busy_gpu_hours)
