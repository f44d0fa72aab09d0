"""A job's end that says its node went away under it (a spot reclaim, a deleted node): the
invocation goes back to the queue as its next attempt, or fails `evicted`, as its function's
`retries` say. `domain.retry.end_of_lost_node` decides; this gathers what it needs (the row as
it stands, the function's retries) and applies the one compare-and-set. The dispatcher asks
here before it records such an end the usual way."""

from __future__ import annotations

from elasticityops.catalog.function_cache import FunctionCache
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.invocations import Invocation
from elasticityops.domain.ports import InvocationRecords
from elasticityops.domain.retry import end_of_lost_node


async def end_lost_node(
    store: InvocationRecords, functions: FunctionCache, event: BackendEvent
) -> Invocation | None:
    """The invocation requeued or failed for the lost node `event` tells of; None where it tells
    of none, or of an attempt that is not the current one, or the compare-and-set lost: then
    the event is recorded as any other (its fold leaves an ended or moved-on one alone)."""
    finished = event.finished
    if finished is None or (finished.lost_node is None and finished.preempted_by is None):
        return None
    inv = await store.get_invocation(event.invocation_id)
    if inv is None or (event.attempt is not None and event.attempt != inv.attempt):
        return None
    spec = await functions.version(inv.function, inv.spec_version)
    # A version not kept any more: its retries are unknown, so it is not retried.
    change = end_of_lost_node(inv, finished, spec.retries if spec is not None else 0, finished.at)
    return None if change is None else await store.apply(change)
