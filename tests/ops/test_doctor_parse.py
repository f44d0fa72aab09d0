"""API objects (as the server returns them) to snapshot data."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from elasticityops.ops.doctor import parse


def test_node_info_reads_gpu_capacity_allocatable_and_readiness() -> None:
    node = parse.node_info(
        {
            "metadata": {"name": "n1", "labels": {"cloud.google.com/gke-accelerator": "nvidia-tesla-t4"}},
            "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"nvidia.com/gpu": "1", "cpu": "4"},
                "allocatable": {"cpu": "3920m"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    )
    assert (node.name, node.ready, node.gpu_capacity, node.gpu_allocatable) == ("n1", True, 1, 0)
    assert node.looks_like_gpu_node
    assert node.taints[0].key == "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("name", "is_plugin"),
    [
        ("nvidia-device-plugin-daemonset", True),
        ("nvidia-gpu-device-plugin-small-cos", True),
        ("nvidia-device-plugin-1700000000", True),
        ("dcgm-exporter", False),
        ("kube-proxy", False),
    ],
)
def test_device_plugin_names(name: str, is_plugin: bool) -> None:
    assert parse.is_device_plugin({"metadata": {"name": name}}) is is_plugin


def test_hpa_metric_without_current_value_is_unknown() -> None:
    hpa = parse.hpa_info(
        {
            "metadata": {"name": "h", "namespace": "ns"},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "svc"},
                "metrics": [
                    {
                        "type": "Pods",
                        "pods": {"metric": {"name": "gpu_utilization"}, "target": {"type": "AverageValue"}},
                    },
                    {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}},
                ],
            },
            "status": {
                "currentMetrics": [
                    {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 12}}},
                    {"type": "Pods", "pods": {"metric": {"name": "gpu_utilization"}, "current": {}}},
                ],
                "conditions": [
                    {
                        "type": "ScalingActive",
                        "status": "False",
                        "reason": "FailedGetPodsMetric",
                        "message": "m",
                    }
                ],
            },
        }
    )
    assert [(m.type, m.name, m.has_current) for m in hpa.metrics] == [
        ("Pods", "gpu_utilization", False),
        ("Resource", "cpu", True),
    ]
    assert hpa.target == "Deployment/svc"
    assert hpa.conditions[0].reason == "FailedGetPodsMetric"


def test_pending_pod_keeps_scheduler_message_events_and_gpu_request() -> None:
    pod = parse.pending_pod(
        {
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {
                "containers": [{"resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            },
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/2 nodes",
                    }
                ]
            },
        },
        [
            {
                "reason": "NotTriggerScaleUp",
                "message": "pod didn't trigger scale-up",
                "source": {"component": "cluster-autoscaler"},
            }
        ],
    )
    assert (pod.gpu_request, pod.scheduler_message, pod.tolerates_gpu_taint) == (1, "0/2 nodes", True)
    assert pod.events[0].source == "cluster-autoscaler"


def test_api_service_availability() -> None:
    down = parse.api_service_info(
        {
            "metadata": {"name": "v1beta1.custom.metrics.k8s.io"},
            "status": {
                "conditions": [
                    {
                        "type": "Available",
                        "status": "False",
                        "reason": "MissingEndpoints",
                        "message": "no endpoints",
                    }
                ]
            },
        }
    )
    assert not down.available
    assert "MissingEndpoints" in down.message


def test_region_quotas() -> None:
    quotas = parse.region_quotas(
        {
            "quotas": [
                {"metric": "NVIDIA_T4_GPUS", "limit": 64.0, "usage": 2.0},
                {"metric": "CPUS", "limit": 24},
            ]
        }
    )
    assert quotas == {"NVIDIA_T4_GPUS": (64.0, 2.0), "CPUS": (24.0, 0.0)}


def test_a_node_knows_how_long_it_has_been_ready() -> None:
    raw: dict[str, Any] = {
        "metadata": {"name": "n"},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"}]
        },
    }
    at = dt.datetime(2026, 12, 1, 10, 1, 30, tzinfo=dt.UTC).timestamp()
    assert parse.node_info(raw, at).ready_for_s == 90.0
    assert parse.node_info(raw).ready_for_s is None
    raw["status"]["conditions"][0]["status"] = "False"
    assert parse.node_info(raw, at).ready_for_s is None
