"""Elasticity: warm GPU capacity (headroom) and the pure decision that sizes it."""

from elasticityops.elasticity.sizing import (
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
