"""Pure builders of what `kubectl apply` needs to run the gateway in a cluster: Namespace,
ServiceAccount, a least-privilege Role and a node-reading ClusterRole with their bindings, a
PersistentVolumeClaim for the SQLite data, the Deployment and Service, and the PriorityClasses
that the Jobs (and the warm-capacity placeholders) use.

With `replicas` above one (high availability, docs/high-availability.md) the gateway runs on
PostgreSQL (its URL from the operator's Secret), elects a leader through a Lease, spreads its
pods over nodes and zones, keeps one ready through rollouts and voluntary disruptions (rolling
update, PodDisruptionBudget), and has no SQLite volume.

The objects are one template (backends/kubernetes/template.py): `build_deploy` evaluates it under
the options, and the Helm chart (charts/elasticityops, written by `eops render chart`) is the
same template as Go template text, each option a value of the chart (docs/helm.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from elasticityops.backends.kubernetes.labels import (
    HOSTNAME_LABEL,
    JOB_PRIORITY,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    NAME_LABEL,
    PLACEHOLDER_PRIORITY,
    PLACEHOLDER_PRIORITY_CLASS,
    PRIORITY_CLASSES,
    ZONE_LABEL,
)
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.backends.kubernetes.template import (
    RENDER_ONLY,
    Condition,
    Node,
    Value,
    When,
    at_most,
    equals,
    more_than,
    objects,
    present,
    text,
)
from elasticityops.backends.kubernetes.worker_clusters import parse_workers
from elasticityops.domain.budget import GpuBudget, parse_gpu_budget
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.knobs import knob, spec

APP = "elasticityops"
PORT = 8080
LEASE_NAME = APP
"""The coordination.k8s.io Lease the replicas elect their leader with (the gateway's default
name, in the backend's namespace)."""
DATABASE_URL_KEY = "database-url"
"""Key of the operator's Secret that holds the key of the callback tokens when replicas share
it: a job's result callback reaches any replica, and each must accept its token."""
METRICS_TOKEN_KEY = "metrics-token"
"""Key of the operator's Secret that holds the gateway's scrape token (EOPS_METRICS_TOKEN), which
the ServiceMonitor sends as its bearer token."""
_SECRET_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")  # a DNS subdomain
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}$")


@dataclass(frozen=True)
class SecretKey:
    """One key of a Secret in the gateway's namespace, as `NAME[:KEY]`."""

    name: str
    key: str = DATABASE_URL_KEY

    def render(self) -> str:
        return f"{self.name}:{self.key}"


def parse_secret_key(raw: Any, default_key: str = DATABASE_URL_KEY) -> SecretKey | None:
    """`NAME[:KEY]` (key default `database-url`); a bad one raises ValueError saying why."""
    if isinstance(raw, SecretKey):
        return raw
    text = str(raw).strip()
    if not text:
        return None
    name, colon, key = text.partition(":")
    if not _SECRET_NAME.match(name):
        raise ValueError(
            f"invalid value {text!r}: {name!r} is not a Secret name (lower case letters, digits, "
            "'-' and '.'); use NAME or NAME:KEY, e.g. eops-db or eops-db:url"
        )
    if colon and not _SECRET_KEY.match(key):
        raise ValueError(
            f"invalid value {text!r}: {key!r} is not a Secret key (letters, digits, '-', '_' and "
            "'.'); use NAME or NAME:KEY, e.g. eops-db:url"
        )
    return SecretKey(name, key) if colon else SecretKey(name, default_key)


def parse_metrics_secret(raw: Any) -> SecretKey | None:
    """`NAME[:KEY]` of the scrape token's Secret (key default `metrics-token`)."""
    return parse_secret_key(raw, METRICS_TOKEN_KEY)


KUBECONFIG_KEY = "kubeconfig"
"""Key of a worker's kubeconfig in its Secret unless told another (as Kueue's own MultiKueue
Secrets have it)."""
WORKERS_DIR = "/etc/eops/workers"
"""Where the gateway's container has each worker's kubeconfig, as a file named for the worker."""


