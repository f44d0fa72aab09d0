"""Synthetic traffic of the shape ElasticityOps is built for: a diurnal baseline of 60-180
concurrent GPU jobs and bursts to 3,000-4,000 concurrent jobs. Seeded and reproducible."""

from __future__ import annotations

import math

import numpy as np

# Declared with the planner's other inputs, so that `eops` builds its options without numpy.
from elasticityops.planner.config import SyntheticSpec as SyntheticSpec
from elasticityops.planner.trace import Trace


def baseline_concurrency(spec: SyntheticSpec, t_s: np.ndarray) -> np.ndarray:
    """Expected concurrent baseline jobs at times t_s (a cosine between min and max)."""
    mid = (spec.baseline_min + spec.baseline_max) / 2
    amp = (spec.baseline_max - spec.baseline_min) / 2
    phase = 2 * math.pi * (t_s / 86_400.0 - spec.peak_hour / 24.0)
    result: np.ndarray = mid + amp * np.cos(phase)
    return result


def generate(spec: SyntheticSpec) -> Trace:
    rng = np.random.default_rng(spec.seed)
    horizon = spec.days * 86_400.0
    # Baseline: a Poisson process whose rate follows the diurnal concurrency (Little's law).
    minutes = np.arange(0.0, horizon, 60.0)
    rate = baseline_concurrency(spec, minutes + 30.0) / spec.mean_duration_s
    counts = rng.poisson(rate * 60.0)
    base_t = np.repeat(minutes, counts) + rng.uniform(0.0, 60.0, int(counts.sum()))
    sigma = 0.8
    base_d = rng.lognormal(math.log(spec.mean_duration_s) - sigma**2 / 2, sigma, len(base_t))
    # Bursts: jobs arriving within the ramp that all overlap, lifting concurrency to the peak.
    n_bursts = int(rng.poisson(spec.bursts_per_day * spec.days))
    burst_t: list[np.ndarray] = []
    burst_d: list[np.ndarray] = []
    for start in np.sort(rng.uniform(0.0, max(0.0, horizon - spec.burst_ramp_s), n_bursts)):
        peak = rng.uniform(spec.burst_peak_min, spec.burst_peak_max)
        extra = max(0, round(peak - float(baseline_concurrency(spec, np.array([start]))[0])))
        burst_t.append(start + rng.uniform(0.0, spec.burst_ramp_s, extra))
        burst_d.append(rng.lognormal(math.log(spec.burst_duration_median_s), 0.25, extra))
    arrivals = np.concatenate([base_t, *burst_t])
    durations = np.concatenate([base_d, *burst_d])
    labels = np.concatenate(
        [np.zeros(len(base_t), dtype=np.int8)] + [np.ones(len(b), dtype=np.int8) for b in burst_t]
    )
    order = np.argsort(arrivals, kind="stable")
    # Millisecond resolution, as written to CSV, so a generated trace and its file replay alike.
    arrivals = np.round(arrivals[order], 3)
    durations = np.maximum(np.round(durations[order], 3), 0.001)
    names = ("baseline", "burst")
    return Trace(arrivals, durations, tuple(names[k] for k in labels[order].tolist()))


def concurrency_profile(trace: Trace, step_s: float = 60.0) -> tuple[np.ndarray, np.ndarray]:
    """Concurrent requests if every request started on arrival, sampled every step_s."""
    if not len(trace):
        return np.zeros(0), np.zeros(0, dtype=np.int64)
    ends = trace.arrival_s + trace.duration_s
    grid = np.arange(0.0, float(ends.max()) + step_s, step_s)
    started = np.searchsorted(np.sort(trace.arrival_s), grid, side="right")
    ended = np.searchsorted(np.sort(ends), grid, side="right")
    return grid, started - ended
