"""A lower bound for issue 15: headroom sized by a policy that knows the trace's future.

For each seed: the synthetic trace of bench/predictive_vs_static.py (2 days of the normal
60-180 concurrent-job load, no bursts), replayed by the planner's own engine
(`planner.model.simulate`) at the cluster defaults (600 s scale-down, provisioning lognormal
median 240 s / p95 420 s, 10 s scans, 30 s GPU delay), with an *oracle* headroom policy in
place of `predictive`. The oracle knows every arrival time and run time (not the provisioning
times the engine draws): its pool at t is the most requests that will be running at once over
[t, t + horizon] if each started on arrival, plus a margin, and it holds the placeholders that
the busy nodes and the free capacity lasting the horizon (`sizing.unheld_supply`, the same
accounting as `predictive`) do not cover. Everything else is the engine's: placeholders,
preemption by real pods, the autoscaler's reaction, provisioning, scale-down. The margin is
bisected (integers) to the least that meets p95 <= --p95-wait, for each horizon of --horizons;
the answer is the least idle among them.

Between the oracle and `predictive`, three partial ones split its lead by what it knows
(`EndsOracleHeadroom`, each with `slack` bisected to the most meeting p95 <= --p95-wait, so all
sit at the target's edge): "predictive" (the real rule, nothing foreseen, only its slack
bisected), "rate" (predictive's Erlang pool on the generator's true arrival rate at t + L/2
instead of the slow window's estimate and trend), "ends" (when each running request will end,
so the running ones still running one lead time L ahead, plus a Poisson quantile for those
arriving meanwhile), "ends+rate" (both). None of them knows when the next requests arrive.

Idle GPU time (billed less busy) is split from the engine's per-node records into:
provisioning (creation to ready), nodes that were never used (ready to deletion: they came
after the demand they were ordered for had gone), scale-down tails (a node's last run's end to
its deletion, or to the horizon), and gaps (ready to the first run and between runs: warm
nodes, held or waiting out less than a window), and the minimum billing.

    PYTHONPATH=src .venv/bin/python bench/predictive_oracle.py [--seeds 0,1,2,5] [--days 2]
        [--p95-wait 10] [--horizons 300,380,460,540] [--json-out FILE]

Prerequisites: the project's venv (numpy) and PYTHONPATH=src, as for predictive_vs_static.py;
exit code 2 when they are missing. Pure model runs: about a minute per seed on 2 cores.

How it plugs in: the engine calls `size_headroom` by its module-level name; `oracle_engine()`
swaps it, for the duration of a run, for a function that answers for an `OracleHeadroom` and
hands every other policy to the real one. No engine code is changed or copied.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from predictive_vs_static import check_prerequisites, machine

try:
    from elasticityops.domain.headroom.sizing import (
        PredictiveHeadroom,
        WaitTargetHeadroom,
        demand_rate,
        erlang_pool,
        mean_run_time,
        model_late_share,
        poisson_quantile,
        unheld_supply,
    )
except ModuleNotFoundError:  # main() says what is missing and how to get it
    print(f"predictive_oracle: {check_prerequisites()}", file=sys.stderr)
    raise SystemExit(2) from None


@dataclass(frozen=True, eq=False)
class OracleHeadroom(WaitTargetHeadroom):
    """Sizing with foresight over `lead_time_s` (the horizon): a wait-target policy to the
    engine, so that it measures the late share and lists the nodes leaving within the horizon
    as it does for `predictive`. `ahead[k]` is the most requests running at once (each started
    on arrival) over [k, k + horizon] seconds, k whole seconds from the trace's start."""

    margin: int = 0
    ahead: Any = field(default=None, repr=False)  # numpy int array, one entry per second


