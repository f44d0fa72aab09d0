"""The mean run time of requests, measured while many of them are still running.

The headroom sizing needs the mean run time S (offered load = arrival rate x S). The mean of
the runs that have ended is biased low wherever the long runs have not ended yet: in a cluster
under an hour old it was 255 s against a true 290 s, and the pool sized on it sat at the busy
count while the morning load rose (BENCHMARKS.md, "What the planner says of such windows").
`RunCohort` counts the runs still going, as survival analysis does with censored data: over
the runs that started in the last `window_s`, the time each has run so far (its whole run if it
ended) over the number that ended; the maximum-likelihood mean of an exponential run time,
and for other shapes close to the mean once most runs of the window have ended. Fewer than
`min_ended` ended runs answer None: with a handful ended, the few long ones still running
weigh too much (a cluster's first minutes asked for 400 nodes with a minimum of one).

Pure bookkeeping in O(1) per event (amortised); times are passed in, in seconds, and starts
come in time order (the planner's virtual clock, the controller's wall clock)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Generic, TypeVar

Key = TypeVar("Key")


@dataclass
class _Run:
    start_s: float
    run_s: float | None = None  # set when it ends
    gone: bool = False  # dropped: counts for nothing


class RunCohort(Generic[Key]):
    """Runs started within the last `window_s`, each known by a key (a request index, an
    invocation id) until it ends or is dropped."""

    def __init__(self, window_s: float, min_ended: int) -> None:
        if window_s <= 0 or min_ended < 1:
            raise ValueError("window_s must be > 0 and min_ended >= 1")
        self.window_s = window_s
        self.min_ended = min_ended
        self._order: deque[tuple[Key, _Run]] = deque()  # in start order, oldest first
        self._open: dict[Key, _Run] = {}  # running, within the window
        self._ended = 0
        self._ended_s = 0.0  # sum of the ended runs' run times
        self._start_sum = 0.0  # sum of the running runs' start times

    def started(self, key: Key, at_s: float) -> None:
        """`key` started running at `at_s` (a restart replaces a run still open)."""
        self.dropped(key)
        run = _Run(at_s)
        self._order.append((key, run))
        self._open[key] = run
        self._start_sum += at_s

    def ended(self, key: Key, at_s: float) -> None:
        """`key` finished at `at_s`; a run not open (started before the window) is ignored."""
        run = self._open.pop(key, None)
        if run is None:
            return
        self._start_sum -= run.start_s
        run.run_s = max(0.0, at_s - run.start_s)
        self._ended += 1
        self._ended_s += run.run_s

    def dropped(self, key: Key) -> None:
        """`key`'s run was cut short (preempted, its node lost): no measure of a run time."""
        run = self._open.pop(key, None)
        if run is not None:
            self._start_sum -= run.start_s
            run.gone = True

    def mean_s(self, now_s: float) -> float | None:
        """Mean run time at `now_s`, or None with fewer than `min_ended` ended runs."""
        self._expire(now_s - self.window_s)
        if self._ended < self.min_ended:
            return None
        running_s = len(self._open) * now_s - self._start_sum
        return (self._ended_s + max(0.0, running_s)) / self._ended

    def _expire(self, before_s: float) -> None:
        order = self._order
        while order and order[0][1].start_s < before_s:
            key, run = order.popleft()
            if run.gone:
                continue
            if run.run_s is not None:
                self._ended -= 1
                self._ended_s -= run.run_s
            else:
                del self._open[key]  # still running, started before the window
                self._start_sum -= run.start_s
        if not order:  # keep the float sums from drifting over a long run
            self._ended_s = 0.0
            self._start_sum = 0.0
