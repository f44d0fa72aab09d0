"""The pure discrete-event model: `simulate(arrivals, durations, settings, policy) -> SimResult`."""

from elasticityops.planner.model.engine import ModelStalledError, simulate
from elasticityops.planner.model.result import SimResult, SimTimeSeries

__all__ = ["ModelStalledError", "SimResult", "SimTimeSeries", "simulate"]
