"""Which MultiKueue workers each invocation's attempt ran in, and the runs that ended there, told
once each (watching.py). Kept past the invocation's end: MultiKueue may have dispatched the
same attempt again after taking it back from a worker whose pod went on, and that run can end
long after the record did (a lost worker's pod is seen again only once the worker is back)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

LIMIT = 10_000
"""Invocations remembered, the newest kept: a run that ends after this many newer invocations
ran in the workers is not charged again (its KueueRanAgain note was already written)."""


@dataclass
class _Runs:
    attempt: int
    workers: set[str] = field(default_factory=set)
    told: set[str] = field(default_factory=set)  # pods (by uid) whose run's end was told


class WorkerRuns:
    def __init__(self, limit: int = LIMIT) -> None:
        self._limit = limit
        self._by_invocation: OrderedDict[str, _Runs] = OrderedDict()

    def ran(self, invocation_id: str, attempt: int, worker: str) -> bool:
        """`attempt` has run in `worker`: whether that is news. An older attempt's run counts
        for nothing; a newer attempt starts afresh."""
        runs = self._runs(invocation_id, attempt)
        if runs is None or worker in runs.workers:
            return False
        runs.workers.add(worker)
        return True

    def workers(self, invocation_id: str, attempt: int) -> frozenset[str]:
        """The workers `attempt` ran in so far (none for an older attempt)."""
        runs = self._by_invocation.get(invocation_id)
        return frozenset() if runs is None or runs.attempt != attempt else frozenset(runs.workers)

    def first_end(self, invocation_id: str, attempt: int, pod_uid: str) -> bool:
        """Whether this is the first time the end of that pod's run is told."""
        runs = self._runs(invocation_id, attempt)
        if runs is None or pod_uid in runs.told:
            return False
        runs.told.add(pod_uid)
        return True

    def _runs(self, invocation_id: str, attempt: int) -> _Runs | None:
        runs = self._by_invocation.get(invocation_id)
        if runs is not None and attempt < runs.attempt:
            return None
        if runs is None or attempt > runs.attempt:
            runs = _Runs(attempt)
        self._by_invocation[invocation_id] = runs
        self._by_invocation.move_to_end(invocation_id)
        while len(self._by_invocation) > self._limit:
            self._by_invocation.popitem(last=False)
        return runs
