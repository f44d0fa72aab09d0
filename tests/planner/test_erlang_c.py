"""A static pool with no provisioning is an M/M/c queue: compare with the Erlang C formula."""

from __future__ import annotations

import math

import numpy as np
import pytest

from elasticityops.planner.model import simulate
from elasticityops.planner.settings import ClusterSettings


def erlang_c(c: int, offered: float) -> float:
    """P(wait) for M/M/c with offered load a = lambda/mu (a < c)."""
    term = 1.0
    total = 1.0
    for k in range(1, c):
        term *= offered / k
        total += term
    top = term * offered / c * c / (c - offered)  # a^c / c! * c / (c - a)
    return top / (total + top)


def batch_means(values: np.ndarray, batches: int = 20) -> tuple[float, float]:
    """Mean and its standard error from batch means (the waits are autocorrelated)."""
    means = np.array([b.mean() for b in np.array_split(values, batches)])
    return float(means.mean()), float(means.std(ddof=1) / math.sqrt(batches))


@pytest.mark.parametrize(
    ("servers", "arrival_rate", "mean_service"),
    [
        pytest.param(10, 8.0, 1.0, id="c10-rho0.8"),
        pytest.param(3, 1.5, 1.0, id="c3-rho0.5"),
        pytest.param(50, 4.5, 10.0, id="c50-rho0.9"),
    ],
)
def test_static_pool_matches_erlang_c(servers: int, arrival_rate: float, mean_service: float) -> None:
    rng = np.random.default_rng(servers)
    n = 120_000
    arrivals = np.cumsum(rng.exponential(1.0 / arrival_rate, n))
    durations = rng.exponential(mean_service, n)
    settings = ClusterSettings(baseline=servers, max_nodes=servers)
    result = simulate(arrivals.tolist(), durations.tolist(), settings)
    waits = (np.asarray(result.start_s) - arrivals)[n // 10 :]  # drop the warm-up from empty
    offered = arrival_rate * mean_service
    p_wait = erlang_c(servers, offered)
    mean_wait = p_wait * mean_service / (servers - offered)

    share, share_se = batch_means((waits > 0).astype(np.float64))
    mean, mean_se = batch_means(waits)
    assert abs(share - p_wait) <= 4 * share_se + 0.005, (share, p_wait, share_se)
    assert abs(mean - mean_wait) <= 4 * mean_se + 0.01 * mean_wait, (mean, mean_wait, mean_se)
    assert result.peak_nodes == servers
    assert len(result.node_created_s) == servers


def test_erlang_c_helper_known_value() -> None:
    # textbook value: c=2, a=1 -> C = 1/3
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
