"""What the headroom controller has seen of the traffic of one warm shape, turned into the
`HeadroomObservation` the planner's sizing function takes.

The same windows and the same measures as the planner's model (planner/model/engine.py): the
recent and slow arrival rates, the trend over two trend windows, mean busy nodes over the slow
window, the mean run time of the requests of the run-time window (those still running
counted by their time so far, domain/headroom/run_times.py), and the share of the requests of the
feedback window that started (or still wait) later than the target. Kept in memory and fed by
the dispatcher, which sees every admission, start and end; after a restart the windows fill
again from empty, as the planner's do at a trace's start. Time is passed in (seconds since the
epoch), so this is pure bookkeeping that tests drive with any clock."""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from dataclasses import dataclass

from elasticityops.domain.headroom.run_times import RUN_TIME_SHARES, RunCohort
from elasticityops.domain.headroom.sizing import HeadroomObservation

# The arrival trend is also measured over these shares of the trend window (the sizing picks
# the shortest it can trust: sizing.py trend_for), as the planner's model does.
TREND_SHARES = (0.25, 0.5, 1.0)


@dataclass(frozen=True)
class TrafficWindows:
    """Seconds; the planner's defaults (planner/settings.py), so the controller sizes as the
    planner predicts."""

    rate_s: float = 60.0
    slow_s: float = 1800.0
    trend_s: float = 7200.0
    feedback_s: float = 86400.0
    run_time_s: float = 7200.0
    run_time_min_ended: int = 100


@dataclass(frozen=True)
class ClusterPicture:
    """The capacity side of one shape, as the backend sees it now (see HeadroomObservation for
    each field's meaning)."""

    free_nodes: int = 0
    provisioning_nodes: int = 0
    placeholders_running: int = 0
    placeholders_pending: int = 0
    scale_down_in_s: tuple[float, ...] = ()
    lead_time_s: float | None = None


