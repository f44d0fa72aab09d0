"""The simulated cloud's I/O loop (`python -m elasticityops.devcluster.cloud_loop`).

One watch on the dev cluster's nodes (never a list per cycle: thousands of nodes in a scale
run): each new autoscaled node is stamped once (cloud.stamp) so that kwok's node stages boot it;
once a second the static pool is reconciled to the `baseline` knob, the knobs are re-read from
the settings file (tests and users change them on a running cluster) and a small status JSON is
written (the cluster waits for its first one at `up`). Failures of the API server are logged and
retried, never fatal. Started and stopped by PID like every other component.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import random
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from elasticityops.backends.kubernetes.api import KubeApi
from elasticityops.backends.kubernetes.watch import KindWatch
from elasticityops.devcluster.client import ADMIN_SETTINGS, Credentials
from elasticityops.devcluster.cloud import baseline_plan, rfc3339, stamp, stockout
from elasticityops.devcluster.config import AutoscalerSettings
from elasticityops.devcluster.node_stages import STOCKOUT, STOCKOUT_REASON
from elasticityops.devcluster.nodes import (
    BASELINE_POOL,
    ROLE_AUTOSCALED,
    ROLE_BASELINE,
    ROLE_LABEL,
    baseline_zone,
    gpu_node,
    node_ready,
)
from elasticityops.domain.clock import SystemClock
from elasticityops.domain.errors import Conflict, EopsError, NotFound

PATCH_CONCURRENCY = 16


@dataclass
class Totals:
    stamped: int = 0
    stocked_out: int = 0
    errors: int = 0
    recent: list[str] = field(default_factory=list)

    def note(self, line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)
        self.recent = [*self.recent[-49:], line]


@dataclass
class NodeView:
    role: str
    ready: bool


class CloudLoop:
    def __init__(self, api: KubeApi, settings_path: Path, status_path: Path, kubelet_port: int = 0) -> None:
        self.api = api
        self.kubelet_port = kubelet_port
        self.settings_path = settings_path
        self.status_path = status_path
        self.settings = AutoscalerSettings.read(settings_path)
        self.rng = random.Random(self.settings.seed or time.time_ns())
        self.nodes: dict[str, NodeView] = {}
        self.totals = Totals()
        self._patching: set[str] = set()
        self._slots = asyncio.Semaphore(PATCH_CONCURRENCY)
        self._tasks: set[asyncio.Task[None]] = set()
        self.watch = KindWatch(
            api, "/api/v1/nodes", {"labelSelector": ROLE_LABEL}, self.on_node, SystemClock()
        )

    async def on_node(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        if kind == "DELETED":
            self.nodes.pop(name, None)
            return
        labels = meta.get("labels") or {}
        self.nodes[name] = NodeView(role=str(labels.get(ROLE_LABEL, "")), ready=node_ready(obj))
        if name in self._patching:
            return
        failed = stockout(obj, self.settings)
        patch = failed or stamp(obj, self.settings, self.rng, time.time())
        if patch is not None:
            self._patching.add(name)
            self._spawn(self._patch(name, patch, failed=failed is not None))

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _patch(self, name: str, patch: dict[str, Any], failed: bool) -> None:
        """Stamp a node, or fail it (`failed`: the stockout annotation, and an Event saying why)."""
        message = str(patch["metadata"]["annotations"][STOCKOUT]) if failed else ""
        try:
            async with self._slots:
                await self.api.patch(f"/api/v1/nodes/{name}", patch)
                if failed:
                    await self.api.create("/api/v1/namespaces/default/events", _node_event(name, message))
            if failed:
                self.totals.stocked_out += 1
                self.totals.note(f"stockout: {name} failed ({message})")
            else:
                self.totals.stamped += 1
        except NotFound:
            pass  # deleted meanwhile (a scale-down, a cleanup)
        except EopsError as exc:
            self.totals.errors += 1
            self.totals.note(f"error {'failing' if failed else 'stamping'} {name}: {exc}")
        finally:
            # A failed patch is retried at the node's next watch event or relist.
            self._patching.discard(name)

    async def reconcile_baseline(self) -> None:
        existing = {n for n, v in self.nodes.items() if v.role == ROLE_BASELINE}
        create, delete = baseline_plan(existing, self.settings.baseline)
        if not (create or delete):
            return
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        async def make(name: str) -> None:
            index = int(name.rsplit("-", 1)[1])
            # Created registered and Ready (fast for thousands of nodes): without node Leases
            # kwok plays their pods as soon as it has taken them on (cluster.wait_for_nodes).
            body = gpu_node(
                name,
                pool=BASELINE_POOL,
                zone=baseline_zone(index, self.settings.region),
                role=ROLE_BASELINE,
                now=now,
                kubelet_port=self.kubelet_port,
            )
            async with self._slots:
                with contextlib.suppress(Conflict):
                    await self.api.create("/api/v1/nodes", body)

        async def remove(name: str) -> None:
            async with self._slots:
                await self.api.delete(f"/api/v1/nodes/{name}")

        results = await asyncio.gather(
            *(make(n) for n in create), *(remove(n) for n in delete), return_exceptions=True
        )
        failed = [r for r in results if isinstance(r, BaseException)]
        for exc in failed:
            self.totals.note(f"error in the static pool: {exc}")
        self.totals.errors += len(failed)
        # Seen at once, not at the watch's echo: the next second's reconcile must not redo them.
        for name in create:
            self.nodes.setdefault(name, NodeView(ROLE_BASELINE, True))
        for name in delete:
            self.nodes.pop(name, None)
        self.totals.note(f"static pool: {len(create)} created, {len(delete)} deleted")

    def write_status(self) -> None:
        autoscaled = [v for v in self.nodes.values() if v.role == ROLE_AUTOSCALED]
        status = {
            "time": time.time(),
            "settings": self.settings.to_json(),
            "nodes": {
                "baseline": sum(1 for v in self.nodes.values() if v.role == ROLE_BASELINE),
                "autoscaled": len(autoscaled),
                "autoscaled_ready": sum(1 for v in autoscaled if v.ready),
            },
            "watch_synced": self.watch.synced,
            "totals": {k: v for k, v in vars(self.totals).items() if k != "recent"},
            "recent": self.totals.recent[-10:],
        }
        tmp = self.status_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(status, indent=2))
        tmp.replace(self.status_path)

    def reload(self) -> None:
        try:
            self.settings = AutoscalerSettings.read(self.settings_path)
        except (OSError, ValueError) as exc:
            self.totals.note(f"settings unreadable, keeping the last good ones: {exc}")

    async def run(self, stop: asyncio.Event) -> None:
        watcher = asyncio.get_running_loop().create_task(self.watch.run())
        try:
            while not stop.is_set():
                self.reload()
                if self.watch.synced:
                    try:
                        await self.reconcile_baseline()
                    except EopsError as exc:
                        self.totals.errors += 1
                        self.totals.note(f"static pool reconcile failed, retrying: {exc}")
                    self.write_status()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), 1.0)
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            for task in list(self._tasks):
                task.cancel()


def _node_event(node: str, message: str) -> dict[str, Any]:
    now = rfc3339(time.time())
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{node}.", "namespace": "default"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": node},
        "reason": STOCKOUT_REASON,
        "message": message,
        "type": "Warning",
        "source": {"component": "eops-simulated-cloud"},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


async def _main(args: argparse.Namespace) -> None:
    creds = Credentials.in_pki(args.server, args.pki_dir)
    api = KubeApi.at(creds.server, ADMIN_SETTINGS, ssl_context=creds.ssl_context())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    cloud = CloudLoop(api, args.settings, args.status, args.kubelet_port)
    cloud.totals.note("simulated cloud started")
    try:
        await cloud.run(stop)
    finally:
        await api.close()
        cloud.totals.note("simulated cloud stopped")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="ElasticityOps dev cluster: the simulated cloud (node boot and GPU driver delays, "
        "stockouts, the static pool)"
    )
    parser.add_argument("--server", required=True)
    parser.add_argument("--pki-dir", required=True, type=Path)
    parser.add_argument("--settings", required=True, type=Path)
    parser.add_argument("--status", required=True, type=Path)
    parser.add_argument(
        "--kubelet-port", type=int, default=0, help="kwok's server, for the nodes it registers"
    )
    asyncio.run(_main(parser.parse_args(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