@dataclass(frozen=True, eq=False)
class EndsOracleHeadroom(PredictiveHeadroom):
    """`predictive`'s inputs, and also when each running request will end, but not when the
    next ones will come: the pool at t is the running requests that will still run one lead
    time L ahead (`outlast[k]`, k whole seconds from the start), plus the `1 - late` quantile
    of Poisson(forecast rate x E[min(run time, L)]) for those arriving meanwhile, `late` from
    `model_late_share` (the same feedback on the measured late share, `slack` bisected).
    `mean_min_run_s` is E[min(run time, L)] over the trace: a property of the run times that a
    gateway could learn from history; how long each running request still runs is the part
    that it cannot know, only estimate from its age."""

    outlast: Any = field(default=None, repr=False)  # numpy int array, one entry per second
    mean_min_run_s: float = 0.0
    # with `true_rate` (per whole second k: the generator's arrival rate at k + L / 2), that
    # rate stands in for predictive's estimate from the slow window and its trend
    true_rate: Any = field(default=None, repr=False)


def generator_rate(spec: Any, arrival_s: Any, lead_s: float) -> Any:
    """Per whole second k: the synthetic generator's mean arrival rate at k + L / 2 (requests per
    second; the diurnal concurrency over the mean run time, as `synthetic.generate` draws it)."""
    import numpy as np

    from elasticityops.planner.synthetic import baseline_concurrency

    k = np.arange(0, math.ceil(float(arrival_s[-1])) + 2, dtype=np.float64)
    return baseline_concurrency(spec, k + lead_s / 2.0) / spec.mean_duration_s


def outlasting(arrival_s: Any, duration_s: Any, lead_s: float) -> Any:
    """Per whole second k: requests arrived by k (started on arrival) still running at k + L."""
    import numpy as np

    end = arrival_s + duration_s
    diff = np.zeros(math.ceil(float(end.max())) + 2, dtype=np.int64)
    first = np.ceil(arrival_s).astype(np.int64)
    stop = np.ceil(end - lead_s).astype(np.int64)
    keep = stop > first
    np.add.at(diff, first[keep], 1)
    np.add.at(diff, stop[keep], -1)
    return np.cumsum(diff)


def lasting(obs: Any, lead_s: float) -> int:
    """Free capacity that lasts `lead_s`, counted as `predictive` counts it: `unheld_supply` at
    the arrival rate its forecast uses, with its default surge and fall thresholds."""
    defaults = {f.name: f.default for f in dataclasses.fields(PredictiveHeadroom)}
    rate = demand_rate(obs, defaults["surge_ratio"], defaults["fall_z"])
    return int(unheld_supply(obs, lead_s, rate))


def ends_oracle_size(obs: Any, policy: EndsOracleHeadroom) -> int:
    lead = policy.lead_time_s
    k = min(len(policy.true_rate if policy.outlast is None else policy.outlast) - 1, max(0, int(obs.now_s)))
    if policy.outlast is None:  # the rate alone: predictive's Erlang pool on the generator's rate
        run_s = mean_run_time(obs)
        if run_s is None:
            return 0
        late = model_late_share(obs.late_share, policy)
        pool = erlang_pool(float(policy.true_rate[k]) * run_s, policy.target_wait_s / run_s, late)
        return max(0, min(policy.max_nodes, pool - obs.busy_nodes - lasting(obs, lead)))
    if policy.true_rate is not None:
        ahead = float(policy.true_rate[min(len(policy.true_rate) - 1, k)])
    else:
        rate = demand_rate(obs, policy.surge_ratio)
        ahead = max(0.0, rate + obs.arrival_trend_per_s2 * (obs.slow_window_s / 2.0 + lead))
    late = model_late_share(obs.late_share, policy)
    pool = int(policy.outlast[k]) + poisson_quantile(ahead * policy.mean_min_run_s, 1.0 - late)
    have = obs.busy_nodes + lasting(obs, lead)
    return max(0, min(policy.max_nodes, pool - have))


def demand_ahead(arrival_s: Any, duration_s: Any, horizon_s: float) -> Any:
    """Per whole second k: max over [k, k + horizon] of the requests running if none waited."""
    import numpy as np
    from numpy.lib.stride_tricks import sliding_window_view

    ends = np.sort(arrival_s + duration_s)
    last = math.ceil(float(ends[-1])) + 1
    grid = np.arange(0, last + 1, dtype=np.float64)
    # running at any instant of [k, k + 1): arrived before k + 1 and not ended by k
    running = np.searchsorted(arrival_s, grid + 1.0, side="left") - np.searchsorted(ends, grid, side="right")
    width = max(1, round(horizon_s) + 1)
    padded = np.concatenate([running, np.zeros(width - 1, dtype=running.dtype)])
    return sliding_window_view(padded, width).max(axis=1)


