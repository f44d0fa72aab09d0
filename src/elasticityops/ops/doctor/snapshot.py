"""What `doctor` knows about a cluster: plain frozen data, gathered once at the edge.

Every check is a pure function of a `ClusterSnapshot`, so checks are tested table-driven with
hand-built snapshots and the gatherer is the only code that talks to the cluster. A section the
gatherer could not read carries the error text instead of data (`None` plus an entry in
`unreadable`), and the checks say so instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from elasticityops.backends.kubernetes.labels import (
    ACCELERATOR_LABEL,
    GKE_GPU_LABEL,
    GPU_PRESENT_LABEL,
    ZONE_LABEL,
)

GPU_NODE_LABELS = (ACCELERATOR_LABEL, GKE_GPU_LABEL, GPU_PRESENT_LABEL)


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class NodeInfo:
    name: str
    ready: bool
    labels: dict[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    gpu_capacity: int = 0
    gpu_allocatable: int = 0
    unschedulable: bool = False
    ready_for_s: float | None = None  # seconds since its Ready condition turned True (None: unknown)

    @property
    def looks_like_gpu_node(self) -> bool:
        """Labelled as a GPU node, or advertising GPU capacity."""
        return self.gpu_capacity > 0 or any(label in self.labels for label in GPU_NODE_LABELS)

    @property
    def zone(self) -> str:
        return self.labels.get(ZONE_LABEL, "")


@dataclass(frozen=True)
class DaemonSetInfo:
    namespace: str
    name: str
    desired: int
    ready: int
    unavailable_message: str = ""


@dataclass(frozen=True)
class PodLog:
    namespace: str
    pod: str
    node: str
    text: str


@dataclass(frozen=True)
class AccessRule:
    """One permission ElasticityOps needs and whether the current identity has it."""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespaced: bool = True
    allowed: bool = False
    reason: str = ""

    @property
    def label(self) -> str:
        # kubectl create role's form (resource.group/subresource), so a message and its fix agree
        group = f".{self.group}" if self.group else ""
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.verb} {self.resource}{group}{sub}"


@dataclass(frozen=True)
class ApiServiceInfo:
    name: str
    available: bool
    message: str = ""


@dataclass(frozen=True)
class CustomMetrics:
    """The custom metrics API: its APIService and the metric resources it lists."""

    api_service: ApiServiceInfo | None
    served: tuple[str, ...] = ()  # e.g. "pods/gpu_utilization"
    error: str = ""


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class HpaMetric:
    type: str  # Resource, Pods, Object, External, ContainerResource
    name: str
    has_current: bool


@dataclass(frozen=True)
class HpaInfo:
    namespace: str
    name: str
    target: str  # Kind/name
    metrics: tuple[HpaMetric, ...]
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class EventInfo:
    reason: str
    message: str
    source: str = ""
    count: int = 1


@dataclass(frozen=True)
class PendingPod:
    namespace: str
    name: str
    gpu_request: int
    scheduler_message: str = ""
    events: tuple[EventInfo, ...] = ()
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerates_gpu_taint: bool = False


@dataclass(frozen=True)
class PriorityClassInfo:
    name: str
    value: int
    preemption_policy: str = "PreemptLowerPriority"


@dataclass(frozen=True)
class QuotaReading:
    """Regional quotas read with gcloud, or why they could not be."""

    gcloud_found: bool
    project: str = ""
    region: str = ""
    limits: dict[str, tuple[float, float]] = field(default_factory=dict)  # metric -> (limit, usage)
    error: str = ""
    target_unknown: bool = False  # no project or region to ask about: not checked, not an error


@dataclass(frozen=True)
class LeaseInfo:
    """The gateway replicas' leader election Lease (coordination.k8s.io/v1)."""

    holder: str  # holderIdentity; empty: released
    duration_s: int
    renewed_ago_s: float | None  # this machine's clock less renewTime; None: never renewed
    transitions: int


