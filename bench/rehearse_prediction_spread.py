#!/usr/bin/env python3
"""How far a rehearsal's prediction moves with the planner's own random draws (issue 42): the
planner draws each node's provisioning time from the same distribution as the dev cluster, but
not the same numbers, so one prediction is one sample. This predicts a finished rehearsal (of
`eops rehearse`, or bench/rehearse_real_slice.py) again under seeds 1..N, for each queue order,
with the cluster and planner settings it recorded, and prints the median
and the 10th-90th percentile band of the predicted p95 wait and idle GPU time beside what was
measured: a measurement outside the band is a gap in the model, not bad luck.

    PYTHONPATH=src .venv/bin/python bench/rehearse_prediction_spread.py SUMMARY TRACE \\
        [--policy NAME] [--seeds 20] [--orders newest-first,fifo,random] [--json-out FILE]

SUMMARY is the run's summary.json (`eops rehearse`'s: per policy its measurement, and the
cluster and planner settings it predicted with; --policy picks one where it holds several),
TRACE the trace.csv it replayed; e.g. the evidence in docs/evidence/rehearse-real-2026-12-07/
(`none/summary.json` with `trace.csv`). The run's own prediction is recomputed first; a warning
says so when today's planner no longer gives it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from machine_info import machine


def _check(summary: Path, trace: Path) -> str | None:
    for path in (summary, trace):
        if not path.is_file():
            return f"{path} not found: pass a rehearsal's summary.json and the trace.csv it replayed"
    try:
        import numpy  # noqa: F401

        from elasticityops.planner.settings import PENDING_ORDERS  # noqa: F401
    except ImportError as exc:
        return f"{exc}: run from the repository root with PYTHONPATH=src and the dev venv (scripts/test)"
    return None


def band(values: list[float]) -> dict[str, float]:
    import numpy as np

    p10, p50, p90 = np.percentile(values, [10, 50, 90])
    return {"p10": round(float(p10), 1), "median": round(float(p50), 1), "p90": round(float(p90), 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("summary", type=Path, help="the rehearsal's summary.json")
    ap.add_argument("trace", type=Path, help="the trace.csv it replayed")
    ap.add_argument("--policy", default=None, help="the policy of SUMMARY to predict, where it has several")
    ap.add_argument("--seeds", type=int, default=20, help="predictions per order (seeds 1..N)")
    ap.add_argument("--orders", default="newest-first,fifo,random", help="queue orders, comma-separated")
    ap.add_argument("--json-out", type=Path, default=None, help="write the figures here too")
    args = ap.parse_args()
    if problem := _check(args.summary, args.trace):
        print(problem, file=sys.stderr)
        return 2

    from elasticityops.devcluster.config import AutoscalerSettings
    from elasticityops.planner.settings import PENDING_ORDERS
    from elasticityops.planner.trace import load_trace
    from elasticityops.rehearse.cluster_map import planner_settings
    from elasticityops.rehearse.predict import predict

    orders = [o.strip() for o in args.orders.split(",") if o.strip()]
    if unknown := [o for o in orders if o not in PENDING_ORDERS]:
        print(f"--orders: unknown {unknown}; choose from {', '.join(PENDING_ORDERS)}", file=sys.stderr)
        return 2
    run = json.loads(args.summary.read_text())
    rows = {row["policy"]: row for row in run["policies"]}
    if args.policy is None and len(rows) == 1:
        (row,) = rows.values()
    elif args.policy in rows:
        row = rows[args.policy]
    else:
        print(f"--policy: name one of {', '.join(rows)} (the policies of {args.summary})", file=sys.stderr)
        return 2
    used = run["planner_settings"]
    start_s, end_s = row["measured_window_s"]
    trace, _ = load_trace(args.trace)
    # the cluster the run had, as `eops rehearse` recorded it: any rehearsal's summary will do
    knobs = dict(run["cluster"]["autoscaler"])
    knobs["stockout_zones"] = tuple(knobs["stockout_zones"])
    base = dataclasses.replace(
        planner_settings(AutoscalerSettings(**knobs).validated()).settings,
        empty_node_pick=used["empty-node-pick"],
    )
    again = predict(
        trace, dataclasses.replace(base, pending_order=used["pending-order"]), row["policy"], start_s, end_s
    )
    recorded = row["predicted"]
    if (again.metrics.p95_wait_s, round(again.metrics.idle_gpu_s)) != (
        recorded["p95_wait_s"],
        round(recorded["idle_gpu_s"]),
    ):
        print(
            f"the run's own prediction does not come out again (p95 {again.metrics.p95_wait_s} s, "
            f"idle {again.metrics.idle_gpu_s:,.0f} against {recorded['p95_wait_s']} s, "
            f"{recorded['idle_gpu_s']:,.0f}): "
            "the planner changed since the run; its figures are today's model",
            file=sys.stderr,
        )
    measured = row["measured"]
    print(
        f"{row['policy']}: measured p95 {measured['p95_wait_s']:.1f} s, "
        f"idle {measured['idle_gpu_s']:,.0f} GPU-s; "
        f"recorded prediction p95 {recorded['p95_wait_s']:.1f} s, idle {recorded['idle_gpu_s']:,.0f} "
        f"({used['pending-order']}, seed {base.seed})"
    )
    print(f"{'order':14} {'p95 median':>10} {'p95 p10-p90':>13} {'idle median':>12} {'idle p10-p90':>17}")
    out: dict[str, Any] = {"machine": machine(), "policy": row["policy"], "measured": measured, "orders": {}}
    for order in orders:
        p95s: list[float] = []
        idles: list[float] = []
        for seed in range(1, args.seeds + 1):
            settings = dataclasses.replace(base, pending_order=order, seed=seed)
            metrics = predict(trace, settings, row["policy"], start_s, end_s).metrics
            p95s.append(metrics.p95_wait_s)
            idles.append(metrics.idle_gpu_s)
        p, i = band(p95s), band(idles)
        out["orders"][order] = {"p95_wait_s": p, "idle_gpu_s": i, "seeds": args.seeds}
        print(
            f"{order:14} {p['median']:>10.1f} {p['p10']:>6.1f}-{p['p90']:<6.1f} {i['median']:>12,.0f} "
            f"{i['p10']:>8,.0f}-{i['p90']:<8,.0f}"
        )
    if args.json_out:
        args.json_out.write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