@dataclass(frozen=True)
class WorkerSecret:
    """One MultiKueue worker (its MultiKueueCluster name) and the Secret, in the gateway's
    namespace, that holds the gateway's kubeconfig of it."""

    name: str
    secret: SecretKey

    @property
    def path(self) -> str:
        return f"{WORKERS_DIR}/{self.name}"


def parse_worker_secrets(raw: Any) -> tuple[WorkerSecret, ...] | None:
    """`NAME=SECRET[:KEY],...` (key default `kubeconfig`); a bad one raises ValueError saying why."""
    if raw is None or isinstance(raw, tuple):
        return raw or None
    named, problems = parse_workers(str(raw), "kube-worker-secrets", "SECRET[:KEY]", "eops-worker-1")
    if problems:
        first = problems[0]
        raise ValueError(f"invalid value {str(raw)!r}: {first.problem}; {first.fix}")
    workers = []
    for name, secret in named.items():
        try:
            key = parse_secret_key(secret, KUBECONFIG_KEY)
        except ValueError:
            raise ValueError(
                f"invalid value {str(raw)!r}: {secret!r}, the Secret of {name}, is not SECRET[:KEY] (a "
                "Secret's name: lower case letters, digits, '-' and '.'; a key: letters, digits, '-', "
                "'_' and '.'); e.g. worker-1=eops-worker-1 or worker-1=eops-worker-1:config"
            ) from None
        assert key is not None  # parse_workers refuses an empty one
        workers.append(WorkerSecret(name, key))
    return tuple(workers) or None


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
    replicas: int = knob(
        1,
        unit="pods",
        ge=1,
        le=100,
        help="Gateway pods. Above 1 they elect a leader through a Lease, share PostgreSQL "
        "(--database-url-secret) and have no SQLite volume.",
    )
    database_url_secret: SecretKey | None = knob(
        None,
        metavar="NAME[:KEY]",
        parse=parse_secret_key,
        shown="none: SQLite on the data volume",
        help=f"The operator's Secret (not rendered) whose KEY (default {DATABASE_URL_KEY}) holds "
        "the gateway's EOPS_DATABASE_URL (the replicas share the callback-token key through it).",
    )

    cpu_request: str = knob(
        "500m", flag="cpu", metavar="QUANTITY", help="CPU the gateway's container requests."
    )
    memory_request: str = knob(
        "256Mi", flag="memory", metavar="QUANTITY", help="Memory the gateway's container requests."
    )
    memory_limit: str = knob(
        "512Mi", metavar="QUANTITY", help="Memory the gateway's container may use before it is killed."
    )
    admission: str = knob(
        "gateway",
        choices=("gateway", "kueue"),
        help="The gateway's EOPS_ADMISSION: gateway (its own budget and preemption) or kueue (each Job "
        "goes to --kube-local-queue at once and Kueue admits it; docs/kueue.md).",
    )
    priority_classes: bool = knob(
        True,
        help="Render the PriorityClasses of the Jobs and placeholders (off where the cluster has them "
        "already: `eops render gke` and the dev cluster create them, and Helm refuses objects it "
        "did not create).",
    )
    service_monitor: bool = knob(
        False,
        help="Render a Prometheus operator ServiceMonitor (monitoring.coreos.com/v1) that scrapes "
        "the gateway's /metrics; the cluster needs the operator's CRD.",
    )
    scrape_interval: str = knob(
        "30s", metavar="DURATION", help="How often the ServiceMonitor has the gateway scraped."
    )
    worker_secrets: tuple[WorkerSecret, ...] | None = knob(
        None,
        flag="kube-worker-secrets",
        metavar="NAME=SECRET[:KEY],...",
        parse=parse_worker_secrets,
        shown="none: one cluster",
        help=f"With --admission kueue on a MultiKueue manager: each worker (named as its "
        f"MultiKueueCluster) and the operator's Secret (not rendered) whose KEY (default "
        f"{KUBECONFIG_KEY}) holds the gateway's kubeconfig of it (`eops render worker-rbac`); "
        f"mounted under {WORKERS_DIR} and given as EOPS_KUBE_WORKERS (docs/multi-cluster.md).",
    )
    metrics_token_secret: SecretKey | None = knob(
        None,
        metavar="NAME[:KEY]",
        parse=parse_metrics_secret,
        shown="none: /metrics is open",
        help=f"The operator's Secret (not rendered) whose KEY (default {METRICS_TOKEN_KEY}) holds the "
        "scrape token: the gateway's EOPS_METRICS_TOKEN, which /metrics then asks for, and the "
        "ServiceMonitor's bearer token.",
    )

    @property
    def highly_available(self) -> bool:
        return self.replicas > 1


