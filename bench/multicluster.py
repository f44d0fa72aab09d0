#!/usr/bin/env python3
"""Invocations through MultiKueue (issue 40) beside the same invocations through one cluster's
Kueue, on one machine in one run: accept to all running, to all done, which worker ran each,
invocations that ran in two clusters or twice, and the CPU of the gateway, each Kueue and each
API server.

    .venv/bin/python bench/multicluster.py [--invocations 200] [--run-seconds 5]
        [--phases one-cluster,all-at-once,incremental,gateway,stockout] [--nominate-wait 30]
        [--pods-ready-timeout 120] [--out DIR] [--markdown]

What it does, in order:
1. checks its prerequisites (the dev cluster's binaries with the real cluster-autoscaler and
   Kueue, `eops dev-cluster build --kueue`) and exits 2 naming what is missing;
2. per MultiKueue dispatcher asked for (`all-at-once`, Kueue's default; `incremental`,
   which nominates up to three workers per 5-minute round; and `gateway`, Kueue's external
   dispatcher with the gateway nominating one worker at a time, the next after
   --nominate-wait s without admission), starts a set of its own
   (`eops dev-cluster up --multikueue --workers 2`: a manager and two workers, each worker with
   a static pool of --invocations T4 nodes, so nodes are there and what is measured is the
   path through the queues, not provisioning);
3. `one-cluster` runs on worker-1 of the first set: `eops serve --admission kueue` on that
   cluster alone, its LocalQueue `eops` (the same Kueue, quota and nodes a worker has);
   the MultiKueue phases run `eops serve --admission kueue --kube-workers ...` on the manager;
4. each phase: a fresh gateway (SQLite), one function whose pods run --run-seconds (kwok), all
   invocations in one batch request; the workers' pods are polled every second (which worker,
   when Running) and the gateway's list read until every invocation has ended;
5. `stockout` (a set of its own, the gateway's nominations, the workers' Kueue with
   waitForPodsReady of --pods-ready-timeout s): worker-1's region is out of GPUs from before the
   batch until half of the invocations have ended (its static pool gone, every zone stocked
   out), then back; what it measures is that every invocation ends, how many ran in worker-2
   after worker-1's Kueue evicted them, and that none ran twice;
6. prints one row per phase (and a Markdown table with --markdown) and writes OUT/multicluster.json.

Goal (the issue's): accept-to-running through MultiKueue within 15% of one cluster's, nothing
lost, no invocation run in two clusters. MultiKueue's clients to the workers run at client-go's
5 QPS in Kueue v0.17.0 and cannot be set (docs/multi-cluster.md); the phases show what that costs.
A stocked-out region moves its work through the workers' waitForPodsReady (docs/multi-cluster.md,
"A region out of GPUs"), not a capacity check: upstream's best-effort ProvisioningRequest never
fails on a stockout (docs/kueue.md). The timeout counts from the worker's admission, and
MultiKueue copies the Job there afterwards through its 5-QPS client: at a thousand invocations
that backlog alone can pass 120 s, so give --pods-ready-timeout room (healthy work would be
evicted and moved too; `moved` counts the invocations that had a pod in worker-1 and ended in
another worker).
Exit code 0 whether or not the goal is met (the JSON says); 2 when a prerequisite is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

from elasticityops.devcluster.kueue_setup import DISPATCHERS
from elasticityops.devcluster.stages import RUN_SECONDS_ANNOTATION
from k8s_burst import cpu_by_process, cpu_spent, free_port, gateway_ready, machine

ROOT = Path(__file__).resolve().parents[1]
NS = "default"  # where the set's LocalQueue `eops` is, on the manager and every worker

STOCKOUT = "stockout"
PHASES = ("one-cluster", *DISPATCHERS, STOCKOUT)
INVOCATION_LABEL = "elasticityops.dev/invocation"


@dataclass
class Seen:
    """What the workers' pods showed of one phase."""

    running_at: dict[str, float] = field(default_factory=dict)  # invocation -> first Running
    clusters: dict[str, set[str]] = field(default_factory=dict)  # invocation -> workers with a pod
    pods: dict[str, set[str]] = field(default_factory=dict)  # invocation -> pod names
    ran: dict[str, set[str]] = field(default_factory=dict)  # invocation -> pods seen Running or done


