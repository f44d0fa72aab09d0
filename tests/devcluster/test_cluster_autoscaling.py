"""Quota, stockout back-off, baseline resizing and a CI-sized scale run, on the real cluster."""

from __future__ import annotations

import os
import time

import pytest

from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_LABEL
from elasticityops.devcluster.scale import run_scale
from elasticityops.devcluster.workloads import gpu_job

from .helpers import job_condition, wait_for

pytestmark = pytest.mark.cluster


def _autoscaled(api) -> int:
    nodes, _ = api.list("/api/v1/nodes", {"labelSelector": f"{ROLE_LABEL}={ROLE_AUTOSCALED}"})
    return len(nodes)


def _no_autoscaled_nodes_left(dev_cluster, api) -> None:
    """Idle nodes an earlier test left (the Kubernetes tests' burst leaves dozens) would count
    against this test's quota: let them scale down first."""
    with dev_cluster.knobs(baseline=0, scale_down_after=1):
        wait_for(lambda: _autoscaled(api) == 0, timeout=60, what="no idle nodes left from earlier tests")


def test_quota_caps_nodes_and_the_rest_waits(dev_cluster, dev_namespace) -> None:
    ns = dev_namespace
    with dev_cluster.api() as api:
        _no_autoscaled_nodes_left(dev_cluster, api)
    with (
        dev_cluster.knobs(baseline=0, max_nodes=2, provision_delay="fixed:1", scale_down_after=30),
        dev_cluster.api() as api,
    ):
        dev_cluster.set_baseline(0)
        for i in range(4):
            api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job(f"q{i}", run_seconds=4))
        wait_for(lambda: _autoscaled(api) == 2, timeout=30, what="two nodes")
        time.sleep(3)
        assert _autoscaled(api) == 2  # never above the quota
        # Two run, then the other two reuse the same nodes.
        for i in range(4):
            assert wait_for(lambda i=i: job_condition(api, ns, f"q{i}"), timeout=60) == "Complete"
        assert _autoscaled(api) <= 2


def test_stockout_backs_off_then_provisions(dev_cluster, dev_namespace) -> None:
    ns = dev_namespace
    with (
        dev_cluster.knobs(
            baseline=0,
            stockout_probability=1.0,
            backoff_initial=2,
            backoff_max=4,
            provision_delay="fixed:1",
            scale_down_after=1,
        ),
        dev_cluster.api() as api,
    ):
        dev_cluster.set_baseline(0)
        wait_for(lambda: _autoscaled(api) == 0, timeout=30, what="no idle nodes left from earlier tests")
        before = dev_cluster.autoscaler_status()["totals"]["stockouts"]
        api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job("so", run_seconds=1))
        wait_for(lambda: dev_cluster.autoscaler_status()["totals"]["stockouts"] >= before + 2, timeout=30)
        assert dev_cluster.autoscaler_status()["backoff"]  # some pool is backing off
        assert _autoscaled(api) == 0
        dev_cluster.configure_autoscaler(stockout_probability=0.0)
        assert wait_for(lambda: job_condition(api, ns, "so"), timeout=60) == "Complete"


def test_baseline_pool_resizes(dev_cluster) -> None:
    start = dev_cluster.autoscaler_settings.baseline
    dev_cluster.add_baseline_nodes(3)
    assert dev_cluster.node_counts()["baseline"] == start + 3
    dev_cluster.remove_baseline_nodes(3)
    assert dev_cluster.node_counts()["baseline"] == start


def test_scale_run_ci_sized(dev_cluster) -> None:
    """N nodes and N single-GPU Jobs to completion (EOPS_SCALE_CI_N, default 200)."""
    n = int(os.environ.get("EOPS_SCALE_CI_N", "200"))
    before = dev_cluster.autoscaler_settings
    try:
        res = run_scale(dev_cluster, nodes=n, pods=n, namespace="scale-ci", run_seconds=5, timeout=600)
    finally:
        with dev_cluster.api() as api:
            api.delete("/api/v1/namespaces/scale-ci")
        dev_cluster.configure_autoscaler(max_nodes=before.max_nodes)
        dev_cluster.set_baseline(before.baseline, timeout=300)
    assert res.succeeded == n
    print(res.summary())
