"""A queued invocation's queue position and reason, read from the store and the dispatcher's
settings now (GET /v1/invocations/{id}); the decisions are domain/queue.py's."""

from __future__ import annotations

from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.dispatch.settings import DispatchSettings
from elasticityops.domain.gpus_held import by_version, gpus_held_by_type
from elasticityops.domain.invocations import Invocation, State
from elasticityops.domain.ports import Backend, InvocationStore
from elasticityops.domain.queue import QueueFacts, QueueStatus, queue_position, queue_reason


async def queue_status(
    inv: Invocation,
    store: InvocationStore,
    functions: FunctionCache,
    backend: Backend,
    settings: DispatchSettings,
) -> QueueStatus | None:
    """Position and reason of a queued invocation (or, with Kueue admission, one whose Job waits
    in Kueue's queue, as the backend sees it); None for one not waiting, or one whose spec
    version is not kept (admission fails it instead)."""
    if inv.state is State.pending:
        return backend.queue_status(inv)
    if inv.state is not State.queued:
        return None
    spec = await functions.version(inv.function, inv.spec_version)
    if spec is None:
        return None
    # Grouped counts only: the store never hands over rows, however long the queue.
    ahead = await store.queued_ahead(inv)
    active = await store.active_counts_by_type()
    versions = await functions.versions([*ahead, *by_version(active)])
    current = await functions.get(inv.function)
    facts = QueueFacts(
        function=inv.function,
        gpu_type=spec.gpu.type,
        gpus=spec.gpu.count,
        max_concurrency=None if current is None else current.spec.max_concurrency,
        function_active=sum(n for (name, _, _), n in active.items() if name == inv.function),
        in_use=gpus_held_by_type(active, versions),
        budget=settings.gpu_budget,
        backend_free=backend.free_gpus(),
        backend_total=backend.total_gpus(),
        paused=settings.paused,
        spill_to=spec.gpu.types[1:],
    )
    position = queue_position(spec.gpu.type, ahead, versions, spec.gpu.types[1:])
    return QueueStatus(position, queue_reason(facts))
