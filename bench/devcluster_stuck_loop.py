#!/usr/bin/env python3
"""Issue 14's reproduction in a loop: do pods bound to Ready kwok nodes stay Pending?

    PYTHONPATH=src .venv/bin/python bench/devcluster_stuck_loop.py --runs 10
    PYTHONPATH=src .venv/bin/python bench/devcluster_stuck_loop.py --runs 1 --invocations 20 \\
        --survivor-invocations 4 --provision-delay fixed:5 --driver-delay fixed:0 --scan-interval 2

Each run: a fresh dev cluster (default `eops dev-cluster up` knobs: baseline 2, max 100 nodes,
upstream's cluster-autoscaler), a fresh PostgreSQL, two gateways
(`eops serve --backend kubernetes`, each with its own data dir, both on that database), a
function whose pods run --run-seconds (`eops.dev/run-seconds`), --invocations sent
alternately to both, one gateway SIGKILLed --kill-after seconds after the first was sent,
--survivor-invocations more sent to the survivor. Meanwhile a thread lists bound-but-Pending
pods (devcluster/stuck.py) every --poll seconds and keeps each pod's longest wait.

Per run: whether every invocation ended `succeeded` exactly once (the survivor's view, one Job
and one Succeeded pod per invocation), the total time, and the pods seen bound-but-Pending
longer than --stuck-after (and the longest wait of any), and whether this run's kwok gates
pods on its lease cache (a probe before the load; devcluster/stuck.py): stuck pods only in
gated runs would confirm the cause found in kwok's source. The fault is intermittent (1 of 2 runs
in the issue): compare many runs before and after a fix. Not CI: one run takes minutes.

Before and after the fix (docs/dev-cluster.md, "Simulated nodes"): `--kwok-node-leases 240
--gated-only` runs the configuration before it (kwok's node Leases, 240 s) on kwok starts whose
pod controller is gated (each run's cluster restarted until the probe says so, ~1 in 8
starts), where the fault can happen; the default (`--kwok-node-leases 0`) is the fix.

Prerequisites, checked first: the dev cluster binaries (`eops dev-cluster build`), PostgreSQL's
initdb/pg_ctl (`apt-get install -y postgresql`; as root the `postgres` user runs it) and the
psycopg driver (in the project's dependencies).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the tests' throwaway PostgreSQL

from elasticityops.backends.kubernetes.labels import INVOCATION_LABEL  # noqa: E402
from elasticityops.devcluster.build import ensure_built  # noqa: E402
from elasticityops.devcluster.cluster import DevCluster  # noqa: E402
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig  # noqa: E402
from elasticityops.devcluster.errors import DevClusterError  # noqa: E402
from elasticityops.devcluster.paths import Toolchain  # noqa: E402
from elasticityops.devcluster.stages import RUN_SECONDS_ANNOTATION  # noqa: E402
from elasticityops.devcluster.stuck import (  # noqa: E402
    kwok_gates_pods_on_its_lease_cache,
    list_bound_pending,
)
from elasticityops.devcluster.workloads import gpu_job  # noqa: E402
from helpers.pg_cluster import PostgresUnavailable, free_port, pg_cluster  # noqa: E402

FUNCTION = "stuck-loop"


def prerequisites() -> tuple[Toolchain | None, list[str]]:
    """The toolchain, and what is missing (each with how to get it)."""
    missing = []
    tc = None
    try:
        tc = ensure_built(allow_build=False, autoscaler="required")
    except DevClusterError as exc:
        missing.append(f"dev cluster binaries: {exc} (build them: `eops dev-cluster build`, ~25 min)")
    try:
        from helpers.pg_cluster import _bindir

        _bindir()
    except PostgresUnavailable as exc:
        missing.append(f"PostgreSQL: {exc}")
    if importlib.util.find_spec("psycopg") is None:
        missing.append("psycopg (PostgreSQL driver): install the project, `pip install -e .`")
    return tc, missing


@dataclass
class Watcher:
    """Lists bound-but-Pending pods every `poll` seconds; keeps each pod's longest wait."""

    cluster: DevCluster
    poll: float
    longest: dict[str, tuple[str, float]] = field(default_factory=dict)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with self.cluster.api() as api:
            while not self._stop.is_set():
                try:
                    for p in list_bound_pending(api):
                        if p.seconds > self.longest.get(p.key, ("", -1.0))[1]:
                            self.longest[p.key] = (p.node, p.seconds)
                except Exception:  # a slow or busy API server must not end the watch
                    self.errors += 1
                self._stop.wait(self.poll)

    @contextlib.contextmanager
    def running(self) -> Iterator[Watcher]:
        thread = threading.Thread(target=self.run, name="stuck-watch", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join(30)


@dataclass
class Gateway:
    name: str
    process: subprocess.Popen[bytes]
    url: str
    data_dir: Path
    log: Path

    def token(self) -> str:
        return (self.data_dir / "admin-token").read_text().strip()

    def client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.token()}"}, timeout=60
        )


