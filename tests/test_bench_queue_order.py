"""bench/rehearse_queue_order.py's measure of the order a cluster served waiting invocations in."""

from __future__ import annotations

import numpy as np
import pytest

from helpers.bench import load_bench


def test_the_share_of_newer_first_is_0_for_first_come_first_served_and_1_for_last_come() -> None:
    share = load_bench("rehearse_queue_order").newer_first_share
    arrived = np.array([0.0, 1.0, 2.0, 3.0])
    fifo = np.array([10.0, 20.0, 30.0, 40.0])
    lifo = np.array([40.0, 30.0, 20.0, 10.0])
    assert share(arrived, fifo, 3.0) == (0.0, 6)
    assert share(arrived, lifo, 3.0) == (1.0, 6)
    # a request that did not wait is in no pair
    quick = np.array([0.5, 20.0, 30.0, 40.0])
    assert share(arrived, quick, 3.0) == (0.0, 3)
    assert np.isnan(share(arrived, arrived, 3.0)[0])


@pytest.mark.parametrize("seed", [0, 1])
def test_a_random_order_comes_out_near_half(seed: int) -> None:
    share = load_bench("rehearse_queue_order").newer_first_share
    rng = np.random.default_rng(seed)
    arrived = np.arange(60, dtype=float)
    started = 100.0 + rng.permutation(60).astype(float)
    value, pairs = share(arrived, started, 3.0)
    assert pairs == 60 * 59 // 2
    assert 0.35 < value < 0.65
