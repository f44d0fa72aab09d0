"""ManualClock: virtual time moves only when told, and sleepers wake at their deadlines."""

from __future__ import annotations

import asyncio

import pytest

from elasticityops.domain.clock import ManualClock

pytestmark = pytest.mark.anyio


async def test_a_sleeper_waits_until_the_clock_reaches_its_deadline() -> None:
    clock = ManualClock()
    woke: list[float] = []

    async def sleeper(seconds: float) -> None:
        await clock.sleep(seconds)
        woke.append(clock.monotonic())

    tasks = [asyncio.create_task(sleeper(s)) for s in (5, 1, 3)]
    await asyncio.sleep(0.05)
    assert woke == []
    assert clock.monotonic() == 0  # sleeping moved nothing
    clock.advance(2)
    await asyncio.sleep(0)
    assert woke == [2]
    clock.advance(3)
    await asyncio.gather(*tasks)
    assert sorted(woke) == [2, 5, 5]


async def test_a_cancelled_sleeper_is_forgotten() -> None:
    clock = ManualClock()
    task = asyncio.create_task(clock.sleep(10))
    await asyncio.sleep(0)
    assert clock.next_deadline() == 10
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert clock.next_deadline() is None


async def test_run_jumps_from_deadline_to_deadline_of_what_it_drives() -> None:
    clock = ManualClock()

    async def backoff() -> list[float]:
        seen = []
        for pause in (0.5, 1.0, 2.0):
            await clock.sleep(pause)
            seen.append(clock.monotonic())
        return seen

    assert await clock.run(backoff()) == [0.5, 1.5, 3.5]


async def test_run_gives_up_on_what_never_ends() -> None:
    clock = ManualClock()
    with pytest.raises(TimeoutError):
        await clock.run(asyncio.Event().wait(), limit_s=0.1)


def test_the_clock_never_goes_back() -> None:
    with pytest.raises(ValueError, match="never goes back"):
        ManualClock().advance(-1)
