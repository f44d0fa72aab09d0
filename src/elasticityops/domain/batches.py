"""A batch: many invocations of one function accepted in one request, stored in one transaction.

Each input is an invocation of its own (own id, timeline, retries, cost) that names its batch;
the batch itself is a small record (id, function, when, how many, idempotency key). Ids are
handed out in input order: the invocations' ids sort as their inputs came, so reading a batch's
invocations by id is reading them in input order."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from elasticityops.domain.invocations import State, new_invocation_id

BATCH_PREFIX = "bat-"
# `KEY#i` is each item's idempotency key: a retried batch finds its items by them too, and a key
# at the single route's longest (200) still fits the column (256) with any index.
_ITEM_KEY_SEP = "#"


@dataclass(frozen=True)
class Batch:
    id: str
    function: str
    created_at: datetime
    count: int
    idempotency_key: str | None = None


@dataclass(frozen=True)
class BatchStatus:
    """A batch and how many of its invocations are in each state."""

    batch: Batch
    counts: Mapping[State, int]

    @property
    def ended(self) -> int:
        return sum(n for state, n in self.counts.items() if state.terminal)

    @property
    def done(self) -> bool:
        return self.ended >= self.batch.count


def new_batch_id(random_bytes: Callable[[int], bytes] = os.urandom, *, at: datetime) -> str:
    """Time-ordered like an invocation id (the same form), with its own prefix."""
    return BATCH_PREFIX + new_invocation_id(random_bytes=random_bytes, at=at).removeprefix("inv-")


def ids_in_input_order(count: int, random_bytes: Callable[[int], bytes], *, at: datetime) -> list[str]:
    """`count` invocation ids, sorted: the i-th goes to the i-th input, so ids sort as inputs
    came (ids of one millisecond differ only in their random part, which alone would not)."""
    return sorted(new_invocation_id(random_bytes=random_bytes, at=at) for _ in range(count))


def item_key(batch_key: str | None, index: int) -> str | None:
    """The idempotency key of a batch's `index`-th invocation, derived from the batch's."""
    return None if batch_key is None else f"{batch_key}{_ITEM_KEY_SEP}{index}"
