"""Several dev clusters as one MultiKueue set (pure: names, regions and the set's record;
cluster_set.py starts them, with the objects `eops render kueue [--multikueue]` renders, which
the CLI composes: ops/kueue_multikueue.py).

A set is a manager, a control plane whose Kueue dispatches (no nodes), and workers, each a dev
cluster of its own with Kueue, named `manager`, `worker-1`, `worker-2`, ... Each keeps its state
in a sub-directory of the set's state directory named after it, beside `set.json`.

The manager holds, in Kueue's namespace, a Secret per worker with that worker's kubeconfig, a
MultiKueueCluster per worker naming its Secret, one MultiKueueConfig naming them all and the
AdmissionCheck of MultiKueue's controller on the ClusterQueue: a Job created in its LocalQueue
gets `spec.managedBy: kueue.x-k8s.io/multikueue` from Kueue's webhook and runs on a worker.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.devcluster.nodes import REGION_ZONES, zones_of

Manifest = dict[str, Any]
MANAGER = "manager"
WORKER_PREFIX = "worker-"
WORKER_REGIONS = tuple(REGION_ZONES)  # worker-1 in the first, worker-2 in the second, ...
MAX_WORKERS = len(WORKER_REGIONS)  # a region each; three clusters already fill 2 cores
SET_FILE = "set.json"
_WORKER = re.compile(r"worker-([1-9][0-9]*)")


def worker_name(index: int) -> str:
    """The name of the set's `index`-th worker (from 1)."""
    return f"{WORKER_PREFIX}{index}"


def check_workers(count: int) -> int:
    if not 1 <= count <= MAX_WORKERS:
        raise ValueError(f"--workers {count}: a set has 1 to {MAX_WORKERS} workers")
    return count


def worker_region(index: int) -> str:
    """The region of the set's `index`-th worker (from 1): every worker has one of its own."""
    return WORKER_REGIONS[index - 1]


def worker_settings(settings: AutoscalerSettings, workers: int) -> dict[str, AutoscalerSettings]:
    """Each worker's cloud: `settings` in the worker's own region, with the stocked-out zones of
    `settings` that are in that region. ValueError naming `--stockout-zone` for a zone no
    worker has (or a GPU type no group has)."""
    regions = {worker_name(i): worker_region(i) for i in range(1, check_workers(workers) + 1)}
    stockouts: dict[str, list[str]] = {w: [] for w in regions}
    for entry in settings.stockout_zones:
        zone = entry.partition("/")[0]
        owner = next((w for w, region in regions.items() if zone in zones_of(region)), None)
        if owner is None:
            where = "; ".join(f"{w}: {', '.join(zones_of(r))}" for w, r in regions.items())
            raise ValueError(f"--stockout-zone {entry}: no worker of the set has zone {zone!r} ({where})")
        stockouts[owner].append(entry)
    out = {}
    for worker, region in regions.items():
        mine = replace(settings, region=region, stockout_zones=tuple(stockouts[worker]))
        try:
            out[worker] = mine.validated()
        except ValueError as exc:
            raise ValueError(f"--stockout-zone: {exc}") from None
    return out


@dataclass(frozen=True)
class SetRecord:
    """`set.json`: which clusters the set has, so `down`, `status` and `--cluster` find them."""

    workers: int
    started_at: float
    up_seconds: float | None = None  # how long `up` took, once it is done

    @property
    def worker_names(self) -> tuple[str, ...]:
        return tuple(worker_name(i) for i in range(1, self.workers + 1))

    @property
    def names(self) -> tuple[str, ...]:
        return (MANAGER, *self.worker_names)

    def check_name(self, name: str) -> str:
        """`name` when the set has a cluster of that name, else ValueError naming those it has."""
        if name not in self.names:
            raise ValueError(
                f"--cluster {name!r}: no such cluster in the set; use one of {', '.join(self.names)}"
            )
        return name

    def check_worker(self, name: str) -> str:
        """`name` when it is one of the set's workers (the clusters with nodes and a cloud)."""
        self.check_name(name)
        if name == MANAGER:
            raise ValueError(
                f"--cluster {MANAGER}: the manager has no nodes; use a worker: {', '.join(self.worker_names)}"
            )
        return name

    def to_json(self) -> dict[str, Any]:
        return {"workers": self.workers, "started_at": self.started_at, "up_seconds": self.up_seconds}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SetRecord:
        up_seconds = data.get("up_seconds")
        return cls(
            workers=int(data["workers"]),
            started_at=float(data["started_at"]),
            up_seconds=None if up_seconds is None else float(up_seconds),
        )

    def write(self, root: Path) -> None:
        tmp = root / f"{SET_FILE}.tmp"
        tmp.write_text(json.dumps(self.to_json(), indent=2))
        tmp.replace(root / SET_FILE)


def read_record(root: Path) -> SetRecord | None:
    """The set recorded in `root`, None where `root` holds no set (one cluster, or nothing)."""
    path = root / SET_FILE
    if not path.is_file():
        return None
    return SetRecord.from_json(json.loads(path.read_text()))


def member_dir(root: Path, name: str) -> Path:
    """Where the set's cluster `name` keeps its state."""
    return root / name


def condition_true(obj: Manifest, kind: str) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)
