"""Render the GPU elasticity stack for a long-running GPU service (a Deployment).

device plugin -> DCGM exporter -> Prometheus -> Prometheus Adapter -> custom metrics API -> HPA.
`render_elasticity(ElasticityInputs) -> ElasticityRender` is pure; the CLI writes the files.

Where each piece commonly breaks, and what the render does about it:
- The device plugin only runs where a GPU is: node affinity on the GPU label and a toleration of
  GKE's `nvidia.com/gpu` taint. On GKE the plugin is managed by GKE (do not install a second one).
- DCGM exporter labels series with the *GPU's* pod (`pod`, `namespace`); after a Prometheus scrape
  they become `exported_pod` / `exported_namespace` (the scrape target's own labels win). Adapter
  rules that map `pod`/`namespace` then match the exporter pod, not the workload, and the HPA
  shows `<unknown>`. The rules here map the exported labels.
- GPU utilisation is a good signal only when one pod serves many requests at once. When one
  request saturates the GPU (one request per pod, as ElasticityOps jobs do), utilisation is ~100%
  at any load: the HPA climbs to max and stays there. Queue depth per replica is the signal then.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from elasticityops.backends.kubernetes.labels import (
    GPU_PRESENT_LABEL,
    GPU_RESOURCE,
    NAME_LABEL,
    PART_OF_LABEL,
)
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.knobs import knob
from elasticityops.ops.yaml_docs import Document, Manifest, dump_documents

DEVICE_PLUGIN_NAME = "nvidia-device-plugin-daemonset"
DEVICE_PLUGIN_LABEL = {"name": "nvidia-device-plugin-ds"}
DCGM_NAME = "dcgm-exporter"
DCGM_PORT = 9400
GPU_UTIL_SERIES = "DCGM_FI_DEV_GPU_UTIL"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_METRIC = re.compile(r"^[a-z_][a-z0-9_]*$")

GPU_UTIL_WARNING = (
    "GPU utilisation is the WRONG signal when one request saturates the GPU (one request per pod,\nas "
    "ElasticityOps jobs run): utilisation reads ~100% on the first request and the HPA climbs\nto "
    "maxReplicas and stays there. Then scale on queue depth per replica instead (requests\nwaiting / "
    "replicas, an External or Object metric from your queue), or let ElasticityOps run\none Job per "
    "request and size warm capacity with its headroom controller. Utilisation works\nwhen one pod batches "
    "many concurrent requests and utilisation grows with load."
)


def parse_selector(raw: object) -> tuple[tuple[str, str], ...]:
    """`k=v,k2=v2` (or the pairs themselves) as pairs; empty: none given."""
    if isinstance(raw, list | tuple):
        return tuple((str(k), str(v)) for k, v in raw)
    pairs = []
    for item in str(raw).split(","):
        if item.strip():
            key, _, value = item.partition("=")
            pairs.append((key.strip(), value.strip()))
    return tuple(pairs)


def _label(raw: object) -> tuple[str, str | None]:
    if isinstance(raw, tuple):
        return (str(raw[0]), None if raw[1] is None else str(raw[1]))
    return parse_label(str(raw))


@dataclass(frozen=True)
class ElasticityInputs:
    """What `eops render elasticity` renders; each knob is one of its flags (elasticityops/knobs.py).
    The limits are validate()'s, whose messages say what to pass instead."""

    deployment: str
    namespace: str = knob("default", help="Namespace of the Deployment.")
    min_replicas: int = knob(1, flag="min", unit="replicas", help="Minimum replicas, at least 1.")
    max_replicas: int = knob(8, flag="max", unit="replicas", help="Maximum replicas.")
    target_util: int = knob(70, unit="percent", help="Target average GPU utilisation per pod.")
    scale_up_window_s: int = knob(
        60, flag="scale-up-window", unit="seconds", help="Scale-up stabilisation window."
    )
    scale_down_window_s: int = knob(
        300, flag="scale-down-window", unit="seconds", help="Scale-down stabilisation window."
    )
    grace_period_s: int = knob(
        120, flag="grace-seconds", unit="seconds", help="terminationGracePeriodSeconds of the Deployment."
    )
    concurrency: int | None = knob(
        None,
        unit="requests",
        shown="not given",
        help="Requests one pod serves at once (1: utilisation is the wrong signal).",
    )
    pod_selector: tuple[tuple[str, str], ...] = knob(
        (),
        flag="selector",
        metavar="K=V,...",
        parse=parse_selector,
        shown="app=DEPLOYMENT",
        help="The Deployment's pod labels, k=v,k2=v2.",
    )
    metric_name: str = knob("gpu_utilization", help="Custom metric name the adapter exposes.")
    monitoring_namespace: str = knob("gpu-monitoring", help="Namespace of DCGM exporter and the adapter.")
    prometheus_url: str = knob(
        "http://prometheus-server.monitoring.svc", unit="URL", help="Prometheus URL for the adapter."
    )
    prometheus_port: int = knob(80, help="Prometheus port for the adapter.")
    gpu_node_label: tuple[str, str | None] = knob(
        (GPU_PRESENT_LABEL, "true"),
        metavar="LABEL",
        parse=_label,
        shown=f"{GPU_PRESENT_LABEL}=true",
        help="Label of GPU nodes: key or key=value.",
    )
    device_plugin_image: str = knob(
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.1", help="NVIDIA device plugin image, with a pinned tag."
    )
    dcgm_image: str = knob(
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
        help="DCGM exporter image, with a pinned tag.",
    )


