"""A MultiKueue set of dev clusters on one machine: start, attach, stop (multikueue.py names them
and renders their objects).

`up_set` records the set (`set.json`) before it starts anything, so `down_set` stops every
cluster by PID even after a start that failed half-way. The workers start first, one after
another (each a dev cluster of today with Kueue, its queue objects installed), then the manager
(a control plane without nodes whose Kueue is a MultiKueue manager), which gets the workers'
kubeconfigs; `up_set` returns once every MultiKueueCluster is Active and the AdmissionCheck too.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from elasticityops.devcluster import multikueue, procs
from elasticityops.devcluster.cluster import DevCluster, StepFn, down, load_state
from elasticityops.devcluster.config import ClusterConfig
from elasticityops.devcluster.errors import DevClusterError, StartupError
from elasticityops.devcluster.install import install_objects
from elasticityops.devcluster.kueue_setup import MultiKueueManager
from elasticityops.devcluster.multikueue import MANAGER, Manifest, SetRecord, member_dir, read_record
from elasticityops.devcluster.paths import Toolchain
from elasticityops.domain.errors import EopsError

KUEUE = "/apis/kueue.x-k8s.io/v1beta2"


def _quiet(_: str) -> None:
    return None


@dataclass(frozen=True)
class SetObjects:
    """The Kueue objects of the set (what `eops render kueue [--multikueue]` renders, composed by
    the caller): `worker`'s on every worker as they are; the manager's made of the workers'
    kubeconfigs (name to text) once they exist."""

    worker: list[Manifest]
    manager: Callable[[dict[str, str]], list[Manifest]]


def manager_config(worker: ClusterConfig, root: Path, timings: MultiKueueManager) -> ClusterConfig:
    """The manager's ClusterConfig: the workers' control-plane flags, no nodes, Kueue dispatching."""
    return replace(
        worker,
        state_dir=member_dir(root, MANAGER),
        nodes=False,
        kueue=True,
        multikueue=timings,
        pods_ready_timeout_s=None,  # no pods of its own: the workers' Kueue decides readiness
        # No nodes, no cloud: none of the workers' stocked-out zones is the manager's.
        autoscaler=replace(worker.autoscaler, enabled=False, baseline=0, stockout_zones=()),
    )


def _check_free(root: Path) -> None:
    record = read_record(root)
    names = record.names if record is not None else ()
    for name in (*names, ""):
        state = load_state(member_dir(root, name) if name else root)
        if state is not None and any(procs.is_alive(p) for p in state.processes):
            where = f"the set's {name}" if name else "a dev cluster"
            raise DevClusterError(f"{where} is already running in {root}; run `eops dev-cluster down` first")


def up_set(
    root: Path,
    worker: ClusterConfig,
    workers: int,
    objects: SetObjects,
    tc: Toolchain,
    timings: MultiKueueManager | None = None,
    step: StepFn = _quiet,
) -> ClusterSet:
    """Start a manager and `workers` workers under `root` (which must hold nothing running);
    `worker` is every worker's ClusterConfig but its state directory, region (each worker has
    its own, multikueue.WORKER_REGIONS; `worker`'s stocked-out zones go to the worker whose
    region has them) and Kueue, which are set."""
    root = root.resolve()
    multikueue.worker_settings(worker.autoscaler, workers)  # refused before anything starts
    _check_free(root)
    root.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    record = SetRecord(workers=workers, started_at=time.time())
    record.write(root)
    try:
        kubeconfigs = {}
        for name, settings in multikueue.worker_settings(worker.autoscaler, workers).items():
            cfg = replace(
                worker,
                state_dir=member_dir(root, name),
                autoscaler=settings,
                kueue=True,
                nodes=True,
                multikueue=None,
            )
            cluster = DevCluster.start(cfg, tc, _prefixed(step, name))
            step(f"{name}: Kueue's queue objects")
            _install(cluster, objects.worker, cfg.startup_timeout)
            kubeconfigs[name] = cluster.kubeconfig_path.read_text()
        cfg = manager_config(worker, root, timings or MultiKueueManager())
        manager = DevCluster.start(cfg, tc, _prefixed(step, MANAGER))
        step(f"{MANAGER}: MultiKueue's objects")
        try:
            manager_objects = objects.manager(kubeconfigs)
        except ValueError as exc:
            raise StartupError(f"{MANAGER}: {exc}") from None
        _install(manager, manager_objects, cfg.startup_timeout)
        step(f"{MANAGER}: MultiKueue connects to {', '.join(record.worker_names)}")
        wait_connected(manager, record.worker_names, True, cfg.startup_timeout)
    except BaseException:
        down_set(root)
        raise
    record = replace(record, up_seconds=round(time.monotonic() - began, 1))
    record.write(root)
    return ClusterSet(root, record)


def _prefixed(step: StepFn, name: str) -> StepFn:
    return lambda what: step(f"{name}: {what}")


def _install(cluster: DevCluster, objects: list[Manifest], timeout: float) -> None:
    with cluster.api() as api:
        try:
            install_objects(api, objects, timeout)
        except EopsError as exc:
            raise StartupError(f"{cluster.state_dir.name}: {exc}") from None


def cluster_states(manager: DevCluster) -> dict[str, bool]:
    """Each MultiKueueCluster on the manager and whether it is Active (Kueue connected to it)."""
    with manager.api() as api:
        items, _ = api.list(f"{KUEUE}/multikueueclusters")
    return {str(o["metadata"]["name"]): multikueue.condition_true(o, "Active") for o in items}


def wait_connected(manager: DevCluster, workers: tuple[str, ...], active: bool, timeout: float) -> None:
    """Wait until every one of `workers` is Active (or, `active` False, not Active) on the manager."""
    deadline = time.monotonic() + timeout
    seen: dict[str, bool] = {}
    while time.monotonic() < deadline:
        seen = cluster_states(manager)
        if all(seen.get(w) is active for w in workers):
            return
        time.sleep(1.0)
    state = "Active" if active else "inactive"
    raise StartupError(f"MultiKueueClusters not {state} after {timeout:.0f}s: {json.dumps(seen)}")


def down_set(root: Path) -> dict[str, list[str]]:
    """Stop every cluster of the set by PID, the manager first (its Kueue would only retry the
    workers meanwhile); the processes stopped, by cluster. The record goes last."""
    root = root.resolve()
    record = read_record(root)
    if record is None:
        return {}
    stopped = {name: down(member_dir(root, name)) for name in record.names}
    (root / multikueue.SET_FILE).unlink(missing_ok=True)
    return stopped


class ClusterSet:
    """A running set: its record and a DevCluster per member."""

    def __init__(self, root: Path, record: SetRecord) -> None:
        self.root = root
        self.record = record

    @classmethod
    def attach(cls, root: Path) -> ClusterSet:
        root = root.expanduser().resolve()
        record = read_record(root)
        if record is None:
            raise DevClusterError(f"no MultiKueue set recorded in {root}")
        return cls(root, record)

    @property
    def names(self) -> tuple[str, ...]:
        return self.record.names

    def cluster(self, name: str) -> DevCluster:
        """The set's cluster `name` (ValueError for a name the set has not)."""
        return DevCluster.attach(member_dir(self.root, self.record.check_name(name)))

    @property
    def manager(self) -> DevCluster:
        return self.cluster(MANAGER)

    def each(self) -> dict[str, DevCluster]:
        return {name: self.cluster(name) for name in self.names}

    def stop(self) -> dict[str, list[str]]:
        return down_set(self.root)
