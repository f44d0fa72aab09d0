"""Typed settings of a dev cluster, each field with its unit and default, named like the planner's."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from elasticityops.planner.distributions import parse_distribution


@dataclass(frozen=True)
class AutoscalerSettings:
    """Knobs of the node auto-provisioning emulator (upstream cluster-autoscaler defaults)."""

    enabled: bool = True
    baseline: int = 0  # nodes in the static pool; never scaled down
    max_nodes: int = 100  # GPU quota: baseline + provisioned + in-flight nodes never exceed it
    scan_interval: float = 10.0  # s between two decision cycles
    gpu_pod_delay: float = 30.0  # s a GPU pod must have been unschedulable before it counts
    provision_delay: str = "fixed:120"  # s from scale-up decision to a Ready node (planner spec)
    scale_down_after: float = 600.0  # s a node must be unneeded (no GPU requested) before removal
    max_scale_down_parallelism: int = 10  # nodes removed per cycle at most
    pool_size_limit: int = 1000  # nodes per auto-provisioned node pool
    stockout_probability: float = 0.0  # chance that one provisioning attempt fails
    backoff_initial: float = 300.0  # s a pool is skipped after its first failed attempt
    backoff_max: float = 1800.0  # s; the back-off doubles up to this
    expendable_pods_priority_cutoff: int = -10  # pods with a lower priority are ignored
    # Real autoscaler only: s a node may take to register and to turn Ready before it is given
    # up (max-node-provision-time and max-node-startup-time, upstream's 15 min both).
    max_node_provision_time: float = 900.0
    seed: int = 0  # RNG seed for delays and stockouts (0: from the clock)

    def validated(self) -> AutoscalerSettings:
        parse_distribution(self.provision_delay)
        if self.baseline < 0 or self.max_nodes < 0 or self.pool_size_limit < 1:
            raise ValueError("baseline, max_nodes must be >= 0 and pool_size_limit >= 1")
        if not 0.0 <= self.stockout_probability <= 1.0:
            raise ValueError("stockout_probability must be within [0, 1]")
        if self.scan_interval <= 0:
            raise ValueError("scan_interval must be > 0")
        return self

    @classmethod
    def for_benchmarks(cls, max_nodes: int) -> AutoscalerSettings:
        """Quick and the same every run: a scan every 2 s, no GPU pod delay, 5 s to provision a
        node, no scale-down within a run (bench/devcluster_scale.py, bench/k8s_burst.py)."""
        return cls(
            baseline=0,
            max_nodes=max(max_nodes, 1),
            scan_interval=2.0,
            gpu_pod_delay=0.0,
            provision_delay="fixed:5",
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
        return replace(cls(), **data).validated()

    def write(self, path: Path) -> None:
        # Write-then-rename so the running emulator never reads a half-written file.
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=2))
        tmp.replace(path)

    @classmethod
    def read(cls, path: Path) -> AutoscalerSettings:
        return cls.from_json(json.loads(path.read_text()))


AutoscalerKind = Literal["emulator", "real"]
AUTOSCALER_KINDS: tuple[AutoscalerKind, ...] = ("emulator", "real")


@dataclass(frozen=True)
class ClusterConfig:
    """How to start one dev cluster."""

    state_dir: Path
    autoscaler: AutoscalerSettings = field(default_factory=AutoscalerSettings)
    node_lease_seconds: int = 240  # kwok renews each node lease every quarter of this
    api_qps: int = 500  # client QPS of controller-manager and scheduler (defaults throttle)
    api_burst: int = 1000
    startup_timeout: float = 120.0  # s each component gets to become ready
    apf_enabled: bool = True  # API priority and fairness; off lifts the inflight limits too
    job_workers: int = 5  # --concurrent-job-syncs; upstream's 5 keeps Job throughput realistic
    # "real": upstream's cluster-autoscaler (kwok provider) scales the GPU groups and the emulator
    # only keeps the static baseline pool; "emulator": the emulator does both.
    autoscaler_kind: AutoscalerKind = "emulator"
