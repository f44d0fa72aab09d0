"""What the render is asked for: the Deployment, its selector, the scaling bounds and the metric
source, as flags and YAML give them."""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.backends.kubernetes.labels import (
    GPU_PRESENT_LABEL,
)
from elasticityops.knobs import knob

DEVICE_PLUGIN_NAME = "nvidia-device-plugin-daemonset"


DEVICE_PLUGIN_LABEL = {"name": "nvidia-device-plugin-ds"}


DCGM_NAME = "dcgm-exporter"


DCGM_PORT = 9400


GPU_UTIL_SERIES = "DCGM_FI_DEV_GPU_UTIL"


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


def parse_label(text: str) -> tuple[str, str | None]:
    key, sep, value = text.partition("=")
    return (key.strip(), value.strip() if sep else None)


@dataclass(frozen=True)
class ElasticityInputs:
    """What `eops render elasticity` renders; each knob is one of its flags (elasticityops/knobs.py).
    The limits are validate()'s, whose messages say what to pass instead."""

    deployment: str
    namespace: str = knob("default", help="Namespace of the Deployment.")
    min_replicas: int = knob(
        1,
        flag="min",
        unit="replicas",
        ge=1,
        le=10_000,
        help="Minimum replicas (an HPA on a Pods metric cannot scale from 0: no pod, no metric).",
    )
    max_replicas: int = knob(8, flag="max", unit="replicas", ge=1, le=10_000, help="Maximum replicas.")
    target_util: int = knob(70, unit="percent", ge=1, le=100, help="Target average GPU utilisation per pod.")
    scale_up_window_s: int = knob(
        60, flag="scale-up-window", unit="seconds", ge=0, le=3600, help="Scale-up stabilisation window."
    )
    scale_down_window_s: int = knob(
        300, flag="scale-down-window", unit="seconds", ge=0, le=3600, help="Scale-down stabilisation window."
    )
    grace_period_s: int = knob(
        120,
        flag="grace-seconds",
        unit="seconds",
        ge=0,
        le=86_400,
        help="terminationGracePeriodSeconds of the Deployment.",
    )
    concurrency: int | None = knob(
        None,
        unit="requests",
        shown="not given",
        ge=1,
        le=100_000,
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
    prometheus_port: int = knob(80, ge=1, le=65_535, help="Prometheus port for the adapter.")
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


def selector_of(inputs: ElasticityInputs) -> dict[str, str]:
    return dict(inputs.pod_selector) if inputs.pod_selector else {"app": inputs.deployment}