def start_gateway(name: str, cluster: DevCluster, ns: str, db_url: str, tmp: Path) -> Gateway:
    port = free_port()
    data = tmp / name
    log = tmp / f"{name}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("EOPS_")}
    env.update({"PYTHONUNBUFFERED": "1", "EOPS_DATABASE_URL": db_url})
    argv = [sys.executable, "-m", "elasticityops.cli.main", "serve", "--backend", "kubernetes"]
    argv += ["--kubeconfig", str(cluster.kubeconfig_path), "--namespace", ns, "--data-dir", str(data)]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=out, env=env, cwd=REPO)
    gw = Gateway(name, proc, f"http://127.0.0.1:{port}", data, log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"gateway {name} exited:\n{log.read_text(errors='replace')[-3000:]}")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(gw.url + "/readyz", timeout=2).status_code == 200:
                return gw
        time.sleep(0.3)
    raise RuntimeError(f"gateway {name} not ready after 120 s:\n{log.read_text(errors='replace')[-3000:]}")


def stop(gw: Gateway, sig: int = signal.SIGINT) -> None:
    if gw.process.poll() is None:
        gw.process.send_signal(sig)
        try:
            gw.process.wait(30)
        except subprocess.TimeoutExpired:
            gw.process.kill()
            gw.process.wait(10)


def function_spec(run_seconds: float) -> dict[str, Any]:
    return {
        "name": FUNCTION,
        "image": "worker:1",
        "command": ["python", "w.py"],
        "annotations": {RUN_SECONDS_ANNOTATION: f"{run_seconds:g}"},
        "timeout_seconds": 3600,
    }


def invoke(client: httpx.Client, i: int) -> str:
    answer = client.post(f"/v1/functions/{FUNCTION}/invocations", json={"i": i})
    answer.raise_for_status()
    return str(answer.json()["id"])


def states(client: httpx.Client) -> dict[str, str]:
    found: dict[str, str] = {}
    cursor = None
    while True:
        params: dict[str, Any] = {"function": FUNCTION, "limit": 500}
        if cursor:
            params["cursor"] = cursor
        page = client.get("/v1/invocations", params=params).json()
        found.update({item["id"]: item["state"] for item in page["items"]})
        cursor = page.get("next_cursor")
        if not cursor:
            return found


def start_cluster(
    cfg: ClusterConfig, tc: Toolchain, ns: str, args: argparse.Namespace
) -> tuple[DevCluster, bool, int]:
    """A cluster with namespace `ns`; with --gated-only restarted until the probe finds kwok's
    pod controller gated. Returns it, whether it is gated, and the starts it took."""
    starts = 0
    while True:
        starts += 1
        cluster = DevCluster.start(cfg, tc)
        with cluster.api() as api:
            api.create(
                "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
            )
            # Whether this kwok's pod controller skips pods on its lease cache (see stuck.py).
            gated = kwok_gates_pods_on_its_lease_cache(api, ns, kwok_leases=cfg.node_lease_seconds > 0)
        if gated or not args.gated_only or starts >= args.max_starts:
            return cluster, gated, starts
        print(f"kwok start {starts} not gated; starting another", file=sys.stderr, flush=True)
        cluster.stop()


