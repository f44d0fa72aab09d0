"""Policy specs as users write them, turned into the sizing policies of `elasticity.sizing`.

none                      pure auto-provisioning (baseline from --baseline, default 0)
static                    a fixed pool of --baseline nodes, no placeholders (needs --baseline > 0)
warm:K                    K placeholder pods (warm nodes) at all times
scheduled:HH:MM=K,...     K placeholders from each time of day (trace time) to the next entry
predictive[:W]            placeholders sized from the load forecast one lead time ahead (slow
                          arrival rate, mean run time by Little's law, busy nodes, measured lead
                          time), less the free nodes no placeholder holds, so that p95
                          time-to-start stays within W seconds (default --target-wait)
predictive-rate[:W]       the predictive rule before issue 15 (60 s arrival and departure rates,
                          placeholders on top of free nodes), kept for comparison
"""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.elasticity.sizing import (
    ArrivalRateHeadroom,
    HeadroomPolicy,
    NoHeadroom,
    PredictiveHeadroom,
    ScheduledHeadroom,
    StaticBaseline,
    WarmHeadroom,
)
from elasticityops.planner.errors import PlannerInputError
from elasticityops.planner.settings import ClusterSettings

_FLAG = "--policy"


@dataclass(frozen=True)
class PolicyChoice:
    """A named policy: `name` is the label in tables, plots and file names."""

    name: str
    sizing: HeadroomPolicy


def lead_time_s(settings: ClusterSettings, quantile: float = 0.95) -> float:
    """Seconds from a placeholder being consumed to its replacement being ready (high percentile):
    the GPU-pod delay, a full scan interval, and the provisioning time's `quantile`."""
    return (
        settings.gpu_scale_up_delay_s + settings.scan_interval_s + settings.provision_delay.quantile(quantile)
    )


def parse_policy(spec: str, settings: ClusterSettings, target_wait_s: float = 10.0) -> PolicyChoice:
    text = spec.strip()
    kind, _, arg = text.partition(":")
    kind = kind.strip().lower()
    arg = arg.strip()
    if kind == "none" and not arg:
        return PolicyChoice(
            "none" if settings.baseline == 0 else f"baseline:{settings.baseline}", NoHeadroom()
        )
    if kind == "static" and not arg:
        if settings.baseline <= 0:
            raise PlannerInputError(f"{_FLAG} static needs --baseline > 0 (the size of the fixed pool)")
        return PolicyChoice(f"static:{settings.baseline}", StaticBaseline(settings.baseline))
    if kind == "warm":
        k = _int(arg, text)
        return PolicyChoice(_with_baseline(f"warm:{k}", settings), WarmHeadroom(k))
    if kind == "scheduled":
        return PolicyChoice(
            _with_baseline(f"scheduled:{arg}", settings), ScheduledHeadroom(_schedule(arg, text))
        )
    if kind in ("predictive", "predictive-rate"):
        wait = _float(arg, text) if arg else target_wait_s
        cls = PredictiveHeadroom if kind == "predictive" else ArrivalRateHeadroom
        sizing = cls(target_wait_s=wait, lead_time_s=lead_time_s(settings), max_nodes=settings.autoscaled_cap)
        return PolicyChoice(_with_baseline(f"{kind}:{wait:g}", settings), sizing)
    raise PlannerInputError(
        f"{_FLAG}: cannot parse {spec!r}; "
        "expected none, static, warm:K, scheduled:HH:MM=K,..., predictive[:W] or predictive-rate[:W]"
    )


def _with_baseline(name: str, settings: ClusterSettings) -> str:
    return name if settings.baseline == 0 else f"{name}+baseline:{settings.baseline}"


MAX_WARM_NODES = 100_000
"""The most warm nodes a policy may name: 25x the largest peak this is built for (4,000 GPUs)."""
MAX_TARGET_WAIT_S = 3600.0
"""The longest wait a predictive policy may aim at: an hour."""


def _int(text: str, spec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise PlannerInputError(f"{_FLAG}: {spec!r} needs a whole number of nodes, e.g. warm:50") from None
    if not 0 <= value <= MAX_WARM_NODES:
        raise PlannerInputError(f"{_FLAG}: {spec!r} needs a node count from 0 to {MAX_WARM_NODES:,}")
    return value


def _float(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise PlannerInputError(f"{_FLAG}: {spec!r} needs a wait in seconds, e.g. predictive:10") from None
    if not 0 <= value <= MAX_TARGET_WAIT_S:
        raise PlannerInputError(f"{_FLAG}: {spec!r} needs a wait from 0 to {MAX_TARGET_WAIT_S:g} seconds")
    return value


def _schedule(arg: str, spec: str) -> tuple[tuple[int, int], ...]:
    entries: list[tuple[int, int]] = []
    try:
        for part in arg.split(","):
            when, _, count = part.strip().partition("=")
            hh, _, mm = when.strip().partition(":")
            hour, minute = int(hh), int(mm or "0")
            if not (0 <= hour < 24 and 0 <= minute < 60):
                raise ValueError
            units = int(count)
            if not 0 <= units <= MAX_WARM_NODES:
                raise ValueError
            entries.append((hour * 3600 + minute * 60, units))
        return ScheduledHeadroom(tuple(sorted(entries))).table
    except ValueError:
        raise PlannerInputError(
            f"{_FLAG}: cannot parse schedule {spec!r}; expected e.g. scheduled:08:00=50,20:00=5, "
            f"each count from 0 to {MAX_WARM_NODES:,}"
        ) from None
