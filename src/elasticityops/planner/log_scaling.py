"""A window of an imported request log as a planner trace, optionally scaled to a target mean
offered concurrency (GPUs busy if every request started on arrival, averaged over the window).

Scaling up superposes S time-shifted copies of the whole log: each copy is shifted as a whole by
one integer number of seconds drawn uniformly from [-max_shift, max_shift] (numpy
`default_rng(seed)`, one draw of S integers), copies are cut to the window, and S is the target
over the window's own mean, rounded. A copy keeps the real sessions, bursts, gaps and run times,
so the load's shape survives above the scale of the shift; this is how
`../shared/traces/gentd26_2024-12-02T12_2d_scaled100.csv` was made, and importing the raw file
with the same window, target and seed gives that file. Scaling down thins: each request is kept
with probability target / mean (the same generator)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.log_import import RequestLog
from elasticityops.planner.trace import Trace

METHODS = ("auto", "superpose", "thin")


@dataclass(frozen=True)
class Scaling:
    """Scale to `target` mean concurrency (GPUs) by `method` (auto: superpose above the log's
    mean, thin below it)."""

    target: float
    method: str = "auto"
    max_shift_s: float = 1800.0
    seed: int = 0


@dataclass(frozen=True)
class Imported:
    """The trace (arrivals from the window's start) and what was done to make it."""

    trace: Trace
    start_epoch_s: float
    span_s: float
    mean_before: float  # offered concurrency of the window's own requests, GPUs
    mean_after: float
    copies: int  # superposed copies; 1 when not superposed
    kept_share: float  # share kept by thinning; 1.0 when not thinned


def offered_mean(durations: np.ndarray, span_s: float) -> float:
    """Mean offered concurrency of requests with these run times over a window of span_s."""
    return float(durations.sum()) / span_s if span_s > 0 else 0.0


def to_trace(
    log: RequestLog,
    *,
    start_epoch_s: float | None = None,
    end_epoch_s: float | None = None,
    scaling: Scaling | None = None,
) -> Imported:
    """The requests arriving in [start, end) (default: the log's first arrival to just past its
    last), as seconds from start, sorted by arrival, scaled by `scaling`."""
    if not len(log):
        raise PlannerInputError("the log has no requests left (after --keep); nothing to import")
    first, last = float(log.arrival_epoch_s.min()), float(log.arrival_epoch_s.max())
    start = first if start_epoch_s is None else start_epoch_s
    end = math.nextafter(last, math.inf) if end_epoch_s is None else end_epoch_s
    if end <= start:
        raise PlannerInputError(
            f"--to ({end:.0f}) is not after --from ({start:.0f}) (epoch seconds); give a later --to"
        )
    span = (end if end_epoch_s is not None else last) - start
    inside = (log.arrival_epoch_s >= start) & (log.arrival_epoch_s < end)
    if not inside.any():
        raise PlannerInputError(
            f"no request arrives between --from and --to; the log runs from {first:.0f} to {last:.0f} "
            "(epoch seconds): choose a window inside it"
        )
    mean = offered_mean(log.duration_s[inside], span)
    rel = log.arrival_epoch_s - start
    copies, kept = 1, 1.0
    if scaling is None or math.isclose(scaling.target, mean):
        picks = [np.flatnonzero(inside)]
        shifts = [0.0]
    else:
        method = _method(scaling, mean, span)
        rng = np.random.default_rng(scaling.seed)
        if method == "superpose":
            copies = max(1, round(scaling.target / mean))
            shift = int(scaling.max_shift_s)
            offsets = rng.integers(-shift, shift + 1, copies)
            shifts = [float(o) for o in offsets]
            picks = [np.flatnonzero((rel + o >= 0) & (rel + o < end - start)) for o in shifts]
        else:
            kept = scaling.target / mean
            rows = np.flatnonzero(inside)
            picks = [rows[rng.random(len(rows)) < kept]]
            shifts = [0.0]
    index = np.concatenate(picks)
    arrival = np.concatenate([rel[p] + o for p, o in zip(picks, shifts, strict=True)])
    order = np.argsort(arrival, kind="stable")
    index = index[order]
    duration = log.duration_s[index]
    trace = Trace(
        arrival[order],
        duration,
        _labels(log.function, index),
        _labels(log.gpu_type, index),
    )
    return Imported(trace, start, span, mean, offered_mean(duration, span), copies, kept)


def _method(scaling: Scaling, mean: float, span: float) -> str:
    if not scaling.target > 0:
        raise PlannerInputError("--scale-to: must be > 0 GPUs (the mean offered concurrency wanted)")
    if mean <= 0 or span <= 0:
        raise PlannerInputError(
            "--scale-to: the window's requests take no GPU time (all durations 0 or a window of "
            "one instant), so there is nothing to scale; give --from/--to around more requests"
        )
    method = scaling.method
    if method == "auto":
        return "superpose" if scaling.target > mean else "thin"
    if method == "thin" and scaling.target > mean:
        raise PlannerInputError(
            f"--scale-method thin: the target {scaling.target:g} is above the window's mean "
            f"{mean:.3g} GPUs and thinning only removes requests; use --scale-method superpose"
        )
    if method == "superpose" and scaling.target < mean / 2:
        raise PlannerInputError(
            f"--scale-method superpose: the target {scaling.target:g} is under half the window's "
            f"mean {mean:.3g} GPUs (less than one copy); use --scale-method thin"
        )
    return method


def _labels(labels: tuple[str, ...] | None, index: np.ndarray) -> tuple[str, ...] | None:
    if labels is None:
        return None
    return tuple(labels[k] for k in index.tolist())