@dataclass(frozen=True)
class ElasticityRender:
    files: dict[str, str]
    manifests: list[Manifest]
    device_plugin_values: dict[str, Any]
    adapter_values: dict[str, Any]
    deployment_patch: dict[str, Any]
    warnings: tuple[str, ...] = field(default_factory=tuple)


def selector_of(inputs: ElasticityInputs) -> dict[str, str]:
    return dict(inputs.pod_selector) if inputs.pod_selector else {"app": inputs.deployment}


def validate(inputs: ElasticityInputs) -> None:
    problems = [
        *_name_problems(inputs),
        *_scaling_problems(inputs),
        *_label_problems(inputs),
        *_source_problems(inputs),
    ]
    if problems:
        raise InvalidInput(problems=problems)


def _name_problems(inputs: ElasticityInputs) -> list[FieldProblem]:
    """The Deployment's and the namespaces' names."""
    return [
        FieldProblem(
            name,
            f"{value!r} is not a Kubernetes name",
            "use lower-case letters, digits and '-', at most 63",
        )
        for name, value in (
            ("deployment", inputs.deployment),
            ("namespace", inputs.namespace),
            ("monitoring-namespace", inputs.monitoring_namespace),
        )
        if not _DNS_LABEL.match(value)
    ]


def _scaling_problems(inputs: ElasticityInputs) -> list[FieldProblem]:
    """Replicas, the target, the windows and the concurrency: what the HPA does with the metric."""
    problems: list[FieldProblem] = []
    if inputs.min_replicas < 1:
        problems.append(
            FieldProblem(
                "min",
                f"min replicas {inputs.min_replicas} < 1",
                "an HPA on a Pods metric cannot scale from 0 (no pod, no metric): use --min 1 or more",
            )
        )
    if inputs.max_replicas < max(inputs.min_replicas, 1):
        problems.append(
            FieldProblem(
                "max", f"max replicas {inputs.max_replicas} is below min {inputs.min_replicas}", "raise --max"
            )
        )
    if not 1 <= inputs.target_util <= 100:
        problems.append(
            FieldProblem(
                "target-util",
                f"{inputs.target_util} is not a percentage in 1-100",
                "70 leaves headroom for bursts",
            )
        )
    problems += [
        FieldProblem(
            name,
            f"{seconds} s is outside 0-{cap}",
            "pass seconds, e.g. 60 for scale-up, 300 for scale-down",
        )
        for name, seconds, cap in (
            ("scale-up-window", inputs.scale_up_window_s, 3600),
            ("scale-down-window", inputs.scale_down_window_s, 3600),
            ("grace-seconds", inputs.grace_period_s, 86_400),
        )
        if not 0 <= seconds <= cap
    ]
    if inputs.concurrency is not None and inputs.concurrency < 1:
        problems.append(
            FieldProblem(
                "concurrency",
                f"{inputs.concurrency} is not a request count",
                "pass how many requests one pod serves at once, e.g. 1 or 16",
            )
        )
    return problems


