"""The emulator's I/O loop: gather a snapshot, call `autoscaler.decide`, apply its actions once.

Runs as its own process (`python -m elasticityops.devcluster.autoscaler_loop`), started and
stopped by PID like the other components. Knobs are re-read from a JSON file every cycle, so
tests and users change them on a running cluster; a status JSON is written every cycle.
Failures of the API server are logged and retried next cycle, never fatal.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import random
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from elasticityops.backends.kubernetes.blocking import BlockingKubeApi
from elasticityops.devcluster.autoscaler import (
    Actions,
    EmulatorState,
    NodeView,
    PendingPod,
    Snapshot,
    decide,
)
from elasticityops.devcluster.client import Credentials, admin_api
from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.devcluster.nodes import (
    BASELINE_POOL,
    GPU_RESOURCE,
    POOL_LABEL,
    ROLE_AUTOSCALED,
    ROLE_BASELINE,
    ROLE_LABEL,
    ZONES,
    gpu_node,
    node_ready,
)
from elasticityops.domain.errors import Conflict, EopsError

_UNFINISHED = "status.phase!=Succeeded,status.phase!=Failed"


def _epoch(stamp: str | None, default: float) -> float:
    if not stamp:
        return default
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def _quantity_int(value: Any) -> int:
    # GPU quantities are whole numbers ("1"); anything else counts as 0 for this emulator.
    try:
        return int(str(value))
    except ValueError:
        return 0


def pod_gpus(pod: dict[str, Any]) -> int:
    total = 0
    for c in pod.get("spec", {}).get("containers", []):
        res = c.get("resources", {})
        total += _quantity_int(
            res.get("requests", {}).get(GPU_RESOURCE) or res.get("limits", {}).get(GPU_RESOURCE) or 0
        )
    return total


def _unschedulable_since(pod: dict[str, Any], now: float) -> float | None:
    for cond in pod.get("status", {}).get("conditions", []) or []:
        if (cond.get("type"), cond.get("status"), cond.get("reason")) == (
            "PodScheduled",
            "False",
            "Unschedulable",
        ):
            return _epoch(cond.get("lastTransitionTime"), now)
    return None


def snapshot_from(
    nodes: list[dict[str, Any]], pods: list[dict[str, Any]], now: float, cutoff: int
) -> Snapshot:
    """Pure: turn listed objects into the emulator's view (unit-tested without a cluster)."""
    requested: dict[str, int] = {}
    pending: list[PendingPod] = []
    for pod in pods:
        meta, spec = pod.get("metadata", {}), pod.get("spec", {})
        gpus = pod_gpus(pod)
        priority = int(spec.get("priority") or 0)
        node = spec.get("nodeName")
        if node:
            if priority >= cutoff and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
                requested[node] = requested.get(node, 0) + gpus
            continue
        if gpus == 0 or meta.get("deletionTimestamp"):
            continue
        since = _unschedulable_since(pod, now)
        if since is not None:
            pending.append(PendingPod(f"{meta.get('namespace')}/{meta.get('name')}", gpus, since, priority))
    views = []
    for n in nodes:
        meta = n.get("metadata", {})
        labels = meta.get("labels", {}) or {}
        views.append(
            NodeView(
                name=meta["name"],
                pool=labels.get(POOL_LABEL, ""),
                role=labels.get(ROLE_LABEL, ""),
                gpus=_quantity_int(n.get("status", {}).get("allocatable", {}).get(GPU_RESOURCE, 0)),
                gpus_requested=requested.get(meta["name"], 0),
                ready=node_ready(n),
            )
        )
    return Snapshot(now=now, nodes=tuple(views), pending=tuple(pending))


@dataclass
class Totals:
    created: int = 0
    deleted: int = 0
    ordered: int = 0
    stockouts: int = 0
    errors: int = 0
    recent: list[str] = field(default_factory=list)

    def note(self, line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)
        self.recent = [*self.recent[-49:], line]


