"""Predictive headroom on real traffic: `none`, the best static setting `recommend` finds in
hindsight, and `predictive` side by side on a real trace (issue 42).

The default trace is the shared GenTD26 window (Alibaba's serverless Stable Diffusion requests,
2024-12-02 12:00 to 12-04 12:00 scaled to a mean of ~100 GPUs), read from the project's sibling
`shared/traces/` or from where EOPS_TRACES says; its README says where the raw file comes from
(`alibaba/clusterdata`, `cluster-trace-v2026-GenAI/lora_request_trace.csv`) and how it was
scaled. The planner's defaults (lognormal provisioning median 240 s / p95 420 s, 10 s scans,
30 s GPU-pod delay). For each scale-down window the planner's own search (`recommend`: baseline
pool B and warm headroom K by bisection, and `predictive`); "best static" is the static setting
(baseline or warm) of least idle GPU time among those meeting the p95 target, "predictive" the
window where it idles least while meeting it. The goal: predictive meets p95 <= target with
idle GPU time at most 1.05x the best static's and peak nodes at most the larger of 1.2x the
trace's peak busy GPUs (every request started on arrival) and `none`'s peak. Usage:

    PYTHONPATH=src .venv/bin/python bench/predictive_real_trace.py [--trace FILE]
        [--start-h 0] [--hours 48] [--p95-wait 10] [--windows 300,600,1200] [--json-out FILE]
        [--pending-order fifo|newest-first|random] [--empty-node-pick random|first-fit]

Exit code 0 whether or not the goal is met (the JSON says); 2 when a prerequisite is missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from machine_info import cpu_model, memory_gib

TRACE_NAME = "gentd26_2024-12-02T12_2d_scaled100.csv"
DEFAULT_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"


def default_trace() -> Path:
    return Path(os.environ.get("EOPS_TRACES") or DEFAULT_TRACES) / TRACE_NAME


def machine() -> dict[str, Any]:
    mem = memory_gib()
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model() or "unknown",
        "memory_gib": round(mem, 1) if mem else None,
        "load_average": os.getloadavg()[0],
    }


def check_prerequisites(trace: Path) -> str | None:
    """A line saying what is missing and where to get it, or None."""
    for module in ("numpy", "elasticityops.planner.recommend"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            return f"cannot import {module}: run with the project's venv and PYTHONPATH=src"
    if not trace.is_file():
        return (
            f"no trace at {trace}: the shared traces live beside the project (../shared/traces/, or "
            "set EOPS_TRACES); the raw GenTD26 file is alibaba/clusterdata "
            "cluster-trace-v2026-GenAI/lora_request_trace.csv, scaled as ../shared/traces/README.md says"
        )
    return None


def row(label: str, summary: Any) -> dict[str, Any]:
    busy = summary.busy_gpu_hours
    return {
        "setting": label,
        "p95_s": round(summary.time_to_start_s.p95, 2),
        "idle_gpu_h": round(summary.idle_gpu_hours, 1),
        "busy_gpu_h": round(busy, 1),
        "idle_over_busy": round(summary.idle_gpu_hours / busy, 4) if busy else None,
        "cost_usd": round(summary.cost_usd, 0),
        "peak_nodes": summary.peak_nodes,
    }


def compare(args: argparse.Namespace) -> dict[str, Any]:
    import dataclasses

    import numpy as np

    from elasticityops.planner.policies import parse_policy
    from elasticityops.planner.recommend import recommend
    from elasticityops.planner.runner import run_policy
    from elasticityops.planner.settings import ClusterSettings
    from elasticityops.planner.synthetic import concurrency_profile
    from elasticityops.planner.trace import Trace, load_trace

    full, _ = load_trace(args.trace)
    t0 = args.start_h * 3600.0
    keep = (full.arrival_s >= t0) & (full.arrival_s < t0 + args.hours * 3600.0)
    trace = Trace(full.arrival_s[keep] - t0, full.duration_s[keep])
    settings = ClusterSettings(pending_order=args.pending_order, empty_node_pick=args.empty_node_pick)
    started = time.monotonic()
    rec = recommend(trace, settings, args.p95_wait, windows=args.windows)
    search_s = time.monotonic() - started

    def meets(c: Any) -> bool:
        return bool(c.summary.time_to_start_s.p95 <= args.p95_wait)

    static = [c for c in rec.evaluated if c.family != "predictive" and meets(c)]
    best = min(static, key=lambda c: c.summary.idle_gpu_hours) if static else None
    predictive = [c for c in rec.evaluated if c.family == "predictive"]
    pred_ok = [c for c in predictive if meets(c)]
    pred = min(pred_ok or predictive, key=lambda c: (not meets(c), c.summary.idle_gpu_hours))
    at_600 = dataclasses.replace(settings, scale_down_after_s=600.0)
    none = run_policy(trace, at_600, parse_policy("none", at_600, args.p95_wait)).summary
    _, conc = concurrency_profile(trace)
    peak_busy = int(np.max(conc)) if len(conc) else 0
    peak_cap = max(1.2 * peak_busy, none.peak_nodes)
    goal = {
        "p95_met": meets(pred),
        "idle_within_1_05_of_best_static": bool(
            best is not None and pred.summary.idle_gpu_hours <= 1.05 * best.summary.idle_gpu_hours
        ),
        "peak_within_bound": pred.summary.peak_nodes <= peak_cap,
    }
    return {
        "trace": str(args.trace),
        "window_h": [args.start_h, args.start_h + args.hours],
        "requests": len(trace),
        "peak_busy_if_started_on_arrival": peak_busy,
        "peak_nodes_bound": peak_cap,
        "none_sd600": row("none sd=600s", none),
        "best_static": row(best.label, best.summary) if best else None,
        "recommend_best_by_cost": row(rec.best.label, rec.best.summary) if rec.best else None,
        "predictive": [row(c.label, c.summary) for c in predictive],
        "predictive_chosen": row(pred.label, pred.summary),
        "goal": goal,
        "goal_met": all(goal.values()),
        "search_wall_s": round(search_s, 1),
    }


def table(res: dict[str, Any]) -> str:
    head = f"{'setting':<32} {'p95 s':>6} {'idle/busy':>9} {'idle GPU-h':>10} {'cost $':>8} {'peak':>6}"
    lines = [head, "-" * len(head)]
    rows = [res["none_sd600"], res["best_static"], *res["predictive"]]
    for r in rows:
        if r is None:
            lines.append("(no static setting meets the target)")
            continue
        lines.append(
            f"{r['setting']:<32} {r['p95_s']:>6.1f} {r['idle_over_busy']:>9.1%} {r['idle_gpu_h']:>10,.0f}"
            f" {r['cost_usd']:>8,.0f} {r['peak_nodes']:>6}"
        )
    lines.append(
        f"peak busy (on arrival) {res['peak_busy_if_started_on_arrival']}, peak bound "
        f"{res['peak_nodes_bound']:.0f}; goal {res['goal']} -> met: {res['goal_met']}"
    )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--trace", type=Path, default=None, help=f"trace CSV (default: shared/traces/{TRACE_NAME})"
    )
    p.add_argument(
        "--start-h", type=float, default=0.0, help="window start, hours into the trace (default 0)"
    )
    p.add_argument("--hours", type=float, default=48.0, help="window length in hours (default 48)")
    p.add_argument("--p95-wait", type=float, default=10.0, help="p95 time-to-start target, s (default 10)")
    p.add_argument("--windows", default="300,600,1200", help="scale-down windows searched, s")
    p.add_argument("--json-out", type=Path, help="also write the JSON document here")
    p.add_argument(
        "--pending-order",
        choices=("fifo", "newest-first", "random"),
        default="fifo",
        help="the model's queue",
    )
    p.add_argument(
        "--empty-node-pick", choices=("random", "first-fit"), default="random", help="the model's pick"
    )
    args = p.parse_args(argv)
    args.trace = args.trace or default_trace()
    args.windows = tuple(float(w) for w in args.windows.split(",") if w.strip())
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = check_prerequisites(args.trace)
    if missing:
        print(f"predictive_real_trace: {missing}", file=sys.stderr)
        return 2
    res = compare(args)
    print(table(res))
    doc = {"machine": machine(), "p95_wait_s": args.p95_wait, "windows_s": list(args.windows), **res}
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json_out:
        args.json_out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
