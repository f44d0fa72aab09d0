"""Pure builders of the Kubernetes objects of one invocation: its Job (or, with the `pod`
workload, its bare Pod) and its payload Secret.

One Job per invocation, sized to take a whole GPU node, named after the invocation id so that a
retry after a crash finds the Job it already created (409 AlreadyExists means "already there").

Order of creation: the Job first, then the Secret with an ownerReference to the Job's uid, so the
Secret is garbage-collected with its Job and never outlives it. The pod mounts the Secret as a
non-optional volume, so until the Secret exists the kubelet holds the pod in ContainerCreating;
on a real cluster the pod waits minutes for a node anyway. The other order (Secret first, patch
the ownerReference later) leaks an unowned Secret whenever the gateway dies between the steps."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from elasticityops.backends.kubernetes.labels import (
    ACCELERATOR_LABEL,
    ATTEMPT_LABEL,
    DRIVER_VERSION_LABEL,
    FUNCTION_LABEL,
    GPU_RESOURCE,
    GPU_TYPE_LABEL,
    INSTANCE_LABEL,
    INVOCATION_ANNOTATION,
    INVOCATION_LABEL,
    KEEP_LOG_FINALIZER,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MULTIKUEUE_CONTROLLER,
    PRIORITY_CLASSES,
    QUEUE_NAME_LABEL,
    SAFE_TO_EVICT_ANNOTATION,
    WORKLOAD_PRIORITY_LABEL,
)
from elasticityops.backends.kubernetes.machines import (
    MACHINES,
    Allocatable,
    allocatable,
    parse_cpu_millis,
    parse_memory_mib,
    whole_node_requests,
)
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.invocations import Invocation
from elasticityops.domain.job_env import CALLBACK_TOKEN, job_variables

CONTAINER_NAME = "job"
PAYLOAD_VOLUME = "payload"
PAYLOAD_DIR = "/var/run/eops"
PAYLOAD_KEY = "payload"
TOKEN_KEY = "callback-token"
PAYLOAD_PATH = f"{PAYLOAD_DIR}/{PAYLOAD_KEY}"
# The container writes a small result here; Kubernetes copies it (<= 4 KiB) into the pod status
# as the termination message, which the watch reads when no callback came.
RESULT_PATH = "/dev/termination-log"
SECRET_DATA_LIMIT = 1024 * 1024  # the API server's limit on a Secret's data
CALLBACK_TOKEN_BYTES = 43  # domain.invocations.callback_token: 32 bytes, unpadded base64
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_MAX_JOB_NAME = 52  # pod names add "-xxxxx"; keep them a 63-character label
ATTEMPT_SUFFIX = "-a"  # job_name of attempt 2: eops-<id>-a2 (ids have no "-" after "inv-")


def job_name(invocation_id: str, attempt: int = 0) -> str:
    """Deterministic Job (and Secret) name of one attempt of an invocation. The first attempt
    keeps the name Jobs always had (so a Job made before attempts existed is still found); a
    later one (after preemption) is suffixed, so it never meets the old Job while that is
    being deleted, and is never adopted as it."""
    base = f"eops-{invocation_id}"
    name = base if attempt == 0 else f"{base}{ATTEMPT_SUFFIX}{attempt}"
    if len(name) <= _MAX_JOB_NAME and _DNS_LABEL.match(name):
        return name
    key = invocation_id if attempt == 0 else f"{invocation_id}/{attempt}"
    return "eops-" + hashlib.sha256(key.encode()).hexdigest()[:32]


def owner_labels(instance: str) -> dict[str, str]:
    return {MANAGED_BY_LABEL: MANAGED_BY, INSTANCE_LABEL: instance}


def _labels(spec: FunctionSpec, invocation: Invocation, settings: KubernetesSettings) -> dict[str, str]:
    if len(invocation.id) > 63 or not _LABEL_VALUE.match(invocation.id):
        raise InvalidInput(
            [
                FieldProblem(
                    "invocation.id", f"{invocation.id!r} is not a label value", "use new_invocation_id()"
                )
            ]
        )
    return {
        **owner_labels(settings.instance),
        FUNCTION_LABEL: spec.name,
        INVOCATION_LABEL: invocation.id,
        GPU_TYPE_LABEL: gpu_type_of(spec, invocation),
        ATTEMPT_LABEL: str(invocation.attempt),
    }


def gpu_type_of(spec: FunctionSpec, invocation: Invocation) -> str:
    """The GPU type the invocation's Job asks for: the one it was admitted on (a later one of
    its function's list when it spilled over), else the spec's first."""
    return invocation.gpu_type or spec.gpu.type


def container_requests(spec: FunctionSpec, settings: KubernetesSettings) -> dict[str, str]:
    """CPU and memory requests: the function's own, else sized to take its machine type whole.

    Either way they must fit the machine's allocatable, or the pod would never schedule."""
    machine = MACHINES.get(spec.machine_type)
    if machine is None and (spec.resources.cpu is None or spec.resources.memory is None):
        raise InvalidInput(
            [
                FieldProblem(
                    "machine_type",
                    f"{spec.machine_type!r} is not a machine type ElasticityOps knows the size of",
                    f"use one of {', '.join(MACHINES)}, or set resources.cpu and resources.memory",
                )
            ]
        )
    sized = (
        whole_node_requests(machine, settings.daemonset_cpu_millis, settings.daemonset_memory_mib)
        if machine is not None
        else Allocatable(0, 0)
    )
    cpu = spec.resources.cpu or f"{sized.cpu_millis}m"
    memory = spec.resources.memory or f"{sized.memory_mib}Mi"
    if machine is not None:
        alloc = allocatable(machine)
        problems = []
        if parse_cpu_millis(cpu) > alloc.cpu_millis:
            problems.append(
                FieldProblem(
                    "resources.cpu",
                    f"{cpu} is more than a {spec.machine_type} node has allocatable ({alloc.cpu_millis}m)",
                    f"ask for at most {sized.cpu_millis}m or pick a larger machine_type",
                )
            )
        if parse_memory_mib(memory) > alloc.memory_mib:
            problems.append(
                FieldProblem(
                    "resources.memory",
                    f"{memory} is more than a {spec.machine_type} node has allocatable "
                    f"({alloc.memory_mib}Mi)",
                    f"ask for at most {sized.memory_mib}Mi or pick a larger machine_type",
                )
            )
        if problems:
            raise InvalidInput(problems)
    return {"cpu": cpu, "memory": memory}