def prerequisites() -> Any:
    from elasticityops.devcluster.build import ensure_built
    from elasticityops.devcluster.errors import DevClusterError

    try:
        return ensure_built(allow_build=False, autoscaler="required", kueue=True)
    except DevClusterError as exc:
        print(
            f"error: {exc}\nbuild the dev cluster with the autoscaler and Kueue first: "
            "`eops dev-cluster build --kueue --require-autoscaler` (EOPS_AUTOSCALER_SRC names "
            "the autoscaler's source tarball when it is not beside the project, docs/dev-cluster.md)",
            file=sys.stderr,
        )
        return None


def start_set(
    root: Path,
    dispatcher: str,
    nodes: int,
    tc: Any,
    pods_ready_s: float | None = None,
    worker_qps: float = 0.0,
) -> Any:
    from elasticityops.cli.devcluster_set import set_objects
    from elasticityops.devcluster.cluster_set import up_set
    from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
    from elasticityops.devcluster.kueue_setup import MultiKueueManager

    knobs = AutoscalerSettings(
        baseline=nodes, max_nodes=nodes + 10, provision_delay="fixed:5", driver_delay="fixed:0"
    )
    cfg = ClusterConfig(state_dir=root, autoscaler=knobs, pods_ready_timeout_s=pods_ready_s)
    timings = MultiKueueManager(dispatcher=dispatcher, worker_qps=worker_qps)
    return up_set(root, cfg, 2, set_objects(2, knobs.max_nodes), tc, timings)


