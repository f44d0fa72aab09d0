"""Headroom: how much warm GPU capacity to keep ahead of demand, and in what units. Pure: the
sizing rules, the policy syntax, the traffic they read and the shapes of warm units. The
controller that runs them lives in elasticityops/headroom/."""

from elasticityops.domain.headroom.sizing import (
    ArrivalRateHeadroom,
    HeadroomObservation,
    HeadroomPolicy,
    NoHeadroom,
    PredictiveHeadroom,
    ScheduledHeadroom,
    StaticBaseline,
    WaitTargetHeadroom,
    WarmHeadroom,
    normal_ppf,
    poisson_quantile,
    size_headroom,
)

__all__ = [
    "ArrivalRateHeadroom",
    "HeadroomObservation",
    "HeadroomPolicy",
    "NoHeadroom",
    "PredictiveHeadroom",
    "ScheduledHeadroom",
    "StaticBaseline",
    "WaitTargetHeadroom",
    "WarmHeadroom",
    "normal_ppf",
    "poisson_quantile",
    "size_headroom",
]
