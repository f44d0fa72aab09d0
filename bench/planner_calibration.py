#!/usr/bin/env python3
"""Planner vs upstream cluster-autoscaler: time-to-start of N one-GPU Jobs into an empty cluster.

    PYTHONPATH=src .venv/bin/python bench/planner_calibration.py --pods 1
    PYTHONPATH=src .venv/bin/python bench/planner_calibration.py --pods 200 --json

For one scenario: starts a dev cluster (upstream's cluster-autoscaler 1.36.1 with the kwok
provider, baseline 0, quota >= N), submits N one-GPU Jobs at once, and reads the timeline back
from the API server, per pod:

  reaction  Job creation -> the pod's `TriggeredScaleUp` event (the 30 s GPU delay, loop timing)
  create    `TriggeredScaleUp` -> creationTimestamp of the node the pod ran on (node creation)
  boot      node creation -> its `EopsNodeBooted` event (the --provision-delay)
  driver    `EopsNodeBooted` -> `EopsGpuDriverInstalled` (the --driver-delay)
  pod start `EopsGpuDriverInstalled` -> the pod's status.startTime (scheduling, kwok start)
  total     Job creation -> status.startTime (time-to-start)

Then it runs the planner's own model (`planner.model.simulate`) for the same settings over the
same trace (N arrivals at t=0 of --run-seconds) and prints predicted p50/p95 time-to-start
beside the measured ones, with the goal: within 15% or 5 s, whichever is larger. The planner's
provision delay is "scale-up decision to schedulable node", i.e. boot + driver here.

Timestamps: Job creation is taken by this client (ms); Event and object times are the API's
(Events carry eventTime in microseconds where the reporter sets it, else whole seconds;
creationTimestamp and startTime are whole seconds), so each phase is good to about a second.

Prerequisites: the dev-cluster binaries and the cluster-autoscaler built
(`eops dev-cluster build --require-autoscaler`); no other dev cluster run needed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from elasticityops.backends.kubernetes.objects import epoch as parse_time
from elasticityops.devcluster.node_stages import BOOTED_REASON, DRIVER_REASON
from elasticityops.devcluster.nodes import ROLE_AUTOSCALED, ROLE_LABEL
from elasticityops.devcluster.workloads import gpu_job
from elasticityops.planner.distributions import parse_distribution
from elasticityops.planner.model import simulate
from elasticityops.planner.settings import ClusterSettings
from machine_info import cpu_model

NAMESPACE = "calib"
SCALE_UP_REASON = "TriggeredScaleUp"
PHASES = ("reaction", "create", "boot", "driver", "pod_start", "total")
TOLERANCE_SHARE = 0.15
TOLERANCE_S = 5.0


def machine() -> str:
    model = cpu_model() or "unknown CPU"
    return f"nproc={os.cpu_count()}, {model}, {platform.system()} {platform.release()}"


def fixed_seconds(spec: str) -> float | None:
    dist = parse_distribution(spec)
    return dist.quantile(0.5) if dist.kind == "fixed" else None


def planner_provision_spec(args: argparse.Namespace) -> str:
    """The planner's provision delay for the cluster's boot + driver delays."""
    if args.planner_provision_delay:
        return str(args.planner_provision_delay)
    boot, driver = fixed_seconds(args.provision_delay), fixed_seconds(args.driver_delay)
    if boot is None or driver is None:
        raise SystemExit(
            "planner_calibration: with a non-fixed --provision-delay or --driver-delay, give the "
            "planner's own spec of their sum with --planner-provision-delay"
        )
    return f"fixed:{boot + driver:g}"


def pct(values: list[float]) -> dict[str, float | int | None]:
    if not values:
        return {"n": 0, "p50": None, "p95": None}
    p50, p95 = (float(x) for x in np.percentile(np.asarray(values, dtype=np.float64), [50, 95]))
    return {"n": len(values), "p50": round(p50, 1), "p95": round(p95, 1)}


def within_goal(predicted: float, measured: float) -> bool:
    return abs(predicted - measured) <= max(TOLERANCE_SHARE * measured, TOLERANCE_S)


# ---- the planner ---------------------------------------------------------------------------


def planner_prediction(
    n: int,
    run_seconds: float,
    scan: float,
    provision: str,
    max_nodes: int,
    scale_down_after: float,
    arrivals: list[float] | None = None,
) -> dict[str, Any]:
    """The planner's model over N arrivals at t=0 (or at `arrivals`, seconds, sorted)."""
    settings = ClusterSettings(
        baseline=0,
        max_nodes=max_nodes,
        scan_interval_s=scan,
        provision_delay=parse_distribution(provision),
        scale_down_after_s=scale_down_after,
    )
    arrivals = sorted(arrivals) if arrivals is not None else [0.0] * n
    res = simulate(arrivals, [run_seconds] * n, settings)
    waits = [s - a for s, a in zip(res.start_s, arrivals, strict=True)]
    reaction = [res.node_created_s[nd] - a for nd, a in zip(res.node, arrivals, strict=True)]
    provisioned = [res.node_ready_s[nd] - res.node_created_s[nd] for nd in res.node]
    pod_start = [s - res.node_ready_s[nd] for s, nd in zip(res.start_s, res.node, strict=True)]
    return {
        "settings": {
            "scan_interval_s": scan,
            "gpu_scale_up_delay_s": settings.gpu_scale_up_delay_s,
            "provision_delay": provision,
            "max_nodes": max_nodes,
        },
        "phases": {
            "reaction": pct(reaction),
            "provision": pct(provisioned),
            "pod_start": pct(pod_start),
            "total": pct(waits),
        },
    }


