"""Where a queued invocation stands, and why it waits: pure functions over what the store counts.

The position is 1-based among the queued invocations that compete for the same GPU type (any of
its types, for a function that lists several), in admission order (domain.admission: priority
rank, then the functions' turns, then acceptance); the reason names the first limit that holds
it back, in the order admission meets them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from elasticityops.domain.budget import GpuBudget, room_by_type, total_room
from elasticityops.domain.functions import FunctionSpec

WAITING = "waiting for the dispatcher"


@dataclass(frozen=True)
class QueueStatus:
    position: int
    reason: str


@dataclass(frozen=True)
class QueueFacts:
    """What the gateway knows now about the limits a queued invocation meets."""

    function: str
    gpu_type: str
    gpus: int  # what it asks for
    max_concurrency: int | None  # of its function now; None: the function is gone
    function_active: int  # its function's pending and running invocations
    in_use: Mapping[str, int]  # GPUs held per type
    budget: GpuBudget | None
    backend_free: int | None
    backend_total: int | None
    paused: bool = False
    headroom: Mapping[str, int] | None = None  # GPUs held per type for warm capacity
    spill_to: tuple[str, ...] = ()  # the types after gpu_type its function lists, in order


def queue_position(
    gpu_type: str,
    ahead: Mapping[tuple[str, int], int],
    versions: Mapping[tuple[str, int], FunctionSpec],
    spill_to: tuple[str, ...] = (),
) -> int:
    """1 + the queued invocations ahead of it (`ahead`, by function and version, as the store
    counts them) that ask for one of its GPU types (`gpu_type`, then `spill_to`). One whose
    version is not kept is not counted: admission fails it instead of running it."""
    mine = {gpu_type, *spill_to}
    same = sum(
        count
        for key, count in ahead.items()
        if key in versions and mine.intersection(versions[key].gpu.types)
    )
    return 1 + same


def queue_reason(facts: QueueFacts) -> str:
    """A short sentence: the first limit that holds it back, or WAITING when none does (the
    next admission pass takes it, or takes those ahead of it first)."""
    if facts.paused:
        return "the dispatcher is paused (--paused, EOPS_DISPATCH_PAUSED): nothing is admitted"
    if facts.max_concurrency is not None and facts.function_active >= facts.max_concurrency:
        return f"function {facts.function} is at its max_concurrency ({facts.max_concurrency})"
    headroom = facts.headroom or {}
    budget = facts.budget
    if budget is not None:
        # The room admission computes (domain.budget), so the reason never disagrees with it.
        room = room_by_type(budget, facts.in_use, headroom)
        full: list[str] = []
        for kind in (facts.gpu_type, *facts.spill_to):
            cap = budget.cap(kind)
            if cap is None or facts.gpus <= room[kind]:
                full = []  # admission takes it on this type once those ahead are through
                break
            full.append(_full(f"the GPU budget for {kind}", room[kind], cap, facts, kind))
        if full:
            return "; ".join(full)
        total = total_room(budget, facts.in_use, headroom)
        if budget.total is not None and total is not None and facts.gpus > total:
            return _full("the GPU budget", total, budget.total, facts, None)
    if facts.backend_free is not None and facts.backend_free < facts.gpus:
        of = (
            ""
            if facts.backend_total is None
            else f" ({facts.backend_total - facts.backend_free} of {facts.backend_total})"
        )
        return f"the backend's GPUs are all taken{of}"
    return WAITING


def _full(what: str, room: int, cap: int, facts: QueueFacts, gpu_type: str | None) -> str:
    in_use = f"{_held(facts, gpu_type)} of {cap} in use"
    if room == 0:
        return f"{what} is full ({in_use})"
    return f"{what} has room for {room} GPUs and it needs {facts.gpus} ({in_use})"


def _held(facts: QueueFacts, gpu_type: str | None) -> str:
    """GPUs in use (of one type, or all), with the headroom held beside them when there is any."""
    headroom = facts.headroom or {}
    if gpu_type is None:
        used, extra = sum(facts.in_use.values()), sum(headroom.values())
    else:
        used, extra = facts.in_use.get(gpu_type, 0), headroom.get(gpu_type, 0)
    return f"{used} + {extra} headroom" if extra else str(used)
