"""One policy's replay, drain and collection on virtual time, with a tiny fake gateway (each
invocation starts 2 s after it is accepted and runs its annotated seconds) and a fake node list
(one baseline node, and one more while anything runs). Checks the glue: offsets, ids mapped
back to requests, times relative to the start, the window, the counts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from elasticityops.devcluster.nodes import gpu_node
from elasticityops.devcluster.stages import RUN_SECONDS_ANNOTATION
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.invocations import State
from elasticityops.planner.trace import Trace
from elasticityops.rehearse import driver
from elasticityops.rehearse.driver import PolicyRecord, Rehearsal
from elasticityops.rehearse.options import RehearseOptions
from elasticityops.rehearse.summary import PolicyRun
from elasticityops.wire import InvocationOut, TimelineOut

START_DELAY = 2.0


class FakeGateway:
    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.accepted: dict[str, tuple[Any, float]] = {}
        self.keys: list[str] = []

    async def invoke(
        self, name: str, payload: Any = None, *, idempotency_key: str, annotations: dict[str, str]
    ) -> InvocationOut:
        inv_id = f"inv-{len(self.accepted)}"
        self.accepted[inv_id] = (self.clock.now(), float(annotations[RUN_SECONDS_ANNOTATION]))
        self.keys.append(idempotency_key)
        return self._out(inv_id)

    def _out(self, inv_id: str) -> InvocationOut:
        at, run = self.accepted[inv_id]
        now = self.clock.now()
        started = at + timedelta(seconds=START_DELAY)
        finished = started + timedelta(seconds=run)
        state = State.succeeded if finished <= now else State.running if started <= now else State.pending
        return InvocationOut(
            id=inv_id,
            function="rehearse",
            state=state,
            priority="normal",
            timeline=TimelineOut(
                accepted=at,
                started=started if started <= now else None,
                finished=finished if finished <= now else None,
            ),
            durations={},
        )

    def running(self) -> int:
        return sum(1 for i in self.accepted if self._out(i).state is State.running)

    async def iter_invocations(self, *, function: str, page_size: int) -> AsyncIterator[InvocationOut]:
        for inv_id in list(self.accepted):
            yield self._out(inv_id)


class FakeNodes:
    """A baseline node all along, and a second node while any invocation runs."""

    def __init__(self, clock: ManualClock, gateway: FakeGateway) -> None:
        self.clock, self.gateway = clock, gateway

    async def list(self, path: str, params: Any = None, page_size: int = 500) -> tuple[list[Any], str]:
        stamp = "2025-12-31T00:00:00Z"
        nodes = [gpu_node("base", pool="p", zone="z", role="baseline", now=stamp)]
        nodes[0]["metadata"]["creationTimestamp"] = stamp
        if self.gateway.running():
            extra = gpu_node("extra", pool="p", zone="z", role="autoscaled", now=stamp)
            extra["metadata"]["creationTimestamp"] = stamp
            nodes.append(extra)
        return nodes, "1"


class Progress:
    def __init__(self) -> None:
        self.sent_counts: list[int] = []
        self.ended_counts: list[int] = []

    def phase(self, policy: str, text: str) -> None:
        return None

    def sent(self, policy: str, done: int, total: int) -> None:
        self.sent_counts.append(done)

    def ended(self, policy: str, done: int, total: int) -> None:
        self.ended_counts.append(done)


@pytest.mark.parametrize("until", ["last-end", "last-arrival"])
def test_a_policy_is_replayed_drained_and_collected(tmp_path: Path, until: str) -> None:
    clock = ManualClock()
    gateway = FakeGateway(clock)
    arrivals = [0.0, 10.0, 10.0, 40.0, 95.0]
    durations = [20.0, 5.0, 30.0, 12.0, 8.0]
    trace = Trace(np.array(arrivals), np.array(durations))
    options = RehearseOptions(sample_interval=5.0, drain_timeout=60.0, warmup=5.0, measure_until=until)
    plan = Rehearsal(trace, ("none",), {}, tmp_path / "kc", 1, tmp_path, options)
    record = PolicyRecord(PolicyRun("none", "rh-none-abc", None, None))
    progress = Progress()

    async def go() -> None:
        await driver._replay_and_collect(
            FakeNodes(clock, gateway),  # type: ignore[arg-type]
            gateway,  # type: ignore[arg-type]
            plan,
            record,
            progress,
            clock,
        )

    asyncio.run(clock.run(go(), limit_s=20.0))
    got = sorted(record.invocations, key=lambda i: (i.arrival_s, i.finished_s or 0))
    assert [i.arrival_s for i in got] == arrivals
    assert [i.accepted_s for i in got] == pytest.approx(arrivals)
    assert [i.wait_s for i in got] == pytest.approx([START_DELAY] * 5)
    assert gateway.keys == [f"rh-none-abc-{k}" for k in range(5)]
    run = record.run
    assert run.measured is not None
    assert (run.send_failures, run.not_started, run.not_finished) == (0, 0, 0)
    last_end = max(a + START_DELAY + d for a, d in zip(arrivals, durations, strict=True))
    end = last_end if until == "last-end" else arrivals[-1]
    assert run.extra["measured_window_s"] == [5.0, pytest.approx(end)]
    busy_in_window = sum(
        max(0.0, min(a + START_DELAY + d, end) - max(a + START_DELAY, 5.0))
        for a, d in zip(arrivals, durations, strict=True)
    )
    assert run.measured.busy_gpu_s == pytest.approx(busy_in_window)
    assert run.measured.peak_nodes == 2
    # The baseline node alone is up for the whole window; the extra one while anything ran.
    assert run.measured.idle_gpu_s >= (end - 5.0) - busy_in_window
    assert progress.sent_counts[-1] == 5
    assert progress.ended_counts[-1] == 5
    assert len(record.samples) >= end // 5