# ---- the dev cluster -----------------------------------------------------------------------


def event_time(ev: dict[str, Any]) -> float | None:
    for key in ("eventTime", "firstTimestamp", "lastTimestamp"):
        t = parse_time(ev.get(key))
        if t is not None:
            return t
    return parse_time((ev.get("metadata") or {}).get("creationTimestamp"))


def first_events(events: list[dict[str, Any]], kind: str, reason: str) -> dict[str, float]:
    """Earliest event time of `reason` per involved object of `kind` (by name)."""
    out: dict[str, float] = {}
    for ev in events:
        obj = ev.get("involvedObject") or {}
        if obj.get("kind") != kind or ev.get("reason") != reason:
            continue
        t = event_time(ev)
        name = str(obj.get("name", ""))
        if t is not None and (name not in out or t < out[name]):
            out[name] = t
    return out


def measure(
    pods: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    events: list[dict[str, Any]],
    job_created: dict[str, float],
) -> dict[str, Any]:
    scale_up = first_events(events, "Pod", SCALE_UP_REASON)
    booted = first_events(events, "Node", BOOTED_REASON)
    driver = first_events(events, "Node", DRIVER_REASON)
    node_created = {
        str(n["metadata"]["name"]): parse_time(n["metadata"].get("creationTimestamp")) for n in nodes
    }
    node_rows = [
        {
            "node": name,
            "created": created,
            "booted": booted.get(name),
            "driver": driver.get(name),
        }
        for name, created in sorted(node_created.items())
        if name in booted or name in driver or name.startswith("nap-")
    ]
    scale_up_messages: dict[str, int] = {}
    for ev in events:
        if ev.get("reason") == SCALE_UP_REASON:
            msg = str(ev.get("message", ""))
            scale_up_messages[msg] = scale_up_messages.get(msg, 0) + 1
    phases: dict[str, list[float]] = {p: [] for p in PHASES}
    per_pod = []
    for pod in pods:
        meta = pod["metadata"]
        job = (meta.get("labels") or {}).get("batch.kubernetes.io/job-name") or (
            meta.get("labels") or {}
        ).get("job-name")
        t0 = job_created.get(str(job))
        started = parse_time((pod.get("status") or {}).get("startTime"))
        nd = (pod.get("spec") or {}).get("nodeName")
        up = scale_up.get(str(meta["name"]))
        created = node_created.get(str(nd)) if nd else None
        b = booted.get(str(nd)) if nd else None
        d = driver.get(str(nd)) if nd else None
        row = {"pod": meta["name"], "node": nd, "job_created": t0}
        marks = [
            ("reaction", t0, up),
            ("create", up, created),
            ("boot", created, b),
            ("driver", b, d),
            ("pod_start", d, started),
            ("total", t0, started),
        ]
        for phase, a, z in marks:
            if a is not None and z is not None:
                phases[phase].append(z - a)
                row[phase] = round(z - a, 3)
        per_pod.append(row)
    return {
        "phases": {p: pct(v) for p, v in phases.items()},
        "pods": per_pod,
        "nodes": node_rows,
        "scale_up_messages": scale_up_messages,
    }


def check_prerequisites() -> Any:
    """The dev cluster's binaries, the cluster-autoscaler included (never built here)."""
    from elasticityops.devcluster.build import ensure_built
    from elasticityops.devcluster.errors import DevClusterError

    try:
        return ensure_built(allow_build=False, autoscaler="required")
    except DevClusterError as exc:
        raise SystemExit(
            f"planner_calibration: {exc}\n  build them once with "
            "`eops dev-cluster build --require-autoscaler` (cached under ~/.cache/elasticityops)"
        ) from None


