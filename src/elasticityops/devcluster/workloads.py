"""Manifests of simulated GPU work (pure): Jobs and pods that run for a given time and exit code.

These are what tests, the scale benchmark and users' rehearsals submit. A pod requests one
`nvidia.com/gpu` and no toleration: the API server's ExtendedResourceToleration admission adds
the `nvidia.com/gpu` toleration, as on GKE.
"""

from __future__ import annotations

from typing import Any

from elasticityops.backends.kubernetes.labels import GPU_RESOURCE
from elasticityops.devcluster.stages import EXIT_CODE_ANNOTATION, RUN_SECONDS_ANNOTATION


def sim_annotations(run_seconds: float | None = None, exit_code: int | None = None) -> dict[str, str]:
    ann: dict[str, str] = {}
    if run_seconds is not None:
        ann[RUN_SECONDS_ANNOTATION] = f"{run_seconds:g}"
    if exit_code is not None:
        ann[EXIT_CODE_ANNOTATION] = str(int(exit_code))
    return ann


def gpu_pod_spec(gpus: int = 1, priority_class: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 0,
        "containers": [
            {
                "name": "main",
                "image": "registry.example/eops/gpu-function:sim",
                "resources": {
                    "requests": {"cpu": "500m", "memory": "1Gi", GPU_RESOURCE: str(gpus)},
                    "limits": {GPU_RESOURCE: str(gpus)},
                },
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def gpu_job(
    name: str,
    *,
    run_seconds: float | None = None,
    exit_code: int | None = None,
    backoff_limit: int = 0,
    ttl_seconds_after_finished: int | None = None,
    labels: dict[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """A one-pod Job that asks for one T4 and "runs" `run_seconds`, exiting `exit_code`, at the
    priority of `priority_class` (none: 0, below every gateway's pod)."""
    spec: dict[str, Any] = {
        "backoffLimit": backoff_limit,
        "completions": 1,
        "parallelism": 1,
        "template": {
            "metadata": {
                "annotations": sim_annotations(run_seconds, exit_code),
                "labels": dict(labels or {}),
            },
            "spec": gpu_pod_spec(priority_class=priority_class),
        },
    }
    if ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = ttl_seconds_after_finished
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
    }


def gpu_pod(
    name: str,
    *,
    run_seconds: float | None = None,
    exit_code: int | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """A bare pod (no Job). Without `run_seconds` it runs until deleted, like a placeholder."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": sim_annotations(run_seconds, exit_code)},
        "spec": gpu_pod_spec(priority_class=priority_class),
    }
