"""The headroom controller's knobs (`eops serve --headroom POLICY`, EOPS_HEADROOM, ...) and the
policy text, in the planner's own syntax (domain/headroom/policy_text.py) so a policy the planner
recommends is typed as it is."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from elasticityops.domain.budget import GpuBudget
from elasticityops.domain.headroom.cluster_defaults import DEFAULT_LEAD_TIME_S, DEFAULT_MAX_NODES
from elasticityops.domain.headroom.policy_text import UnknownPolicy, parse_policy_text
from elasticityops.domain.headroom.sizing import (
    HeadroomPolicy,
    NoHeadroom,
    ScheduledHeadroom,
    WarmHeadroom,
)
from elasticityops.knobs import knob

FORMS = "none, warm:K, scheduled:HH:MM=K,... or predictive[:W] (the planner's --policy syntax)"


def check_policy_text(raw: Any) -> str:
    """`raw` as a policy the controller runs (ValueError naming the forms otherwise)."""
    text = str(raw).strip()
    parse_headroom(text, target_wait_s=10.0, lead_time_s=None)
    return text


def parse_headroom(text: str, *, target_wait_s: float, lead_time_s: float | None) -> HeadroomPolicy:
    """The sizing policy of `text`. `lead_time_s`: the lead time predictive rules size for until
    the cluster has shown one (None: the planner's default cluster's). `static` is a node pool's
    minimum, which the controller does not manage, so it is refused with that said."""
    kind = text.partition(":")[0].strip().lower()
    if kind in ("static", "predictive-rate"):
        what = (
            "a node pool's fixed size, which the pool's minimum sets (eops render gke)"
            if kind == "static"
            else "the planner's old rule, kept there for comparison"
        )
        raise ValueError(f"{kind} is {what}, not a policy of the headroom controller; use {FORMS}")
    lead = DEFAULT_LEAD_TIME_S if lead_time_s is None else lead_time_s
    try:
        parsed = parse_policy_text(
            text or "none", target_wait_s=target_wait_s, lead_time_s=lead, max_nodes=DEFAULT_MAX_NODES
        )
    except UnknownPolicy:
        raise ValueError(f"cannot parse {text!r}; use {FORMS}") from None
    except ValueError as exc:
        raise ValueError(f"{exc}; use {FORMS}") from None
    return parsed.sizing


def most_units(policy: HeadroomPolicy) -> int | None:
    """The most warm units a constant or scheduled policy ever asks for; None for rules sized
    from traffic (bounded by the budget as they run)."""
    match policy:
        case NoHeadroom():
            return 0
        case WarmHeadroom(nodes=n):
            return n
        case ScheduledHeadroom(table=table):
            return max(n for _, n in table)
    return None


def over_budget(policy: HeadroomPolicy, budget: GpuBudget | None) -> str | None:
    """Why `policy` can never be held within `budget` (a fixed headroom larger than a cap), or
    None. Each warm pool holds the policy's units of one GPU each at least."""
    most = most_units(policy)
    if budget is None or not most:
        return None
    caps = [("the GPU budget", budget.total)] if budget.total is not None else []
    caps += [(f"the GPU budget for {kind}", cap) for kind, cap in budget.per_type]
    for what, cap in caps:
        if cap is not None and most > cap:
            return (
                f"the policy holds up to {most} warm GPUs but {what} is {cap}: lower the headroom "
                "or raise --gpu-budget (headroom counts against it)"
            )
    return None


@dataclass(frozen=True)
class HeadroomSettings:
    headroom: str = knob(
        "none",
        env="EOPS_HEADROOM",
        metavar="POLICY",
        parse=check_policy_text,
        help="Warm GPU capacity the gateway keeps per GPU shape, sized by the planner's function: "
        "none, warm:K, scheduled:HH:MM=K,... (gateway local time) or predictive[:W] (W: target "
        "p95 wait, seconds). Counts against --gpu-budget; real work takes it first.",
    )
    target_wait_s: float = knob(
        10.0,
        env="EOPS_HEADROOM_TARGET_WAIT",
        unit="seconds",
        ge=0,
        le=3600,
        help="Target p95 time-to-start of predictive (predictive:W overrides it).",
    )
    lead_time_s: float | None = knob(
        None,
        env="EOPS_HEADROOM_LEAD_TIME",
        unit="seconds",
        ge=0,
        le=86_400,
        shown="the planner's default cluster: 460",
        help="Seconds from asking for a node to its GPU being ready, which predictive sizes for "
        "until the cluster has provisioned a node (then it uses the measured time).",
    )
    reaction_s: float = knob(
        40.0,
        env="EOPS_HEADROOM_REACTION",
        unit="seconds",
        ge=0,
        le=86_400,
        help="The autoscaler's reaction to a pending pod (GPU-pod delay + a scan interval), added "
        "to the measured provisioning time to make the lead time.",
    )
    scale_down_after_s: float = knob(
        600.0,
        env="EOPS_HEADROOM_SCALE_DOWN_AFTER",
        unit="seconds",
        gt=0,
        le=604_800,
        help="The cluster's scale-down-unneeded-time: when an idle node goes (predictive counts "
        "idle nodes that outlast the lead time as supply).",
    )
    sync_s: float = knob(
        5.0,
        env="EOPS_HEADROOM_SYNC",
        unit="seconds",
        gt=0,
        le=3600,
        help="Longest pause between two sizings of the warm capacity (admissions and ends also wake it).",
    )

    def policy(self) -> HeadroomPolicy:
        return parse_headroom(self.headroom, target_wait_s=self.target_wait_s, lead_time_s=self.lead_time_s)

    @property
    def enabled(self) -> bool:
        return not isinstance(self.policy(), NoHeadroom)