def run_cluster(args: argparse.Namespace, tc: Any, log: Callable[[str], None]) -> dict[str, Any]:
    from elasticityops.devcluster.cluster import DevCluster
    from elasticityops.devcluster.config import AutoscalerSettings, ClusterConfig
    from elasticityops.domain.errors import Conflict

    knobs = AutoscalerSettings(
        baseline=0,
        max_nodes=max(args.max_nodes or args.pods, 1),
        scan_interval=args.scan_interval,
        provision_delay=args.provision_delay,
        driver_delay=args.driver_delay,
        scale_down_after=args.scale_down_after,
        seed=1,
    ).validated()
    with tempfile.TemporaryDirectory(prefix="eops-calib-") as tmp:
        t_up = time.monotonic()
        cluster = DevCluster.start(
            ClusterConfig(state_dir=Path(tmp), autoscaler=knobs, node_heartbeat_seconds=100), tc
        )
        log(f"cluster up in {time.monotonic() - t_up:.1f}s")
        try:
            with cluster.api() as api:
                with contextlib.suppress(Conflict):
                    api.create(
                        "/api/v1/namespaces",
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                    )
                deadline = time.monotonic() + 60
                while not api.ok(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default"):
                    if time.monotonic() > deadline:
                        raise SystemExit("planner_calibration: no default service account after 60 s")
                    time.sleep(0.2)
                jobs_path = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
                job_created: dict[str, float] = {}
                t_submit = time.time()
                for i in range(args.pods):
                    name = f"calib-{i:04d}"
                    sent = time.time()
                    with contextlib.suppress(Conflict):
                        api.create(jobs_path, gpu_job(name, run_seconds=args.run_seconds))
                    job_created[name] = (sent + time.time()) / 2
                log(f"{args.pods} Jobs submitted in {time.time() - t_submit:.1f}s")
                pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
                deadline = time.monotonic() + args.timeout
                last_log = 0.0
                while True:
                    pods, _ = api.list(pods_path, page_size=1000)
                    started = sum(1 for p in pods if (p.get("status") or {}).get("startTime"))
                    if started >= args.pods:
                        break
                    if time.monotonic() > deadline:
                        raise SystemExit(
                            f"planner_calibration: {started}/{args.pods} pods started "
                            f"after {args.timeout:.0f}s"
                        )
                    if time.monotonic() - last_log > 15:
                        last_log = time.monotonic()
                        log(f"  {started}/{args.pods} pods started ({time.time() - t_submit:.0f}s)")
                    time.sleep(1.0)
                log(f"all {args.pods} pods started {time.time() - t_submit:.1f}s after the first submission")
                time.sleep(3.0)  # let the last Events reach the API server
                pods, _ = api.list(pods_path, page_size=1000)
                nodes, _ = api.list("/api/v1/nodes", page_size=1000)
                events, _ = api.list("/api/v1/events", page_size=5000)
        finally:
            if args.keep_logs:
                shutil.copytree(cluster.layout.logs, args.keep_logs, dirs_exist_ok=True)
            cluster.stop()
    out = measure(pods, nodes, events, job_created)
    out["autoscaled_nodes"] = sum(
        1 for n in nodes if (n["metadata"].get("labels") or {}).get(ROLE_LABEL) == ROLE_AUTOSCALED
    )
    return out


def table(result: dict[str, Any]) -> str:
    m, p = result["measured"]["phases"], result["planner"]["phases"]
    lines = [
        f"N={result['pods']}  scan {result['scan_interval_s']:g}s  boot {result['provision_delay']}  "
        f"driver {result['driver_delay']}  "
        f"planner provision {result['planner']['settings']['provision_delay']}",
        f"{'phase':<10} {'n':>4} {'meas p50':>9} {'meas p95':>9} {'plan p50':>9} {'plan p95':>9}",
    ]
    planner_of = {"reaction": "reaction", "pod_start": "pod_start", "total": "total"}
    for phase in PHASES:
        row = m[phase]
        pp = p.get(planner_of.get(phase, ""), {})
        lines.append(
            f"{phase:<10} {row['n']:>4} {_f(row['p50']):>9} {_f(row['p95']):>9} "
            f"{_f(pp.get('p50')):>9} {_f(pp.get('p95')):>9}"
        )
    lines.append(
        f"{'provision':<10} {'':>4} {'(create+boot+driver)':>19} "
        f"{_f(p['provision']['p50']):>9} {_f(p['provision']['p95']):>9}"
    )
    if "comparison_measured_arrivals" in result:
        pr = result["planner_measured_arrivals"]["phases"]["total"]
        lines.append(
            f"planner on the measured arrivals (Jobs over {result['submit_span_s']:.1f}s): "
            f"p50 {_f(pr['p50'])}s, p95 {_f(pr['p95'])}s"
        )
    for q in ("p50", "p95"):
        c = result["comparison"][q]
        lines.append(
            f"time-to-start {q}: measured {c['measured']:.1f}s, planner {c['predicted']:.1f}s, "
            f"diff {c['diff']:+.1f}s ({c['diff_pct']:+.0f}%), goal +-{c['tolerance']:.1f}s: "
            f"{'within' if c['within_goal'] else 'OUTSIDE'}"
        )
    return "\n".join(lines)


def _f(x: object) -> str:
    return "-" if x is None else f"{float(x):.1f}"  # type: ignore[arg-type]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", type=int, default=1, help="N one-GPU Jobs submitted at once (default 1)")
    ap.add_argument("--run-seconds", type=float, default=30.0, help="simulated run time of each pod")
    ap.add_argument(
        "--scan-interval", type=float, default=10.0, help="autoscaler loop period, s (upstream 10)"
    )
    ap.add_argument(
        "--provision-delay", default="fixed:60", help="node boot (creation to Ready), planner spec"
    )
    ap.add_argument("--driver-delay", default="fixed:30", help="Ready to GPU allocatable, planner spec")
    ap.add_argument(
        "--planner-provision-delay",
        default="",
        help="the planner's provision delay (default: fixed boot + driver)",
    )
    ap.add_argument("--max-nodes", type=int, default=0, help="quota (default: --pods)")
    ap.add_argument("--scale-down-after", type=float, default=600.0)
    ap.add_argument("--timeout", type=float, default=900.0, help="s to wait for every pod to start")
    ap.add_argument("--keep-logs", type=Path, default=None, help="copy the components' logs here")
    ap.add_argument("--planner-only", action="store_true", help="print the planner's prediction only")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args(argv)
    if args.pods < 1:
        ap.error("--pods must be >= 1")

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    provision = planner_provision_spec(args)
    tc = None if args.planner_only else check_prerequisites()
    max_nodes = max(args.max_nodes or args.pods, 1)
    planner = planner_prediction(
        args.pods, args.run_seconds, args.scan_interval, provision, max_nodes, args.scale_down_after
    )
    if args.planner_only:
        print(json.dumps(planner, indent=2))
        return 0
    measured = run_cluster(args, tc, log)
    # The same model over the arrivals as they happened (Jobs are created one by one, over
    # seconds for a burst): what the planner would say given the real trace.
    created = sorted(r["job_created"] for r in measured["pods"] if r.get("job_created") is not None)
    planner_real = planner_prediction(
        args.pods,
        args.run_seconds,
        args.scan_interval,
        provision,
        max_nodes,
        args.scale_down_after,
        arrivals=[t - created[0] for t in created],
    )
    for row in measured["pods"]:
        if row.get("job_created") is not None:
            row["job_created"] = round(row["job_created"] - created[0], 3)
    comparison = compare(measured, planner)
    comparison_real = compare(measured, planner_real)
    result = {
        "machine": machine(),
        "pods": args.pods,
        "run_seconds": args.run_seconds,
        "scan_interval_s": args.scan_interval,
        "provision_delay": args.provision_delay,
        "driver_delay": args.driver_delay,
        "submit_span_s": round(created[-1] - created[0], 2),
        "autoscaled_nodes": measured["autoscaled_nodes"],
        "measured": {"phases": measured["phases"]},
        "planner": planner,
        "comparison": comparison,
        "planner_measured_arrivals": planner_real,
        "comparison_measured_arrivals": comparison_real,
        "per_pod": measured["pods"],
        "per_node": measured["nodes"],
        "scale_up_messages": measured["scale_up_messages"],
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(table(result))
    return 0


def compare(measured: dict[str, Any], planner: dict[str, Any]) -> dict[str, Any]:
    comparison = {}
    for q in ("p50", "p95"):
        mv = measured["phases"]["total"][q]
        pv = planner["phases"]["total"][q]
        if mv is None or pv is None:
            raise SystemExit("planner_calibration: no pod's time-to-start could be measured")
        tol = max(TOLERANCE_SHARE * mv, TOLERANCE_S)
        comparison[q] = {
            "measured": mv,
            "predicted": pv,
            "diff": round(pv - mv, 1),
            "diff_pct": round(100 * (pv - mv) / mv, 1) if mv else 0.0,
            "tolerance": round(tol, 1),
            "within_goal": within_goal(pv, mv),
        }
    return comparison


if __name__ == "__main__":
    raise SystemExit(main())