class Loop:
    def __init__(
        self, api: BlockingKubeApi, settings_path: Path, status_path: Path, baseline_only: bool = False
    ) -> None:
        self.api = api
        self.baseline_only = baseline_only
        self.settings_path = settings_path
        self.status_path = status_path
        self.state = EmulatorState()
        self.totals = Totals()
        self.stop_event = threading.Event()
        self.pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="eops-as")
        settings = AutoscalerSettings.read(settings_path)
        self.rng = random.Random(settings.seed or time.time_ns())

    def gather(self, cutoff: int) -> Snapshot:
        # resourceVersion=0: served from the API server's watch cache, not a quorum read of etcd;
        # a view a few ms old is fine for a loop that acts every few seconds.
        nodes, _ = self.api.list("/api/v1/nodes", {"labelSelector": ROLE_LABEL, "resourceVersion": "0"}, 1000)
        pods, _ = self.api.list("/api/v1/pods", {"fieldSelector": _UNFINISHED, "resourceVersion": "0"}, 1000)
        return snapshot_from(nodes, pods, time.time(), cutoff)

    def _create(self, body: dict[str, Any]) -> None:
        # Conflict: already there, an earlier cycle's create (or a retried one) went through.
        with contextlib.suppress(Conflict):
            self.api.create("/api/v1/nodes", body)

    def apply(self, actions: Actions) -> None:
        # Provisioned nodes register NotReady and kwok readies them: pods waiting for them can
        # only bind after kwok has taken the node on. A node created Ready gets pods bound
        # within a second, and under load kwok then sometimes never picks those pods up
        # (seen at 4,000 autoscaled pods: 3 stuck Pending on a Ready node).
        bodies = [gpu_node(o.name, pool=o.pool, zone=o.zone, role=ROLE_AUTOSCALED) for o in actions.create]
        # Baseline nodes are created registered and Ready (fast for thousands of nodes); the
        # cluster waits for kwok's lease of each before reporting the pool ready.
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for name in actions.create_baseline:
            index = int(name.rsplit("-", 1)[1])
            bodies.append(
                gpu_node(
                    name, pool=BASELINE_POOL, zone=ZONES[index % len(ZONES)], role=ROLE_BASELINE, now=now
                )
            )
        jobs: list[Future[object]] = [self.pool.submit(self._create, b) for b in bodies]
        jobs += [self.pool.submit(self.api.delete, f"/api/v1/nodes/{n}") for n in actions.delete]
        failed = 0
        for job in jobs:
            try:
                job.result()
            except EopsError as exc:
                failed += 1
                self.totals.note(f"error: {exc}")
        self.totals.errors += failed
        self.totals.created += len(bodies)
        self.totals.deleted += len(actions.delete)
        self.totals.ordered += len(actions.ordered)
        self.totals.stockouts += len(actions.stockouts)
        if actions.ordered:
            self.totals.note(
                f"ordered {len(actions.ordered)} node(s): {', '.join(o.name for o in actions.ordered[:5])}"
            )
        if bodies:
            self.totals.note(f"created {len(bodies)} node(s)")
        if actions.delete:
            self.totals.note(f"deleted {len(actions.delete)} node(s): {', '.join(actions.delete[:5])}")
        for pool in actions.stockouts:
            self.totals.note(f"stockout in {pool}: backing off until {self.state.backoff[pool].until:.0f}")

    def write_status(self, snap: Snapshot, settings: AutoscalerSettings) -> None:
        status = {
            "time": snap.now,
            "settings": settings.to_json(),
            "nodes": {
                "baseline": sum(1 for n in snap.nodes if n.role == ROLE_BASELINE),
                "autoscaled": sum(1 for n in snap.nodes if n.role == ROLE_AUTOSCALED),
                "in_flight": len(self.state.in_flight),
            },
            "pending_gpu_pods": len(snap.pending),
            "unneeded": len(self.state.unneeded_since),
            "backoff": {p: b.until for p, b in self.state.backoff.items() if b.until > snap.now},
            "totals": {k: v for k, v in vars(self.totals).items() if k != "recent"},
            "recent": self.totals.recent[-10:],
        }
        tmp = self.status_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(status, indent=2))
        tmp.replace(self.status_path)

    def cycle(self) -> float:
        """One gather-decide-apply pass; returns the seconds to wait before the next."""
        settings = AutoscalerSettings.read(self.settings_path)
        if self.baseline_only:
            # The real cluster-autoscaler scales the GPU groups; only the static pool is ours.
            settings = replace(settings, enabled=False)
        snap = self.gather(settings.expendable_pods_priority_cutoff)
        actions, self.state = decide(snap, self.state, settings, self.rng)
        if not actions.empty():
            self.apply(actions)
        self.write_status(snap, settings)
        wait = settings.scan_interval
        if self.state.in_flight:
            # Wake up when the next ordered node is due, not a whole scan interval later.
            wait = min(wait, max(min(o.ready_at for o in self.state.in_flight) - time.time(), 0.05))
        return wait

    def run(self) -> None:
        while not self.stop_event.is_set():
            try:
                wait = self.cycle()
            except (EopsError, OSError, ValueError) as exc:
                self.totals.errors += 1
                self.totals.note(f"cycle failed, retrying: {exc}")
                wait = 1.0
            self.stop_event.wait(wait)
        self.pool.shutdown(wait=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="ElasticityOps dev-cluster node auto-provisioning emulator")
    parser.add_argument("--server", required=True)
    parser.add_argument("--pki-dir", required=True, type=Path)
    parser.add_argument("--settings", required=True, type=Path)
    parser.add_argument("--status", required=True, type=Path)
    parser.add_argument(
        "--baseline-only", action="store_true", help="Keep the static pool only; never scale GPU nodes."
    )
    args = parser.parse_args(argv)
    with admin_api(Credentials.in_pki(args.server, args.pki_dir)) as api:
        loop = Loop(api, args.settings, args.status, args.baseline_only)
        signal.signal(signal.SIGTERM, lambda *_: loop.stop_event.set())
        signal.signal(signal.SIGINT, lambda *_: loop.stop_event.set())
        loop.totals.note("emulator started")
        loop.run()
        loop.totals.note("emulator stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
