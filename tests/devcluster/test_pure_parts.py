"""Distributions, settings, node manifests, kwok stages and the snapshot builder (no cluster)."""

from __future__ import annotations

import random
import statistics

import pytest
import yaml

from elasticityops.devcluster.autoscaler_loop import pod_gpus, snapshot_from
from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.devcluster.nodes import baseline_nodes, gpu_node, node_ready
from elasticityops.devcluster.stages import completion_stages, render_kwok_config
from elasticityops.planner.distributions import parse_distribution
from elasticityops.planner.errors import PlannerInputError


# The dev cluster's provision_delay is the planner's spec language, parsed by the planner; kind
# and two quantiles pin each distribution (a lognormal's 5th percentile is median^2 / p95).
@pytest.mark.parametrize(
    ("spec", "kind", "p5", "median", "p95"),
    [
        ("fixed:120", "fixed", 120, 120, 120),
        ("fixed:90", "fixed", 90, 90, 90),
        ("uniform:60,180", "uniform", 66, 120, 174),
        ("lognormal:median=240,p95=420", "lognormal", 240 * 240 / 420, 240, 420),
    ],
)
def test_parse_delay(spec: str, kind: str, p5: float, median: float, p95: float) -> None:
    d = parse_distribution(spec)
    assert d.kind == kind
    assert [d.quantile(0.05), d.median, d.quantile(0.95)] == pytest.approx([p5, median, p95])
    assert parse_distribution(str(d)) == d
    assert AutoscalerSettings(provision_delay=spec).validated().provision_delay == spec


@pytest.mark.parametrize(
    "spec",
    # "90" meant fixed:90 to the dev cluster's own parser; the one language refuses a bare number
    ["", "fixed:-1", "uniform:5,1", "lognormal:median=300,p95=200", "gamma:1", "x", "90"],
)
def test_parse_delay_rejects(spec: str) -> None:
    with pytest.raises(PlannerInputError, match="--provision-delay"):
        parse_distribution(spec)
    with pytest.raises(ValueError, match="--provision-delay"):
        AutoscalerSettings(provision_delay=spec).validated()


def test_lognormal_matches_its_median_and_p95() -> None:
    d = parse_distribution("lognormal:median=240,p95=420")
    rng = random.Random(7)
    xs = sorted(d.sample(rng) for _ in range(20_000))
    assert statistics.median(xs) == pytest.approx(240, rel=0.05)
    assert xs[int(0.95 * len(xs))] == pytest.approx(420, rel=0.05)


def test_settings_roundtrip_and_validation(tmp_path) -> None:
    s = AutoscalerSettings(baseline=3, provision_delay="uniform:1,2")
    s.write(tmp_path / "a.json")
    assert AutoscalerSettings.read(tmp_path / "a.json") == s
    with pytest.raises(ValueError, match="unknown"):
        AutoscalerSettings.from_json({"baseline": 1, "bogus": 2})
    with pytest.raises(ValueError, match="stockout_probability"):
        AutoscalerSettings(stockout_probability=2).validated()


def test_gpu_node_looks_like_gke_t4() -> None:
    n = gpu_node("n1", pool="p", zone="us-central1-b", role="baseline")
    labels = n["metadata"]["labels"]
    assert labels["cloud.google.com/gke-accelerator"] == "nvidia-tesla-t4"
    assert labels["node.kubernetes.io/instance-type"] == "n1-standard-4"
    assert labels["cloud.google.com/gke-nodepool"] == "p"
    assert labels["topology.kubernetes.io/zone"] == "us-central1-b"
    assert n["spec"]["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert n["status"]["allocatable"] | {} == {
        "cpu": "4",
        "memory": "15Gi",
        "nvidia.com/gpu": "1",
        "pods": "110",
        "ephemeral-storage": "100Gi",
    }
    assert n["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert len({x["metadata"]["labels"]["topology.kubernetes.io/zone"] for x in baseline_nodes(8)}) == 4


def test_completion_stages_are_exclusive_and_jitter_free() -> None:
    annotated, job_default = completion_stages()
    keys_a = {e["key"]: e["operator"] for e in annotated["spec"]["selector"]["matchExpressions"]}
    keys_b = {e["key"]: e["operator"] for e in job_default["spec"]["selector"]["matchExpressions"]}
    ann = '.metadata.annotations["eops.dev/run-seconds"]'
    assert (keys_a[ann], keys_b[ann]) == ("Exists", "DoesNotExist")
    for st in (annotated, job_default):
        assert not any("jitter" in k.lower() for k in st["spec"]["delay"])


def test_kwok_config_is_valid_multi_document_yaml() -> None:
    stock = (
        "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: node-initialize\n---\n"
        "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n  name: pod-ready\n"
    )
    docs = list(yaml.safe_load_all(render_kwok_config(stock, "127.0.0.1:1234", 240)))
    assert docs[0]["kind"] == "KwokConfiguration"
    # Ours replace the stock pod-ready; the stock node stage is kept.
    assert [d["metadata"]["name"] for d in docs[1:]] == [
        "eops-pod-ready",
        "eops-pod-complete-annotated",
        "eops-pod-complete-job-default",
        "node-initialize",
    ]
    assert docs[0]["options"]["serverAddress"] == "127.0.0.1:1234"


def _pod(
    name: str, *, node: str | None = None, gpus: int = 1, phase: str = "Pending", unsched: bool = True
) -> dict:
    pod: dict = {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]},
        "status": {"phase": phase},
    }
    if node:
        pod["spec"]["nodeName"] = node
    if unsched:
        pod["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    return pod


def test_snapshot_from_listed_objects() -> None:
    nodes = [
        gpu_node("n1", pool="p", zone="z", role="autoscaled")
        | {
            "status": {
                "allocatable": {"nvidia.com/gpu": "1"},
                "conditions": [{"type": "Ready", "status": "True"}],
            }
        }
    ]
    pods = [_pod("a", node="n1", phase="Running", unsched=False), _pod("b"), _pod("c", gpus=0)]
    snap = snapshot_from(nodes, pods, now=1e10, cutoff=-10)
    assert snap.nodes[0].gpus_requested == 1
    assert snap.nodes[0].ready
    assert [p.key for p in snap.pending] == ["ns/b"]
    assert pod_gpus(_pod("x", gpus=3)) == 3


def test_node_ready_reads_the_ready_condition() -> None:
    assert node_ready(gpu_node("n1", pool="p", zone="z", role="baseline", now="2026-01-01T00:00:00Z"))
    assert not node_ready(gpu_node("n1", pool="p", zone="z", role="autoscaled"))  # kwok readies it
    assert not node_ready({"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    assert not node_ready({})


def test_benchmark_autoscaler_settings_are_valid_and_keep_nodes() -> None:
    from elasticityops.devcluster.config import AutoscalerSettings

    knobs = AutoscalerSettings.for_benchmarks(0).validated()
    assert knobs.max_nodes == 1
    assert knobs.provision_delay == "fixed:5"
    assert knobs.scale_down_after == 3600.0
