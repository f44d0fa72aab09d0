"""Traces for rehearsals: the planner's synthetic 60-180 load, a day of it compressed into a
window of minutes (pure, seeded). Arrivals and run times are both divided by 1440/minutes from
a day generated with run times that much longer, so concurrency still swings between the
trough and the peak (Little's law: rate x run time is unchanged) and jobs keep the generator's
mean length (300 s), which is what makes provisioning delays of minutes matter."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from elasticityops.planner.synthetic import SyntheticSpec, generate
from elasticityops.planner.trace import Trace


def compressed_day(minutes: float, seed: int = 0, shape: SyntheticSpec | None = None) -> Trace:
    """One day of `shape` (default: the normal load, no bursts) in `minutes` of trace time."""
    if minutes <= 0:
        raise ValueError("minutes must be > 0")
    base = shape or SyntheticSpec(bursts_per_day=0.0)
    factor = 1440.0 / minutes
    day = generate(replace(base, days=1.0, seed=seed, mean_duration_s=base.mean_duration_s * factor))
    arrivals = np.round(day.arrival_s / factor, 3)
    durations = np.maximum(np.round(day.duration_s / factor, 3), 0.001)
    return Trace(arrivals, durations, day.function)


def normal_slice(minutes: float, start_hour: float = 8.0, seed: int = 0) -> Trace:
    """`minutes` of the normal load (no bursts) in real time, from `start_hour` of its day
    (the generator's peak is at 14:00: 08:00 is mid-way up, about 120 concurrent jobs)."""
    if minutes <= 0:
        raise ValueError("minutes must be > 0")
    base = SyntheticSpec(bursts_per_day=0.0)
    shifted = replace(base, days=minutes / 1440.0, seed=seed, peak_hour=(base.peak_hour - start_hour) % 24.0)
    return generate(shifted)