def build_job(
    spec: FunctionSpec,
    invocation: Invocation,
    settings: KubernetesSettings,
    callback_url: str | None = None,
) -> dict[str, Any]:
    """The Job of one invocation, as the API server takes it."""
    name = job_name(invocation.id, invocation.attempt)
    labels = _labels(spec, invocation, settings)
    requests = container_requests(spec, settings)
    gpus = str(spec.gpu.count)
    node_selector = {ACCELERATOR_LABEL: gpu_type_of(spec, invocation)}
    if settings.gpu_driver_version:
        node_selector[DRIVER_VERSION_LABEL] = settings.gpu_driver_version
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(spec.env.items())]
    told = job_variables(invocation.id, PAYLOAD_PATH, RESULT_PATH, callback_url)
    env += [{"name": k, "value": v} for k, v in told.items()]
    env.append({"name": CALLBACK_TOKEN, "valueFrom": {"secretKeyRef": {"name": name, "key": TOKEN_KEY}}})
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "priorityClassName": PRIORITY_CLASSES[invocation.priority],
        "nodeSelector": node_selector,
        "tolerations": [{"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}],
        # Jobs talk to the gateway through the callback, never to the API server.
        "automountServiceAccountToken": False,
        # Service links put an env var per Service into every container: noise, and slow
        # in namespaces with many Services.
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": 30,
        "containers": [
            {
                "name": CONTAINER_NAME,
                "image": spec.image,
                "imagePullPolicy": settings.image_pull_policy,
                "command": list(spec.command),
                "env": env,
                "resources": {
                    "requests": {**requests, GPU_RESOURCE: gpus},
                    # A memory limit equal to the request makes running out of memory a clean
                    # OOMKilled of this container, not node pressure evicting it.
                    "limits": {"memory": requests["memory"], GPU_RESOURCE: gpus},
                },
                "terminationMessagePath": RESULT_PATH,
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "volumeMounts": [{"name": PAYLOAD_VOLUME, "mountPath": PAYLOAD_DIR, "readOnly": True}],
            }
        ],
        "volumes": [
            {
                "name": PAYLOAD_VOLUME,
                "secret": {
                    "secretName": name,
                    "items": [{"key": PAYLOAD_KEY, "path": PAYLOAD_KEY}],
                    "defaultMode": 0o444,
                },
            }
        ],
    }
    if settings.service_account:
        pod_spec["serviceAccountName"] = settings.service_account
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": {**labels, **kueue_labels(invocation, settings)},
            "annotations": {INVOCATION_ANNOTATION: invocation.id},
        },
        "spec": {
            # Submitted to Kueue, a Job is created suspended (as Kueue's own webhook would make
            # it): no pod starts before Kueue admits it, webhook or not.
            **({"suspend": True} if settings.local_queue is not None else {}),
            # On a MultiKueue manager, named here and not left to Kueue's webhook: that one sets
            # it only once its queue cache knows the LocalQueue's MultiKueue check, which a Kueue
            # just restarted does not yet, and the Job it lets through unmarked is rejected by
            # the check and deactivated (seen mid-burst in test_multikueue_faults_cluster.py).
            **({"managedBy": MULTIKUEUE_CONTROLLER} if settings.local_queue and settings.workers else {}),
            "backoffLimit": 0,
            "completions": 1,
            "parallelism": 1,
            # The deadline counts from the Job's start, so the wait for a node is part of the
            # timeout, as in the invocation state machine (pending -> timed_out).
            "activeDeadlineSeconds": spec.timeout_seconds,
            "ttlSecondsAfterFinished": settings.ttl_after_finished_seconds,
            "template": {
                "metadata": {
                    "labels": dict(labels),
                    # MultiKueue deletes the worker's copy of the Job as the work ends, and its
                    # pod with it: the pod waits for the gateway to keep its log (log_keeping.py).
                    **({"finalizers": [KEEP_LOG_FINALIZER]} if keeps_logs(settings) else {}),
                    # The function's annotations, then the invocation's own (`eops.dev/` keys,
                    # so a per-request hint overrides the function's default), then ours, which
                    # must win.
                    "annotations": {
                        **spec.annotations,
                        **invocation.annotations,
                        SAFE_TO_EVICT_ANNOTATION: "false",
                        INVOCATION_ANNOTATION: invocation.id,
                    },
                },
                "spec": pod_spec,
            },
        },
    }


