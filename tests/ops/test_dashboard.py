"""deploy/grafana/elasticityops.json: an importable dashboard whose every query parses with
promtool (Prometheus's own parser) and reads only metrics that exist: the gateway's as a real
gateway's /metrics exports them, the cluster-autoscaler's as its pinned source declares them
(test_dashboard_cluster.py scrapes the running one)."""

from __future__ import annotations

import json
import re
import tarfile
from pathlib import Path
from typing import Any

import httpx
import pytest

from elasticityops.devcluster.autoscaler_source import find_source
from helpers.server import REPO, running_server

from .promql import (
    check_with_promtool,
    dashboard_queries,
    exported_labels,
    exported_series,
    grouping_labels,
    metric_names,
)

DASHBOARD_PATH = REPO / "deploy" / "grafana" / "elasticityops.json"
AUTOSCALER_PREFIX = "cluster_autoscaler_"
SCRAPE_TOKEN = "dashboard-scrape-0123456789abcdef"


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD_PATH.read_text())
    return loaded


def _names(dashboard: dict[str, Any]) -> set[str]:
    return {name for _, expr in dashboard_queries(dashboard) for name in metric_names(expr)}


def test_the_dashboard_is_importable_with_a_prometheus_datasource_variable(dashboard: dict[str, Any]) -> None:
    [variable] = [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert all(p["datasource"] == {"type": "prometheus", "uid": f"${{{variable['name']}}}"} for p in panels)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells = [
        (x, y)
        for p in dashboard["panels"]
        for x in range(p["gridPos"]["x"], p["gridPos"]["x"] + p["gridPos"]["w"])
        for y in range(p["gridPos"]["y"], p["gridPos"]["y"] + p["gridPos"]["h"])
    ]
    assert len(cells) == len(set(cells)), "panels overlap"
    titles = {title for title, _ in dashboard_queries(dashboard)}
    for wanted in (
        "Invocations by state",
        "Time to start (percentiles)",
        "Queue depth",
        "GPUs in use vs budget",
    ):
        assert wanted in titles
    assert {"Headroom: warm units wanted and held", "Cost per hour", "Nodes by state"} <= titles
    assert "Cost per hour by capacity" in titles


@pytest.mark.parametrize(
    ("expr", "labels"),
    [
        pytest.param("sum(rate(x_total[5m]))", set(), id="a-total"),
        pytest.param("sum by (capacity) (rate(x_total[5m])) * 3600", {"capacity"}, id="by"),
        pytest.param("max by (le, state) (h) + on (gpu_type) b", {"le", "state", "gpu_type"}, id="by-and-on"),
        pytest.param('sum without (phase) (x{function="by (nothing)"})', set(), id="without-and-strings"),
    ],
)
def test_grouping_labels_are_read_off_a_query(expr: str, labels: set[str]) -> None:
    assert grouping_labels(expr) == labels


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        pytest.param("max by (state) (eops_invocations)", {"eops_invocations"}, id="grouping-labels"),
        pytest.param(
            'sum(rate(x_total{phase="run", le=~"1|2"}[$__rate_interval])) * 3600', {"x_total"}, id="matchers"
        ),
        pytest.param("a + on (gpu_type) group_left b offset 5m", {"a", "b"}, id="vector-matching"),
        pytest.param(
            "histogram_quantile(0.99, sum(rate(h_bucket[5m])) by (le))", {"h_bucket"}, id="by-after"
        ),
        pytest.param("topk(5, m) > bool 1e3", {"m"}, id="numbers-and-bool"),
    ],
)
def test_metric_names_are_read_off_a_query(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_every_query_parses_with_promtool(dashboard: dict[str, Any], tmp_path: Path) -> None:
    exprs = [expr for _, expr in dashboard_queries(dashboard)]
    done = check_with_promtool(exprs, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(exprs)} rules found" in done.stdout
    broken = check_with_promtool([*exprs, "sum by (le (rate(x[5m]))"], tmp_path)  # the check can fail
    assert broken.returncode != 0
    assert "dashboard:query_" in broken.stdout + broken.stderr


def test_every_gateway_metric_is_exported(dashboard: dict[str, Any], tmp_path: Path) -> None:
    wanted = {name for name in _names(dashboard) if not name.startswith(AUTOSCALER_PREFIX)}
    assert {"eops_invocations", "eops_time_to_start_seconds_bucket", "eops_queue_depth"} <= wanted
    # Warm capacity and a per-type budget, so that their labelled gauges have samples; one
    # invocation run to its end, so that the histograms have observations.
    args = ("--gpus", "2", "--example", "--headroom", "warm:1", "--gpu-budget", "nvidia-tesla-t4=2")
    # Scraped as Prometheus would scrape a gateway with a scrape token (the chart's ServiceMonitor
    # with metrics.tokenSecretName): the dashboard reads the same series.
    scrape = {"Authorization": f"Bearer {SCRAPE_TOKEN}"}
    env = {"EOPS_METRICS_TOKEN": SCRAPE_TOKEN}
    with running_server(tmp_path / "gw", *args, env=env) as gateway, gateway.client() as http:
        done = http.post("/v1/functions/hello/invocations", params={"wait": 30}, json={"name": "Ada"})
        assert done.json()["state"] == "succeeded", done.text
        assert httpx.get(f"{gateway.url}/metrics", timeout=10).status_code == 401
        exposition = httpx.get(f"{gateway.url}/metrics", headers=scrape, timeout=10).text
    exported = exported_series(exposition)
    assert wanted <= exported, f"not exported: {sorted(wanted - exported)}"
    # Every label a gateway query groups or matches by is on the samples of the series it reads.
    labels = exported_labels(exposition)
    missing = [
        (expr, name)
        for _, expr in dashboard_queries(dashboard)
        for name in grouping_labels(expr)
        if (read := metric_names(expr) - {n for n in metric_names(expr) if n.startswith(AUTOSCALER_PREFIX)})
        and not any(name in labels.get(series, set()) for series in read)
    ]
    assert missing == [], f"grouped by a label no sample has: {missing}"
    [by_capacity] = [e for t, e in dashboard_queries(dashboard) if t == "Cost per hour by capacity"]
    assert grouping_labels(by_capacity) == {"capacity"}
    # The cost panels name the per-invocation cost counters (docs/cost.md).
    assert {"eops_invocation_node_seconds_total", "eops_invocation_cost_dollars_total"} <= wanted


def declared_autoscaler_metrics() -> set[str]:
    """`cluster_autoscaler_<Name>` of every metric the pinned autoscaler's metrics.go declares."""
    source = find_source()
    path = "cluster-autoscaler/metrics/metrics.go"
    if source.is_tarball:
        with tarfile.open(source.path, "r:gz") as tar:
            member = tar.extractfile(path)
            assert member is not None
            code = member.read().decode()
    else:
        code = (source.path / "metrics" / "metrics.go").read_text()
    assert 'caNamespace           = "cluster_autoscaler"' in code
    return {AUTOSCALER_PREFIX + name for name in re.findall(r'Name:\s+"(\w+)"', code)}


def test_every_autoscaler_metric_is_declared_by_the_pinned_autoscaler(dashboard: dict[str, Any]) -> None:
    wanted = {name for name in _names(dashboard) if name.startswith(AUTOSCALER_PREFIX)}
    assert len(wanted) >= 5
    declared = declared_autoscaler_metrics()
    assert wanted <= declared, f"not declared by cluster-autoscaler: {sorted(wanted - declared)}"
