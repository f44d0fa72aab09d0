"""The label, annotation and resource names: ours, and every other that more than one module
reads or writes (the manifests, the watch selectors, the ops renders, the doctor, the dev
cluster). A name one module alone uses stays there, beside what it means (node_capacity.py's
spot labels, the dev cluster's own)."""

from __future__ import annotations

from elasticityops.domain.functions import Priority

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "elasticityops"
NAME_LABEL = "app.kubernetes.io/name"
COMPONENT_LABEL = "app.kubernetes.io/component"
PART_OF_LABEL = "app.kubernetes.io/part-of"
INSTANCE_LABEL = "elasticityops.dev/instance"
FUNCTION_LABEL = "elasticityops.dev/function"
INVOCATION_LABEL = "elasticityops.dev/invocation"
# Which attempt of the invocation a Job (and its pod) runs: after a preemption the old attempt's
# Job may still report while it goes away, and that is no news of the new attempt.
ATTEMPT_LABEL = "elasticityops.dev/attempt"
INVOCATION_ANNOTATION = "elasticityops.dev/invocation-id"
GPU_TYPE_LABEL = "elasticityops.dev/gpu-type"  # the GPU type a Job was launched on
WARM_SHAPE_LABEL = "elasticityops.dev/warm-shape"  # the shape a warm-capacity object holds
SAFE_TO_EVICT_ANNOTATION = "cluster-autoscaler.kubernetes.io/safe-to-evict"
# On each pod MultiKueue runs in a worker: held until the gateway has kept its log (log_keeping.py).
KEEP_LOG_FINALIZER = "eops.dev/keep-log"
# MultiKueue's controller: the AdmissionCheck's controllerName, and the `spec.managedBy` of a Job
# it runs in a worker (the Job controller leaves such a Job on the manager alone).
MULTIKUEUE_CONTROLLER = "kueue.x-k8s.io/multikueue"

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"

GPU_RESOURCE = "nvidia.com/gpu"  # the device plugin's resource, and GKE's taint on GPU nodes
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
DRIVER_VERSION_LABEL = "cloud.google.com/gke-gpu-driver-version"
GKE_GPU_LABEL = "cloud.google.com/gke-gpu"  # "true" on GKE's GPU nodes
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"  # NVIDIA's GPU feature discovery: "true" on GPU nodes

PRIORITY_CLASSES: dict[Priority, str] = {
    Priority.high: "eops-high",
    Priority.normal: "eops-normal",
    Priority.low: "eops-low",
}
PLACEHOLDER_PRIORITY_CLASS = "eops-placeholder"
# Kueue's: the LocalQueue a Job is submitted to, and its WorkloadPriorityClass (named as the
# PriorityClass of the same priority: one name per priority level for both).
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
WORKLOAD_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
PLACEHOLDER_PRIORITY = -10  # the cluster autoscaler's expendable cutoff: still triggers scale-up
JOB_PRIORITY = 1000


def selector(instance: str) -> str:
    """Label selector of everything one gateway owns."""
    return f"{MANAGED_BY_LABEL}={MANAGED_BY},{INSTANCE_LABEL}={instance}"
