"""Settings of the Kubernetes backend: each knob declared once, with its unit, default, variable
and limits (elasticityops/knobs.py). Read at the edge (`eops serve` flags over `EOPS_KUBE_*`
variables over these defaults, see elasticityops/settings.py) and passed down; nothing below
reads the environment.

The GPU cap is not here: EOPS_GPU_BUDGET (the dispatcher's, for every backend) is the one."""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.knobs import knob


@dataclass(frozen=True)
class KubernetesSettings:
    namespace: str = knob(
        "elasticityops",
        env="EOPS_KUBE_NAMESPACE",
        flag="namespace",
        help="Namespace of the Jobs, their pods and payload Secrets (kubernetes backend).",
    )
    kubeconfig: str | None = knob(
        None,
        env="EOPS_KUBECONFIG",
        unit="file",
        shown="the in-cluster service account, else $KUBECONFIG or ~/.kube/config",
        help="Kubeconfig of the cluster (kubernetes backend).",
    )
    context: str | None = knob(
        None, env="EOPS_KUBE_CONTEXT", shown="the current one", help="Kubeconfig context."
    )
    service_account_dir: str | None = knob(
        None,
        env="EOPS_KUBE_SERVICE_ACCOUNT_DIR",
        unit="directory",
        shown="the pod's mount",
        help="Where the pod's service account (token, ca.crt) is mounted: the credentials used "
        "when no kubeconfig is given.",
    )
    instance: str = knob(
        "default",
        env="EOPS_KUBE_INSTANCE",
        help="Name of this gateway, a label on every Job, so that two gateways sharing a namespace "
        "never adopt each other's Jobs.",
    )
    local_queue: str | None = knob(
        None,
        env="EOPS_KUBE_LOCAL_QUEUE",
        shown="eops, with --admission kueue",
        help="With --admission kueue: the Kueue LocalQueue in --namespace every Job is submitted "
        "to (kueue.x-k8s.io/queue-name); as `eops render kueue --local-queue` names it.",
    )
    workers: str | None = knob(
        None,
        env="EOPS_KUBE_WORKERS",
        unit="NAME=KUBECONFIG,...",
        shown="none: one cluster",
        help="With --admission kueue on a MultiKueue manager: each worker cluster (named as its "
        "MultiKueueCluster), where the gateway puts payloads and reads pods and logs "
        "(docs/multi-cluster.md).",
    )
    nominate_wait_s: float = knob(
        0.0,
        env="EOPS_KUBE_NOMINATE_WAIT",
        unit="seconds",
        ge=0,
        le=3600,
        shown="0: Kueue's own dispatcher nominates",
        help="With --kube-workers and an external multiKueue.dispatcherName: the gateway "
        "nominates one worker per Workload, the next after this many seconds unadmitted "
        "(docs/multi-cluster.md).",
    )
    # Each invocation costs two writes (Job, Secret), so 500 allows ~250 Jobs/s after the burst; at
    # 200 it was what held a 1,000-invocation burst to 100 Jobs/s on the dev cluster
    # (bench/k8s_burst.py), and client-go's default of 5 would cap it at 2.5. The API server's
    # priority and fairness (429 + Retry-After, honoured) remains the real guard.
    qps: float = knob(
        500.0,
        env="EOPS_KUBE_QPS",
        unit="requests/s",
        gt=0,
        le=100_000,
        help="Client-side rate limit of API requests (token bucket refill).",
    )
    burst: int = knob(
        1000,
        env="EOPS_KUBE_BURST",
        unit="requests",
        ge=1,
        le=1_000_000,
        help="Token bucket size: a burst of half as many invocations goes out unthrottled.",
    )
    concurrency: int = knob(
        64,
        env="EOPS_KUBE_CONCURRENCY",
        unit="requests",
        ge=1,
        le=10_000,
        help="Most API requests in flight at once; also the number of launch workers.",
    )
    max_retries: int = knob(
        6,
        env="EOPS_KUBE_MAX_RETRIES",
        unit="retries",
        ge=0,
        le=100,
        help="Retries of a request after 429, 5xx or a dropped connection.",
    )
    retry_base_seconds: float = knob(
        0.2,
        env="EOPS_KUBE_RETRY_BASE_SECONDS",
        unit="seconds",
        ge=0,
        le=3600,
        help="First back-off delay, doubled per retry with jitter.",
    )
    retry_cap_seconds: float = knob(
        10.0, env="EOPS_KUBE_RETRY_CAP_SECONDS", unit="seconds", ge=0, le=3600, help="Longest back-off delay."
    )
    request_timeout_seconds: float = knob(
        30.0,
        env="EOPS_KUBE_REQUEST_TIMEOUT_SECONDS",
        unit="seconds",
        gt=0,
        le=3600,
        help="Timeout of one non-watch request.",
    )
    watch_timeout_seconds: int = knob(
        290,
        env="EOPS_KUBE_WATCH_TIMEOUT_SECONDS",
        unit="seconds",
        ge=1,
        le=86_400,
        help="Server-side timeout of one watch request; the watch resumes from its resourceVersion.",
    )
    provisioning_timeout_seconds: float = knob(
        900.0,
        env="EOPS_KUBE_PROVISIONING_TIMEOUT_SECONDS",
        unit="seconds",
        gt=0,
        le=604_800,
        help="How long a pod may wait for a node before the invocation fails as no_capacity "
        "(the cluster autoscaler's max-node-provision-time is 15 min).",
    )
    ttl_after_finished_seconds: int = knob(
        3600,
        env="EOPS_KUBE_TTL_AFTER_FINISHED_SECONDS",
        unit="seconds",
        ge=0,
        le=31_536_000,
        help="ttlSecondsAfterFinished of every Job: long enough to read logs, short enough that "
        "finished Jobs do not pile up.",
    )
    keep_log_bytes: int = knob(
        16_384,
        env="EOPS_KUBE_KEEP_LOG_BYTES",
        unit="bytes",
        ge=0,
        le=10_485_760,
        shown="16 KiB",
        help="With --kube-workers: the last bytes of each pod's log the gateway keeps before it "
        "lets the pod go (MultiKueue deletes the worker's copy as the work ends); 0 keeps none "
        "(docs/multi-cluster.md).",
    )
    workload: str = knob(
        "job",
        env="EOPS_KUBE_WORKLOAD",
        choices=("job", "pod"),
        help="What each invocation runs as: job (a Job, whose controller makes its pod) or pod (a "
        "bare Pod the gateway makes, times and deletes itself: no Job controller writes per "
        "invocation, for control planes whose controller-manager is throttled; docs/kubernetes.md).",
    )
    gpu_driver_version: str | None = knob(
        None,
        env="EOPS_KUBE_GPU_DRIVER_VERSION",
        choices=("default", "latest"),
        shown="no selector",
        help="GKE driver selector cloud.google.com/gke-gpu-driver-version, needed where node "
        "auto-provisioning creates the GPU pools (else those nodes get no driver).",
    )
    image_pull_policy: str = knob(
        "IfNotPresent",
        env="EOPS_KUBE_IMAGE_PULL_POLICY",
        choices=("Always", "IfNotPresent", "Never"),
        help="imagePullPolicy of the job container.",
    )
    service_account: str | None = knob(
        None,
        env="EOPS_KUBE_JOB_SERVICE_ACCOUNT",
        shown="the namespace default",
        help="Service account the job pods run as.",
    )
    headroom_mechanism: str = knob(
        "placeholders",
        env="EOPS_HEADROOM_MECHANISM",
        choices=("placeholders", "buffer"),
        help="How warm capacity (--headroom) is held on Kubernetes: placeholders (pause pods that "
        "real jobs preempt) or buffer (a CapacityBuffer; see docs/headroom.md).",
    )
    placeholder_image: str = knob(
        "registry.k8s.io/pause:3.10",
        env="EOPS_KUBE_PLACEHOLDER_IMAGE",
        help="Image of the warm-capacity pods (a pause container).",
    )
    node_costs: str = knob(
        "watch",
        env="EOPS_KUBE_NODE_COSTS",
        choices=("watch", "off"),
        help="watch: charge invocations their nodes' provisioning and idle time from a GPU Node "
        "watch (docs/cost.md; the rendered ClusterRole allows it); off: their pods' time only.",
    )
    daemonset_cpu_millis: int = knob(
        400,
        env="EOPS_KUBE_DAEMONSET_CPU_MILLIS",
        unit="millicores",
        ge=0,
        le=1_000_000,
        help="CPU left on each node for GKE's daemonsets (kube-proxy, logging, device plugin) when "
        "a job's CPU request is sized to the machine.",
    )
    daemonset_memory_mib: int = knob(
        1024,
        env="EOPS_KUBE_DAEMONSET_MEMORY_MIB",
        unit="MiB",
        ge=0,
        le=1_048_576,
        help="Memory left on each node for the daemonsets.",
    )