@dataclass(frozen=True)
class LabelSelector:
    """A label selector: `match_labels` and (key, operator, values) expressions, all to hold."""

    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: tuple[tuple[str, str, tuple[str, ...]], ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        for key, operator, values in self.match_expressions:
            held = {
                "In": key in labels and labels[key] in values,
                "NotIn": key not in labels or labels[key] not in values,
                "Exists": key in labels,
                "DoesNotExist": key not in labels,
            }.get(operator, False)
            if not held:
                return False
        return True


@dataclass(frozen=True)
class KueueObject:
    """A Kueue LocalQueue, ClusterQueue or AdmissionCheck, as far as the doctor needs it."""

    name: str
    active: Condition | None = None  # its Active condition; None: Kueue has reported none yet
    cluster_queue: str = ""  # a LocalQueue's ClusterQueue
    admission_checks: tuple[str, ...] = ()  # the AdmissionChecks a ClusterQueue names
    gpu_quota: dict[str, str] = field(default_factory=dict)  # a ClusterQueue's GPUs per flavor
    stopped: str = ""  # a queue's stopPolicy, where it is not None
    # A ClusterQueue's namespaceSelector; None: Kueue's null selector, which selects no namespace.
    namespace_selector: LabelSelector | None = field(default_factory=LabelSelector)
    controller: str = ""  # an AdmissionCheck's controllerName
    parameters: str = ""  # the name of an AdmissionCheck's parameters object (its config)


@dataclass(frozen=True)
class KueueReading:
    """Kueue as the gateway's `--admission kueue` needs it. An object looked for and not there is
    None; one that could not be read is None too, with a `kueue-*` entry in `unreadable`."""

    local_queue_name: str
    versions: tuple[str, ...] = ()  # kueue.x-k8s.io versions served; (): Kueue is not installed
    resources: tuple[str, ...] = ()  # what kueue.x-k8s.io/v1beta2 serves (workloads, ...)
    local_queue: KueueObject | None = None
    cluster_queue: KueueObject | None = None
    admission_checks: dict[str, KueueObject | None] = field(default_factory=dict)  # by name
    priority_classes: tuple[PriorityClassInfo, ...] = ()  # the WorkloadPriorityClasses
    namespace_labels: dict[str, str] = field(default_factory=dict)  # of the gateway's namespace
    namespace_labels_read: bool = True  # False: only its name label is known (not readable)
    # MultiKueue (docs/multi-cluster.md): each worker cluster the MultiKueueConfig of a MultiKueue
    # AdmissionCheck names, by name, with its Active condition; None: no such MultiKueueCluster.
    multikueue_clusters: dict[str, KueueObject | None] = field(default_factory=dict)
    multikueue_config: str = ""  # the MultiKueueConfig read; "" where the queue has no MultiKueue check


@dataclass(frozen=True)
class ClusterSnapshot:
    api_reachable: bool
    api_error: str = ""
    server_version: str = ""
    namespace: str = "default"
    identity: str = ""
    access: tuple[AccessRule, ...] = ()
    nodes: tuple[NodeInfo, ...] = ()
    device_plugins: tuple[DaemonSetInfo, ...] = ()
    device_plugin_logs: tuple[PodLog, ...] = ()
    api_services: tuple[ApiServiceInfo, ...] = ()
    custom_metrics: CustomMetrics = field(default_factory=lambda: CustomMetrics(api_service=None))
    hpas: tuple[HpaInfo, ...] = ()
    priority_classes: tuple[PriorityClassInfo, ...] = ()
    pending_pods: tuple[PendingPod, ...] = ()
    autoscaler_status: str | None = None
    quota: QuotaReading | None = None
    peak: int | None = None
    gpu_type: str = "nvidia-tesla-t4"
    lease_name: str = "elasticityops"
    lease: LeaseInfo | None = None  # None: there is no such Lease (or it could not be read)
    kueue: KueueReading | None = None  # None: the gateway admits by itself (no --admission kueue)
    unreadable: dict[str, str] = field(default_factory=dict)  # section -> error text

    @property
    def gpu_nodes(self) -> tuple[NodeInfo, ...]:
        return tuple(node for node in self.nodes if node.looks_like_gpu_node)
