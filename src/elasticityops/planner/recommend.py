"""Search settings for the cheapest one that meets a p95 time-to-start target.

Families searched for each scale-down window: a static baseline pool of B nodes, warm headroom
of K placeholders, and predictive headroom at the target. B and K are found by bisection on the
assumption that p95 wait falls as capacity grows (it does in this model up to sampling noise);
every setting evaluated is kept, and the frontier is the set no other setting beats on both
cost and p95 wait. The quota to request is the chosen setting's peak nodes plus a margin.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from elasticityops.planner.policies import PolicyChoice, parse_policy
from elasticityops.planner.runner import RunOutcome, run_policy
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.summary import Summary
from elasticityops.planner.synthetic import concurrency_profile
from elasticityops.planner.trace import Trace

Progress = Callable[[int, int, str], None]
"""(settings simulated so far, at most this many in all, the setting simulated now)."""


@dataclass(frozen=True)
class Candidate:
    family: str  # "baseline", "warm" or "predictive"
    size: int  # B or K (0 for predictive)
    scale_down_after_s: float
    summary: Summary

    @property
    def label(self) -> str:
        return self.summary.policy


@dataclass(frozen=True)
class Recommendation:
    target_p95_s: float
    best: Candidate | None  # cheapest meeting the target; None if no setting meets it
    closest: Candidate  # lowest p95 found (what to look at when the target is out of reach)
    frontier: tuple[Candidate, ...]  # by rising p95
    evaluated: tuple[Candidate, ...]
    quota_gpus: int  # GPUs to request: peak nodes of `best` (or `closest`) plus the margin
    node_pools: int  # auto-provisioned pools (pool-zones) that quota needs at 1,000 nodes each
    margin: float


def frontier(cands: Sequence[Candidate]) -> tuple[Candidate, ...]:
    """Settings not beaten on both cost and p95 by another, sorted by p95."""
    out: list[Candidate] = []
    best_cost = math.inf
    for c in sorted(cands, key=lambda c: (c.summary.time_to_start_s.p95, c.summary.cost_usd)):
        if c.summary.cost_usd < best_cost:
            out.append(c)
            best_cost = c.summary.cost_usd
    return tuple(out)


def recommend(
    trace: Trace,
    settings: ClusterSettings,
    target_p95_s: float,
    *,
    windows: Sequence[float] = (300.0, 600.0, 1200.0),
    margin: float = 0.2,
    progress: Progress | None = None,
) -> Recommendation:
    _, conc = concurrency_profile(trace)
    hi = max(1, min(int(conc.max()) if len(conc) else 1, settings.autoscaled_cap))
    # Per family: 0, hi, then a bisection of at most ceil(log2(hi)) steps; then predictive.
    steps = 2 * (2 + math.ceil(math.log2(hi))) + 1
    total = steps * len(windows)
    evaluated: list[Candidate] = []

    def evaluate(family: str, size: int, window: float) -> Candidate:
        base = replace(settings, scale_down_after_s=window, baseline=size if family == "baseline" else 0)
        spec = {"baseline": "none", "warm": f"warm:{size}", "predictive": f"predictive:{target_p95_s:g}"}[
            family
        ]
        choice: PolicyChoice = parse_policy(spec, base, target_p95_s)
        label = f"{choice.name} sd={window:g}s"
        if progress:
            progress(len(evaluated), total, label)
        outcome: RunOutcome = run_policy(trace, base, choice)
        cand = Candidate(family, size, window, replace(outcome.summary, policy=label))
        evaluated.append(cand)
        return cand

    def meets(c: Candidate) -> bool:
        return c.summary.time_to_start_s.p95 <= target_p95_s

    for window in windows:
        for family in ("baseline", "warm"):
            lo_c = evaluate(family, 0, window)
            if meets(lo_c):
                continue
            hi_c = evaluate(family, hi, window)
            if not meets(hi_c):
                continue
            lo, top = 0, hi
            while top - lo > 1:
                mid = (lo + top) // 2
                if meets(evaluate(family, mid, window)):
                    top = mid
                else:
                    lo = mid
        evaluate("predictive", 0, window)
    ok = [c for c in evaluated if meets(c)]
    best = min(ok, key=lambda c: c.summary.cost_usd) if ok else None
    closest = min(evaluated, key=lambda c: (c.summary.time_to_start_s.p95, c.summary.cost_usd))
    chosen = best or closest
    quota = math.ceil(chosen.summary.peak_nodes * (1.0 + margin))
    return Recommendation(
        target_p95_s=target_p95_s,
        best=best,
        closest=closest,
        frontier=frontier(evaluated),
        evaluated=tuple(evaluated),
        quota_gpus=quota,
        node_pools=max(
            1,
            math.ceil(
                (quota - (chosen.size if chosen.family == "baseline" else 0)) / settings.pool_size_limit
            ),
        ),
        margin=margin,
    )
