"""The objects the cluster is given: the ComputeClass (ordered GPU fallbacks) and node
auto-provisioning's config file, as plain data."""

from __future__ import annotations

from typing import Any

from elasticityops.ops.gke.inputs import GPU_SHAPES, GkeInputs
from elasticityops.ops.gke.sizing import GkeSizing
from elasticityops.ops.yaml_docs import Manifest

COMPUTE_CLASS_NAME = "eops-gpu"


def _rule(inputs: GkeInputs, gpu_type: str, spot: bool) -> dict[str, Any]:
    """One ComputeClass priority: this GPU, on its machine, in this market, in every zone."""
    machine = inputs.machine if gpu_type == inputs.gpu_type else GPU_SHAPES[gpu_type].machine_type
    rule: dict[str, Any] = {
        "machineType": machine,
        "spot": spot,
        "gpu": {"type": gpu_type, "count": 1, "driverVersion": "latest"},
        "location": {"zones": list(inputs.zones)},
    }
    if inputs.preload_disk_image:
        rule["storage"] = {
            "secondaryBootDisks": [
                {
                    "diskImageName": inputs.preload_disk_image,
                    "project": inputs.project,
                    "mode": "CONTAINER_IMAGE_CACHE",
                }
            ]
        }
    return rule


def compute_class(inputs: GkeInputs) -> Manifest:
    """Ordered fallbacks: primary GPU spot -> on-demand, then the fallback GPU the same way."""
    gpu_types = [inputs.gpu_type] + ([inputs.fallback_gpu_type] if inputs.fallback_gpu_type else [])
    markets = [True, False] if inputs.spot else [False]
    return {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": COMPUTE_CLASS_NAME, "labels": {"app.kubernetes.io/part-of": "elasticityops"}},
        "spec": {
            "priorities": [_rule(inputs, gpu_type, spot) for gpu_type in gpu_types for spot in markets],
            "nodePoolAutoCreation": {"enabled": True},
            # Move work back to the cheaper, earlier rule when it has capacity again.
            "activeMigration": {"optimizeRulePriority": True},
            # DoNotScaleUp: a pod that fits no rule waits visibly Pending instead of landing on
            # an unplanned, unbudgeted machine shape.
            "whenUnsatisfiable": "DoNotScaleUp",
        },
    }


def nap_config(inputs: GkeInputs, sizing: GkeSizing) -> dict[str, Any]:
    """The file `gcloud container clusters create --autoprovisioning-config-file` reads."""
    limits: list[dict[str, Any]] = [
        {"resourceType": "cpu", "minimum": 0, "maximum": sizing.nap_cpu_limit},
        {"resourceType": "memory", "minimum": 0, "maximum": sizing.nap_memory_limit_gb},
        {"resourceType": inputs.gpu_type, "minimum": 0, "maximum": sizing.gpu_limit},
    ]
    if inputs.fallback_gpu_type:
        limits.append(
            {"resourceType": inputs.fallback_gpu_type, "minimum": 0, "maximum": sizing.fallback_gpu_limit}
        )
    return {
        "resourceLimits": limits,
        "autoprovisioningLocations": list(inputs.zones),
        "management": {"autoRepair": True, "autoUpgrade": True},
    }
