"""What `eops doctor` reads the cluster with: each knob declared once (elasticityops/knobs.py) and
one of its flags. Apart from gather.py, so that the CLI builds its options without loading the
Kubernetes client."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from elasticityops.backends.kubernetes.settings import KubernetesSettings
from elasticityops.knobs import knob
from elasticityops.ops.gke.inputs import GPU_SHAPES
from elasticityops.ops.kueue import KueueInputs

DEFAULT_LOCAL_QUEUE = KueueInputs("").local_queue  # `eops render kueue`'s, and serve's default

MAX_RETRIES = 2
"""Retries of a request after 429, 5xx or a dropped connection: a busy API server gets a second
chance, an unreachable one is reported within seconds."""


@dataclass(frozen=True)
class GatherOptions:
    kubeconfig: Path | None = knob(
        None, unit="file", shown="$KUBECONFIG or ~/.kube/config", help="Kubeconfig of the cluster."
    )
    context: str | None = knob(None, shown="the current one", help="Kubeconfig context.")
    # Where `eops serve` runs Jobs (the same default and variable), not the kubeconfig context's
    # namespace, which the gateway ignores: a doctor looking elsewhere misses its Pending pods.
    namespace: str = knob(
        KubernetesSettings().namespace,
        env="EOPS_KUBE_NAMESPACE",
        flag="namespace",
        help="Namespace ElasticityOps runs Jobs in (eops serve --namespace).",
    )
    peak: int | None = knob(
        None,
        unit="nodes",
        ge=1,
        le=1_000_000,
        shown="no quota check",
        help="Planned peak of GPU nodes, to check GPU quota against.",
    )
    gpu_type: str = knob("nvidia-tesla-t4", choices=tuple(GPU_SHAPES), help="GPU model whose quota to check.")
    project: str | None = knob(None, shown="gcloud's", help="GCP project for the quota check.")
    region: str | None = knob(None, shown="the nodes' region label", help="GCP region for the quota check.")
    gcloud: str | None = None  # path of the gcloud binary; None: not installed
    lease_name: str = knob(
        "elasticityops",
        help="Lease the gateway replicas elect their leader on (eops serve --lease-name), in --namespace.",
    )
    workload: str = knob(
        "job",
        choices=("job", "pod"),
        help="What the gateway runs invocations as (eops serve --kube-workload): pod also needs the "
        "rights to create and delete pods.",
    )
    # As `eops serve` reads them (the same flags and variables), so a doctor run beside the
    # gateway, or with its flags, checks the Kueue set-up it dispatches through.
    admission: str = knob(
        "gateway",
        env="EOPS_ADMISSION",
        choices=("gateway", "kueue"),
        help="Who admits the gateway's invocations (eops serve --admission): kueue also checks "
        "Kueue's API, the LocalQueue, its ClusterQueue and admission checks, the "
        "WorkloadPriorityClasses and the rights to read Workloads.",
    )
    local_queue: str | None = knob(
        None,
        env="EOPS_KUBE_LOCAL_QUEUE",
        shown=f"{DEFAULT_LOCAL_QUEUE}, with --admission kueue",
        help="The Kueue LocalQueue in --namespace the gateway submits to (eops serve "
        "--kube-local-queue); naming one checks Kueue as --admission kueue does.",
    )
    nominate_wait_s: float = knob(
        0.0,
        env="EOPS_KUBE_NOMINATE_WAIT",
        flag="kube-nominate-wait",
        unit="seconds",
        ge=0,
        le=3600,
        shown="0: Kueue's own dispatcher nominates",
        help="As eops serve --kube-nominate-wait (the gateway as MultiKueue's dispatcher): above 0, "
        "also checks the right to write each Workload's nominated workers (patch workloads/status).",
    )
    timeout_s: float = knob(
        10.0, flag="timeout", unit="seconds", gt=0, le=3600, help="Timeout of each API request."
    )
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def kueue_queue(self) -> str | None:
        """The LocalQueue to check, None when the gateway admits by itself."""
        if self.local_queue:
            return self.local_queue
        return DEFAULT_LOCAL_QUEUE if self.admission == "kueue" else None

    def client_settings(self) -> KubernetesSettings:
        return KubernetesSettings(
            kubeconfig=str(self.kubeconfig) if self.kubeconfig else None,
            context=self.context,
            request_timeout_seconds=self.timeout_s,
            max_retries=MAX_RETRIES,
        )
