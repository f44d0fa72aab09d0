"""Warm capacity in units a backend can hold: shapes, and how much of each the budget allows.

A warm unit (a placeholder pod, a CapacityBuffer chunk, a warm local slot) must ask for exactly
what the Job it stands in for asks, or the autoscaler warms a node the Job cannot use. Functions
that ask the same (GPU type and count, CPU, memory) share one pool: a `WarmShape`. Pure.

Real work comes first: warm capacity is what the GPU budget leaves after the GPUs in use
(`clamp_to_budget`), so an admitted invocation is never held back for headroom; it takes a warm
node, and the headroom shrinks to make room within the budget."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from elasticityops.domain.budget import GpuBudget


@dataclass(frozen=True, order=True)
class WarmShape:
    """What one warm unit asks for; `cpu` and `memory` as the backend's Job requests them
    (Kubernetes quantities; empty on the local backend, whose slots are whole GPUs)."""

    gpu_type: str
    gpu_count: int = 1
    cpu: str = ""
    memory: str = ""

    @property
    def key(self) -> str:
        """A short stable name for the shape, the same in every gateway process (object names,
        labels and metrics use it; a restart finds its objects by it)."""
        text = f"{self.gpu_type}/{self.gpu_count}/{self.cpu}/{self.memory}"
        return hashlib.sha256(text.encode()).hexdigest()[:10]

    def describe(self) -> str:
        parts = [f"{self.gpu_count}x {self.gpu_type}"]
        if self.cpu or self.memory:
            parts.append(f"cpu {self.cpu or '-'}, memory {self.memory or '-'}")
        return ", ".join(parts)


def clamp_to_budget(
    wanted: Mapping[WarmShape, int], budget: GpuBudget | None, in_use: Mapping[str, int]
) -> dict[WarmShape, int]:
    """Units of each shape to hold: what the policy wants, within what the budget leaves once
    the GPUs in use (`in_use`, per GPU type) are counted, so that in use plus headroom never
    exceeds a cap. Where a cap cannot give every shape all it wants, the shapes take one unit
    each in turn, those asking most first (ties by shape): a fair, deterministic split."""
    held = {shape: 0 for shape in wanted}
    type_left = {kind: max(0, cap - in_use.get(kind, 0)) for kind, cap in budget.per_type} if budget else {}
    total_left = (
        None if budget is None or budget.total is None else max(0, budget.total - sum(in_use.values()))
    )
    # A shape no cap bounds gets all it wants at once: the turns below are for splitting a cap
    # (warm:10^20 with no budget took one turn a unit, for ever, on the event loop).
    for shape in wanted:
        if shape.gpu_type not in type_left and total_left is None:
            held[shape] = max(0, wanted[shape])
    order = sorted(
        (s for s in wanted if wanted[s] > 0 and held[s] < wanted[s]), key=lambda s: (-wanted[s], s)
    )
    room = _Room(type_left, total_left)
    while True:
        # Whole turns in which every shape still asking gets its unit come in one step: one turn
        # a unit made a warm:100000 under a budget of a million take a second on the event loop.
        turns, asking = _whole_turns(order, held, wanted, room)
        if turns > 0:
            for shape in asking:
                room.give(held, shape, turns)
            continue
        # A cap that cannot give every shape still asking a unit: one turn, in order. Each such
        # turn leaves less room than one unit of each shape asks, so these turns are bounded by
        # the shapes and their GPU counts, never by the ask.
        if not _one_turn(order, held, wanted, room):
            break
    return held


@dataclass
class _Room:
    """GPUs a budget still leaves for warm units: per capped type, and in all (None: no cap)."""

    by_type: dict[str, int]
    total: int | None

    def fits(self, shape: WarmShape) -> bool:
        left = self.by_type.get(shape.gpu_type)
        need = shape.gpu_count
        return (left is None or left >= need) and (self.total is None or self.total >= need)

    def give(self, held: dict[WarmShape, int], shape: WarmShape, units: int) -> None:
        """`units` more of `shape` held, their GPUs taken from the room."""
        held[shape] += units
        if shape.gpu_type in self.by_type:
            self.by_type[shape.gpu_type] -= units * shape.gpu_count
        if self.total is not None:
            self.total -= units * shape.gpu_count


def _one_turn(
    order: list[WarmShape], held: dict[WarmShape, int], wanted: Mapping[WarmShape, int], room: _Room
) -> bool:
    """One unit to each shape still asking that fits, in order; whether any got one."""
    progressed = False
    for shape in order:
        if held[shape] < wanted[shape] and room.fits(shape):
            room.give(held, shape, 1)
            progressed = True
    return progressed


def _whole_turns(
    order: list[WarmShape], held: Mapping[WarmShape, int], wanted: Mapping[WarmShape, int], room: _Room
) -> tuple[int, list[WarmShape]]:
    """How many turns in a row give each shape still asking (and fitting) one unit without a cap
    running short or a shape getting more than it asks, and those shapes."""
    asking = [s for s in order if held[s] < wanted[s] and room.fits(s)]
    if not asking:
        return 0, []
    turns = min(wanted[s] - held[s] for s in asking)
    per_type: dict[str, int] = {}
    for shape in asking:
        per_type[shape.gpu_type] = per_type.get(shape.gpu_type, 0) + shape.gpu_count
    for kind, need in per_type.items():
        if kind in room.by_type:
            turns = min(turns, room.by_type[kind] // need)
    if room.total is not None:
        turns = min(turns, room.total // sum(per_type.values()))
    return turns, asking


def gpus_by_type(units: Mapping[WarmShape, int]) -> dict[str, int]:
    """GPUs the warm units hold, per GPU type."""
    out: dict[str, int] = {}
    for shape, count in units.items():
        if count:
            out[shape.gpu_type] = out.get(shape.gpu_type, 0) + count * shape.gpu_count
    return out