def keeps_logs(settings: KubernetesSettings) -> bool:
    """Whether the gateway keeps its pods' logs: on a MultiKueue manager (whose Jobs run in the
    workers), unless EOPS_KUBE_KEEP_LOG_BYTES is 0."""
    return bool(settings.local_queue and settings.workers and settings.keep_log_bytes > 0)


def kueue_labels(invocation: Invocation, settings: KubernetesSettings) -> dict[str, str]:
    """With Kueue admission, the LocalQueue the Job is submitted to and its priority as a
    WorkloadPriorityClass (named as the PriorityClass of its level, `eops render kueue`). On the
    Job only: a pod carrying them would be a workload of Kueue's pod integration of its own."""
    if settings.local_queue is None:
        return {}
    return {
        QUEUE_NAME_LABEL: settings.local_queue,
        WORKLOAD_PRIORITY_LABEL: PRIORITY_CLASSES[invocation.priority],
    }


def build_payload_secret(
    invocation_id: str,
    payload: bytes,
    callback_token: str,
    job_uid: str,
    settings: KubernetesSettings,
    attempt: int = 0,
) -> dict[str, Any]:
    """The Secret holding the payload and the callback token, owned by the Job (or, with the
    `pod` workload, the bare Pod) `job_uid`: the garbage collector deletes it with its owner."""
    if len(payload) + len(callback_token) > SECRET_DATA_LIMIT:
        most = SECRET_DATA_LIMIT - len(callback_token)
        raise InvalidInput(
            [
                FieldProblem(
                    "payload",
                    f"{len(payload)} bytes do not fit a Kubernetes Secret (1 MiB with the token)",
                    f"send at most {most:,} bytes, or pass a URL to the data instead",
                )
            ]
        )
    name = job_name(invocation_id, attempt)
    owner_api, owner_kind = _OWNER_KINDS[settings.workload]
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": settings.namespace,
            "labels": {
                **owner_labels(settings.instance),
                INVOCATION_LABEL: invocation_id,
                ATTEMPT_LABEL: str(attempt),
            },
            "ownerReferences": [
                {
                    "apiVersion": owner_api,
                    "kind": owner_kind,
                    "name": name,
                    "uid": job_uid,
                    # blockOwnerDeletion would need update rights on jobs/finalizers.
                    "blockOwnerDeletion": False,
                }
            ],
        },
        "data": {
            PAYLOAD_KEY: base64.b64encode(payload).decode(),
            TOKEN_KEY: base64.b64encode(callback_token.encode()).decode(),
        },
    }


