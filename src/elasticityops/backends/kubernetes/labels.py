"""Names shared by the manifests, the watch selectors and the ops renders."""

from __future__ import annotations

from elasticityops.domain.functions import Priority

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "elasticityops"
INSTANCE_LABEL = "elasticityops.dev/instance"
FUNCTION_LABEL = "elasticityops.dev/function"
INVOCATION_LABEL = "elasticityops.dev/invocation"
# Which attempt of the invocation a Job (and its pod) runs: after a preemption the old attempt's
# Job may still report while it goes away, and that is no news of the new attempt.
ATTEMPT_LABEL = "elasticityops.dev/attempt"
INVOCATION_ANNOTATION = "elasticityops.dev/invocation-id"
GPU_TYPE_LABEL = "elasticityops.dev/gpu-type"  # the GPU type a Job was launched on
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"

GPU_RESOURCE = "nvidia.com/gpu"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
DRIVER_VERSION_LABEL = "cloud.google.com/gke-gpu-driver-version"

PRIORITY_CLASSES: dict[Priority, str] = {
    Priority.high: "eops-high",
    Priority.normal: "eops-normal",
    Priority.low: "eops-low",
}
PLACEHOLDER_PRIORITY_CLASS = "eops-placeholder"
PLACEHOLDER_PRIORITY = -10  # the cluster autoscaler's expendable cutoff: still triggers scale-up
JOB_PRIORITY = 1000


def selector(instance: str) -> str:
    """Label selector of everything one gateway owns."""
    return f"{MANAGED_BY_LABEL}={MANAGED_BY},{INSTANCE_LABEL}={instance}"
