"""A headroom policy as users write it, for the planner (`eops plan --policy`) and the headroom
controller (`eops serve --headroom`) alike: one syntax, so a policy the planner recommends is
typed into the gateway as it is. Pure.

warm:K                    K warm units (warm nodes) at all times
scheduled:HH:MM=K,...     K warm units from each time of day to the next entry
predictive[:W]            warm units sized from the load forecast one lead time ahead, so that
                          p95 time-to-start stays within W seconds (default: the caller's target)
predictive-rate[:W]       the predictive rule before issue 15, kept for comparison
none                      no warm units

`static` (a fixed node pool) is the planner's alone: it is a pool's minimum, not a headroom.
"""

from __future__ import annotations

from dataclasses import dataclass

from elasticityops.domain.headroom.sizing import (
    ArrivalRateHeadroom,
    HeadroomPolicy,
    NoHeadroom,
    PredictiveHeadroom,
    ScheduledHeadroom,
    WarmHeadroom,
)

MAX_WARM_NODES = 100_000
"""The most warm nodes a policy may name: 25x the largest peak this is built for (4,000 GPUs)."""
MAX_TARGET_WAIT_S = 3600.0
"""The longest wait a predictive policy may aim at: an hour."""


class UnknownPolicy(ValueError):
    """The text names none of the policies; each caller says which forms it takes."""


@dataclass(frozen=True)
class ParsedPolicy:
    """`label`: the policy as tables and plots name it (e.g. `predictive:10`)."""

    label: str
    sizing: HeadroomPolicy


def parse_policy_text(text: str, *, target_wait_s: float, lead_time_s: float, max_nodes: int) -> ParsedPolicy:
    """The policy `text` names. ValueError (the message without a flag, for the caller to add)
    for a bad number or schedule; UnknownPolicy for any other text, static included."""
    kind, _, arg = text.strip().partition(":")
    kind = kind.strip().lower()
    arg = arg.strip()
    spec = text.strip()
    if kind == "none" and not arg:
        return ParsedPolicy("none", NoHeadroom())
    if kind == "warm":
        k = _count(arg, spec)
        return ParsedPolicy(f"warm:{k}", WarmHeadroom(k))
    if kind == "scheduled":
        return ParsedPolicy(f"scheduled:{arg}", ScheduledHeadroom(_schedule(arg, spec)))
    if kind in ("predictive", "predictive-rate"):
        wait = _wait(arg, spec) if arg else target_wait_s
        cls = PredictiveHeadroom if kind == "predictive" else ArrivalRateHeadroom
        sizing = cls(target_wait_s=wait, lead_time_s=lead_time_s, max_nodes=max_nodes)
        return ParsedPolicy(f"{kind}:{wait:g}", sizing)
    raise UnknownPolicy(spec)


def _count(text: str, spec: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{spec!r} needs a whole number of nodes, e.g. warm:50") from None
    if not 0 <= value <= MAX_WARM_NODES:
        raise ValueError(f"{spec!r} needs a node count from 0 to {MAX_WARM_NODES:,}")
    return value


def _wait(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{spec!r} needs a wait in seconds, e.g. predictive:10") from None
    if not 0 <= value <= MAX_TARGET_WAIT_S:
        raise ValueError(f"{spec!r} needs a wait from 0 to {MAX_TARGET_WAIT_S:g} seconds")
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
        raise ValueError(
            f"cannot parse schedule {spec!r}; expected e.g. scheduled:08:00=50,20:00=5, "
            f"each count from 0 to {MAX_WARM_NODES:,}"
        ) from None
