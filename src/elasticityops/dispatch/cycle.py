"""One admission pass over a snapshot: which queued invocations to launch now and which to fail
because they can never run. Pure; `domain.admission.admit` makes the ordering decision."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from elasticityops.domain.admission import AdmissionSnapshot, QueuedItem, admit
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.invocations import FailureReason, Invocation, State
from elasticityops.domain.ports import Change

_FROM_QUEUED = frozenset({State.queued})


@dataclass(frozen=True)
class CyclePlan:
    admit: list[Invocation]  # in launch order
    fail: list[Change]  # queued invocations that can never run


def plan_cycle(
    *,
    queued: Sequence[Invocation],
    active: Mapping[tuple[str, int], int],
    functions: Mapping[str, FunctionSpec],
    versions: Mapping[tuple[str, int], FunctionSpec],
    free_gpus: int | None,
    total_gpus: int | None,
    gpu_budget: int | None,
    at: datetime,
) -> CyclePlan:
    """`queued` oldest first; `active` how many are pending or running per (function, version);
    `functions` the specs that exist now, by name (a queued invocation whose function is not
    there was deleted); `versions` the specs by (name, version) that the queued invocations were
    accepted with, and those the active ones run: what each asks GPUs for (a missing one was
    never kept)."""
    active_by_function: Counter[str] = Counter()
    for (name, _version), count in active.items():
        active_by_function[name] += count
    fail: list[Change] = []
    runnable: list[Invocation] = []
    limits = ((total_gpus, "the backend offers"), (gpu_budget, "the GPU budget allows"))
    ceiling = min(((n, what) for n, what in limits if n is not None), default=None)
    gpus: dict[str, int] = {}
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
        elif ceiling is not None and spec.gpu.count > ceiling[0]:
            # Queueing it would block everything behind it forever (admission keeps strict order).
            most, what = ceiling
            too_big = (
                f"gpu.count is {spec.gpu.count} but {what} at most {most} GPUs at once; "
                "lower gpu.count or raise the limit (--gpus, EOPS_GPU_BUDGET)"
            )
            fail.append(_fail(inv, at, FailureReason.no_capacity, too_big))
        else:
            runnable.append(inv)
            gpus[inv.id] = spec.gpu.count
    in_use = gpus_held(active, versions)
    snapshot = AdmissionSnapshot(
        queued=[QueuedItem(i.id, i.function, i.priority, gpus[i.id]) for i in runnable],
        free_gpus=free_gpus,
        gpu_budget_left=None if gpu_budget is None else max(0, gpu_budget - in_use),
        active_by_function=active_by_function,
        max_concurrency={name: spec.max_concurrency for name, spec in functions.items()},
    )
    by_id = {i.id: i for i in runnable}
    return CyclePlan(admit=[by_id[i] for i in admit(snapshot)], fail=fail)


def gpus_held(active: Mapping[tuple[str, int], int], versions: Mapping[tuple[str, int], FunctionSpec]) -> int:
    """GPUs held by pending and running invocations: the one count, from the store's active
    counts per (function, version) and the gpu.count of the version each runs (one each, at
    least, for a version whose spec is not kept)."""
    return sum(count * (versions[key].gpu.count if key in versions else 1) for key, count in active.items())


def _fail(inv: Invocation, at: datetime, reason: FailureReason, message: str) -> Change:
    """A queued invocation that can never run fails at once, while still queued."""
    return Change(inv.id, State.failed, at, from_states=_FROM_QUEUED, reason=reason, message=message)