def oracle_size(obs: Any, policy: OracleHeadroom) -> int:
    """Placeholders: the pool the future needs, less what the cluster already has for it."""
    k = min(len(policy.ahead) - 1, max(0, int(obs.now_s)))
    pool = int(policy.ahead[k]) + policy.margin
    have = obs.busy_nodes + lasting(obs, policy.lead_time_s)
    return max(0, min(policy.max_nodes, pool - have))


@contextmanager
def oracle_engine() -> Iterator[None]:
    """The engine's `size_headroom`, answering for the two oracles too, while inside."""
    from elasticityops.planner.model import engine

    real: Callable[..., int] = engine.size_headroom

    def sizing(obs: Any, policy: Any) -> int:
        if isinstance(policy, OracleHeadroom):
            return oracle_size(obs, policy)
        if isinstance(policy, EndsOracleHeadroom):
            return ends_oracle_size(obs, policy)
        return real(obs, policy)

    engine.size_headroom = sizing  # type: ignore[assignment]
    try:
        yield
    finally:
        engine.size_headroom = real  # type: ignore[assignment]


def idle_parts(trace: Any, result: Any, min_billed_s: float) -> dict[str, float]:
    """Idle GPU-hours by cause, from the engine's records (see the module's docstring)."""
    import numpy as np

    horizon = result.horizon_s
    node = np.asarray(result.node)
    start = np.asarray(result.start_s)
    end = np.asarray(result.end_s)
    order = np.lexsort((start, node))
    node, start, end = node[order], start[order], end[order]
    first = np.searchsorted(node, np.arange(len(result.node_created_s)), side="left")
    last = np.searchsorted(node, np.arange(len(result.node_created_s)), side="right")
    parts = {"provisioning": 0.0, "never_used": 0.0, "tails": 0.0, "gaps": 0.0, "min_billed": 0.0}
    for nd, (created, ready, deleted) in enumerate(
        zip(result.node_created_s, result.node_ready_s, result.node_deleted_s, strict=True)
    ):
        gone = min(deleted, horizon)
        life = gone - created
        if life <= 0:
            continue
        parts["min_billed"] += max(0.0, min_billed_s - life)
        up = min(ready, gone)
        if nd < result.baseline:
            up = created
        parts["provisioning"] += up - created
        a, b = first[nd], last[nd]
        if a == b:
            parts["never_used"] += gone - up
            continue
        parts["gaps"] += (start[a] - up) + float(np.sum(start[a + 1 : b] - end[a : b - 1]))
        parts["tails"] += gone - end[b - 1]
    return {k: v / 3600.0 for k, v in parts.items()}


@dataclass(frozen=True)
class OracleRun:
    horizon_s: float
    margin: int
    p95_s: float
    idle_gpu_h: float
    busy_gpu_h: float
    nodes_created: int
    parts: dict[str, float]

    @property
    def idle_ratio(self) -> float:
        return self.idle_gpu_h / self.busy_gpu_h

    def as_dict(self) -> dict[str, Any]:
        return {
            "horizon_s": self.horizon_s,
            "margin": self.margin,
            "p95_s": round(self.p95_s, 2),
            "idle_gpu_h": round(self.idle_gpu_h, 1),
            "busy_gpu_h": round(self.busy_gpu_h, 1),
            "idle_over_busy": round(self.idle_ratio, 4),
            "nodes_created": self.nodes_created,
            "idle_parts_gpu_h": {k: round(v, 1) for k, v in self.parts.items()},
        }


def run_one(trace: Any, settings: Any, policy: Any) -> tuple[Any, Any]:
    from elasticityops.planner.model import simulate
    from elasticityops.planner.summary import summarize

    with oracle_engine():
        result = simulate(trace.arrival_s.tolist(), trace.duration_s.tolist(), settings, policy)
    return result, summarize("oracle", trace, result, settings)


