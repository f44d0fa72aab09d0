"""Object builders for planner tests."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from elasticityops.domain.headroom.sizing import HeadroomPolicy
from elasticityops.planner.distributions import fixed
from elasticityops.planner.model import SimResult, simulate
from elasticityops.planner.settings import ClusterSettings

PROVISION_S = 120.0


def settings(**overrides: Any) -> ClusterSettings:
    """Upstream defaults, but a fixed provisioning time so that expected waits are exact."""
    return replace(ClusterSettings(provision_delay=fixed(PROVISION_S)), **overrides)


def run(
    arrivals: list[float], durations: list[float], policy: HeadroomPolicy | None = None, **overrides: Any
) -> SimResult:
    return simulate(arrivals, durations, settings(**overrides), policy)
