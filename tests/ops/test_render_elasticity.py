"""`eops render elasticity`: the numbers land where the inputs say, the adapter maps the exported
labels, the output says when GPU utilisation is the wrong signal, and YAML round-trips."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from elasticityops.domain.errors import InvalidInput
from elasticityops.ops.elasticity.inputs import GPU_UTIL_SERIES, ElasticityInputs, parse_label
from elasticityops.ops.elasticity.render import render_elasticity

from .manifests import load_documents

BASE = ElasticityInputs(deployment="gpu-inference", namespace="serving")


def _kind(rendered_manifests: list[dict[str, object]], kind: str) -> dict[str, object]:
    return next(m for m in rendered_manifests if m["kind"] == kind)


@pytest.mark.parametrize(
    ("change", "min_r", "max_r", "target", "up", "down"),
    [
        pytest.param({}, 1, 8, "70", 60, 300, id="defaults"),
        pytest.param(
            {"min_replicas": 2, "max_replicas": 20, "target_util": 85},
            2,
            20,
            "85",
            60,
            300,
            id="custom-range",
        ),
        pytest.param({"scale_up_window_s": 0, "scale_down_window_s": 600}, 1, 8, "70", 0, 600, id="windows"),
    ],
)
def test_hpa_numbers(change: dict[str, Any], min_r: int, max_r: int, target: str, up: int, down: int) -> None:
    rendered = render_elasticity(replace(BASE, **change))
    hpa = rendered.manifests[[m["kind"] for m in rendered.manifests].index("HorizontalPodAutoscaler")]
    spec = hpa["spec"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "gpu-inference"}
    assert (spec["minReplicas"], spec["maxReplicas"]) == (min_r, max_r)
    metric = spec["metrics"][0]
    assert metric["type"] == "Pods"
    assert metric["pods"]["metric"]["name"] == "gpu_utilization"
    assert metric["pods"]["target"] == {"type": "AverageValue", "averageValue": target}
    assert spec["behavior"]["scaleUp"]["stabilizationWindowSeconds"] == up
    assert spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == down


def test_adapter_rule_maps_exported_labels_to_pod_and_namespace() -> None:
    values = render_elasticity(BASE).adapter_values
    rule = values["rules"]["custom"][0]
    assert values["rules"]["default"] is False
    assert rule["seriesQuery"].startswith(GPU_UTIL_SERIES)
    assert rule["resources"]["overrides"] == {
        "exported_namespace": {"resource": "namespace"},
        "exported_pod": {"resource": "pod"},
    }
    assert rule["name"]["as"] == "gpu_utilization"
    assert "<<.LabelMatchers>>" in rule["metricsQuery"]
    assert "<<.GroupBy>>" in rule["metricsQuery"]


def test_metric_name_flows_from_adapter_to_hpa() -> None:
    rendered = render_elasticity(replace(BASE, metric_name="gpu_busy_percent"))
    assert rendered.adapter_values["rules"]["custom"][0]["name"]["as"] == "gpu_busy_percent"
    hpa = next(m for m in rendered.manifests if m["kind"] == "HorizontalPodAutoscaler")
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "gpu_busy_percent"


def test_device_plugin_runs_only_on_gpu_nodes_and_tolerates_the_taint() -> None:
    rendered = render_elasticity(replace(BASE, gpu_node_label=("accelerator", "nvidia")))
    for affinity, tolerations in (
        (rendered.device_plugin_values["affinity"], rendered.device_plugin_values["tolerations"]),
        (
            _kind(rendered.manifests, "DaemonSet")["spec"]["template"]["spec"]["affinity"],  # type: ignore[index]
            _kind(rendered.manifests, "DaemonSet")["spec"]["template"]["spec"]["tolerations"],  # type: ignore[index]
        ),
    ):
        term = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ][0]
        assert term["matchExpressions"] == [{"key": "accelerator", "operator": "In", "values": ["nvidia"]}]
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in tolerations


def test_label_without_value_uses_exists() -> None:
    rendered = render_elasticity(
        replace(BASE, gpu_node_label=parse_label("cloud.google.com/gke-accelerator"))
    )
    term = rendered.device_plugin_values["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]
    assert term["matchExpressions"] == [{"key": "cloud.google.com/gke-accelerator", "operator": "Exists"}]


def test_pdb_grace_period_and_selector() -> None:
    rendered = render_elasticity(
        replace(BASE, grace_period_s=900, pod_selector=(("app.kubernetes.io/name", "infer"),))
    )
    pdb = next(m for m in rendered.manifests if m["kind"] == "PodDisruptionBudget")
    assert pdb["spec"] == {
        "maxUnavailable": 1,
        "selector": {"matchLabels": {"app.kubernetes.io/name": "infer"}},
    }
    assert rendered.deployment_patch["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 900
    assert "terminationGracePeriodSeconds 900" in rendered.files["deployment-patch.yaml"]


def test_output_says_when_gpu_utilisation_is_the_wrong_signal() -> None:
    text = render_elasticity(BASE).files["hpa.yaml"]
    assert "WRONG signal when one request saturates the GPU" in text
    assert "queue depth" in text
    single = render_elasticity(replace(BASE, concurrency=1))
    assert any("queue depth" in w for w in single.warnings)
    assert "--concurrency 1" in single.files["hpa.yaml"]
    assert not render_elasticity(replace(BASE, concurrency=16)).warnings


def test_every_file_round_trips() -> None:
    rendered = render_elasticity(BASE)
    docs = []
    for name in ("device-plugin.yaml", "dcgm-exporter.yaml", "hpa.yaml"):
        docs += load_documents(rendered.files[name])
    assert docs == rendered.manifests
    assert load_documents(rendered.files["device-plugin-values.yaml"]) == [rendered.device_plugin_values]
    assert load_documents(rendered.files["prometheus-adapter-values.yaml"]) == [rendered.adapter_values]
    assert load_documents(rendered.files["deployment-patch.yaml"]) == [rendered.deployment_patch]


def test_dcgm_exporter_is_scrapable_and_maps_pods() -> None:
    rendered = render_elasticity(BASE)
    service = next(m for m in rendered.manifests if m["kind"] == "Service")
    assert service["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    ds = [m for m in rendered.manifests if m["kind"] == "DaemonSet"][1]
    container = ds["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"} in container["env"]
    assert container["volumeMounts"][0]["mountPath"] == "/var/lib/kubelet/pod-resources"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param({"min_replicas": 0}, "min", id="min-zero"),
        pytest.param({"max_replicas": 0}, "max", id="max-below-min"),
        pytest.param({"target_util": 150}, "target-util", id="util-over-100"),
        pytest.param({"deployment": "Bad_Name"}, "deployment", id="bad-name"),
        pytest.param({"scale_down_window_s": -1}, "scale-down-window", id="negative-window"),
        pytest.param({"concurrency": 0}, "concurrency", id="zero-concurrency"),
        pytest.param({"gpu_node_label": ("bad key!", None)}, "gpu-node-label", id="bad-label"),
        pytest.param({"prometheus_url": "prometheus:9090"}, "prometheus-url", id="url-without-scheme"),
        pytest.param(
            {"device_plugin_image": "nvcr.io/nvidia/k8s-device-plugin"},
            "device-plugin-image",
            id="untagged-image",
        ),
        pytest.param(
            {"dcgm_image": "nvcr.io/nvidia/k8s/dcgm-exporter:latest"}, "dcgm-image", id="latest-image"
        ),
    ],
)
def test_invalid_inputs_name_the_field(change: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        render_elasticity(replace(BASE, **change))  # type: ignore[arg-type]
    problem = next(p for p in caught.value.problems if p.field == field)
    assert problem.fix
