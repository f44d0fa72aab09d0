"""Policy specs as users write them, turned into the sizing policies of `domain/headroom/sizing.py`.

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

from elasticityops.domain.headroom.policy_text import UnknownPolicy, parse_policy_text
from elasticityops.domain.headroom.sizing import HeadroomPolicy, NoHeadroom, StaticBaseline
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
    """The policy `spec` names (the headroom's syntax, domain/headroom/policy_text.py, and the
    planner's own `static`), named with the cluster's baseline."""
    text = spec.strip()
    kind, _, arg = text.partition(":")
    if kind.strip().lower() == "static" and not arg.strip():
        if settings.baseline <= 0:
            raise PlannerInputError(f"{_FLAG} static needs --baseline > 0 (the size of the fixed pool)")
        return PolicyChoice(f"static:{settings.baseline}", StaticBaseline(settings.baseline))
    try:
        parsed = parse_policy_text(
            text,
            target_wait_s=target_wait_s,
            lead_time_s=lead_time_s(settings),
            max_nodes=settings.autoscaled_cap,
        )
    except UnknownPolicy:
        raise PlannerInputError(
            f"{_FLAG}: cannot parse {spec!r}; "
            "expected none, static, warm:K, scheduled:HH:MM=K,..., predictive[:W] or predictive-rate[:W]"
        ) from None
    except ValueError as exc:
        raise PlannerInputError(f"{_FLAG}: {exc}") from None
    if isinstance(parsed.sizing, NoHeadroom):
        return PolicyChoice(
            "none" if settings.baseline == 0 else f"baseline:{settings.baseline}", parsed.sizing
        )
    return PolicyChoice(_with_baseline(parsed.label, settings), parsed.sizing)


def _with_baseline(name: str, settings: ClusterSettings) -> str:
    return name if settings.baseline == 0 else f"{name}+baseline:{settings.baseline}"
