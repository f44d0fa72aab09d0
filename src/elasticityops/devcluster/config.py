"""Typed settings of a dev cluster, each field with its unit and default, named like the planner's."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from elasticityops.devcluster.kueue_setup import MultiKueueManager
from elasticityops.devcluster.kwok_provider import L4_TYPE, T4_TYPE
from elasticityops.devcluster.node_stages import DEFAULT_HEARTBEAT_SECONDS
from elasticityops.devcluster.nodes import REGION, zones_of
from elasticityops.planner.distributions import parse_distribution

GPU_TYPES = (T4_TYPE, L4_TYPE)  # those the dev cluster's node groups offer


@dataclass(frozen=True)
class AutoscalerSettings:
    """Knobs of the dev cluster's node auto-provisioning: upstream's cluster-autoscaler (its
    flags, fixed at `up`) and the simulated cloud under it (`cloud.py`: the static pool, how long
    a new node boots and installs its GPU driver, which zones are stocked out), which a running
    cluster re-reads, so tests and users change those live (`RUNTIME_KNOBS`)."""

    enabled: bool = True  # run the cluster-autoscaler (off: the static pool only)
    baseline: int = 0  # nodes in the static pool; never scaled down
    max_nodes: int = 100  # GPU quota: --max-nodes-total, the baseline included; each group's max
    scan_interval: float = 10.0  # s between two autoscaler loops
    # s from node creation to Ready (the VM boots, the kubelet registers): the planner's spec
    provision_delay: str = "fixed:60"
    # s from Ready to nvidia.com/gpu allocatable (GKE's driver installer; 0 until then)
    driver_delay: str = "fixed:60"
    scale_down_after: float = 600.0  # s a node must be unneeded before removal
    max_scale_down_parallelism: int = 10  # nodes removed at once at most
    backoff_initial: float = 300.0  # s a group is skipped after its first failed scale-up
    backoff_max: float = 1800.0  # s; the back-off doubles up to this
    expendable_pods_priority_cutoff: int = -10  # pods with a lower priority are ignored
    # s a node may take to register and to turn Ready before it is given up
    # (max-node-provision-time and max-node-startup-time, upstream's 15 min both)
    max_node_provision_time: float = 900.0
    # zones whose new nodes never become Ready: ZONE (every GPU type there) or ZONE/GPU_TYPE
    # (only that type's group there, e.g. us-central1-a/nvidia-tesla-t4: its L4 group still works)
    stockout_zones: tuple[str, ...] = ()
    seed: int = 0  # RNG seed for the sampled delays (0: from the clock)
    # GKE's BALANCED location policy: one scale-up spread over a GPU type's zone groups
    # (--balance-similar-node-groups). Off, upstream grows one group (of at most 1,000) per
    # loop, and a loop at thousands of pending pods takes minutes on two cores.
    balance_zones: bool = False
    max_nodes_per_scaleup: int = 1000  # upstream's default: the most nodes one scale-up adds
    # s of binpacking per node group in one scale-up (upstream's 10 s): its estimate stops
    # there, which on two busy cores is about 1,000 nodes of one-GPU pods
    max_binpacking_s: float = 10.0
    # The region of every node (nodes.REGION_ZONES): its zones are the node groups', the static
    # pool's and those stockout_zones may name. Fixed at `up` (the kwok provider's groups).
    region: str = REGION

    def validated(self) -> AutoscalerSettings:
        parse_distribution(self.provision_delay, "--provision-delay")
        parse_distribution(self.driver_delay, "--driver-delay")
        if self.baseline < 0 or self.max_nodes < 0:
            raise ValueError("baseline and max_nodes must be >= 0")
        if self.scan_interval <= 0:
            raise ValueError("scan_interval must be > 0")
        if self.max_scale_down_parallelism < 1:
            raise ValueError("max_scale_down_parallelism must be >= 1")
        if self.max_nodes_per_scaleup < 1:
            raise ValueError("max_nodes_per_scaleup must be >= 1")
        if self.max_binpacking_s <= 0:
            raise ValueError("max_binpacking_s must be > 0")
        zones = zones_of(self.region)
        for entry in self.stockout_zones:
            zone, slash, kind = entry.partition("/")
            if zone not in zones:
                raise ValueError(f"stockout_zones: unknown zone {zone!r}; zones are {', '.join(zones)}")
            if slash and kind not in GPU_TYPES:
                raise ValueError(
                    f"stockout_zones: {entry!r} names GPU type {kind!r}, which the dev cluster has "
                    f"no node group for; use ZONE or ZONE/TYPE with TYPE one of {', '.join(GPU_TYPES)}"
                )
        return self

    @classmethod
    def for_benchmarks(cls, max_nodes: int) -> AutoscalerSettings:
        """Quick and the same every run: a loop every 2 s, 5 s to boot a node, no driver delay,
        no scale-down within a run (bench/devcluster_scale.py, bench/k8s_burst.py)."""
        return cls(
            baseline=0,
            max_nodes=max(max_nodes, 1),
            scan_interval=2.0,
            provision_delay="fixed:5",
            driver_delay="fixed:0",
            scale_down_after=3600.0,
        )

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AutoscalerSettings:
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown autoscaler settings: {sorted(unknown)}")
        values = dict(data)
        if "stockout_zones" in values:
            values["stockout_zones"] = tuple(values["stockout_zones"])
        return replace(cls(), **values).validated()

    def write(self, path: Path) -> None:
        # Write-then-rename so the running cloud simulator never reads a half-written file.
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2))
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> AutoscalerSettings:
        return cls.from_json(json.loads(path.read_text()))


RUNTIME_KNOBS = frozenset({"baseline", "provision_delay", "driver_delay", "stockout_zones", "seed"})
"""What a running cluster changes live (the simulated cloud re-reads them); every other knob is a
flag of the cluster-autoscaler, fixed at `up` (restarting it would delete every node it made)."""


@dataclass(frozen=True)
class ClusterConfig:
    """How to start one dev cluster."""

    state_dir: Path
    autoscaler: AutoscalerSettings = field(default_factory=AutoscalerSettings)
    node_heartbeat_seconds: int = DEFAULT_HEARTBEAT_SECONDS  # kwok posts each node's status this often
    node_lease_seconds: int = 0
    """0: kwok keeps no node Leases and plays every pod of a node it manages (issue 14). > 0:
    kwok 0.8.0's Leases of that duration, under which its pod controller can skip a pod for good
    when its lease cache lags (docs/dev-cluster.md); only to reproduce that fault."""
    api_qps: int = 500  # client QPS of controller-manager and scheduler (defaults throttle)
    api_burst: int = 1000
    controller_manager_qps: int | None = None
    """The controller-manager's own client QPS where it differs from api_qps: upstream's stock
    20 (burst 30) shows what one Job per request costs on a default control plane (issue 16)."""
    controller_manager_burst: int | None = None
    startup_timeout: float = 120.0  # s each component gets to become ready
    kueue: bool = False
    """Run Kueue's manager (built by `eops dev-cluster build --kueue`) beside the control plane."""
    nodes: bool = True
    """False: a control plane without nodes (no scheduler, kwok, simulated cloud or autoscaler),
    as a MultiKueue manager cluster, which only dispatches, needs."""
    multikueue: MultiKueueManager | None = None
    """With `kueue`: this cluster's Kueue is a MultiKueue manager, with these timings."""
    pods_ready_timeout_s: float | None = None
    """With `kueue`: Kueue's waitForPodsReady, a Workload whose pods are not all ready this long
    after admission evicted and queued again (a MultiKueue worker's then goes back to the manager,
    which dispatches it again: how work leaves a stocked-out region). None: off, upstream's
    default."""
    kueue_feature_gates: tuple[tuple[str, bool], ...] = ()
    """With `kueue`: Kueue feature gates set on top of its defaults, (name, on) pairs; e.g.
    WorkloadRequestUseMergePatch (alpha in v0.17), which writes Workloads by merge patch instead
    of server-side apply (BENCHMARKS.md, "Through Kueue")."""
    apf_enabled: bool = True  # API priority and fairness; off lifts the inflight limits too
    job_workers: int = 5  # --concurrent-job-syncs; upstream's 5 keeps Job throughput realistic
    etcd_compaction_s: int = 300
    """s between two compactions of etcd by the API server (--etcd-compaction-interval; upstream's
    5 min). Short, a watch served from etcd that resumes from a version older than that gets
    410 Gone, as clients of a busy real cluster do."""
    request_timeout_s: int = 60
    """s the API server gives a request that is not a watch or a stream (--request-timeout;
    upstream's 1 min) before it answers 504 itself: what a client sees while etcd is away."""
    uncached_watches: tuple[str, ...] = ()
    """Resources (`jobs.batch`) whose watches the API server serves from etcd, not from its
    watch cache (--watch-cache-sizes=RESOURCE#0): their watches see etcd's compactions (410)."""