DEPLOY_KUBERNETES = (
    "namespace",
    "kube-instance",
    "kube-gpu-driver-version",
    "kube-workload",
    "kube-local-queue",
    "kube-nominate-wait",
)
"""The `kubernetes` knobs that `render deploy` takes (by name); build_deploy reads only these."""


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
    # --admission kueue: what Kueue does with each Job, read from its Workload (nothing written).
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["get", "list", "watch"]},
]
# MultiKueue with the gateway as its dispatcher (--kube-nominate-wait): the workers each Workload
# may go to (status.nominatedClusterNames; nominating.py), nothing else of it. Rendered always;
# `eops doctor` asks for it only with --kube-nominate-wait (a gateway that does not nominate
# never uses it).
NOMINATE_RULES: list[KubeObject] = [
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads/status"], "verbs": ["patch"]}
]
# MultiKueue's manager (--kube-workers): a Job's pod count MultiKueue left stale, set right
# (stale_jobs.py; nothing else of a Job's status is written). Rendered always, as the above.
STALE_JOB_RULES: list[KubeObject] = [
    {"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["patch"]}
]
# The `pod` workload: the gateway makes and deletes each invocation's pod itself (no Job).
BARE_POD_RULES: list[KubeObject] = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create", "delete"]}]
NODE_RULES: list[KubeObject] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}
]
# Leader election (replicas above 1): read and renew the one Lease by name. A create cannot be
# limited by resourceNames (the name is not known when it is authorised), so it has a rule of
# its own; nothing may delete or list leases.
LEASE_RULES: list[KubeObject] = [
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": [LEASE_NAME],
        "verbs": ["get", "update"],
    },
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
]


DEFAULT_LOCAL_QUEUE = "eops"
"""The LocalQueue a gateway with Kueue admission submits to unless told another (`eops serve`'s
and `eops render kueue`'s default)."""


def _kueue_problems(options: DeployOptions) -> list[FieldProblem]:
    """Where the gateway would refuse to start with Kueue admission (as `eops serve` does)."""
    admission = spec(DeployOptions, "admission").flag
    if options.admission != "kueue":
        alone = []
        if options.kubernetes.local_queue is not None:
            alone.append(("kube-local-queue", "names a Kueue LocalQueue"))
        if options.worker_secrets:
            alone.append(("kube-worker-secrets", "names MultiKueue's workers"))
        return [
            FieldProblem(
                spec(DeployOptions, name).flag,
                f"{what}, but the gateway admits by itself",
                f"add {admission} kueue, or drop it",
            )
            for name, what in alone
        ]
    problems = []
    if options.gpu_budget is not None:
        problems.append(
            FieldProblem(
                spec(DeployOptions, "gpu-budget").flag,
                f"with {admission} kueue the ClusterQueue's quota is the one GPU cap",
                "drop it and set the quota with `eops render kueue --gpu-budget TYPE=N`",
            )
        )
    if options.kubernetes.workload != "job":
        problems.append(
            FieldProblem(
                spec(DeployOptions, "kube-workload").flag,
                "Kueue admits the gateway's Jobs; bare pods are not submitted to it",
                f"use job with {admission} kueue",
            )
        )
    return problems


