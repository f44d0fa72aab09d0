"""EventLanes: each invocation's events in order, different invocations at once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from elasticityops.dispatch.event_lanes import EventLanes
from elasticityops.domain.events import BackendEvent, Finished

AT = datetime(2026, 1, 1, tzinfo=UTC)


class EventKind:
    started = "started"
    finished = "finished"


def event(inv: str, kind: str) -> BackendEvent:
    if kind == EventKind.started:
        return BackendEvent(inv, started=AT)
    return BackendEvent(inv, finished=Finished.succeeded(AT))


def test_one_invocations_events_are_recorded_in_order_others_meanwhile() -> None:
    recorded: list[tuple[str, str]] = []
    gates = {"a": asyncio.Event(), "b": asyncio.Event()}

    async def record(e: BackendEvent) -> None:
        if e.parts == (EventKind.started,):
            await gates[e.invocation_id].wait()  # a slow commit
        recorded.append((e.invocation_id, e.parts[-1]))

    async def body() -> None:
        lanes = EventLanes(record, concurrency=8)
        lanes.put(event("a", EventKind.started))
        lanes.put(event("a", EventKind.finished))
        lanes.put(event("b", EventKind.started))
        lanes.put(event("c", EventKind.finished))
        await asyncio.sleep(0.01)
        # a and b wait on their first event; c, another invocation, did not wait for them,
        # and a's second event did not overtake its first.
        assert recorded == [("c", EventKind.finished)]
        gates["b"].set()
        gates["a"].set()
        await lanes.drain(5)
        assert recorded.index(("a", EventKind.started)) < recorded.index(("a", EventKind.finished))
        assert sorted(recorded) == sorted(
            [
                ("a", EventKind.started),
                ("a", EventKind.finished),
                ("b", EventKind.started),
                ("c", EventKind.finished),
            ]
        )
        # A lane that emptied is gone; a later event for the same invocation starts a new one.
        lanes.put(event("c", EventKind.started))
        gates["c"] = asyncio.Event()
        gates["c"].set()
        await lanes.drain(5)
        assert recorded[-1] == ("c", EventKind.started)

    asyncio.run(body())


def test_concurrency_is_bounded_and_drain_gives_up_after_its_time() -> None:
    running = 0
    most = 0
    never = asyncio.Event()

    async def record(e: BackendEvent) -> None:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            await never.wait()
        finally:
            running -= 1

    async def body() -> None:
        lanes = EventLanes(record, concurrency=3)
        for i in range(10):
            lanes.put(event(f"inv-{i}", EventKind.started))
        await asyncio.sleep(0.01)
        assert most == 3
        await lanes.drain(0.05)  # returns although nothing finished, and cancels the rest
        await asyncio.sleep(0)
        assert running == 0

    asyncio.run(body())
