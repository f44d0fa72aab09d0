"""Settings of the recommend search simulated in worker processes, several at once.

Each worker gets the trace and the cluster settings once (when it starts) and then simulates one
setting per task, returning only its summary. Workers are spawned, not forked: the CLI's progress
bar runs a thread, and a fork copies its locks in whatever state they are. With one worker (one
core, or `workers=1`) everything runs in this process."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from types import TracebackType

from elasticityops.planner.policies import parse_policy
from elasticityops.planner.runner import run_policy
from elasticityops.planner.settings import ClusterSettings
from elasticityops.planner.summary import Summary
from elasticityops.planner.trace import Trace


@dataclass(frozen=True)
class Setting:
    """One setting of the search: a baseline pool of `size` nodes, `size` warm placeholders, or
    predictive headroom (size 0), with the scale-down `window` (seconds)."""

    family: str  # "baseline", "warm" or "predictive"
    size: int
    window: float

    def spec(self, target_p95_s: float) -> str:
        return {
            "baseline": "none",
            "warm": f"warm:{self.size}",
            "predictive": f"predictive:{target_p95_s:g}",
        }[self.family]

    def label(self, base: ClusterSettings, target_p95_s: float) -> str:
        """As tables show it: the policy's name (with the baseline) and the window."""
        choice = parse_policy(self.spec(target_p95_s), self.cluster(base), target_p95_s)
        return f"{choice.name} sd={self.window:g}s"

    def cluster(self, base: ClusterSettings) -> ClusterSettings:
        return replace(
            base, scale_down_after_s=self.window, baseline=self.size if self.family == "baseline" else 0
        )


def simulate_setting(trace: Trace, base: ClusterSettings, target_p95_s: float, setting: Setting) -> Summary:
    cluster = setting.cluster(base)
    outcome = run_policy(trace, cluster, parse_policy(setting.spec(target_p95_s), cluster, target_p95_s))
    return replace(outcome.summary, policy=setting.label(base, target_p95_s))


# What a worker process was given when it started (see SettingRunner).
_WORKER: tuple[Trace, ClusterSettings, float] | None = None


def _start_worker(trace: Trace, base: ClusterSettings, target_p95_s: float) -> None:
    global _WORKER
    _WORKER = (trace, base, target_p95_s)


def _in_worker(setting: Setting) -> Summary:
    assert _WORKER is not None, "a task ran in a worker that was not started by SettingRunner"
    return simulate_setting(*_WORKER, setting)


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity, where the system says)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class SettingRunner:
    """Simulates settings of one trace; a context manager that owns its worker processes.
    workers: processes at once (0: one per usable core; 1: in this process)."""

    def __init__(self, trace: Trace, base: ClusterSettings, target_p95_s: float, workers: int = 0) -> None:
        # only the columns the model reads travel to the workers
        self.trace = Trace(trace.arrival_s, trace.duration_s)
        self.base = base
        self.target = target_p95_s
        self.workers = workers or usable_cores()
        self.pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> SettingRunner:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def summaries(self, settings: Sequence[Setting]) -> list[Summary]:
        """The summaries of `settings`, in their order."""
        if self.workers <= 1 or len(settings) <= 1:  # one alone runs as fast here, untransferred
            return [simulate_setting(self.trace, self.base, self.target, s) for s in settings]
        if self.pool is None:
            # started at the first batch worth it, so a search that never has one starts none
            self.pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start_worker,
                initargs=(self.trace, self.base, self.target),
            )
        return list(self.pool.map(_in_worker, settings))
