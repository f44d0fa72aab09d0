"""The stack's objects, each a pure function of the inputs: the device plugin, the DCGM exporter, the
Prometheus Adapter's rule, the HPA, its PodDisruptionBudget and the Deployment's patch."""

from __future__ import annotations

from typing import Any

from elasticityops.backends.kubernetes.labels import (
    GPU_RESOURCE,
    NAME_LABEL,
    PART_OF_LABEL,
)
from elasticityops.ops.elasticity.inputs import (
    DCGM_NAME,
    DCGM_PORT,
    DEVICE_PLUGIN_LABEL,
    DEVICE_PLUGIN_NAME,
    GPU_UTIL_SERIES,
    ElasticityInputs,
    selector_of,
)
from elasticityops.ops.yaml_docs import Manifest


def _gpu_affinity(inputs: ElasticityInputs) -> dict[str, Any]:
    key, value = inputs.gpu_node_label
    expression: dict[str, Any] = (
        {"key": key, "operator": "Exists"}
        if value is None
        else {"key": key, "operator": "In", "values": [value]}
    )
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    }


_GPU_TOLERATION = {"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}


def device_plugin_values(inputs: ElasticityInputs) -> dict[str, Any]:
    """Values for the nvidia/k8s-device-plugin Helm chart."""
    repository, _, tag = inputs.device_plugin_image.rpartition(":")
    return {
        "image": {"repository": repository, "tag": tag},
        "priorityClassName": "system-node-critical",
        "affinity": _gpu_affinity(inputs),
        "tolerations": [_GPU_TOLERATION],
        # Keep running (and logging why) on a node whose driver is missing, instead of crash-looping
        # without the NVML message that says what is wrong.
        "failOnInitError": False,
    }


def device_plugin_daemonset(inputs: ElasticityInputs) -> Manifest:
    """The same plugin as a plain DaemonSet, for clusters without Helm."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": DEVICE_PLUGIN_NAME,
            "namespace": "kube-system",
            "labels": dict(DEVICE_PLUGIN_LABEL),
        },
        "spec": {
            "selector": {"matchLabels": dict(DEVICE_PLUGIN_LABEL)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": dict(DEVICE_PLUGIN_LABEL)},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "affinity": _gpu_affinity(inputs),
                    "tolerations": [_GPU_TOLERATION],
                    "containers": [
                        {
                            "name": "nvidia-device-plugin-ctr",
                            "image": inputs.device_plugin_image,
                            "env": [{"name": "FAIL_ON_INIT_ERROR", "value": "false"}],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "volumeMounts": [
                                {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"}
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "device-plugin", "hostPath": {"path": "/var/lib/kubelet/device-plugins"}}
                    ],
                },
            },
        },
    }


def dcgm_exporter(inputs: ElasticityInputs) -> list[Manifest]:
    labels = {NAME_LABEL: DCGM_NAME, PART_OF_LABEL: "elasticityops"}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": inputs.monitoring_namespace}}
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": DCGM_NAME, "namespace": inputs.monitoring_namespace, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {NAME_LABEL: DCGM_NAME}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "affinity": _gpu_affinity(inputs),
                    "tolerations": [_GPU_TOLERATION],
                    "containers": [
                        {
                            "name": "exporter",
                            "image": inputs.dcgm_image,
                            "env": [
                                # Map each GPU to the pod holding it (via the kubelet's pod-resources
                                # socket): this is what puts pod/namespace labels on the series.
                                {"name": "DCGM_EXPORTER_KUBERNETES", "value": "true"},
                                {"name": "DCGM_EXPORTER_LISTEN", "value": f":{DCGM_PORT}"},
                            ],
                            "ports": [{"name": "metrics", "containerPort": DCGM_PORT}],
                            # Profiling metrics (DCGM_FI_PROF_*) need SYS_ADMIN.
                            "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}},
                            "readinessProbe": {
                                "httpGet": {"path": "/health", "port": DCGM_PORT},
                                "periodSeconds": 10,
                            },
                            "volumeMounts": [
                                {
                                    "name": "pod-resources",
                                    "mountPath": "/var/lib/kubelet/pod-resources",
                                    "readOnly": True,
                                }
                            ],
                        }
                    ],
                    "volumes": [
                        {"name": "pod-resources", "hostPath": {"path": "/var/lib/kubelet/pod-resources"}}
                    ],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": DCGM_NAME,
            "namespace": inputs.monitoring_namespace,
            "labels": labels,
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(DCGM_PORT)},
        },
        "spec": {
            "selector": {NAME_LABEL: DCGM_NAME},
            "ports": [{"name": "metrics", "port": DCGM_PORT, "targetPort": "metrics"}],
        },
    }
    return [namespace, daemonset, service]


def adapter_rule(inputs: ElasticityInputs) -> dict[str, Any]:
    """One Prometheus Adapter rule: DCGM GPU utilisation per pod, under `metric_name`."""
    return {
        "seriesQuery": f'{GPU_UTIL_SERIES}{{exported_namespace!="",exported_pod!=""}}',
        "resources": {
            "overrides": {
                "exported_namespace": {"resource": "namespace"},
                "exported_pod": {"resource": "pod"},
            }
        },
        "name": {"matches": f"^{GPU_UTIL_SERIES}$", "as": inputs.metric_name},
        # A pod with several GPUs reports one series per GPU: average them, over a minute so one
        # scrape gap does not flip the HPA to <unknown>.
        "metricsQuery": "avg(avg_over_time(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)",
    }


def adapter_values(inputs: ElasticityInputs) -> dict[str, Any]:
    """Values for the prometheus-community/prometheus-adapter Helm chart."""
    return {
        "prometheus": {"url": inputs.prometheus_url, "port": inputs.prometheus_port},
        "rules": {"default": False, "custom": [adapter_rule(inputs)]},
    }


def hpa(inputs: ElasticityInputs) -> Manifest:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": f"{inputs.deployment}-gpu", "namespace": inputs.namespace},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": inputs.deployment},
            "minReplicas": inputs.min_replicas,
            "maxReplicas": inputs.max_replicas,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": inputs.metric_name},
                        "target": {"type": "AverageValue", "averageValue": str(inputs.target_util)},
                    },
                }
            ],
            "behavior": {
                "scaleUp": {
                    "stabilizationWindowSeconds": inputs.scale_up_window_s,
                    # A new replica usually needs a new GPU node (minutes): add a few at a time.
                    "policies": [{"type": "Pods", "value": 2, "periodSeconds": 60}],
                    "selectPolicy": "Max",
                },
                "scaleDown": {
                    "stabilizationWindowSeconds": inputs.scale_down_window_s,
                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}],
                    "selectPolicy": "Min",
                },
            },
        },
    }


def pdb(inputs: ElasticityInputs) -> Manifest:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": f"{inputs.deployment}-gpu", "namespace": inputs.namespace},
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_of(inputs)}},
    }


def deployment_patch(inputs: ElasticityInputs) -> dict[str, Any]:
    """A strategic-merge patch for the Deployment: `kubectl patch deployment NAME --patch-file`."""
    return {"spec": {"template": {"spec": {"terminationGracePeriodSeconds": inputs.grace_period_s}}}}
