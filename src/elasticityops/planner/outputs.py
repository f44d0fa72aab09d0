"""Write everything `eops plan run` and `eops plan recommend` leave in --out DIR."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elasticityops.planner.config import settings_dict
from elasticityops.planner.recommend import Recommendation
from elasticityops.planner.report import safe_name, write_html, write_invocations, write_json
from elasticityops.planner.runner import RunOutcome
from elasticityops.planner.trace import Trace

if TYPE_CHECKING:
    from elasticityops.planner.plots import PlottedRun

# The plot modules are imported only where plots are drawn: matplotlib's import is ~0.4 s, a fifth
# of `eops plan run --no-plots` on a 300k-request trace (BENCHMARKS.md, planner).


def _plotted(trace: Trace, outcomes: Sequence[RunOutcome]) -> list[PlottedRun]:
    from elasticityops.planner.plots import PlottedRun

    return [PlottedRun(o.summary, o.result, trace.arrival_s) for o in outcomes]


def write_run(
    out: Path, trace: Trace, outcomes: Sequence[RunOutcome], notes: Sequence[str], *, plots: bool = True
) -> list[Path]:
    """summary.json and invocations.csv (one policy: flat; several: a `runs` list and one CSV per
    policy), the three PNGs and report.html."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    settings = settings_dict(outcomes[0].settings)
    if len(outcomes) == 1:
        payload: dict[str, Any] = {
            **outcomes[0].summary.to_dict(),
            "settings": settings,
            "notes": list(notes),
        }
        written.append(write_json(out / "summary.json", payload))
        written.append(write_invocations(out / "invocations.csv", trace, outcomes[0].result))
    else:
        runs = [o.summary.to_dict() for o in outcomes]
        written.append(
            write_json(out / "summary.json", {"runs": runs, "settings": settings, "notes": list(notes)})
        )
        for o in outcomes:
            path = out / f"invocations-{safe_name(o.summary.policy)}.csv"
            written.append(write_invocations(path, trace, o.result))
    if plots:
        from elasticityops.planner.cost_plots import plot_cost_by_hour, plot_cost_vs_wait
        from elasticityops.planner.plots import plot_demand, plot_wait_cdf

        runs_p = _plotted(trace, outcomes)
        cost_path = out / "cost_vs_wait.png"
        images = [
            plot_demand(runs_p, out / "demand.png"),
            plot_wait_cdf(runs_p, out / "wait_cdf.png"),
            plot_cost_by_hour(runs_p[0], cost_path)
            if len(runs_p) == 1
            else plot_cost_vs_wait([o.summary for o in outcomes], cost_path),
        ]
        written.extend(images)
        written.append(
            write_html(
                out / "report.html",
                "ElasticityOps capacity plan",
                [o.summary for o in outcomes],
                images,
                notes,
            )
        )
    return written


def recommendation_dict(rec: Recommendation) -> dict[str, Any]:
    def cand(c: Any) -> dict[str, Any] | None:
        if c is None:
            return None
        return {
            "family": c.family,
            "size": c.size,
            "scale_down_after_s": c.scale_down_after_s,
            **c.summary.to_dict(),
        }

    return {
        "target_p95_wait_s": rec.target_p95_s,
        "met": rec.best is not None,
        "recommended": cand(rec.best),
        "closest": cand(rec.closest),
        "quota_gpus": rec.quota_gpus,
        "quota_margin": rec.margin,
        "autoprovisioned_node_pools": rec.node_pools,
        "frontier": [cand(c) for c in rec.frontier],
        "evaluated": [cand(c) for c in rec.evaluated],
    }


def write_recommendation(
    out: Path, rec: Recommendation, settings: dict[str, Any], notes: Sequence[str], *, plots: bool = True
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = [write_json(out / "recommendation.json", {**recommendation_dict(rec), "settings": settings})]
    if plots:
        from elasticityops.planner.cost_plots import plot_cost_vs_wait

        img = plot_cost_vs_wait(
            [c.summary for c in rec.evaluated],
            out / "frontier.png",
            frontier=[c.summary for c in rec.frontier],
            target_p95_s=rec.target_p95_s,
            recommended=rec.best.summary if rec.best else None,
            closest=rec.closest.summary,
        )
        written.append(img)
        shown = list(rec.frontier) + ([rec.best] if rec.best and rec.best not in rec.frontier else [])
        written.append(
            write_html(
                out / "report.html",
                "ElasticityOps capacity recommendation",
                [c.summary for c in shown],
                [img],
                notes,
            )
        )
    return written
