"""Baseline resizing and a CI-sized scale run, on the session's cluster (the quota and a
stocked-out zone are tested against upstream's autoscaler in test_autoscaler.py)."""

from __future__ import annotations

import os
from typing import Any

import pytest

from elasticityops.devcluster.scale import run_scale

pytestmark = [pytest.mark.cluster, pytest.mark.cluster_lane("headroom")]


def test_baseline_pool_resizes(dev_cluster: Any) -> None:
    start = dev_cluster.autoscaler_settings.baseline
    dev_cluster.add_baseline_nodes(3)
    assert dev_cluster.node_counts()["baseline"] == start + 3
    dev_cluster.remove_baseline_nodes(3)
    assert dev_cluster.node_counts()["baseline"] == start


def test_scale_run_ci_sized(dev_cluster: Any) -> None:
    """N nodes and N single-GPU Jobs to completion (EOPS_SCALE_CI_N, default 200)."""
    n = int(os.environ.get("EOPS_SCALE_CI_N", "200"))
    before = dev_cluster.autoscaler_settings
    try:
        res = run_scale(dev_cluster, nodes=n, pods=n, namespace="scale-ci", run_seconds=5, timeout=600)
    finally:
        with dev_cluster.api() as api:
            api.delete("/api/v1/namespaces/scale-ci")
        dev_cluster.set_baseline(before.baseline, timeout=300)
    assert res.succeeded == n
    print(res.summary())
