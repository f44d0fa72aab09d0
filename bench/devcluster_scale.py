#!/usr/bin/env python3
"""Dev-cluster scale benchmark: N simulated GKE T4 nodes, P single-GPU Jobs to completion.

    .venv/bin/python bench/devcluster_scale.py --nodes 4000 --pods 4000
    .venv/bin/python bench/devcluster_scale.py --nodes 200 --pods 200 --mode autoscale

Starts its own dev cluster in a temporary state directory (stopped by PID at the end), prints
a JSON summary (wall times, CPU seconds and peak RSS per component) and, with --markdown,
the table row used in BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import psutil

from elasticityops.devcluster.build import ensure_built
from elasticityops.devcluster.cluster import DevCluster
from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
from elasticityops.devcluster.scale import run_scale
from machine_info import cpu_model


def machine() -> str:
    model = cpu_model() or "unknown CPU"
    mem = psutil.virtual_memory().total / 2**30
    return f"nproc={os.cpu_count()}, {model}, {mem:.0f} GiB RAM, {platform.system()} {platform.release()}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=4000)
    ap.add_argument("--pods", type=int, default=4000)
    ap.add_argument("--run-seconds", type=float, default=30.0, help="simulated run time of each pod")
    ap.add_argument("--mode", choices=["baseline", "autoscale"], default="baseline")
    ap.add_argument("--timeout", type=float, default=3600.0)
    ap.add_argument(
        "--apf", action=argparse.BooleanOptionalAction, default=True, help="API priority and fairness"
    )
    ap.add_argument("--job-workers", type=int, default=5, help="controller-manager --concurrent-job-syncs")
    ap.add_argument(
        "--scale-down-after",
        type=float,
        default=0.0,
        help="autoscale mode: upstream's --scale-down-unneeded-time; > 0 also measures until every "
        "node is removed (0: no scale-down within the run)",
    )
    ap.add_argument("--provision-delay", default="fixed:5", help="boot delay spec of a new node")
    ap.add_argument("--driver-delay", default="fixed:0", help="GPU driver delay spec of a new node")
    ap.add_argument(
        "--node-heartbeat", type=int, default=100, help="seconds between two status posts of a node (kwok)"
    )
    ap.add_argument(
        "--kwok-node-leases",
        type=int,
        default=0,
        help="kwok node lease seconds (0: none, the dev cluster's default since issue 14; 400 was this "
        "bench's setting before)",
    )
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    tc = ensure_built(allow_build=False, autoscaler="required")
    knobs = dataclasses.replace(
        AutoscalerSettings.for_benchmarks(args.nodes),
        provision_delay=args.provision_delay,
        driver_delay=args.driver_delay,
        **({"scale_down_after": args.scale_down_after} if args.scale_down_after > 0 else {}),
    ).validated()
    with tempfile.TemporaryDirectory(prefix="eops-scale-") as tmp:
        t0 = time.monotonic()
        cluster = DevCluster.start(
            ClusterConfig(
                state_dir=Path(tmp),
                autoscaler=knobs,
                node_heartbeat_seconds=args.node_heartbeat,
                node_lease_seconds=args.kwok_node_leases,
                apf_enabled=args.apf,
                job_workers=args.job_workers,
            ),
            tc,
        )
        startup = time.monotonic() - t0
        print(f"cluster up in {startup:.1f}s", flush=True)
        try:
            res = run_scale(
                cluster,
                nodes=args.nodes,
                pods=args.pods,
                namespace="scale",
                run_seconds=args.run_seconds,
                mode=args.mode,
                timeout=args.timeout,
                log=lambda m: print(m, flush=True),
                scale_down=args.scale_down_after > 0,
            )
        finally:
            cluster.stop()
    summary = {
        "machine": machine(),
        "cluster_startup_s": round(startup, 1),
        "job_workers": args.job_workers,
        "apf": args.apf,
        "node_heartbeat_s": args.node_heartbeat,
        "kwok_node_leases_s": args.kwok_node_leases,
        **res.summary(),
    }
    print(json.dumps(summary, indent=2))
    if args.markdown:
        print(
            f"| {res.nodes} | {res.pods} | {res.mode} | {res.run_seconds:g} | {res.nodes_ready_s:.0f} | "
            f"{res.submit_s:.0f} | {res.all_done_s:.0f} | {sum(res.cpu_s.values()):.0f} | "
            f"{sum(res.peak_rss_mib.values()):.0f} |"
        )
    return 0 if res.succeeded >= args.pods else 1


if __name__ == "__main__":
    raise SystemExit(main())
