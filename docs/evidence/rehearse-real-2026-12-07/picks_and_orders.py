"""A rehearsal of bench/rehearse_real_slice.py beside the planner's prediction under each empty-node
pick and queue order: GPU node-seconds of the measured series, idle GPU time, p95/p99 wait over
the arrivals from the warm-up's end to --to, and the measured queue order by phase.

    PYTHONPATH=src .venv/bin/python docs/evidence/rehearse-real-2026-12-07/picks_and_orders.py \\
        RUN_DIR POLICY_FILE_NAME [TO_S]

RUN_DIR holds trace.csv and rehearsal/ (invocations-NAME.csv, series-NAME.csv); NAME is
`none` or `predictive_10`.
"""

from __future__ import annotations

import csv
import dataclasses
import sys
from pathlib import Path

import numpy as np

from elasticityops.planner.trace import load_trace
from elasticityops.rehearse.cluster_map import planner_settings
from elasticityops.rehearse.predict import predict

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from rehearse_queue_order import newer_first_share
from rehearse_real_slice import cluster_knobs

WARMUP_S = 600.0


def node_seconds(t: np.ndarray, n: np.ndarray, lo: float, hi: float) -> float:
    """The integral of a step series of node counts over [lo, hi]."""
    edges = np.clip(np.append(t, hi), lo, hi)
    return float(np.sum(n * np.diff(edges)))


def main() -> None:
    run, name = Path(sys.argv[1]), sys.argv[2]
    hi = float(sys.argv[3]) if len(sys.argv) > 3 else 3599.0
    policy = "none" if name == "none" else "predictive:10"
    trace, _ = load_trace(run / "trace.csv")
    base = planner_settings(cluster_knobs()).settings
    with (run / "rehearsal" / f"invocations-{name}.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    arrived = np.array([float(r["arrival_s"]) for r in rows])
    started = np.array([float(r["started_s"]) for r in rows])
    waits = started - arrived
    with (run / "rehearsal" / f"series-{name}.csv").open() as handle:
        series = list(csv.DictReader(handle))
    mt = np.array([float(r["t_s"]) for r in series])
    mn = np.array([float(r["gpu_nodes"]) for r in series])
    busy = sum(
        max(0.0, min(float(r["finished_s"]), hi) - max(float(r["started_s"]), WARMUP_S))
        for r in rows
        if r["finished_s"]
    )
    sel = (arrived >= WARMUP_S) & (arrived < hi)
    measured = node_seconds(mt, mn, WARMUP_S, hi)
    p50, p95, p99 = np.percentile(waits[sel], [50, 95, 99])
    print(
        f"measured {WARMUP_S:.0f}-{hi:.0f}: p50 {p50:.1f} p95 {p95:.1f} p99 {p99:.1f} "
        f"node-s {measured:,.0f} idle~ {measured - busy:,.0f}"
    )
    for lo, up in ((0, 600), (600, 1560), (1560, 2400), (2400, 3000), (3000, 3600)):
        phase = (arrived >= lo) & (arrived < up)
        share, pairs = newer_first_share(arrived[phase], started[phase], 3.0)
        print(f"  queue order {lo}-{up}: newer-first {share:.3f} of {pairs} pairs")
    for pick in ("random", "first-fit"):
        for order in ("fifo", "random", "newest-first"):
            settings = dataclasses.replace(base, empty_node_pick=pick, pending_order=order)
            p = predict(trace, settings, policy, WARMUP_S, hi)
            predicted = np.asarray(p.waits)
            inside = trace.arrival_s[trace.arrival_s >= WARMUP_S] < hi
            tl = p.timeline
            nodes = np.array(tl.ready) + np.array(tl.provisioning)
            q95, q99 = np.percentile(predicted[inside], [95, 99])
            print(
                f"{pick:9} {order:12} idle {p.metrics.idle_gpu_s:7,.0f} "
                f"node-s {node_seconds(np.array(tl.t_s), nodes, WARMUP_S, hi):7,.0f} "
                f"p95 {q95:5.1f} p99 {q99:5.1f}"
            )


if __name__ == "__main__":
    main()
