"""`wait_set` (background.py): an event waited for with a time limit, where a cancellation that
comes in the same moment as the event is never lost (asyncio.wait_for on 3.11 loses it: a loop
around it then runs on after its stop, and whoever waits for its end waits for ever)."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from elasticityops.background import wait_set

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_set_in_time_is_true_and_a_time_out_is_false() -> None:
    event = asyncio.Event()
    assert await wait_set(event, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, event.set)
    assert await wait_set(event, 5) is True
    assert await wait_set(event, 0) is True, "already set"


async def _waits_once(event: asyncio.Event) -> None:
    # wait_for as the loops used it: kept to show what the helper is for.
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), 10)


@pytest.mark.parametrize("wait", ["wait_set", "asyncio.wait_for"])
async def test_a_cancel_that_comes_with_the_event_is_not_lost(wait: str) -> None:
    event = asyncio.Event()
    waiting = asyncio.create_task(wait_set(event, 10) if wait == "wait_set" else _waits_once(event))
    await asyncio.sleep(0)  # it waits now
    event.set()
    waiting.cancel()  # in the same turn of the loop as the event
    try:
        await waiting
        lost = True
    except asyncio.CancelledError:
        lost = False
    assert lost is (wait == "asyncio.wait_for"), "only the helper keeps the cancellation"
