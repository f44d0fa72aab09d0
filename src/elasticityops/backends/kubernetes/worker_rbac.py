"""What a MultiKueue worker cluster grants the gateway's kubeconfig of it (`--kube-workers`):
a ServiceAccount in the gateway's namespace, a Role with exactly the calls the gateway makes
there, its RoleBinding, a ClusterRole and binding to watch the worker's GPU Nodes, and a token
Secret whose token and CA make that kubeconfig (`eops render worker-rbac`,
docs/multi-cluster.md). Pure builders.

The gateway makes few calls in a worker (the manager holds the Jobs): WORKER_RULES and
WORKER_CLUSTER_RULES list them, each with the module that makes it, and a test holds the
backend's worker-side code to them, call by call, against a stand-in API server
(tests/backends/kubernetes/test_worker_rbac.py)."""

from __future__ import annotations

import re

from elasticityops.backends.kubernetes.labels import MANAGED_BY, MANAGED_BY_LABEL, NAME_LABEL
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.knobs import spec

APP = "elasticityops"
WORKER_ACCOUNT = f"{APP}-gateway"
"""The ServiceAccount (and Role, RoleBinding) of the gateway in each worker."""
WORKER_TOKEN_SECRET = f"{WORKER_ACCOUNT}-token"
"""Its long-lived token Secret (kubernetes.io/service-account-token): token and ca.crt."""
_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # a DNS label

WORKER_RULES: list[KubeObject] = [
    # watching.py: the pods of the Jobs MultiKueue runs there and the Events about them, each a
    # list then a watch; pod_logs.py lists an attempt's pods to find the one to read.
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["list", "watch"]},
    # pod_logs.py: the log of the current attempt's pod; log_keeping.py reads it as the pod ends...
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
    # ...and then takes its finalizer (KEEP_LOG_FINALIZER) off the pod, letting it go.
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["patch"]},
    # worker_secrets.py: MultiKueue's copy of the Job, by name (its uid owns the payload Secret)...
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
    # ...and the payload Secret, made, never read (a 409 says it is there already).
    {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    # kueue_watching.py (per worker): the worker's copy of each Workload, why it took the work or not.
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["list", "watch"]},
]

WORKER_CLUSTER_RULES: list[KubeObject] = [
    # watching.py / node_tracking.py: the worker's GPU Nodes (by the accelerator label), a list
    # then a watch: their states on the capacity page, their provisioning and idle time in the
    # invocations' cost. Nodes are cluster-scoped, hence a ClusterRole; not needed with
    # EOPS_KUBE_NODE_COSTS=off and no --headroom (the gateway then watches no Nodes).
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
]


def granted(rules: list[KubeObject]) -> set[tuple[str, str, str]]:
    """(API group, resource[/subresource], verb) for each right the rules give."""
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def _meta(name: str, namespace: str | None = None, **extra: object) -> KubeObject:
    meta: KubeObject = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = {NAME_LABEL: APP, MANAGED_BY_LABEL: MANAGED_BY}
    meta.update(extra)
    return meta


def build_worker_rbac(namespace: str) -> list[KubeObject]:
    """The objects to apply in one worker: its namespace is the gateway's (MultiKueue keeps a
    Job's namespace in the worker). InvalidInput for a namespace Kubernetes would refuse."""
    if not _NAMESPACE.fullmatch(namespace):
        raise InvalidInput(
            [
                FieldProblem(
                    spec(KubernetesSettings, "namespace").flag,
                    f"{namespace!r} is not a namespace name",
                    "give the gateway's --namespace: lower-case letters, digits and '-', "
                    "at most 63 characters",
                )
            ]
        )
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(namespace)},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(WORKER_ACCOUNT, namespace)},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "Role",
            "metadata": _meta(WORKER_ACCOUNT, namespace),
            "rules": WORKER_RULES,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": _meta(WORKER_ACCOUNT, namespace),
            "roleRef": {"apiGroup": rbac, "kind": "Role", "name": WORKER_ACCOUNT},
            "subjects": [{"kind": "ServiceAccount", "name": WORKER_ACCOUNT, "namespace": namespace}],
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRole",
            "metadata": _meta(worker_cluster_role(namespace)),
            "rules": WORKER_CLUSTER_RULES,
        },
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(worker_cluster_role(namespace)),
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": worker_cluster_role(namespace)},
            "subjects": [{"kind": "ServiceAccount", "name": WORKER_ACCOUNT, "namespace": namespace}],
        },
        {
            # Kubernetes fills in the token and the cluster's CA (since 1.24 it makes no such
            # Secret by itself); it lives until this Secret is deleted, which is how to revoke it.
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/service-account-token",
            "metadata": _meta(
                WORKER_TOKEN_SECRET,
                namespace,
                annotations={"kubernetes.io/service-account.name": WORKER_ACCOUNT},
            ),
        },
    ]


def worker_cluster_role(namespace: str) -> str:
    """The ClusterRole (and its binding) of the gateway of `namespace`: cluster-scoped, so named
    for the namespace, so gateways of several namespaces keep one each."""
    return f"{WORKER_ACCOUNT}-{namespace}-nodes"


def kubeconfig_steps(namespace: str, worker: str = "WORKER", context: str = "WORKER_CONTEXT") -> list[str]:
    """Shell lines that write `<worker>.kubeconfig` for the gateway from the token Secret, run
    with kubectl's `context` of the worker (an administrator's, after the apply)."""
    secret = f"kubectl --context {context} -n {namespace} get secret {WORKER_TOKEN_SECRET}"
    out = f"KUBECONFIG={worker}.kubeconfig kubectl config"
    return [
        f"SERVER=$(kubectl --context {context} config view --minify --raw "
        "-o jsonpath='{.clusters[0].cluster.server}')",
        f"{secret} -o jsonpath='{{.data.ca\\.crt}}' | base64 -d > {worker}-ca.crt",
        f"TOKEN=$({secret} -o jsonpath='{{.data.token}}' | base64 -d)",
        f'{out} set-cluster {worker} --server="$SERVER" --certificate-authority={worker}-ca.crt '
        "--embed-certs=true",
        f'{out} set-credentials {WORKER_ACCOUNT} --token="$TOKEN"',
        f"{out} set-context {worker} --cluster={worker} --user={WORKER_ACCOUNT} --namespace={namespace}",
        f"{out} use-context {worker}",
    ]
