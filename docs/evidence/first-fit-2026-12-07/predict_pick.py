"""The planner's prediction of a `none` rehearsal with each --empty-node-pick, beside the measured
GPU nodes every 2 minutes. Run from the project root:

    PYTHONPATH=src .venv/bin/python docs/evidence/first-fit-2026-12-07/predict_pick.py \\
        docs/evidence/rehearse-real-2026-12-06/corrected-model

The cluster knobs are those of bench/rehearse_real_slice.py (the trace is ../trace.csv there).
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
from rehearse_real_slice import cluster_knobs

PICKS = ("random", "first-fit")


def main() -> None:
    evidence = Path(sys.argv[1])
    trace, _ = load_trace(evidence.parent / "trace.csv")
    base = planner_settings(cluster_knobs()).settings
    with (evidence / "series-none.csv").open() as handle:
        measured = list(csv.DictReader(handle))
    mt = np.array([float(r["t_s"]) for r in measured])
    nodes = np.array([float(r["gpu_nodes"]) for r in measured])
    demand = np.array([float(r["demand"]) for r in measured])
    last = float(trace.arrival_s.max())
    series = {}
    for pick in PICKS:
        # the queue as the planner had it then (first come, first served): the pick alone differs
        settings = dataclasses.replace(base, empty_node_pick=pick, pending_order="fifo")
        p = predict(trace, settings, "none", 600.0, last)
        series[pick] = (
            np.array(p.timeline.t_s),
            np.array(p.timeline.ready) + np.array(p.timeline.provisioning),
        )
        m = p.metrics
        print(
            f"{pick}: idle {m.idle_gpu_s:,.0f} GPU-s, p95 {m.p95_wait_s:.1f} s, "
            f"peak {m.peak_nodes} (600-{last:.0f} s)"
        )
    print("minute demand_measured nodes_measured " + " ".join(PICKS))
    for minute in range(6, 61, 2):
        t = minute * 60
        i = min(int(np.searchsorted(mt, t)), len(mt) - 1)
        row = [minute, int(demand[i]), int(nodes[i])]
        for pick in PICKS:
            ts, ns = series[pick]
            row.append(int(ns[min(int(np.searchsorted(ts, t)), len(ns) - 1)]))
        print(*row)


if __name__ == "__main__":
    main()
