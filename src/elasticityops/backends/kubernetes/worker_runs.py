"""Which MultiKueue workers each invocation's attempt ran in, and the runs that are over there
(watching.py tells them, for their run_again charge). Kept past the invocation's end: MultiKueue
may have dispatched the same attempt again after taking it back from a worker whose pod went
on, and that run can end long after the record did (a lost worker's pod is seen again only once
the worker is back); and a run over before the second worker's began counts once it has."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

from elasticityops.domain.node_seconds import WorkerRun

LIMIT = 10_000
"""Invocations remembered, the newest kept: a run that ends after this many newer invocations
ran in the workers is not charged again (its KueueRanAgain note was already written)."""


@dataclass
class _Runs:
    attempt: int
    workers: set[str] = field(default_factory=set)
    over: dict[str, WorkerRun] = field(default_factory=dict)  # by pod uid


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

    def over(self, invocation_id: str, attempt: int, pod_uid: str, run: WorkerRun) -> tuple[WorkerRun, ...]:
        """That pod's run is over: every run of the attempt over so far, where this one is news
        and the attempt has run in two workers or more; none otherwise (a run kept now is told
        with the next one)."""
        runs = self._runs(invocation_id, attempt)
        if runs is None or pod_uid in runs.over:
            return ()
        runs.over[pod_uid] = run
        return tuple(runs.over.values()) if len(runs.workers) > 1 else ()

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
