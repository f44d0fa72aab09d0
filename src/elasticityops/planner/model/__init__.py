"""The pure discrete-event model: `simulate(arrivals, durations, settings, policy) -> SimResult`."""

from elasticityops.planner.model.engine import ModelStalledError, simulate
from elasticityops.planner.model.result import SimResult, Timeline

__all__ = ["ModelStalledError", "SimResult", "Timeline", "simulate"]
