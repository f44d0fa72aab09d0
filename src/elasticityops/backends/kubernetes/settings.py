"""Settings of the Kubernetes backend, each with its unit and default stated once.

Built at the edge (`eops serve --backend kubernetes` flags over `EOPS_KUBE_*` variables over
these defaults) and passed down; nothing below reads the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from elasticityops.domain.errors import FieldProblem, InvalidInput


@dataclass(frozen=True)
class KubernetesSettings:
    namespace: str = "elasticityops"
    """Namespace of the Jobs, their pods and payload Secrets. Env: EOPS_KUBE_NAMESPACE."""
    kubeconfig: str | None = None
    """Kubeconfig file. Unset: $KUBECONFIG or ~/.kube/config, else the in-cluster service
    account. Env: EOPS_KUBECONFIG."""
    context: str | None = None
    """Kubeconfig context; unset: the current one. Env: EOPS_KUBE_CONTEXT."""
    instance: str = "default"
    """Name of this gateway, stamped on every Job as a label so that two gateways sharing a
    namespace never adopt each other's Jobs. Env: EOPS_KUBE_INSTANCE."""
    max_gpus: int | None = None
    """GPU quota of the project (count): at most this many GPUs in Jobs at once; unset: the
    cluster decides. Env: EOPS_KUBE_MAX_GPUS."""
    qps: float = 500.0
    """Client-side rate limit (requests per second, token bucket refill). Each invocation costs
    two writes (Job, Secret), so this allows ~250 Jobs/s after the burst; at 200 it was what
    held a 1,000-invocation burst to 100 Jobs/s on the dev cluster (bench/k8s_burst.py), and
    client-go's default of 5 would cap it at 2.5. The API server's priority and fairness (429 +
    Retry-After, honoured) remains the real guard. Env: EOPS_KUBE_QPS."""
    burst: int = 1000
    """Token bucket size (requests): a burst of 500 invocations goes out unthrottled.
    Env: EOPS_KUBE_BURST."""
    concurrency: int = 64
    """Most API requests in flight at once (count), also the number of launch workers.
    Env: EOPS_KUBE_CONCURRENCY."""
    max_retries: int = 6
    """Retries of a request after 429, 5xx or a dropped connection (count). Env: EOPS_KUBE_MAX_RETRIES."""
    retry_base_seconds: float = 0.2
    """First back-off delay, doubled per retry with jitter (seconds). Env: EOPS_KUBE_RETRY_BASE_SECONDS."""
    retry_cap_seconds: float = 10.0
    """Longest back-off delay (seconds). Env: EOPS_KUBE_RETRY_CAP_SECONDS."""
    request_timeout_seconds: float = 30.0
    """Timeout of one non-watch request (seconds). Env: EOPS_KUBE_REQUEST_TIMEOUT_SECONDS."""
    watch_timeout_seconds: int = 290
    """Server-side timeout of one watch request (seconds); the watch resumes from its
    resourceVersion afterwards. Env: EOPS_KUBE_WATCH_TIMEOUT_SECONDS."""
    provisioning_timeout_seconds: float = 900.0
    """How long a pod may wait for a node before the invocation fails as no_capacity (seconds);
    the cluster autoscaler's max-node-provision-time is 15 min.
    Env: EOPS_KUBE_PROVISIONING_TIMEOUT_SECONDS."""
    ttl_after_finished_seconds: int = 3600
    """ttlSecondsAfterFinished of every Job (seconds): long enough to read logs, short enough
    that finished Jobs do not pile up. Env: EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS."""
    gpu_driver_version: str | None = None
    """GKE driver selector `cloud.google.com/gke-gpu-driver-version` (`default` or `latest`);
    needed where node auto-provisioning creates the GPU pools, else those nodes get no driver.
    Unset: no selector. Env: EOPS_KUBE_GPU_DRIVER_VERSION."""
    image_pull_policy: str = "IfNotPresent"
    """imagePullPolicy of the job container. Env: EOPS_KUBE_IMAGE_PULL_POLICY."""
    service_account: str | None = None
    """Service account the job pods run as; unset: the namespace default.
    Env: EOPS_KUBE_JOB_SERVICE_ACCOUNT."""
    daemonset_cpu_millis: int = 400
    """CPU left on each node for GKE's daemonsets (kube-proxy, logging, device plugin) when a
    job's CPU request is sized to the machine (millicores). Env: EOPS_KUBE_DAEMONSET_CPU_MILLIS."""
    daemonset_memory_mib: int = 1024
    """Memory left on each node for the daemonsets (MiB). Env: EOPS_KUBE_DAEMONSET_MEMORY_MIB."""