def measured(trace: Any, settings: Any, policy: Any, horizon: float, margin: int) -> OracleRun:
    result, summary = run_one(trace, settings, policy)
    return OracleRun(
        horizon,
        margin,
        summary.time_to_start_s.p95,
        summary.idle_gpu_hours,
        summary.busy_gpu_hours,
        len(result.node_created_s),
        idle_parts(trace, result, settings.min_billed_s),
    )


def least_margin(
    trace: Any, settings: Any, horizon: float, wait: float, lo: int, hi: int
) -> OracleRun | None:
    """Bisect the margin over [lo, hi] to the least meeting p95 <= wait (p95 falls as the margin
    grows, up to the engine's noise); None if even hi misses."""
    ahead = demand_ahead(trace.arrival_s, trace.duration_s, horizon)

    def at(margin: int) -> OracleRun:
        policy = OracleHeadroom(wait, horizon, max_nodes=settings.autoscaled_cap, margin=margin, ahead=ahead)
        return measured(trace, settings, policy, horizon, margin)

    best = at(hi)
    if best.p95_s > wait:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        run = at(mid)
        if run.p95_s <= wait:
            hi, best = mid, run
        else:
            lo = mid
    return best


def least_slack(
    trace: Any,
    settings: Any,
    lead_s: float,
    wait: float,
    steps: int,
    true_rate: Any = None,
    ends: bool = True,
) -> OracleRun | None:
    """The ends-only oracle with `slack` bisected over [1, 9.5] (more slack: fewer nodes) to the
    most that still meets p95 <= wait; None if even the least misses."""
    import numpy as np

    from elasticityops.planner.policies import parse_policy

    base = parse_policy(f"predictive:{wait:g}", settings, wait).sizing
    outlast = outlasting(trace.arrival_s, trace.duration_s, lead_s) if ends else None
    mean_min = float(np.minimum(trace.duration_s, lead_s).mean())

    def at(slack: float) -> OracleRun:
        if not ends and true_rate is None:  # no foresight: predictive itself, slack bisected
            real = dataclasses.replace(base, slack=slack)
            run = measured(trace, settings, real, lead_s, 0)
            return OracleRun(**{**run.__dict__, "margin": round(slack * 100)})
        policy = EndsOracleHeadroom(
            wait,
            lead_s,
            max_nodes=base.max_nodes,
            slack=slack,
            outlast=outlast,
            mean_min_run_s=mean_min,
            true_rate=true_rate,
        )
        run = measured(trace, settings, policy, lead_s, 0)
        return OracleRun(**{**run.__dict__, "margin": round(slack * 100)})

    lo, hi = 1.0, 9.5
    best = at(lo)
    if best.p95_s > wait:
        return None
    for _ in range(steps):
        mid = (lo + hi) / 2
        run = at(mid)
        if run.p95_s <= wait:
            lo, best = mid, run
        else:
            hi = mid
    return best


def baseline_runs(trace: Any, settings: Any, wait: float) -> dict[str, OracleRun]:
    """`none` and `predictive:W`, split the same way, for the comparison."""
    from elasticityops.planner.policies import parse_policy

    out = {}
    for spec in ("none", f"predictive:{wait:g}"):
        policy = parse_policy(spec, settings, wait).sizing
        out[spec] = measured(trace, settings, policy, math.nan, 0)
    return out


