#!/usr/bin/env python3
"""In which order the real cluster served invocations that waited for a node, from a rehearsal
gateway's SQLite store (`eops rehearse --out DIR` keeps it in DIR/gateway-NAMESPACE/eops.db).

The planner serves waiting requests first come, first served. kube-scheduler does not: a pod that
found no node waits out a back-off (1 s, doubling to 10 s, its queue timestamp reset at each
try), while newer pods take the nodes that free (docs/planner.md, "Which empty node"). This
prints the waits and, over every pair of invocations that waited at the same time, the share in
which the newer one started first (0: first come first served, 0.5: random, 1: last come first
served):

    .venv/bin/python bench/rehearse_queue_order.py DIR/gateway-NAMESPACE/eops.db [--min-wait 3]
        [--trace TRACE.csv --baseline N]

With --trace and --baseline (a cluster of N GPU nodes that stay, no autoscaling), it also prints
the planner's waits for the same trace on such a cluster, side by side.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from rehearsal_store import STORE_HELP, missing_store, started_invocations


def newer_first_share(arrived: np.ndarray, started: np.ndarray, min_wait: float) -> tuple[float, int]:
    """Share of the pairs of invocations that both waited over `min_wait` while the other
    waited, in which the newer started first; and how many such pairs there were."""
    waited = np.flatnonzero(started - arrived > min_wait)
    newer_first = pairs = 0
    for i in waited:
        for j in waited:
            if arrived[i] < arrived[j] and started[i] > arrived[j] + min_wait:
                pairs += 1
                newer_first += bool(started[j] < started[i])
    return (newer_first / pairs if pairs else float("nan")), pairs


def percentiles(waits: np.ndarray) -> dict[str, float]:
    p50, p95, top = np.percentile(waits, [50, 95, 100])
    return {"p50_s": round(float(p50), 1), "p95_s": round(float(p95), 1), "max_s": round(float(top), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("db", type=Path, help=STORE_HELP)
    ap.add_argument("--min-wait", type=float, default=3.0, help="a wait longer than this counts (s)")
    ap.add_argument("--trace", type=Path, default=None, help="the trace the rehearsal replayed")
    ap.add_argument("--baseline", type=int, default=0, help="the cluster's GPU nodes (with --trace)")
    args = ap.parse_args()
    if problem := missing_store(args.db):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    rows = started_invocations(args.db)
    if not rows:
        print("error: no invocation in that store started", file=sys.stderr)
        return 2
    arrived = np.array([row.accepted_s for row in rows])
    started = np.array([row.started_s for row in rows])
    share, pairs = newer_first_share(arrived, started, args.min_wait)
    report: dict[str, object] = {
        "started": len(rows),
        "waited": int(np.sum(started - arrived > args.min_wait)),
        "measured_wait": percentiles(started - arrived),
        "pairs_waiting_together": pairs,
        "newer_started_first_share": round(share, 3),
    }
    if args.trace is not None:
        from elasticityops.planner.model import simulate
        from elasticityops.planner.settings import ClusterSettings
        from elasticityops.planner.trace import load_trace

        trace, _ = load_trace(args.trace)
        settings = ClusterSettings(baseline=args.baseline, max_nodes=args.baseline)
        result = simulate(trace.arrival_s, trace.duration_s, settings)
        planned = np.asarray(result.start_s)
        report["planner_wait"] = percentiles(planned - trace.arrival_s)
        report["planner_newer_started_first_share"] = round(
            newer_first_share(trace.arrival_s, planned, args.min_wait)[0], 3
        )
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