class TrafficLog:
    """Admissions, starts and ends of one shape's invocations, over the windows."""

    def __init__(self, windows: TrafficWindows, late_after_s: float, started_at: float) -> None:
        self.windows = windows
        self.late_after_s = late_after_s
        self._born = started_at
        self._arrivals: list[float] = []  # accepted times, sorted
        self._late: list[float] = []  # accepted times of those that started late, sorted
        self._waiting: dict[str, float] = {}  # admitted, not started: id -> accepted time
        self._running: set[str] = set()
        self._requeued: set[str] = set()  # preempted back to the queue, arrived already
        self._runs: RunCohort[str] = RunCohort(
            windows.run_time_s, windows.run_time_min_ended, RUN_TIME_SHARES
        )
        self._busy_t: list[float] = []
        self._busy_sum: list[float] = [0.0]  # running totals of the busy samples

    @property
    def busy(self) -> int:
        return len(self._running)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def admitted(self, invocation_id: str, accepted_at: float) -> None:
        if invocation_id in self._waiting or invocation_id in self._running:
            return
        if invocation_id not in self._requeued:  # a requeued one arrived once already
            insort(self._arrivals, accepted_at)
        self._waiting[invocation_id] = accepted_at

    def requeued(self, invocation_id: str) -> None:
        """Back in the queue (preempted for higher-priority work): it holds no GPU until it is
        admitted again, which is no new arrival."""
        if self._waiting.pop(invocation_id, None) is not None or invocation_id in self._running:
            self._running.discard(invocation_id)
            self._runs.dropped(invocation_id)
            self._requeued.add(invocation_id)

    def started(self, invocation_id: str, accepted_at: float, started_at: float) -> None:
        if invocation_id in self._running:
            return
        again = invocation_id in self._requeued
        self._requeued.discard(invocation_id)
        if self._waiting.pop(invocation_id, None) is None and not again:
            insort(self._arrivals, accepted_at)  # started before its admission was seen
        if started_at - accepted_at > self.late_after_s and not again:
            insort(self._late, accepted_at)
        self._running.add(invocation_id)
        self._runs.started(invocation_id, started_at)

    def ended(self, invocation_id: str, finished_at: float | None) -> None:
        """An invocation is over (at `finished_at`; None: no end time, no run to measure)."""
        self._waiting.pop(invocation_id, None)
        self._requeued.discard(invocation_id)
        if invocation_id in self._running:
            self._running.discard(invocation_id)
            if finished_at is None:
                self._runs.dropped(invocation_id)
            else:
                self._runs.ended(invocation_id, finished_at)

    def observe(self, now: float, time_of_day_s: float, cluster: ClusterPicture) -> HeadroomObservation:
        """The observation at `now`; samples the busy count (for the slow window's mean)."""
        w = self.windows
        self._prune(now)
        since_last = now - self._busy_t[-1] if self._busy_t else None
        self._busy_t.append(now)
        self._busy_sum.append(self._busy_sum[-1] + self.busy)
        age = max(now - self._born, 1e-9)
        slow_span = min(w.slow_s, max(age, w.rate_s))
        return HeadroomObservation(
            now_s=now,
            time_of_day_s=time_of_day_s,
            arrival_rate_per_s=self._rate(now, w.rate_s),
            rate_window_s=w.rate_s,
            departure_rate_per_s=0.0,
            busy_nodes=self.busy,
            free_nodes=cluster.free_nodes,
            pending_requests=self.waiting,
            provisioning_nodes=cluster.provisioning_nodes,
            placeholders_running=cluster.placeholders_running,
            placeholders_pending=cluster.placeholders_pending,
            arrival_rate_slow_per_s=self._rate(now, slow_span),
            busy_mean_slow=self._busy_mean_since(now - slow_span),
            slow_window_s=slow_span,
            arrival_trend_per_s2=self._trend(now, age, w.trend_s),
            arrival_trends=tuple((w.trend_s * f, self._trend(now, age, w.trend_s * f)) for f in TREND_SHARES),
            run_time_mean_s=self._runs.mean_s(now),
            run_time_means=self._runs.means(now),
            late_share=self._late_share(now, min(w.feedback_s, age)),
            lead_time_s=cluster.lead_time_s,
            scale_down_in_s=cluster.scale_down_in_s,
            history_s=now - self._born,
            since_last_s=since_last,
        )

    def _rate(self, now: float, window: float) -> float:
        return (len(self._arrivals) - bisect_left(self._arrivals, now - window)) / window

    def _trend(self, now: float, age: float, window: float) -> float:
        if age < 2.0 * window:
            return 0.0
        recent = self._rate(now, window)
        before = (
            bisect_left(self._arrivals, now - window) - bisect_left(self._arrivals, now - 2.0 * window)
        ) / window
        return (recent - before) / window

    def _busy_mean_since(self, since: float) -> float:
        first = min(bisect_right(self._busy_t, since), len(self._busy_t) - 1)
        return (self._busy_sum[-1] - self._busy_sum[first]) / (len(self._busy_t) - first)

    def _late_share(self, now: float, window: float) -> float | None:
        since = now - window
        count = len(self._arrivals) - bisect_left(self._arrivals, since)
        if count == 0:
            return None
        late = len(self._late) - bisect_left(self._late, since)
        waiting_late = sum(1 for t in self._waiting.values() if since <= t <= now - self.late_after_s)
        return (late + waiting_late) / count

    def _prune(self, now: float) -> None:
        """Forget what no window reaches any more (the longest is the feedback window, or two
        trend windows)."""
        keep = now - max(self.windows.feedback_s, 2.0 * self.windows.trend_s)
        cut = bisect_left(self._arrivals, keep)
        if cut:
            del self._arrivals[:cut]
        cut = bisect_left(self._late, keep)
        if cut:
            del self._late[:cut]
        cut = bisect_left(self._busy_t, now - self.windows.slow_s) - 1
        if cut > 0:
            base = self._busy_sum[cut]
            del self._busy_t[:cut]
            self._busy_sum = [s - base for s in self._busy_sum[cut:]]
