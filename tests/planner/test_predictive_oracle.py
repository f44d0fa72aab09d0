"""The foresight bounds of bench/predictive_oracle.py: their demand arrays, the idle split, and
that they run through the engine's own mechanics (and give its sizing back afterwards)."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from elasticityops.planner.model import engine
from elasticityops.planner.policies import parse_policy
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.synthetic import SyntheticSpec, generate
from elasticityops.planner.trace import Trace
from helpers.bench import load_bench


@pytest.fixture(scope="module")
def oracle() -> ModuleType:
    return load_bench("predictive_oracle")


def test_demand_ahead_is_the_most_running_over_the_horizon(oracle: ModuleType) -> None:
    # runs [0, 5), [2, 12), [20, 21): 2 at once over [2, 5), then 1 until 12, then 0, then 1
    arrivals = np.array([0.0, 2.0, 20.0])
    durations = np.array([5.0, 10.0, 1.0])
    now = oracle.demand_ahead(arrivals, durations, 0.0)
    assert now[:22].tolist() == [1, 1, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0]
    ahead = oracle.demand_ahead(arrivals, durations, 8.0)
    assert ahead[0] == 2  # [0, 8] holds the overlap
    assert ahead[5] == 1
    assert ahead[12] == 1  # [12, 20] reaches the third run


def test_outlasting_counts_runs_still_going_one_lead_ahead(oracle: ModuleType) -> None:
    arrivals = np.array([0.0, 2.0, 20.0])
    durations = np.array([5.0, 10.0, 1.0])
    out = oracle.outlasting(arrivals, durations, 4.0)
    # the first (ends 5) outlasts k + 4 for k in [0, 1); the second (ends 12) for k in [2, 8)
    assert out[:10].tolist() == [1, 0, 1, 1, 1, 1, 1, 1, 0, 0]
    assert out[20] == 0


@pytest.fixture(scope="module")
def trace_and_settings() -> tuple[Trace, ClusterSettings]:
    return generate(SyntheticSpec(days=0.25, bursts_per_day=0.0, seed=3)), ClusterSettings()


def test_idle_split_adds_up_to_the_summary(
    oracle: ModuleType, trace_and_settings: tuple[Trace, ClusterSettings]
) -> None:
    trace, settings = trace_and_settings
    policy = parse_policy("predictive:10", settings, 10.0).sizing
    result, summary = oracle.run_one(trace, settings, policy)
    parts = oracle.idle_parts(trace, result, settings.min_billed_s)
    assert sum(parts.values()) == pytest.approx(summary.idle_gpu_hours, rel=1e-6)
    assert parts["provisioning"] == pytest.approx(summary.provisioning_node_hours, rel=1e-6)
    assert min(parts.values()) >= 0.0


def test_the_oracle_runs_in_the_engine_and_gives_its_sizing_back(
    oracle: ModuleType, trace_and_settings: tuple[Trace, ClusterSettings]
) -> None:
    trace, settings = trace_and_settings
    # engine's own name for it: the one the oracle swaps for its sizing while it runs
    real = engine.size_headroom  # type: ignore[attr-defined]
    ahead = oracle.demand_ahead(trace.arrival_s, trace.duration_s, 460.0)

    def p95(margin: int) -> float:
        policy = oracle.OracleHeadroom(10.0, 460.0, max_nodes=5000, margin=margin, ahead=ahead)
        return float(oracle.run_one(trace, settings, policy)[1].time_to_start_s.p95)

    # more foresight-driven headroom, shorter waits; far below the demand, as slow as none
    generous, starved = p95(20), p95(-200)
    none = oracle.run_one(trace, settings, parse_policy("none", settings).sizing)[1]
    assert generous < 1.0
    assert starved == pytest.approx(none.time_to_start_s.p95)
    assert engine.size_headroom is real  # type: ignore[attr-defined]  # as above