def one_seed(seed: int, args: argparse.Namespace) -> dict[str, Any]:
    from elasticityops.planner.settings import ClusterSettings
    from elasticityops.planner.synthetic import SyntheticSpec, generate

    spec = SyntheticSpec(days=args.days, bursts_per_day=0.0, seed=seed)
    trace = generate(spec)
    settings = ClusterSettings()
    found = [
        run
        for h in args.horizon_list
        if (run := least_margin(trace, settings, h, args.p95_wait, args.margin_lo, args.margin_hi))
    ]
    best = min(found, key=lambda r: r.idle_gpu_h) if found else None
    refs = baseline_runs(trace, settings, args.p95_wait)
    ends = least_slack(trace, settings, args.ends_lead, args.p95_wait, args.slack_steps)
    rate = generator_rate(spec, trace.arrival_s, args.ends_lead)
    ends_rate = least_slack(trace, settings, args.ends_lead, args.p95_wait, args.slack_steps, rate)
    rate_only = least_slack(
        trace, settings, args.ends_lead, args.p95_wait, args.slack_steps, rate, ends=False
    )
    plain = least_slack(trace, settings, args.ends_lead, args.p95_wait, args.slack_steps, ends=False)
    return {
        "seed": seed,
        "requests": len(trace),
        "oracle_best": best.as_dict() if best else None,
        "oracle_per_horizon": [r.as_dict() for r in found],
        "ends_oracle": ends.as_dict() if ends else None,
        "ends_and_rate_oracle": ends_rate.as_dict() if ends_rate else None,
        "rate_oracle": rate_only.as_dict() if rate_only else None,
        "predictive_slack_bisected": plain.as_dict() if plain else None,
        "reference": {k: v.as_dict() for k, v in refs.items()},
        "oracle_meets_goal": bool(best and best.idle_ratio <= args.idle_goal),
    }


def table(results: list[dict[str, Any]]) -> str:
    head = (
        f"{'seed':>4}  {'run':<28} {'p95 s':>6} {'idle GPU-h':>10} {'idle/busy':>9} {'nodes':>6}"
        f"  {'prov':>6} {'unused':>6} {'tails':>6} {'gaps':>6}"
    )
    lines = [head, "-" * len(head)]
    for res in results:
        rows = [(f"oracle h={r['horizon_s']:g} m={r['margin']}", r) for r in res["oracle_per_horizon"]]
        for key, label in (
            ("predictive_slack_bisected", "predictive"),
            ("rate_oracle", "rate"),
            ("ends_oracle", "ends"),
            ("ends_and_rate_oracle", "ends+rate"),
        ):
            if res[key]:
                r = res[key]
                rows.append((f"{label}, slack={r['margin'] / 100:g}", r))
        rows += list(res["reference"].items())
        for name, r in rows:
            p = r["idle_parts_gpu_h"]
            lines.append(
                f"{res['seed']:>4}  {name:<28} {r['p95_s']:>6.1f} {r['idle_gpu_h']:>10,.0f}"
                f" {r['idle_over_busy']:>9.1%} {r['nodes_created']:>6}  {p['provisioning']:>6.0f}"
                f" {p['never_used']:>6.0f} {p['tails']:>6.0f} {p['gaps']:>6.0f}"
            )
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--seeds", default="0,1,2,5", help="comma-separated trace seeds (default 0,1,2,5)")
    p.add_argument("--days", type=float, default=2.0, help="trace length in days (default 2)")
    p.add_argument("--p95-wait", type=float, default=10.0, help="p95 target, seconds (default 10)")
    p.add_argument("--idle-goal", type=float, default=0.15, help="idle / busy goal (default 0.15)")
    p.add_argument(
        "--horizons",
        default="300,380,460,540",
        help="oracle look-ahead horizons, seconds (default 300,380,460,540)",
    )
    p.add_argument("--margin-lo", type=int, default=-30, help="lowest margin bisected (nodes, default -30)")
    p.add_argument("--margin-hi", type=int, default=30, help="highest margin bisected (nodes, default 30)")
    p.add_argument(
        "--ends-lead", type=float, default=460.0, help="lead time of the ends-only oracle, s (default 460)"
    )
    p.add_argument("--slack-steps", type=int, default=6, help="bisection steps on its slack (default 6)")
    p.add_argument("--json-out", help="also write the JSON document to this file")
    args = p.parse_args(argv)
    args.seed_list = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.horizon_list = [float(h) for h in args.horizons.split(",") if h.strip()]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    missing = check_prerequisites()
    if missing:
        print(f"predictive_oracle: {missing}", file=sys.stderr)
        return 2
    results = [one_seed(seed, args) for seed in args.seed_list]
    print(table(results))
    doc = {
        "machine": machine(),
        "days": args.days,
        "p95_wait_s": args.p95_wait,
        "idle_goal": args.idle_goal,
        "horizons_s": args.horizon_list,
        "results": results,
    }
    text = json.dumps(doc, indent=2)
    print(text)
    if args.json_out:
        with open(args.json_out, "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