def deploy_problems(options: DeployOptions) -> list[FieldProblem]:
    """What stops `options` from rendering a gateway that works."""
    kueue = _kueue_problems(options)
    if kueue:
        return kueue
    if options.highly_available and options.database_url_secret is None:
        flag = spec(DeployOptions, "database-url-secret").flag
        replicas = spec(DeployOptions, "replicas").flag
        return [
            FieldProblem(
                flag,
                f"is required with {replicas} {options.replicas}: replicas cannot share the SQLite "
                "file of one pod's volume",
                f"create a Secret with the PostgreSQL URL (key {DATABASE_URL_KEY}), e.g. kubectl -n "
                f"{options.kubernetes.namespace} create secret generic eops-db "
                f"--from-literal={DATABASE_URL_KEY}=postgresql+psycopg://USER:PASS@HOST/DB, and pass "
                f"{flag} eops-db; or render {replicas} 1",
            )
        ]
    return []


# The options the template reads. Each is a value of the Helm chart (its dotted key in
# values.yaml) and, but for the namespace (the release's own in the chart), one knob above.
NAMESPACE = Value(None, lambda o: o.kubernetes.namespace, knob="namespace", helm=".Release.Namespace")
INSTANCE = Value("kubernetes.instance", lambda o: o.kubernetes.instance, knob="kube-instance")
DRIVER = Value(
    "kubernetes.gpuDriverVersion",
    lambda o: o.kubernetes.gpu_driver_version or "",
    knob="kube-gpu-driver-version",
)
WORKLOAD = Value("kubernetes.workload", lambda o: o.kubernetes.workload, knob="kube-workload")
IMAGE = Value("image", lambda o: o.image, knob="image")
REPLICAS = Value("replicas", lambda o: o.replicas, knob="replicas")
GPU_BUDGET = Value(
    "gpuBudget",
    lambda o: o.gpu_budget.render() if o.gpu_budget is not None else "",
    knob="gpu-budget",
    schema=(("type", ["string", "integer"]),),  # `--set gpuBudget=8` is a number to Helm
)
STORAGE = Value("storage.size", lambda o: o.storage, knob="storage")
STORAGE_CLASS = Value("storage.storageClass", lambda o: o.storage_class or "", knob="storage-class")
DATABASE_SECRET = Value(
    "database.secretName",
    lambda o: o.database_url_secret.name if o.database_url_secret is not None else "",
    knob="database-url-secret",
    about="The operator's Secret (not in the chart) that holds the gateway's EOPS_DATABASE_URL; "
    "empty: SQLite on the data volume. Required with replicas above 1.",
    schema=(("pattern", f"^({_SECRET_NAME.pattern[1:-1]})?$"),),
)
DATABASE_KEY = Value(
    "database.secretKey",
    lambda o: o.database_url_secret.key if o.database_url_secret is not None else DATABASE_URL_KEY,
    knob="database-url-secret",
    about="The key of that Secret that holds the URL.",
    schema=(("pattern", _SECRET_KEY.pattern),),
)
CPU = Value("resources.requests.cpu", lambda o: o.cpu_request, knob="cpu")
MEMORY = Value("resources.requests.memory", lambda o: o.memory_request, knob="memory")
MEMORY_LIMIT = Value("resources.limits.memory", lambda o: o.memory_limit, knob="memory-limit")
PRIORITY_CLASSES_ON = Value("priorityClasses.create", lambda o: o.priority_classes, knob="priority-classes")
SERVICE_MONITOR_ON = Value("serviceMonitor.enabled", lambda o: o.service_monitor, knob="service-monitor")
SCRAPE_INTERVAL = Value("serviceMonitor.interval", lambda o: o.scrape_interval, knob="scrape-interval")
METRICS_SECRET = Value(
    "metrics.tokenSecretName",
    lambda o: o.metrics_token_secret.name if o.metrics_token_secret is not None else "",
    knob="metrics-token-secret",
    about="The operator's Secret (not in the chart) that holds the scrape token: the gateway's "
    "EOPS_METRICS_TOKEN, which /metrics then asks for, and the ServiceMonitor's bearer token; "
    "empty: /metrics is open to whatever reaches the Service.",
    schema=(("pattern", f"^({_SECRET_NAME.pattern[1:-1]})?$"),),
)
METRICS_KEY = Value(
    "metrics.tokenSecretKey",
    lambda o: o.metrics_token_secret.key if o.metrics_token_secret is not None else METRICS_TOKEN_KEY,
    knob="metrics-token-secret",
    about="The key of that Secret that holds the token.",
    schema=(("pattern", _SECRET_KEY.pattern),),
)
KUEUE_ON = Value(
    "kueue.enabled",
    lambda o: o.admission == "kueue",
    about="Kueue admission (eops render deploy --admission kueue): the gateway's EOPS_ADMISSION is "
    "kueue, each Job goes to kueue.localQueue at once and Kueue admits it (docs/kueue.md). Not "
    "with gpuBudget (the ClusterQueue's quota is the cap) or kubernetes.workload pod.",
)
LOCAL_QUEUE = Value(
    "kueue.localQueue",
    lambda o: o.kubernetes.local_queue or DEFAULT_LOCAL_QUEUE,
    knob="kube-local-queue",
    about="The Kueue LocalQueue in the release's namespace the gateway submits its Jobs to "
    "(EOPS_KUBE_LOCAL_QUEUE), with kueue.enabled.",
    schema=(("pattern", "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"),),
)
WORKERS = Value(
    "kueue.workers",
    lambda o: [
        {"name": w.name, "kubeconfigSecret": w.secret.name, "kubeconfigKey": w.secret.key}
        for w in o.worker_secrets or ()
    ],
    knob="kube-worker-secrets",
    about="With kueue.enabled on a MultiKueue manager: each worker cluster as {name, "
    f"kubeconfigSecret, kubeconfigKey (default {KUBECONFIG_KEY})}}: its MultiKueueCluster name and the "
    "operator's Secret (not in the chart) in the release's namespace that holds the gateway's "
    f"kubeconfig of it (`eops render worker-rbac`). Each is mounted under {WORKERS_DIR} and named "
    "in the gateway's EOPS_KUBE_WORKERS (docs/multi-cluster.md). A worker named twice is refused.",
    schema=(
        (
            "items",
            {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "kubeconfigSecret"],
                "properties": {
                    # A MultiKueueCluster's name is a DNS subdomain, as a Secret's is.
                    "name": {"type": "string", "pattern": _SECRET_NAME.pattern},
                    "kubeconfigSecret": {"type": "string", "pattern": _SECRET_NAME.pattern},
                    "kubeconfigKey": {"type": "string", "pattern": _SECRET_KEY.pattern},
                },
            },
        ),
    ),
)
NOMINATE_WAIT = Value(
    "kueue.nominateWait",
    lambda o: o.kubernetes.nominate_wait_s,
    knob="kube-nominate-wait",
    about="With kueue.workers and the manager's Kueue given an external multiKueue.dispatcherName: "
    "the gateway nominates one worker per Workload, the next after this many seconds unadmitted "
    "(EOPS_KUBE_NOMINATE_WAIT; 0: Kueue's own dispatcher; docs/multi-cluster.md).",
    schema=(("minimum", 0), ("maximum", 3600)),
)
# What the chart computes from kueue.workers before the Deployment (ops/chart_workers.py sets
# these template variables): EOPS_KUBE_WORKERS's entries and the kubeconfigs' volume sources.
KUBE_WORKERS_VAR = "$kubeWorkers"
WORKER_SOURCES_VAR = "$workerSources"
KUBE_WORKERS = Value(
    None,
    lambda o: ",".join(f"{w.name}={w.path}" for w in o.worker_secrets or ()),
    helm=f'join "," {KUBE_WORKERS_VAR}',
)