def _label_problems(inputs: ElasticityInputs) -> list[FieldProblem]:
    """The pod selector, the metric's name and the GPU nodes' label."""
    problems = [
        FieldProblem(
            "selector", f"{key}={value} is not a valid label", "write key=value, e.g. app=my-service"
        )
        for key, value in inputs.pod_selector
        if not _LABEL_KEY.match(key) or not _LABEL_VALUE.match(value)
    ]
    if not _METRIC.match(inputs.metric_name):
        problems.append(
            FieldProblem(
                "metric-name",
                f"{inputs.metric_name!r} is not a metric name",
                "use lower-case letters, digits and '_'",
            )
        )
    label_key, label_value = inputs.gpu_node_label
    if not _LABEL_KEY.match(label_key) or (label_value is not None and not _LABEL_VALUE.match(label_value)):
        problems.append(
            FieldProblem(
                "gpu-node-label",
                f"{label_key}={label_value} is not a valid label",
                "write key or key=value, e.g. nvidia.com/gpu.present=true",
            )
        )
    return problems


def _source_problems(inputs: ElasticityInputs) -> list[FieldProblem]:
    """Where the pieces come from: the images (pinned) and Prometheus (a URL)."""
    problems = [
        FieldProblem(
            name,
            f"{image!r} has no pinned tag",
            "pin a release tag: the plugin must match the driver",
        )
        for name, image in (
            ("device-plugin-image", inputs.device_plugin_image),
            ("dcgm-image", inputs.dcgm_image),
        )
        if ":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")
    ]
    if not inputs.prometheus_url.startswith(("http://", "https://")):
        problems.append(
            FieldProblem(
                "prometheus-url",
                f"{inputs.prometheus_url!r} is not an http(s) URL",
                "e.g. http://prometheus-server.monitoring.svc",
            )
        )
    return problems


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


def warnings_for(inputs: ElasticityInputs) -> tuple[str, ...]:
    found: list[str] = []
    if inputs.concurrency == 1:
        found.append(
            "--concurrency 1: one request saturates the GPU, so GPU utilisation cannot tell 1 request from "
            "100; this HPA would sit at maxReplicas. Scale on queue depth per replica instead."
        )
    if inputs.scale_down_window_s < 60:
        found.append(
            f"scale-down window {inputs.scale_down_window_s} s: GPU pods take minutes to come back; "
            "flapping costs cold starts."
        )
    return tuple(found)


def _lines(*lines: str) -> str:
    return "\n".join(lines)


