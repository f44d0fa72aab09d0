"""The console's event stream on a follower (api/console/feed.py): the leader runs the invocation,
so the follower's hub hears nothing of it; the stream still carries it, accepted (the newest
invocation, read once an interval) and moving (the ids a stream watches, through the change
poller). Two replicas on one PostgreSQL, real HTTP (uvicorn in process), real local jobs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import orjson
import pytest

from .support import prints_then_sleeps, replica

pytestmark = pytest.mark.anyio


async def _changes(events: httpx.Response) -> AsyncIterator[dict[str, object]]:
    kind = ""
    async for line in events.aiter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: ") and kind == "changes":
            for change in orjson.loads(line.removeprefix("data: "))["changes"]:
                yield change


async def test_a_followers_stream_carries_what_the_leader_accepts_and_runs(
    tmp_path: Path, database_url: str
) -> None:
    async with (
        replica(tmp_path / "a", database_url, dispatch=True) as leader,
        replica(
            tmp_path / "b", database_url, dispatch=False, EOPS_CONSOLE_HEARTBEAT_SECONDS="0.5"
        ) as follower,
    ):
        await leader.deploy(prints_then_sleeps("sleeper", 1.5))
        async with follower.http.stream("GET", "/v1/events") as events:
            assert events.status_code == 200
            accepted = await leader.http.post("/v1/functions/sleeper/invocations", content=b"{}")
            inv_id = accepted.json()["id"]
            async with asyncio.timeout(15):
                async for change in _changes(events):
                    if change["id"] == inv_id:
                        break
        async with follower.http.stream("GET", "/v1/events", params={"watch": inv_id}) as events:
            states: list[object] = []
            async with asyncio.timeout(20):
                async for change in _changes(events):
                    if change["id"] == inv_id:
                        states.append(change["state"])
                    if "succeeded" in states:
                        break
        assert states[-1] == "succeeded", states
        async with asyncio.timeout(10):  # a gone reader is noticed at the next heartbeat at the latest
            while follower.runtime.feed._streams:  # noqa: ASYNC110 (polled: no event to await)
                await asyncio.sleep(0.1)