def worker_source(worker: WorkerSecret) -> KubeObject:
    """A worker's kubeconfig in the projected volume: its Secret's key as a file named for it."""
    return {
        "secret": {"name": worker.secret.name, "items": [{"key": worker.secret.key, "path": worker.name}]}
    }


WORKER_SOURCES = Value(
    None, lambda o: [worker_source(w) for w in o.worker_secrets or ()], helm=WORKER_SOURCES_VAR
)

HA = more_than(REPLICAS, 1)
BARE_PODS = equals(WORKLOAD, "pod")
KUEUE = present(KUEUE_ON)
MULTIKUEUE = present(WORKERS)
SINGLE = at_most(REPLICAS, 1)
CHART_VALUES: tuple[Value, ...] = (
    IMAGE,
    REPLICAS,
    DATABASE_SECRET,
    DATABASE_KEY,
    GPU_BUDGET,
    INSTANCE,
    DRIVER,
    WORKLOAD,
    CPU,
    MEMORY,
    MEMORY_LIMIT,
    STORAGE,
    STORAGE_CLASS,
    PRIORITY_CLASSES_ON,
    SERVICE_MONITOR_ON,
    SCRAPE_INTERVAL,
    METRICS_SECRET,
    METRICS_KEY,
    KUEUE_ON,
    LOCAL_QUEUE,
    WORKERS,
    NOMINATE_WAIT,
)
"""The chart's values, in the order values.yaml lists them (every Value the template reads but
the namespace)."""
CHART_REFUSES: tuple[tuple[Condition, str], ...] = (
    (
        Condition(
            lambda o: o.highly_available and o.database_url_secret is None,
            f"and ({HA.helm}) (not {DATABASE_SECRET.expression})",
            (REPLICAS, DATABASE_SECRET),
        ),
        "database.secretName is required with replicas above 1: replicas cannot share the SQLite "
        "file of one pod's volume; create a Secret with the PostgreSQL URL (kubectl create secret "
        f"generic eops-db --from-literal={DATABASE_URL_KEY}=postgresql+psycopg://USER:PASS@HOST/DB) "
        "and set database.secretName=eops-db, or replicas=1",
    ),
    (
        Condition(
            lambda o: o.admission == "kueue" and o.gpu_budget is not None,
            f"and {KUEUE_ON.expression} {GPU_BUDGET.expression}",
            (KUEUE_ON, GPU_BUDGET),
        ),
        "gpuBudget is not for kueue.enabled: the ClusterQueue's quota is the one GPU cap; drop "
        "gpuBudget and set the quota with `eops render kueue --gpu-budget TYPE=N` (or kueue.queues)",
    ),
    (
        Condition(
            lambda o: o.admission == "kueue" and o.kubernetes.workload != "job",
            f'and {KUEUE_ON.expression} (ne {WORKLOAD.expression} "job")',
            (KUEUE_ON, WORKLOAD),
        ),
        "kubernetes.workload pod is not for kueue.enabled: Kueue admits the gateway's Jobs, bare "
        "pods are not submitted to it; use kubernetes.workload job",
    ),
    (
        Condition(
            lambda o: o.admission != "kueue" and bool(o.worker_secrets),
            f"and (not {KUEUE_ON.expression}) {WORKERS.expression}",
            (KUEUE_ON, WORKERS),
        ),
        "kueue.workers names MultiKueue's workers, but the gateway admits by itself: set "
        "kueue.enabled=true (a MultiKueue manager's Kueue dispatches to the workers), or drop kueue.workers",
    ),
)
"""What the chart refuses to install (Helm's `fail`): deploy_problems as chart conditions."""