def render_elasticity(inputs: ElasticityInputs) -> ElasticityRender:
    validate(inputs)
    warnings = warnings_for(inputs)
    plugin_values = device_plugin_values(inputs)
    plugin_ds = device_plugin_daemonset(inputs)
    dcgm = dcgm_exporter(inputs)
    a_values = adapter_values(inputs)
    the_hpa = hpa(inputs)
    the_pdb = pdb(inputs)
    patch = deployment_patch(inputs)
    signal_note = GPU_UTIL_WARNING
    if warnings:
        signal_note += "\n\nWARNINGS for these inputs:\n" + "\n".join(f"! {w}" for w in warnings)
    ns, metric = inputs.namespace, inputs.metric_name
    files = {
        "device-plugin-values.yaml": dump_documents(
            [Document(plugin_values)],
            header=_lines(
                "NVIDIA device plugin, Helm values (only where GKE does not manage the plugin: GKE",
                "installs its own with gpu-driver-version; a second plugin fights it).",
                "  helm repo add nvidia https://nvidia.github.io/k8s-device-plugin",
                "  helm install nvidia-device-plugin nvidia/k8s-device-plugin -n kube-system \\",
                "    -f device-plugin-values.yaml",
                "`Failed to initialize NVML` or `no NVIDIA devices found` in its logs: the driver is",
                "missing or does not match the plugin; fix the driver first (eops doctor names it).",
            ),
        ),
        "device-plugin.yaml": dump_documents(
            [Document(plugin_ds)],
            header="The same device plugin as a plain DaemonSet (kubectl apply -f), where Helm is not used",
        ),
        "dcgm-exporter.yaml": dump_documents(
            [Document(m) for m in dcgm],
            header=_lines(
                "DCGM exporter: per-GPU metrics (DCGM_FI_DEV_GPU_UTIL, FB_USED, XID errors) labelled with",
                "the pod that holds the GPU. GKE 1.32.1+ can run a managed DCGM: use one or the other.",
            ),
        ),
        "prometheus-adapter-values.yaml": dump_documents(
            [Document(a_values)],
            header=_lines(
                "Prometheus Adapter, Helm values: exposes DCGM GPU utilisation per pod as the custom",
                f"metric {metric} (custom.metrics.k8s.io/v1beta1).",
                "  helm install prometheus-adapter prometheus-community/prometheus-adapter \\",
                f"    -n {inputs.monitoring_namespace} -f prometheus-adapter-values.yaml",
                "The rule maps exported_pod/exported_namespace, not pod/namespace: after a scrape those",
                "name the exporter pod, and an HPA on them reads <unknown>. Check with:",
                f"  kubectl get --raw '/apis/custom.metrics.k8s.io/v1beta1/namespaces/{ns}/pods/*/{metric}'",
            ),
        ),
        "hpa.yaml": dump_documents(
            [
                Document(
                    the_hpa,
                    comment=_lines(
                        f"Scale {inputs.deployment} on average GPU utilisation per pod "
                        f"(target {inputs.target_util}%).",
                        f"Scale-up waits {inputs.scale_up_window_s} s of sustained load, "
                        f"scale-down {inputs.scale_down_window_s} s",
                        "(HPA default 300 s): a GPU replica that goes away costs a cold node to bring back.",
                        "",
                        signal_note,
                    ),
                ),
                Document(
                    the_pdb,
                    comment=_lines(
                        "At most one replica down at a time for voluntary disruptions: node scale-down",
                        "drains respect it, so the autoscaler cannot empty several GPU nodes of this",
                        "service at once.",
                    ),
                ),
            ]
        ),
        "deployment-patch.yaml": dump_documents(
            [Document(patch)],
            header=_lines(
                f"kubectl -n {ns} patch deployment {inputs.deployment} --patch-file deployment-patch.yaml",
                f"terminationGracePeriodSeconds {inputs.grace_period_s}: the longest request plus the time",
                "to stop taking new ones (handle SIGTERM: fail readiness, finish in-flight work, exit).",
                "The cluster autoscaler honours it on scale-down up to 10 min (upstream",
                "max-graceful-termination-sec); spot reclaims give pods only ~15 s whatever it says.",
            ),
        ),
    }
    return ElasticityRender(
        files=files,
        manifests=[plugin_ds, *dcgm, the_hpa, the_pdb],
        device_plugin_values=plugin_values,
        adapter_values=a_values,
        deployment_patch=patch,
        warnings=warnings,
    )


def parse_label(text: str) -> tuple[str, str | None]:
    key, sep, value = text.partition("=")
    return (key.strip(), value.strip() if sep else None)