def one_burst_run(index: int, tc: Toolchain, args: argparse.Namespace) -> dict[str, Any]:
    """--scenario ready-burst: --burst GPU Jobs pending, then as many static nodes created at
    once, registered Ready (as the simulated cloud grows its static pool): the scheduler binds
    the pods within a second, while kwok is still taking the nodes on. Watches for 90 s."""
    settings = AutoscalerSettings(
        baseline=args.baseline, max_nodes=args.baseline + args.burst + 10
    ).validated()
    with tempfile.TemporaryDirectory(prefix=f"eops-stuck-{index}-") as tmp_name:
        cfg = ClusterConfig(
            state_dir=Path(tmp_name) / "cluster",
            autoscaler=settings,
            node_lease_seconds=args.kwok_node_leases,
        )
        ns = f"burst-{index}"
        cluster, gated, starts = start_cluster(cfg, tc, ns, args)
        try:
            with cluster.api() as api, Watcher(cluster, args.poll).running() as watch:
                for i in range(args.burst):
                    api.create(f"/apis/batch/v1/namespaces/{ns}/jobs", gpu_job(f"b{i}", run_seconds=3600))
                cluster.configure_cloud(baseline=args.baseline + args.burst)
                t0 = time.monotonic()
                time.sleep(90)
                watched = time.monotonic() - t0
                pods, _ = api.list(f"/api/v1/namespaces/{ns}/pods")
        finally:
            cluster.stop()
    running = sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")
    stuck = {k: v for k, v in watch.longest.items() if v[1] > args.stuck_after}
    return {
        "run": index,
        "scenario": "ready-burst",
        "kwok_node_leases_s": args.kwok_node_leases,
        "kwok_pod_gate": gated,
        "cluster_starts": starts,
        "pods": len(pods),
        "running_after_90s": running,
        "watched_s": round(watched, 1),
        "all_succeeded_exactly_once": True,  # no invocations in this scenario
        "stuck_pods": {k: {"node": n, "seconds": round(sec, 1)} for k, (n, sec) in sorted(stuck.items())},
        "max_bound_pending_s": round(max((sec for _, sec in watch.longest.values()), default=0.0), 1),
        "bound_pending_seen": len(watch.longest),
        "watch_errors": watch.errors,
    }


