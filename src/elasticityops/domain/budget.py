"""The GPU budget (EOPS_GPU_BUDGET, --gpu-budget): the quota admission keeps GPUs in use (plus
headroom) within. Either one number for all GPU types together, or a number per GPU type
(`nvidia-tesla-t4=4500,nvidia-l4=200`); a type a per-type budget does not name is not capped,
as with no budget at all (the backend, or the cluster's own quota, is then the only limit)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from elasticityops.domain.functions import KNOWN_GPU_TYPES

MAX_GPUS = 1_000_000
"""The largest budget, in all or for one type: far above any fleet, and small enough that nothing
sized by a budget (the headroom clamp's turns) can run for long."""


FORMS = (
    f"a whole number 0 to {MAX_GPUS} (all GPU types together) or TYPE=N,TYPE=N "
    "(e.g. nvidia-tesla-t4=8,nvidia-l4=2)"
)


@dataclass(frozen=True)
class GpuBudget:
    total: int | None = None
    """Most GPUs of all types together; None: no overall cap."""
    per_type: tuple[tuple[str, int], ...] = ()
    """(GPU type, most GPUs of that type), in the order given; a type not named is not capped."""

    def cap(self, gpu_type: str) -> int | None:
        """Most GPUs of `gpu_type` at once (None: not capped by type)."""
        return dict(self.per_type).get(gpu_type)

    def render(self) -> str:
        """The text form, as EOPS_GPU_BUDGET takes it (parse_gpu_budget(render()) == self)."""
        if self.total is not None:
            return str(self.total)
        return ",".join(f"{kind}={count}" for kind, count in self.per_type)


def parse_gpu_budget(raw: Any) -> GpuBudget | None:
    """`raw` (a number, or text from a variable, flag or YAML) as a budget; a bad one raises
    ValueError saying what is wrong and what to write instead."""
    if isinstance(raw, GpuBudget):
        return raw
    if isinstance(raw, bool):
        raise ValueError(f"invalid value {raw!r}; use {FORMS}")
    text = str(raw).strip()
    if text == "":
        return None
    if "=" not in text:
        return GpuBudget(total=_count(text, text))
    seen: dict[str, int] = {}
    for item in text.split(","):
        kind, eq, number = (part.strip() for part in item.partition("="))
        if not item.strip():
            raise ValueError(f"invalid value {text!r}: an empty item; use {FORMS}")
        if not eq:
            raise ValueError(
                f"invalid value {text!r}: {item.strip()!r} has no GPU type; a per-type budget "
                f"names every type (TYPE=N), use {FORMS}"
            )
        if kind not in KNOWN_GPU_TYPES:
            raise ValueError(
                f"invalid value {text!r}: unknown GPU type {kind!r}; use one of: {', '.join(KNOWN_GPU_TYPES)}"
            )
        if kind in seen:
            raise ValueError(f"invalid value {text!r}: {kind} is given twice; name each type once")
        seen[kind] = _count(number, text, kind)
    return GpuBudget(per_type=tuple(seen.items()))


def _count(number: str, text: str, kind: str | None = None) -> int:
    """A whole number 0 to MAX_GPUS (ASCII digits only: `int()` would take `٣` or `1_000`)."""
    where = f" for {kind}" if kind else ""
    if not (number.isascii() and number.isdigit()):
        raise ValueError(
            f"invalid value {text!r}: {number!r}{where} is not a whole number 0 to {MAX_GPUS}; use {FORMS}"
        )
    if len(number) > len(str(MAX_GPUS)) or int(number) > MAX_GPUS:
        raise ValueError(f"invalid value {text!r}: {number}{where} is above {MAX_GPUS} GPUs; use {FORMS}")
    return int(number)


def room_by_type(
    budget: GpuBudget | None, in_use: Mapping[str, int], headroom: Mapping[str, int]
) -> dict[str, int]:
    """GPUs each capped type still allows (never below 0): its cap less its GPUs in use and the
    headroom held for it. Types without a cap are absent."""
    if budget is None:
        return {}
    return {kind: max(0, cap - in_use.get(kind, 0) - headroom.get(kind, 0)) for kind, cap in budget.per_type}


def total_room(
    budget: GpuBudget | None, in_use: Mapping[str, int], headroom: Mapping[str, int]
) -> int | None:
    """GPUs the overall cap still allows (None: no overall cap); headroom of every type counts."""
    if budget is None or budget.total is None:
        return None
    return max(0, budget.total - sum(in_use.values()) - sum(headroom.values()))