_OWNER_KINDS = {"job": ("batch/v1", "Job"), "pod": ("v1", "Pod")}


def build_pod(
    spec: FunctionSpec,
    invocation: Invocation,
    settings: KubernetesSettings,
    callback_url: str | None = None,
) -> dict[str, Any]:
    """The bare Pod of one invocation (the `pod` workload): exactly the pod its Job would make,
    under the Job's name, so that names stay idempotent and one invocation never has two.

    What the Job gave and a Pod does not have is the gateway's to do: `restartPolicy: Never` is
    already the pod's, and one pod is `backoffLimit: 0`; the deadline is the pod's
    activeDeadlineSeconds (which the kubelet counts from the pod's start on its node, so the
    gateway also ends one still waiting for a node at its timeout, as the Job's deadline
    would); and the finished pod is deleted by the gateway after ttl_after_finished_seconds,
    where a Job had ttlSecondsAfterFinished."""
    job = build_job(spec, invocation, settings, callback_url)
    template = job["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": job["metadata"]["name"],
            "namespace": settings.namespace,
            "labels": dict(template["metadata"]["labels"]),
            "annotations": dict(template["metadata"]["annotations"]),
        },
        "spec": {**template["spec"], "activeDeadlineSeconds": spec.timeout_seconds},
    }


def build_workload(
    spec: FunctionSpec,
    invocation: Invocation,
    settings: KubernetesSettings,
    callback_url: str | None = None,
) -> dict[str, Any]:
    """The Job, or with `settings.workload` "pod" the bare Pod, of one invocation."""
    build = build_pod if settings.workload == "pod" else build_job
    return build(spec, invocation, settings, callback_url)


def owned_by(secret: dict[str, Any], job_uid: str) -> dict[str, Any]:
    """`secret` (from build_payload_secret) with its owner reference naming the Job `job_uid`,
    known only once the Job exists."""
    meta = secret["metadata"]
    owners = [{**ref, "uid": job_uid} for ref in meta["ownerReferences"]]
    return {**secret, "metadata": {**meta, "ownerReferences": owners}}