def one_run(index: int, tc: Toolchain, args: argparse.Namespace) -> dict[str, Any]:
    settings = AutoscalerSettings(
        baseline=args.baseline,
        max_nodes=args.max_nodes,
        provision_delay=args.provision_delay,
        driver_delay=args.driver_delay,
        scan_interval=args.scan_interval,
    ).validated()
    leases = args.kwok_node_leases
    with tempfile.TemporaryDirectory(prefix=f"eops-stuck-{index}-") as tmp_name:
        tmp = Path(tmp_name)
        cfg = ClusterConfig(state_dir=tmp / "cluster", autoscaler=settings, node_lease_seconds=leases)
        ns = f"stuck-{index}"
        cluster, gated, starts = start_cluster(cfg, tc, ns, args)
        gateways: list[Gateway] = []
        try:
            with pg_cluster() as pg:
                db = pg.url()
                # One at a time: the first migrates the fresh database.
                gateways = [
                    start_gateway("gw-a", cluster, ns, db, tmp),
                    start_gateway("gw-b", cluster, ns, db, tmp),
                ]
                a, b = gateways
                with a.client() as ca, b.client() as cb, Watcher(cluster, args.poll).running() as watch:
                    ca.put(
                        f"/v1/functions/{FUNCTION}", json=function_spec(args.run_seconds)
                    ).raise_for_status()
                    t0 = time.monotonic()
                    ids: list[str] = []
                    killed = False
                    for i in range(args.invocations):
                        if not killed and time.monotonic() - t0 >= args.kill_after:
                            stop(b, signal.SIGKILL)
                            killed = True
                        if killed:
                            ids.append(invoke(ca, i))
                        else:
                            ids.append(invoke(ca if i % 2 == 0 else cb, i))
                    if not killed:
                        time.sleep(max(0.0, args.kill_after - (time.monotonic() - t0)))
                        stop(b, signal.SIGKILL)
                    ids += [invoke(ca, args.invocations + i) for i in range(args.survivor_invocations)]
                    final: dict[str, str] = {}
                    deadline = t0 + args.timeout
                    while time.monotonic() < deadline:
                        final = states(ca)
                        if all(final.get(i) in ("succeeded", "failed", "cancelled") for i in ids):
                            break
                        time.sleep(1.0)
                    total = time.monotonic() - t0
                with cluster.api() as api:
                    jobs, _ = api.list(f"/apis/batch/v1/namespaces/{ns}/jobs")
                    pods, _ = api.list(f"/api/v1/namespaces/{ns}/pods")
        finally:
            for gw in gateways:
                stop(gw)
            cluster.stop()
    per_job: dict[str, int] = {}
    for job in jobs:
        inv = job["metadata"].get("labels", {}).get(INVOCATION_LABEL, "")
        per_job[inv] = per_job.get(inv, 0) + 1
    per_pod: dict[str, int] = {}
    for pod in pods:
        if pod.get("status", {}).get("phase") == "Succeeded":
            inv = pod["metadata"].get("labels", {}).get(INVOCATION_LABEL, "")
            per_pod[inv] = per_pod.get(inv, 0) + 1
    not_succeeded = {i: final.get(i, "missing") for i in ids if final.get(i) != "succeeded"}
    once = not not_succeeded and all(per_job.get(i) == 1 and per_pod.get(i) == 1 for i in ids)
    stuck = {k: v for k, v in watch.longest.items() if v[1] > args.stuck_after}
    return {
        "run": index,
        "kwok_node_leases_s": leases,
        "kwok_pod_gate": gated,
        "cluster_starts": starts,
        "invocations": len(ids),
        "all_succeeded_exactly_once": once,
        "not_succeeded": not_succeeded,
        "jobs_not_one": {i: per_job.get(i, 0) for i in ids if per_job.get(i) != 1},
        "total_s": round(total, 1),
        "stuck_pods": {k: {"node": n, "seconds": round(s, 1)} for k, (n, s) in sorted(stuck.items())},
        "max_bound_pending_s": round(max((s for _, s in watch.longest.values()), default=0.0), 1),
        "bound_pending_seen": len(watch.longest),
        "watch_errors": watch.errors,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Issue 14's two-gateway reproduction in a loop; reports stuck pods per run.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=10, help="runs, each on a fresh cluster and database")
    parser.add_argument(
        "--scenario",
        choices=["two-gateways", "ready-burst"],
        default="two-gateways",
        help="two-gateways: the issue's reproduction; ready-burst: --burst pending GPU Jobs, then as "
        "many static nodes created Ready at once (kwok's lease-cache race at its widest)",
    )
    parser.add_argument("--burst", type=int, default=100, help="ready-burst: pods and nodes")
    parser.add_argument("--invocations", type=int, default=100, help="sent alternately to both gateways")
    parser.add_argument(
        "--survivor-invocations", type=int, default=20, help="sent to the survivor after the kill"
    )
    parser.add_argument(
        "--kill-after", type=float, default=3.0, help="seconds from the first invocation to SIGKILL"
    )
    parser.add_argument("--run-seconds", type=float, default=15.0, help="how long each pod runs (kwok)")
    parser.add_argument("--stuck-after", type=float, default=30.0, help="bound-but-Pending longer is stuck")
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between two stuck-pod listings")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds a run may take to finish")
    parser.add_argument("--baseline", type=int, default=2, help="static pool nodes")
    parser.add_argument("--max-nodes", type=int, default=100, help="GPU quota")
    parser.add_argument("--provision-delay", default="fixed:60", help="delay spec: a new node's boot")
    parser.add_argument("--driver-delay", default="fixed:60", help="delay spec: its GPU driver install")
    parser.add_argument("--scan-interval", type=float, default=10.0, help="autoscaler cycle seconds")
    parser.add_argument(
        "--kwok-node-leases",
        type=int,
        default=0,
        help="kwok node lease seconds: 0 is the dev cluster's fix (no leases, no gate); 240 was "
        "its setting before the fix",
    )
    parser.add_argument(
        "--gated-only",
        action="store_true",
        help="restart each run's cluster until the probe finds kwok gated (needs --kwok-node-leases > 0)",
    )
    parser.add_argument("--max-starts", type=int, default=20, help="cluster starts per run with --gated-only")
    parser.add_argument("--json", type=Path, help="also write the per-run results here")
    args = parser.parse_args()

    if args.gated_only and args.kwok_node_leases <= 0:
        parser.error("--gated-only needs --kwok-node-leases > 0: without leases kwok has no gate")
    tc, missing = prerequisites()
    if missing or tc is None:
        print("missing prerequisites:", *(f"  - {m}" for m in missing), sep="\n", file=sys.stderr)
        return 2
    results = []
    for index in range(args.runs):
        result = (one_burst_run if args.scenario == "ready-burst" else one_run)(index, tc, args)
        results.append(result)
        print(json.dumps(result), flush=True)
    stuck_runs = sum(1 for r in results if r["stuck_pods"])
    gated_runs = sum(1 for r in results if r["kwok_pod_gate"])
    stuck_gated = sum(1 for r in results if r["stuck_pods"] and r["kwok_pod_gate"])
    bad = sum(1 for r in results if not r["all_succeeded_exactly_once"])
    print(
        f"{len(results)} run(s): {stuck_runs} with stuck pods (> {args.stuck_after:g}s; "
        f"{stuck_gated} of them in the {gated_runs} run(s) whose kwok gates pods on its lease cache), "
        f"{bad} not all succeeded exactly once; longest bound-but-Pending "
        f"{max((r['max_bound_pending_s'] for r in results), default=0)}s"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 1 if stuck_runs or bad else 0


if __name__ == "__main__":
    sys.exit(main())
