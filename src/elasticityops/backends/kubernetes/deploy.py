"""Pure builders of what `kubectl apply` needs to run the gateway in a cluster: Namespace,
ServiceAccount, a least-privilege Role and a node-reading ClusterRole with their bindings, a
PersistentVolumeClaim for the SQLite data, the Deployment and Service, and the PriorityClasses
that the Jobs (and the warm-capacity placeholders) use."""

from __future__ import annotations

from dataclasses import dataclass, field

from elasticityops.backends.kubernetes.labels import (
    JOB_PRIORITY,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    PLACEHOLDER_PRIORITY,
    PLACEHOLDER_PRIORITY_CLASS,
    PRIORITY_CLASSES,
)
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.budget import GpuBudget, parse_gpu_budget
from elasticityops.knobs import knob

APP = "elasticityops"
PORT = 8080


@dataclass(frozen=True)
class DeployOptions:
    """What `eops render deploy` renders; each knob is one of its flags (elasticityops/knobs.py).
    The gateway's own Kubernetes settings are the backend's knobs, declared once, in `kubernetes`;
    the deployment writes namespace, instance and driver selector into the gateway's environment."""

    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    image: str = knob("ghcr.io/elasticityops/eops:0.1.0", help="Container image of the gateway.")
    gpu_budget: GpuBudget | None = knob(
        None,
        metavar="GPUS|TYPE=N,...",
        parse=parse_gpu_budget,
        shown="no cap",
        help="The gateway's EOPS_GPU_BUDGET: most GPUs in use at once, in all or per GPU type "
        "(nvidia-tesla-t4=8,nvidia-l4=2).",
    )
    storage: str = knob("1Gi", metavar="QUANTITY", help="Size of the gateway's data volume.")
    storage_class: str | None = knob(
        None, shown="the cluster's default", help="StorageClass of the data volume."
    )


DEPLOY_KUBERNETES = ("namespace", "kube-instance", "kube-gpu-driver-version")
"""The `kubernetes` knobs that `render deploy` takes (by name); build_deploy reads only these."""


def _meta(name: str, namespace: str | None = None) -> KubeObject:
    meta: KubeObject = {"name": name, "labels": {"app.kubernetes.io/name": APP, MANAGED_BY_LABEL: MANAGED_BY}}
    if namespace:
        meta["namespace"] = namespace
    return meta


# Exactly what the backend does, nothing more: create/watch/delete its Jobs, watch their pods
# and the events about them, read logs, and write (never read) payload Secrets.
ROLE_RULES: list[KubeObject] = [
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "get", "list", "watch", "delete"]},
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "delete"]},
    # Warm capacity (--headroom): placeholder Deployments, or CapacityBuffers and their PodTemplates.
    {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "verbs": ["create", "get", "list", "watch", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["podtemplates"], "verbs": ["create", "get", "list", "patch", "delete"]},
    {
        "apiGroups": ["autoscaling.x-k8s.io"],
        "resources": ["capacitybuffers"],
        "verbs": ["create", "get", "list", "watch", "patch", "delete"],
    },
]
NODE_RULES: list[KubeObject] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
]


def priority_classes() -> list[KubeObject]:
    """One value for all real jobs, so that a running job is never preempted by another real
    job (its GPU work would be lost); their order is the gateway's admission order. Only the
    placeholders are below, at the autoscaler's expendable cutoff, so every real job preempts
    them and they still trigger scale-up."""
    out = [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": _meta(name),
            "value": JOB_PRIORITY,
            "globalDefault": False,
            "preemptionPolicy": "PreemptLowerPriority",
            "description": f"ElasticityOps jobs of priority {priority.value}",
        }
        for priority, name in PRIORITY_CLASSES.items()
    ]
    out.append(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": _meta(PLACEHOLDER_PRIORITY_CLASS),
            "value": PLACEHOLDER_PRIORITY,
            "globalDefault": False,
            "preemptionPolicy": "Never",
            "description": "ElasticityOps warm-capacity placeholders: preempted by every real job",
        }
    )
    return out


def build_deploy(options: DeployOptions) -> list[KubeObject]:
    kube = options.kubernetes
    ns = kube.namespace
    labels = {"app.kubernetes.io/name": APP}
    env: list[KubeObject] = [
        {"name": "EOPS_DATA_DIR", "value": "/data"},
        {"name": "EOPS_BACKEND", "value": "kubernetes"},
        {"name": "EOPS_KUBE_NAMESPACE", "value": ns},
        {"name": "EOPS_KUBE_INSTANCE", "value": kube.instance},
        {"name": "EOPS_PUBLIC_URL", "value": f"http://{APP}.{ns}.svc:{PORT}"},
    ]
    if options.gpu_budget is not None:
        env.append({"name": "EOPS_GPU_BUDGET", "value": options.gpu_budget.render()})
    if kube.gpu_driver_version:
        env.append({"name": "EOPS_KUBE_GPU_DRIVER_VERSION", "value": kube.gpu_driver_version})
    pvc_spec: KubeObject = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": options.storage}},
    }
    if options.storage_class:
        pvc_spec["storageClassName"] = options.storage_class
    probe = {"httpGet": {"path": "/readyz", "port": PORT}, "periodSeconds": 5}
    container: KubeObject = {
        "name": "gateway",
        "image": options.image,
        "command": ["eops", "serve", "--host", "0.0.0.0", "--port", str(PORT)],
        "env": env,
        "ports": [{"name": "http", "containerPort": PORT}],
        "readinessProbe": probe,
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": PORT}, "periodSeconds": 10},
        "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"memory": "512Mi"}},
        # The root filesystem is read-only; Python and uvicorn may still want a /tmp.
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(ns)},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(APP, ns)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(APP, ns),
            "rules": ROLE_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(APP, ns),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": APP},
            "subjects": [{"kind": "ServiceAccount", "name": APP, "namespace": ns}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(f"{APP}-node-reader"),
            "rules": NODE_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(f"{APP}-node-reader-{ns}"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{APP}-node-reader",
            },
            "subjects": [{"kind": "ServiceAccount", "name": APP, "namespace": ns}],
        },
        *priority_classes(),
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": _meta(f"{APP}-data", ns),
            "spec": pvc_spec,
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(APP, ns),
            "spec": {
                # One writer of the SQLite file: never two pods at once, even during a rollout.
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "serviceAccountName": APP,
                        "securityContext": {"fsGroup": 10001},
                        "containers": [container],
                        "volumes": [
                            {"name": "data", "persistentVolumeClaim": {"claimName": f"{APP}-data"}},
                            {"name": "tmp", "emptyDir": {}},
                        ],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(APP, ns),
            "spec": {"selector": labels, "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]},
        },
    ]