def start_gateway(kubeconfig: Path, data: Path, env: dict[str, str]) -> tuple[psutil.Popen, str, str]:
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith("EOPS_")}
    clean.update(
        {"PYTHONUNBUFFERED": "1", "EOPS_ADMISSION": "kueue", "EOPS_MAX_BATCH_INPUTS": "10000", **env}
    )
    log = (data.parent / f"{data.name}.log").open("wb")
    serve = [sys.executable, "-m", "elasticityops.cli.main", "serve", "--backend", "kubernetes"]
    where = ["--kubeconfig", str(kubeconfig), "--namespace", NS, "--data-dir", str(data)]
    listen = ["--host", "127.0.0.1", "--port", str(port)]
    proc = psutil.Popen([*serve, *where, *listen], stdout=log, stderr=log, env=clean, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while not gateway_ready(url):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the gateway did not start; see {data.parent / f'{data.name}.log'}")
        time.sleep(0.5)
    return proc, url, (data / "admin-token").read_text().strip()


def stop_gateway(proc: psutil.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except psutil.TimeoutExpired:
        proc.kill()


def look(workers: dict[str, Any], seen: Seen, t0: float) -> None:
    """One poll of every worker's pods of ours in NS."""
    for name, cluster in workers.items():
        with cluster.api() as api:
            pods, _ = api.list(f"/api/v1/namespaces/{NS}/pods", {"labelSelector": INVOCATION_LABEL})
        for pod in pods:
            inv = (pod["metadata"].get("labels") or {}).get(INVOCATION_LABEL)
            if not inv:
                continue
            seen.clusters.setdefault(inv, set()).add(name)
            seen.pods.setdefault(inv, set()).add(f"{name}/{pod['metadata']['name']}")
            if (pod.get("status") or {}).get("phase") in ("Running", "Succeeded"):
                seen.running_at.setdefault(inv, time.monotonic() - t0)
                seen.ran.setdefault(inv, set()).add(f"{name}/{pod['metadata']['name']}")


def ended(http: httpx.Client) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 500}
        if cursor:
            params["cursor"] = cursor
        page = http.get("/v1/invocations", params=params).json()
        items += page["items"]
        cursor = page.get("next_cursor")
        if not cursor:
            return items


def run_phase(
    name: str,
    manager: Any,
    workers: dict[str, Any],
    n: int,
    run_s: float,
    tmp: Path,
    timeout: float,
    nominate_wait_s: float = 30.0,
) -> dict[str, Any]:
    """One phase: `manager` is where the gateway submits (a worker itself for one-cluster)."""
    env = {}
    if name != "one-cluster":
        env["EOPS_KUBE_WORKERS"] = ",".join(f"{w}={c.kubeconfig_path}" for w, c in workers.items())
    if name in ("gateway", STOCKOUT):
        env["EOPS_KUBE_NOMINATE_WAIT"] = f"{nominate_wait_s:g}"
    stocked = workers["worker-1"] if name == STOCKOUT else None
    proc, url, token = start_gateway(manager.kubeconfig_path, tmp / name, env)
    seen = Seen()
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=120) as http:
            fn = {
                "name": "far",
                "image": "worker:1",
                "command": ["python", "w.py"],
                "annotations": {RUN_SECONDS_ANNOTATION: str(run_s)},
                "timeout_seconds": 3600,
                "max_concurrency": max(500, n),
            }
            http.put("/v1/functions/far", json=fn).raise_for_status()
            if stocked is not None:
                region_out(stocked, True, n)
            out_s: float | None = None
            cpu0 = cpu_by_process()
            t0 = time.monotonic()
            answer = http.post(
                "/v1/functions/far/invocations:batch", json={"inputs": [{"i": k} for k in range(n)]}
            )
            answer.raise_for_status()
            accepted_s = time.monotonic() - t0
            ids = set(answer.json()["invocation_ids"])  # BatchAccepted: one per input
            all_running_s = done_s = None
            items: list[dict[str, Any]] = []
            while time.monotonic() - t0 < timeout:
                look(workers, seen, t0)
                if all_running_s is None and ids <= set(seen.running_at):
                    all_running_s = max(seen.running_at[i] for i in ids)
                items = [i for i in ended(http) if i["id"] in ids]
                finished = sum(1 for i in items if i["state"] in ("succeeded", "failed", "cancelled"))
                if stocked is not None and out_s is None and finished >= n / 2:
                    out_s = time.monotonic() - t0
                    region_out(stocked, False, n)  # half done: the region has GPUs again
                if finished >= n:
                    done_s = time.monotonic() - t0
                    break
                time.sleep(1.0)
            spent = cpu_spent(cpu0, cpu_by_process())
            states: dict[str, int] = {}
            by_cluster: dict[str, int] = {}
            for item in items:
                states[item["state"]] = states.get(item["state"], 0) + 1
                where = item.get("cluster") or (next(iter(workers)) if name == "one-cluster" else "?")
                by_cluster[where] = by_cluster.get(where, 0) + 1
            waits = sorted(seen.running_at[i] for i in ids if i in seen.running_at)
            return {
                "phase": name,
                "invocations": n,
                "accepted_s": round(accepted_s, 2),
                "all_running_s": None if all_running_s is None else round(all_running_s, 1),
                "p50_running_s": round(waits[len(waits) // 2], 1) if waits else None,
                "all_done_s": None if done_s is None else round(done_s, 1),
                "states": states,
                "by_cluster": by_cluster,
                "in_two_clusters": sum(1 for i in ids if len(seen.clusters.get(i, ())) > 1),
                # a pod that ran (Running or done) more than once: work done twice
                "run_twice": sum(1 for i in ids if len(seen.ran.get(i, ())) > 1),
                # with a region out: how long, and the work whose pod waited there and ran elsewhere
                "region_out_s": None if stocked is None else round(out_s or time.monotonic() - t0, 1),
                "moved": sum(
                    1
                    for i in items
                    if stocked is not None
                    and "worker-1" in seen.clusters.get(i["id"], ())
                    and i.get("cluster") not in (None, "worker-1")
                ),
                "cpu_s": {k: round(v, 1) for k, v in sorted(spent.items()) if v >= 0.5},
                "gateway_peak_rss_mib": round(proc.memory_info().rss / 2**20),
            }
    finally:
        stop_gateway(proc)


def region_out(cluster: Any, out: bool, nodes: int) -> None:
    """`cluster`'s region out of GPUs (its static pool gone, every zone stocked out: nothing free,
    nothing new), once its GPU nodes are gone; or (`out` false) back, with its `nodes` again."""
    from elasticityops.devcluster.nodes import zones_of

    if not out:
        cluster.configure_cloud(baseline=nodes, stockout_zones=())
        return
    cluster.configure_cloud(baseline=0, stockout_zones=zones_of(cluster.autoscaler_settings.region))
    deadline = time.monotonic() + 120
    while True:
        with cluster.api() as api:
            left, _ = api.list("/api/v1/nodes", {"labelSelector": "cloud.google.com/gke-accelerator"})
        if not left:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(left)} GPU nodes still there 120 s after the region went out")
        time.sleep(1.0)


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| phase | accepted (s) | p50 running (s) | all running (s) | all done (s) | states | by cluster "
        "| in two clusters | moved | run twice | gateway CPU (s) | Kueue CPU (s) | API servers CPU (s) |",
        "|---|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        cpu = r["cpu_s"]
        lines.append(
            f"| {r['phase']} | {r['accepted_s']} | {r['p50_running_s']} | {r['all_running_s']} "
            f"| {r['all_done_s']} "
            f"| {r['states']} | {r['by_cluster']} | {r['in_two_clusters']} | {r.get('moved', 0)} "
            f"| {r['run_twice']} "
            f"| {cpu.get('gateway', 0)} | {cpu.get('kueue', 0)} | {cpu.get('kube-apiserver', 0)} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--invocations", type=int, default=200, help="invocations per phase (default 200)")
    ap.add_argument("--run-seconds", type=float, default=5.0, help="each pod runs this long (kwok)")
    ap.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated, of {', '.join(PHASES)}")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds a phase may take")
    ap.add_argument(
        "--nominate-wait", type=float, default=30.0, help="the gateway phase's --kube-nominate-wait (s)"
    )
    ap.add_argument(
        "--pods-ready-timeout",
        type=float,
        default=120.0,
        help="the stockout phase's workers' Kueue waitForPodsReady (s, default 120)",
    )
    ap.add_argument(
        "--worker-qps",
        type=float,
        default=0.0,
        help="the MultiKueue managers' clients to their workers, QPS (burst twice it): the dev "
        "cluster's Kueue patch standing in for later releases' gate; 0: upstream's 5 (default)",
    )
    ap.add_argument("--out", type=Path, default=None, help="results dir (default a temporary one)")
    ap.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    args = ap.parse_args()
    phases = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = [p for p in phases if p not in PHASES]
    if unknown or not phases:
        print(f"error: --phases: {', '.join(unknown) or 'none'}: use {', '.join(PHASES)}", file=sys.stderr)
        return 2
    if args.invocations < 1:
        print("error: --invocations must be at least 1", file=sys.stderr)
        return 2
    tc = prerequisites()
    if tc is None:
        return 2
    from elasticityops.devcluster.cluster_set import down_set

    out = (args.out or Path(tempfile.mkdtemp(prefix="eops-multicluster-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    # one set per dispatcher, and the stockout phase's own (the gateway's, waiting for pods to be
    # ready); one-cluster runs on the first set's worker-1
    sets = [p for p in phases if p in DISPATCHERS or p == STOCKOUT] or ["all-at-once"]
    for k, kind in enumerate(sets):
        dispatcher = "gateway" if kind == STOCKOUT else kind
        pods_ready = args.pods_ready_timeout if kind == STOCKOUT else None
        root = out / f"set-{kind}"
        print(f"{time.strftime('%H:%M:%S')} starting a set ({dispatcher} dispatcher) in {root}", flush=True)
        clusters = start_set(root, DISPATCHERS[dispatcher], args.invocations, tc, pods_ready, args.worker_qps)
        try:
            workers = {w: clusters.cluster(w) for w in clusters.record.worker_names}
            todo = (["one-cluster"] if k == 0 and "one-cluster" in phases else []) + (
                [kind] if kind in phases else []
            )
            for phase in todo:
                on = {"worker-1": workers["worker-1"]} if phase == "one-cluster" else workers
                target = workers["worker-1"] if phase == "one-cluster" else clusters.manager
                print(f"{time.strftime('%H:%M:%S')} {phase}: {args.invocations} invocations", flush=True)
                row = run_phase(
                    phase,
                    target,
                    on,
                    args.invocations,
                    args.run_seconds,
                    out,
                    args.timeout,
                    args.nominate_wait,
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            down_set(root)
    one = next((r for r in rows if r["phase"] == "one-cluster"), None)
    goal: dict[str, Any] = {}
    for r in rows:
        if r is one or one is None or r["all_running_s"] is None or one["all_running_s"] is None:
            continue
        goal[r["phase"]] = {
            "all_running_vs_one_cluster": round(r["all_running_s"] / one["all_running_s"], 2),
            "within_15pct": r["all_running_s"] <= 1.15 * one["all_running_s"],
            "nothing_lost": r["states"].get("succeeded", 0) == r["invocations"],
            "none_in_two_clusters": r["in_two_clusters"] == 0,
        }
    result = {
        "machine": machine(),
        "invocations": args.invocations,
        "run_seconds": args.run_seconds,
        "worker_qps": args.worker_qps or "client-go's 5 (upstream)",
        "rows": rows,
        "goal": goal,
    }
    (out / "multicluster.json").write_text(json.dumps(result, indent=2))
    if args.markdown:
        print(markdown(rows))
    print(json.dumps(goal, indent=2))
    print(f"results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
