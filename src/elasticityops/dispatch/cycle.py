"""One admission pass over a snapshot: which queued invocations to launch now and which to fail
because they can never run. Pure; `domain.admission.admit` makes the ordering decision."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from elasticityops.domain.admission import AdmissionSnapshot, QueuedItem, admission
from elasticityops.domain.budget import GpuBudget, room_by_type, total_room
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.gpus_held import ActiveCounts, gpus_held_by_type
from elasticityops.domain.invocations import FailureReason, Invocation, State
from elasticityops.domain.ports import Change

_FROM_QUEUED = frozenset({State.queued})


@dataclass(frozen=True)
class CyclePlan:
    admit: list[Invocation]  # in launch order, each with the GPU type it is admitted on
    fail: list[Change]  # queued invocations that can never run
    look_further: bool = False
    """Some of `queued` wait for their own GPU type or function while capacity all share is
    left: queued work behind what was read (another type) may fit now."""
    snapshot: AdmissionSnapshot | None = None
    """What admission decided over (preemption looks at what it left waiting)."""


def plan_cycle(
    *,
    queued: Sequence[Invocation],
    active: ActiveCounts,
    functions: Mapping[str, FunctionSpec],
    versions: Mapping[tuple[str, int], FunctionSpec],
    free_gpus: int | None,
    total_gpus: int | None,
    gpu_budget: GpuBudget | None,
    at: datetime,
    headroom: Mapping[str, int] | None = None,
) -> CyclePlan:
    """`queued` in admission order or oldest first (admission sorts by priority itself);
    `active` how many are pending or running per (function, version, GPU type);
    `functions` the specs that exist now, by name (a queued invocation whose function is not
    there was deleted); `versions` the specs by (name, version) that the queued invocations were
    accepted with, and those the active ones run: what each asks GPUs for (a missing one was
    never kept). `headroom`: GPUs per type that real work may not take, counted against the
    budget like GPUs in use. The gateway passes none: its warm capacity yields to real work
    (the headroom controller keeps it within what the budget leaves, headroom/controller.py)."""
    held_for = headroom or {}
    active_by_function: Counter[str] = Counter()
    for (name, _version, _type), count in active.items():
        active_by_function[name] += count
    fail: list[Change] = []
    items: list[QueuedItem] = []
    for inv in queued:
        spec = versions.get((inv.function, inv.spec_version))
        if inv.function not in functions:
            deleted = f"function {inv.function!r} was deleted before this invocation could run"
            fail.append(_fail(inv, at, FailureReason.function_deleted, deleted))
        elif spec is None:
            unknown = (
                f"version {inv.spec_version} of function {inv.function!r} is not kept (it was "
                "replaced before the gateway kept every version); invoke it again"
            )
            fail.append(_fail(inv, at, FailureReason.launch_error, unknown))
        elif (too_big := _never_fits(spec, total_gpus, gpu_budget)) is not None:
            # Queueing it would block its type forever (admission keeps strict order).
            fail.append(_fail(inv, at, FailureReason.no_capacity, too_big))
        else:
            # Only the types it can ever fit: waiting on one it never fits would hold back that
            # type's queue for nothing.
            first, *rest = _fitting_types(spec, gpu_budget)
            items.append(QueuedItem(inv.id, inv.function, inv.priority, spec.gpu.count, first, tuple(rest)))
    in_use = gpus_held_by_type(active, versions)
    snapshot = AdmissionSnapshot(
        queued=items,
        free_gpus=free_gpus,
        gpu_budget_left=total_room(gpu_budget, in_use, held_for),
        active_by_function=active_by_function,
        max_concurrency={name: spec.max_concurrency for name, spec in functions.items()},
        type_room=room_by_type(gpu_budget, in_use, held_for),
    )
    by_id = {i.id: i for i in queued}
    decided = admission(snapshot)
    further = not decided.stopped and len(decided.chosen) < len(items)
    admitted = [replace(by_id[i], gpu_type=decided.on_type[i]) for i in decided.chosen]
    return CyclePlan(admit=admitted, fail=fail, look_further=further, snapshot=snapshot)


def _never_fits(spec: FunctionSpec, total_gpus: int | None, budget: GpuBudget | None) -> str | None:
    """Why an invocation of `spec` can never start (it asks more GPUs than a limit ever allows,
    on every GPU type it lists), or None when it can."""
    limits = [
        (total_gpus, "the backend offers", "--gpus"),
        (None if budget is None else budget.total, "the GPU budget allows", "EOPS_GPU_BUDGET"),
    ]
    if not _fitting_types(spec, budget):
        caps = [(kind, budget.cap(kind) if budget is not None else None) for kind in spec.gpu.types]
        biggest = max(cap for _, cap in caps if cap is not None)
        names = " and ".join(kind for kind, _ in caps)
        limits.append((biggest, f"the GPU budget for {names} allows", "EOPS_GPU_BUDGET"))
    for most, what, knob in limits:
        if most is not None and spec.gpu.count > most:
            return (
                f"gpu.count is {spec.gpu.count} but {what} at most {most} GPUs at once; "
                f"lower gpu.count or raise the limit ({knob})"
            )
    return None


def _fitting_types(spec: FunctionSpec, budget: GpuBudget | None) -> list[str]:
    """The spec's GPU types, in order, whose own budget (if capped) can ever hold one of it."""
    caps = [(kind, None if budget is None else budget.cap(kind)) for kind in spec.gpu.types]
    return [kind for kind, cap in caps if cap is None or spec.gpu.count <= cap]


def _fail(inv: Invocation, at: datetime, reason: FailureReason, message: str) -> Change:
    """A queued invocation that can never run fails at once, while still queued."""
    return Change(inv.id, State.failed, at, from_states=_FROM_QUEUED, reason=reason, message=message)
