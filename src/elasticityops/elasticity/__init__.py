"""Elasticity: warm GPU capacity (headroom) and the pure decision that sizes it."""

from elasticityops.elasticity.sizing import (
    HeadroomObservation,
    HeadroomPolicy,
    NoHeadroom,
    PredictiveHeadroom,
    ScheduledHeadroom,
    StaticBaseline,
    WarmHeadroom,
    normal_ppf,
    poisson_quantile,
    size_headroom,
)

__all__ = [
    "HeadroomObservation",
    "HeadroomPolicy",
    "NoHeadroom",
    "PredictiveHeadroom",
    "ScheduledHeadroom",
    "StaticBaseline",
    "WarmHeadroom",
    "normal_ppf",
    "poisson_quantile",
    "size_headroom",
]