def _meta(name: Node, namespace: Node = None) -> Node:
    meta: dict[str, Node] = {
        "name": name,
        "labels": {NAME_LABEL: APP, MANAGED_BY_LABEL: MANAGED_BY},
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def _priority_classes() -> list[Node]:
    """One value for all real jobs, so that a running job is never preempted by another real
    job (its GPU work would be lost); their order is the gateway's admission order. Only the
    placeholders are below, at the autoscaler's expendable cutoff, so every real job preempts
    them and they still trigger scale-up."""
    out: list[Node] = [
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


def priority_classes() -> list[KubeObject]:
    """The PriorityClasses as plain objects (they read no option)."""
    return objects(_priority_classes(), DeployOptions())


def _anti_affinity(labels: dict[str, str]) -> KubeObject:
    """Preferred, not required: a cluster of one node (or zone) still runs every replica."""

    def term(weight: int, topology: str) -> KubeObject:
        return {
            "weight": weight,
            "podAffinityTerm": {"labelSelector": {"matchLabels": labels}, "topologyKey": topology},
        }

    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                term(100, HOSTNAME_LABEL),
                term(50, ZONE_LABEL),
            ]
        }
    }


def _deployment() -> Node:
    labels = {NAME_LABEL: APP}
    identity = {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}
    env: list[Node] = [
        {"name": "EOPS_DATA_DIR", "value": "/data"},
        {"name": "EOPS_BACKEND", "value": "kubernetes"},
        {"name": "EOPS_KUBE_NAMESPACE", "value": NAMESPACE},
        {"name": "EOPS_KUBE_INSTANCE", "value": INSTANCE},
        {"name": "EOPS_PUBLIC_URL", "value": text(f"http://{APP}.", NAMESPACE, f".svc:{PORT}")},
        When(present(GPU_BUDGET), {"name": "EOPS_GPU_BUDGET", "value": GPU_BUDGET}),
        When(present(DRIVER), {"name": "EOPS_KUBE_GPU_DRIVER_VERSION", "value": DRIVER}),
        When(BARE_PODS, {"name": "EOPS_KUBE_WORKLOAD", "value": WORKLOAD}),
        When(KUEUE, {"name": "EOPS_ADMISSION", "value": "kueue"}),
        When(KUEUE, {"name": "EOPS_KUBE_LOCAL_QUEUE", "value": LOCAL_QUEUE}),
        When(MULTIKUEUE, {"name": "EOPS_KUBE_WORKERS", "value": KUBE_WORKERS}),
        When(present(NOMINATE_WAIT), {"name": "EOPS_KUBE_NOMINATE_WAIT", "value": text(NOMINATE_WAIT)}),
        When(
            present(DATABASE_SECRET),
            {
                "name": "EOPS_DATABASE_URL",
                "valueFrom": {"secretKeyRef": {"name": DATABASE_SECRET, "key": DATABASE_KEY}},
            },
        ),
        When(
            present(METRICS_SECRET),
            {
                "name": "EOPS_METRICS_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": METRICS_SECRET, "key": METRICS_KEY}},
            },
        ),
        When(HA, {"name": "EOPS_LEADER_ELECT", "value": "true"}),
        When(HA, {"name": "EOPS_LEADER_IDENTITY", "valueFrom": identity}),
    ]
    probe = {"httpGet": {"path": "/readyz", "port": PORT}, "periodSeconds": 5}
    container: Node = {
        "name": "gateway",
        "image": IMAGE,
        "command": ["eops", "serve", "--host", "0.0.0.0", "--port", str(PORT)],
        "env": env,
        "ports": [{"name": "http", "containerPort": PORT}],
        # A follower is ready too (it serves the API; /readyz names its role).
        "readinessProbe": probe,
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": PORT}, "periodSeconds": 10},
        "resources": {"requests": {"cpu": CPU, "memory": MEMORY}, "limits": {"memory": MEMORY_LIMIT}},
        # The root filesystem is read-only; Python and uvicorn may still want a /tmp.
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": "tmp", "mountPath": "/tmp"},
            When(MULTIKUEUE, {"name": "kube-workers", "mountPath": WORKERS_DIR, "readOnly": True}),
        ],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "runAsUser": 10001,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    pod_spec: Node = {
        "serviceAccountName": APP,
        "securityContext": {"fsGroup": 10001},
        "containers": [container],
        "volumes": [
            # Replicas share no pod's volume: each one's data dir (lock, admin token) is its own;
            # the callback-token key every replica must agree on is in the database (server_secret).
            When(
                HA,
                {"name": "data", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": f"{APP}-data"}},
            ),
            {"name": "tmp", "emptyDir": {}},
            When(MULTIKUEUE, {"name": "kube-workers", "projected": {"sources": WORKER_SOURCES}}),
        ],
        "affinity": When(HA, _anti_affinity(labels)),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(APP, NAMESPACE),
        "spec": {
            # One writer of the SQLite file: never two pods at once, even during a rollout.
            "replicas": When(HA, REPLICAS, 1),
            # With replicas, a new pod is ready before an old one goes: the API is served all
            # through a rollout.
            "strategy": When(
                HA,
                {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
                {"type": "Recreate"},
            ),
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def _storage_spec() -> Node:
    return {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": STORAGE}},
        "storageClassName": When(present(STORAGE_CLASS), STORAGE_CLASS),
    }


def _service_monitor() -> Node:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _meta(APP, NAMESPACE),
        "spec": {
            "selector": {"matchLabels": {NAME_LABEL: APP}},
            "endpoints": [
                {
                    "port": "http",
                    "path": "/metrics",
                    "interval": SCRAPE_INTERVAL,
                    # The Prometheus operator reads the Secret (in the ServiceMonitor's namespace)
                    # and sends its key as the bearer token of each scrape.
                    "authorization": When(
                        present(METRICS_SECRET),
                        {"type": "Bearer", "credentials": {"name": METRICS_SECRET, "key": METRICS_KEY}},
                    ),
                }
            ],
        },
    }


def deploy_template() -> list[Node]:
    """Every object to apply, in order, as a template over DeployOptions."""
    labels = {NAME_LABEL: APP}
    subject = {"kind": "ServiceAccount", "name": APP, "namespace": NAMESPACE}
    # Named for the namespace, like its binding: two gateways (two Helm releases) in two
    # namespaces share no object of the cluster's but the PriorityClasses, which can be left out.
    node_reader = text(f"{APP}-node-reader-", NAMESPACE)
    return [
        When(RENDER_ONLY, {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(NAMESPACE)}),
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(APP, NAMESPACE)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(APP, NAMESPACE),
            "rules": [
                *ROLE_RULES,
                *NOMINATE_RULES,
                *STALE_JOB_RULES,
                *(When(BARE_PODS, rule) for rule in BARE_POD_RULES),
                *(When(HA, rule) for rule in LEASE_RULES),
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(APP, NAMESPACE),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": APP},
            "subjects": [subject],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(node_reader),
            "rules": NODE_RULES,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(node_reader),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": node_reader},
            "subjects": [subject],
        },
        *(When(present(PRIORITY_CLASSES_ON), pc) for pc in _priority_classes()),
        When(
            SINGLE,
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": _meta(f"{APP}-data", NAMESPACE),
                "spec": _storage_spec(),
            },
        ),
        _deployment(),
        When(
            HA,
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": _meta(APP, NAMESPACE),
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": labels}},
            },
        ),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(APP, NAMESPACE),
            "spec": {"selector": labels, "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]},
        },
        When(present(SERVICE_MONITOR_ON), _service_monitor()),
    ]


def build_deploy(options: DeployOptions) -> list[KubeObject]:
    """Every object to apply, in order; InvalidInput (naming the flag) for options that would
    render a gateway that cannot work."""
    found = deploy_problems(options)
    if found:
        raise InvalidInput(found)
    return objects(deploy_template(), options)
