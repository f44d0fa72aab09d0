"""The inputs checked before anything is rendered: every problem at once, each naming its flag and the
fix."""

from __future__ import annotations

import re

from elasticityops import knobs
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.ops.elasticity.inputs import ElasticityInputs

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_METRIC = re.compile(r"^[a-z_][a-z0-9_]*$")


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
    """Replicas, the target, the windows and the concurrency: each within the range its knob
    declares (elasticity/inputs.py), and max at least min."""
    problems = knobs.problems(inputs, where=lambda knob: knob.name)
    if inputs.max_replicas < inputs.min_replicas:
        problems.append(
            FieldProblem(
                "max", f"max replicas {inputs.max_replicas} is below min {inputs.min_replicas}", "raise --max"
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