_ENV: dict[str, str] = {
    "EOPS_KUBE_NAMESPACE": "namespace",
    "EOPS_KUBECONFIG": "kubeconfig",
    "EOPS_KUBE_CONTEXT": "context",
    "EOPS_KUBE_INSTANCE": "instance",
    "EOPS_KUBE_MAX_GPUS": "max_gpus",
    "EOPS_KUBE_QPS": "qps",
    "EOPS_KUBE_BURST": "burst",
    "EOPS_KUBE_CONCURRENCY": "concurrency",
    "EOPS_KUBE_MAX_RETRIES": "max_retries",
    "EOPS_KUBE_RETRY_BASE_SECONDS": "retry_base_seconds",
    "EOPS_KUBE_RETRY_CAP_SECONDS": "retry_cap_seconds",
    "EOPS_KUBE_REQUEST_TIMEOUT_SECONDS": "request_timeout_seconds",
    "EOPS_KUBE_WATCH_TIMEOUT_SECONDS": "watch_timeout_seconds",
    "EOPS_KUBE_PROVISIONING_TIMEOUT_SECONDS": "provisioning_timeout_seconds",
    "EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS": "ttl_after_finished_seconds",
    "EOPS_KUBE_GPU_DRIVER_VERSION": "gpu_driver_version",
    "EOPS_KUBE_IMAGE_PULL_POLICY": "image_pull_policy",
    "EOPS_KUBE_JOB_SERVICE_ACCOUNT": "service_account",
    "EOPS_KUBE_DAEMONSET_CPU_MILLIS": "daemonset_cpu_millis",
    "EOPS_KUBE_DAEMONSET_MEMORY_MIB": "daemonset_memory_mib",
}
ENV_VARS = tuple(_ENV)


def _convert(kind: str, raw: str, var: str) -> Any:
    try:
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
        return raw
    except ValueError:
        raise InvalidInput([FieldProblem(var, f"{raw!r} is not a valid {kind}", "set a number")]) from None


def load_kubernetes_settings(
    env: Mapping[str, str] | None = None, overrides: Mapping[str, Any] | None = None
) -> KubernetesSettings:
    """Defaults, then `EOPS_KUBE_*` variables, then `overrides` (CLI flags; None is ignored)."""
    env = os.environ if env is None else env
    kinds = {f.name: str(f.type) for f in fields(KubernetesSettings)}
    values: dict[str, Any] = {}
    for var, name in _ENV.items():
        if env.get(var, "") != "":
            values[name] = _convert(kinds[name], env[var], var)
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    settings = replace(KubernetesSettings(), **values)
    check_settings(settings)
    return settings


def check_settings(settings: KubernetesSettings) -> None:
    problems: list[FieldProblem] = []
    if settings.qps <= 0:
        problems.append(FieldProblem("qps", "must be positive", "use e.g. 500"))
    if settings.burst < 1:
        problems.append(FieldProblem("burst", "must be at least 1", "use e.g. 1000"))
    if settings.concurrency < 1:
        problems.append(FieldProblem("concurrency", "must be at least 1", "use e.g. 64"))
    if settings.max_gpus is not None and settings.max_gpus < 0:
        problems.append(FieldProblem("max_gpus", "must not be negative", "use 0 or more, or unset it"))
    if settings.gpu_driver_version not in (None, "default", "latest"):
        problems.append(
            FieldProblem(
                "gpu_driver_version", f"{settings.gpu_driver_version!r} is unknown", "use default or latest"
            )
        )
    if settings.provisioning_timeout_seconds <= 0:
        problems.append(FieldProblem("provisioning_timeout_seconds", "must be positive", "use e.g. 900"))
    if problems:
        raise InvalidInput(problems)
