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

Measured over several windows at once (`shares` of the longest, `means`): the sizing takes the
shortest one whose estimate is precise enough for the load it sizes (sizing.py, `run_time_for`),
since a run-time mix that changes within the hours (real traffic's did) is followed late by a
long window, and a short one holds too few runs where they are long.

Pure bookkeeping in O(windows) per event (amortised); times are passed in, in seconds, and starts
come in time order (the planner's virtual clock, the controller's wall clock)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

Key = TypeVar("Key")

RUN_TIME_SHARES = (0.125, 0.25, 0.5, 1.0)
"""The windows the planner and the controller measure the run time over, as shares of their
run-time window (7,200 s: 15, 30, 60 and 120 minutes)."""

_OPEN, _ENDED, _GONE = 0, 1, 2
_COMPACT_AFTER = 65_536  # runs past the longest window kept before the lists are cut


@dataclass
class _Window:
    """One window's sums over the runs that started within it: from run `first` on."""

    span_s: float
    first: int = 0  # index of the oldest run within the window
    ended: int = 0
    ended_s: float = 0.0  # sum of the ended runs' run times
    running: int = 0
    start_sum: float = 0.0  # sum of the running runs' start times

    def forget(self, state: int, start_s: float, run_s: float) -> None:
        if state == _ENDED:
            self.ended -= 1
            self.ended_s -= run_s
        elif state == _OPEN:
            self.running -= 1
            self.start_sum -= start_s

    def mean_s(self, now_s: float, min_ended: int) -> float | None:
        if self.ended < min_ended:
            return None
        running_s = self.running * now_s - self.start_sum
        return (self.ended_s + max(0.0, running_s)) / self.ended


class RunCohort(Generic[Key]):
    """Runs started within the last `window_s`, each known by a key (a request index, an
    invocation id) until it ends or is dropped; measured over `shares` of that window too."""

    def __init__(self, window_s: float, min_ended: int, shares: tuple[float, ...] = (1.0,)) -> None:
        if window_s <= 0 or min_ended < 1:
            raise ValueError("window_s must be > 0 and min_ended >= 1")
        if not shares or any(not 0.0 < f <= 1.0 for f in shares) or max(shares) != 1.0:
            raise ValueError("shares must be in (0, 1], the whole window among them")
        self.window_s = window_s
        self.min_ended = min_ended
        self._windows = [_Window(window_s * f) for f in sorted(set(shares))]  # shortest first
        self._longest = self._windows[-1]
        # By run index (start order), from index `_base` on: start, run time, state, key.
        self._base = 0
        self._start: list[float] = []
        self._run: list[float] = []
        self._state: list[int] = []
        self._key: list[Key] = []
        self._open: dict[Key, int] = {}  # running, within the window: key -> run index

    def started(self, key: Key, at_s: float) -> None:
        """`key` started running at `at_s` (a restart replaces a run still open)."""
        self.dropped(key)
        self._open[key] = self._base + len(self._start)
        self._start.append(at_s)
        self._run.append(0.0)
        self._state.append(_OPEN)
        self._key.append(key)
        for w in self._windows:
            w.running += 1
            w.start_sum += at_s

    def ended(self, key: Key, at_s: float) -> None:
        """`key` finished at `at_s`; a run not open (started before the window) is ignored."""
        k = self._open.pop(key, None)
        if k is None:
            return
        i = k - self._base
        start = self._start[i]
        run = max(0.0, at_s - start)
        self._state[i] = _ENDED
        self._run[i] = run
        for w in self._windows:
            if k >= w.first:
                w.running -= 1
                w.start_sum -= start
                w.ended += 1
                w.ended_s += run

    def dropped(self, key: Key) -> None:
        """`key`'s run was cut short (preempted, its node lost): no measure of a run time."""
        k = self._open.pop(key, None)
        if k is None:
            return
        i = k - self._base
        self._state[i] = _GONE
        for w in self._windows:
            if k >= w.first:
                w.running -= 1
                w.start_sum -= self._start[i]

    def mean_s(self, now_s: float) -> float | None:
        """Mean run time over the whole window at `now_s`, or None with fewer than `min_ended`
        ended runs."""
        self._expire(now_s)
        return self._longest.mean_s(now_s, self.min_ended)

    def means(self, now_s: float) -> tuple[tuple[float, float, int], ...]:
        """(window, mean run time, ended runs) for each window with at least `min_ended` ended
        runs, shortest first."""
        self._expire(now_s)
        out = []
        for w in self._windows:
            mean = w.mean_s(now_s, self.min_ended)
            if mean is not None:
                out.append((w.span_s, mean, w.ended))
        return tuple(out)

    def _expire(self, now_s: float) -> None:
        end = self._base + len(self._start)
        for w in self._windows:
            before = now_s - w.span_s
            while w.first < end and self._start[w.first - self._base] < before:
                i = w.first - self._base
                w.forget(self._state[i], self._start[i], self._run[i])
                if w is self._longest and self._state[i] == _OPEN:
                    del self._open[self._key[i]]  # still running, started before the window
                w.first += 1
            if w.first == end:  # keep the float sums from drifting over a long run
                w.ended_s = 0.0
                w.start_sum = 0.0
        gone = self._longest.first - self._base
        if gone >= _COMPACT_AFTER:
            for column in (self._start, self._run, self._state, self._key):
                del column[:gone]
            self._base += gone
