#!/usr/bin/env python3
"""What the planner predicts for the windows `bench/rehearse_normal_load.py` measures, in
seconds instead of hours: for each seed and warm-up, the normal-load slice that bench replays
(rehearse/loads.py normal_slice from --start-hour), its dev cluster's settings (GKE-like
provisioning lognormal median 240 s / p95 420 s, 10-minute scale-down, 10 s scan, no
baseline), and per policy the p95 time-to-start and idle / busy GPU time over the measured
window (from the warm-up's end to the last arrival), as `eops rehearse` predicts them. With
the smallest `warm:K` meeting --p95-wait, it says whether the rehearsal's goal (p95 <= W with
idle <= 15% of busy) is feasible for a static setting on that window at all.

    PYTHONPATH=src .venv/bin/python bench/rehearse_windows.py [--seeds 0,1,2,3]
        [--warmups 600,1800] [--minutes 20] [--p95-wait 10] [--json OUT.json]

Pure model runs (no cluster, no gateway): about a second per seed and warm-up on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from rehearse_normal_load import GKE_DELAY, IDLE_GOAL, SCALE_DOWN_S

MAX_WARM = 60


@dataclass(frozen=True)
class Window:
    warmup_s: float
    seed: int
    none_p95_s: float
    none_idle: float
    predictive_p95_s: float
    predictive_idle: float
    warm_k: int | None  # smallest K meeting the wait target, None if none up to MAX_WARM
    warm_p95_s: float | None
    warm_idle: float | None


def one_window(warmup_s: float, seed: int, minutes: float, start_hour: float, p95_wait: float) -> Window:
    from elasticityops.devcluster.config import AutoscalerSettings
    from elasticityops.rehearse.cluster_map import planner_settings
    from elasticityops.rehearse.loads import normal_slice
    from elasticityops.rehearse.predict import predict
    from elasticityops.rehearse.prepare import local_cores

    trace = normal_slice(warmup_s / 60.0 + minutes, start_hour, seed)
    knobs = AutoscalerSettings(
        baseline=0,
        max_nodes=400,
        scan_interval=10.0,
        provision_delay=GKE_DELAY,
        driver_delay="fixed:0",
        scale_down_after=SCALE_DOWN_S,
        seed=seed + 1,  # as the rehearsal bench seeds its cluster
    ).validated()
    settings = planner_settings(knobs, scheduler_cores=local_cores()).settings

    def measure(policy: str) -> tuple[float, float]:
        m = predict(trace, settings, policy, warmup_s, trace.span_s).metrics
        return m.p95_wait_s, m.idle_gpu_s / m.busy_gpu_s if m.busy_gpu_s else float("inf")

    none = measure("none")
    predictive = measure(f"predictive:{p95_wait:g}")
    warm: tuple[int, float, float] | None = None
    for k in range(MAX_WARM + 1):
        p95, idle = measure(f"warm:{k}")
        if p95 <= p95_wait:
            warm = (k, p95, idle)
            break
    return Window(
        warmup_s,
        seed,
        none[0],
        none[1],
        predictive[0],
        predictive[1],
        warm[0] if warm else None,
        warm[1] if warm else None,
        warm[2] if warm else None,
    )


def table(rows: list[Window], p95_wait: float) -> str:
    head = (
        f"{'warm-up':>8} {'seed':>4}  {'none p95/idle':>15}  {'predictive p95/idle':>20}"
        f"  smallest warm:K with p95 <= {p95_wait:g} s"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.warm_k is None:
            warm = f"none up to warm:{MAX_WARM}"
        else:
            feasible = (
                "goal feasible" if r.warm_idle is not None and r.warm_idle <= IDLE_GOAL else "idle over goal"
            )
            warm = f"warm:{r.warm_k}, {r.warm_p95_s:.1f} s / {r.warm_idle:.0%} ({feasible})"
        lines.append(
            f"{r.warmup_s:>7.0f}s {r.seed:>4}  {r.none_p95_s:>6.1f} s / {r.none_idle:>4.0%}"
            f"  {r.predictive_p95_s:>11.1f} s / {r.predictive_idle:>4.0%}  {warm}"
        )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--seeds", default="0,1,2,3", help="comma-separated trace seeds (default 0,1,2,3)")
    p.add_argument("--warmups", default="600,1800", help="comma-separated warm-ups in seconds")
    p.add_argument("--minutes", type=float, default=20.0, help="measured minutes (default 20)")
    p.add_argument("--start-hour", type=float, default=8.0, help="hour of the day the slice starts")
    p.add_argument("--p95-wait", type=float, default=10.0, help="wait target W in seconds")
    p.add_argument("--json", type=Path, help="also write the rows as JSON here")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        warmups = [float(w) for w in args.warmups.split(",") if w.strip()]
    except ValueError as exc:
        print(f"error: --seeds and --warmups take comma-separated numbers ({exc})", file=sys.stderr)
        return 2
    jobs = [(w, s, args.minutes, args.start_hour, args.p95_wait) for w in warmups for s in seeds]
    with ProcessPoolExecutor(max_workers=2) as pool:
        rows = list(pool.map(one_window, *zip(*jobs, strict=True)))
    print(table(rows, args.p95_wait))
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
