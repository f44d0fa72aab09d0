"""The gateway in process: the app `build_app` makes, on a real SQLite store, with a scripted
backend, over httpx's ASGI transport. It reaches the dispatcher's failure paths that a real
backend cannot be made to take on demand: a store that fails while an event is recorded, a
cycle that fails, a launch that raises, how many launches run at once, the backend's own
payload limit."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from elasticityops.api.runtime import Runtime
from elasticityops.domain.errors import TemporaryError
from elasticityops.domain.events import BackendEvent, Finished, finished_event, note_event
from elasticityops.domain.invocations import FailureReason, Invocation, State
from elasticityops.domain.ports import LaunchRequest
from elasticityops.store.sql import SqlStore
from helpers.fake_backend import FakeBackend
from helpers.in_process import eventually, in_process_gateway, in_process_settings

pytestmark = pytest.mark.anyio


class ScriptedBackend(FakeBackend):
    """Launches are recorded (and held at `gate` while it is closed); the test says how each
    job goes by `finish`."""

    name = "scripted"

    def __init__(self, *, max_payload: int | None = None, launch_raises: bool = False) -> None:
        self.launched: list[str] = []
        self.preempted: list[str] = []
        self.preempt_raises = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.in_flight = 0
        self.most_in_flight = 0
        self.max_payload = max_payload
        self.launch_raises = launch_raises
        self.on_cancel: Callable[[Invocation], Awaitable[None]] | None = None

    async def stop(self) -> None:
        self.gate.set()

    def max_payload_bytes(self) -> int | None:
        return self.max_payload

    async def launch(self, request: LaunchRequest) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
        finally:
            self.in_flight -= 1
        if self.launch_raises:
            raise RuntimeError("the scripted backend fell over")
        self.launched.append(request.invocation.id)

    async def cancel(self, invocation: Invocation) -> None:
        if self.on_cancel is not None:
            await self.on_cancel(invocation)
            return
        await self.finish(invocation.id, Finished.cancelled(_now()))

    async def preempt(self, invocation: Invocation) -> None:
        if self.preempt_raises > 0:
            self.preempt_raises -= 1
            raise RuntimeError("the API server is away")
        self.preempted.append(invocation.id)
        # As the real backends do: the stopped attempt's end, once its job is gone.
        assert self.sink is not None
        gone = BackendEvent(invocation.id, attempt=invocation.attempt, finished=Finished.cancelled(_now()))
        await self.sink(gone)

    async def adopt(self, active: Sequence[Invocation]) -> list[str]:
        return [inv.id for inv in active]

    async def finish(self, invocation_id: str, end: Finished) -> None:
        assert self.sink is not None
        await self.sink(finished_event(invocation_id, end, node="slot-0"))


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class InProcess:
    runtime: Runtime
    client: httpx.AsyncClient
    backend: ScriptedBackend

    async def invoke(self, payload: bytes = b"{}") -> str:
        response = await self.client.post("/v1/functions/hello/invocations", content=payload)
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    async def state_of(self, invocation_id: str) -> Invocation:
        inv = await self.runtime.store.get_invocation(invocation_id)
        assert inv is not None
        return inv

    async def until(
        self, invocation_id: str, check: Callable[[Invocation], bool], within_s: float = 10
    ) -> Invocation:
        async with asyncio.timeout(within_s):
            while True:
                with self.runtime.hub.watch(invocation_id) as changed:
                    inv = await self.state_of(invocation_id)
                    if check(inv):
                        return inv
                    with suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), 0.2)


@asynccontextmanager
async def gateway(
    tmp_path: Path,
    backend: ScriptedBackend,
    store: Callable[[SqlStore], SqlStore] | None = None,
    batch_size: int | None = None,
    **env: str,
) -> AsyncIterator[InProcess]:
    settings = in_process_settings(tmp_path, **env)
    if batch_size is not None:
        settings = replace(settings, dispatch=replace(settings.dispatch, batch_size=batch_size))
    async with in_process_gateway(settings, backend, store=store) as (runtime, client):
        yield InProcess(runtime, client, backend)


def failing(
    method: str, times: int, error: Callable[[], Exception] | None = None
) -> Callable[[SqlStore], SqlStore]:
    """Make the store's `method` fail `times` times (by default as the database unreachable
    does, or with `error()`), then work."""

    def wrap(store: SqlStore) -> SqlStore:
        real: Callable[..., Awaitable[Any]] = getattr(store, method)
        left = [times]

        async def flaky(*args: Any) -> Any:
            if left[0] > 0:
                left[0] -= 1
                raise error() if error else TemporaryError("database unavailable: injected", retry_after=0.0)
            return await real(*args)

        setattr(store, method, flaky)
        return store

    return wrap


async def test_an_event_the_store_fails_to_record_is_retried_until_it_lands(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend, failing("record", 3)) as gw:
        inv_id = await gw.invoke()
        await gw.until(inv_id, lambda i: i.state is State.pending)
        await backend.finish(inv_id, Finished.succeeded(_now(), result=b'{"ok": true}'))
        done = await gw.until(inv_id, lambda i: i.state.terminal)
    assert (done.state, done.result, done.node) == (State.succeeded, b'{"ok": true}', "slot-0")


async def test_an_event_waits_out_a_store_outage_longer_than_its_retries(tmp_path: Path) -> None:
    # 12 failures: more than event_retries (5), the pauses capped at 0.3 s here
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend, failing("record", 12)) as gw:
        gw.runtime.dispatcher.settings = replace(gw.runtime.dispatcher.settings, event_wait_max_s=0.3)  # type: ignore[attr-defined]
        inv_id = await gw.invoke()
        await gw.until(inv_id, lambda i: i.state is State.pending)
        await backend.finish(inv_id, Finished.succeeded(_now()))
        done = await gw.until(inv_id, lambda i: i.state.terminal)
    assert done.state is State.succeeded


async def test_an_event_the_store_refuses_is_given_up_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend, failing("record", 1000, lambda: RuntimeError("a bug"))) as gw:
        inv_id = await gw.invoke()
        await gw.until(inv_id, lambda i: i.state is State.pending)
        with caplog.at_level(logging.ERROR, logger="elasticityops.dispatch.dispatcher"):
            await backend.finish(inv_id, Finished.succeeded(_now()))
            # 5 attempts, 0.2 + 0.4 + 0.6 + 0.8 s apart
            await eventually(lambda: any("could not record" in r.getMessage() for r in caplog.records), 15)
        # Dropped, not lost for good: the next start's adoption reads the backend again.
        assert (await gw.state_of(inv_id)).state is State.pending


async def test_a_failed_cycle_is_followed_by_one_that_admits(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = ScriptedBackend()
    with caplog.at_level(logging.ERROR, logger="elasticityops.dispatch.dispatcher"):
        async with gateway(tmp_path, backend, failing("queued", 2)) as gw:
            inv_id = await gw.invoke()
            pending = await gw.until(inv_id, lambda i: i.state is State.pending)
    assert pending.timeline.dispatched is not None
    assert backend.launched == [inv_id]
    assert sum("dispatch cycle failed" in r.getMessage() for r in caplog.records) >= 1


async def test_a_launch_that_raises_ends_the_invocation_through_the_event_route(tmp_path: Path) -> None:
    backend = ScriptedBackend(launch_raises=True)
    async with gateway(tmp_path, backend) as gw:
        inv_id = await gw.invoke()
        done = await gw.until(inv_id, lambda i: i.state.terminal)
    assert (done.state, done.failure_reason) == (State.failed, FailureReason.launch_error)
    assert "fell over" in done.message


async def test_launches_in_flight_are_bounded_by_launch_concurrency(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    backend.gate.clear()
    async with gateway(tmp_path, backend) as gw:
        limit = gw.runtime.dispatcher.settings.launch_concurrency  # type: ignore[attr-defined]
        ids = await asyncio.gather(*(gw.invoke() for _ in range(limit + 16)))
        # bounds that only detect a hang: 20 s ran out in 3 xdist workers on 2 cores
        await eventually(lambda: backend.in_flight >= limit, 60)
        await asyncio.sleep(0.3)  # time for any launch past the bound to begin
        assert backend.most_in_flight == limit
        backend.gate.set()
        await eventually(lambda: len(backend.launched) == len(ids), 60)
    assert sorted(backend.launched) == sorted(ids)
    assert backend.most_in_flight == limit


async def test_a_payload_the_backend_cannot_carry_is_refused_before_it_is_accepted(tmp_path: Path) -> None:
    backend = ScriptedBackend(max_payload=64)
    async with gateway(tmp_path, backend) as gw:
        fits = b'{"x": "' + b"a" * 50 + b'"}'
        assert len(fits) <= 64
        await gw.invoke(fits)
        refused = await gw.client.post(
            "/v1/functions/hello/invocations", content=b'{"x": "' + b"a" * 60 + b'"}'
        )
        assert refused.status_code == 413
        message = refused.json()["error"]["message"]
        assert "64 bytes" in message
        assert "scripted launch" in message
        page = await gw.client.get("/v1/invocations")
        assert len(page.json()["items"]) == 1  # nothing was stored for the refused one


async def test_cancel_of_an_ended_invocation_is_a_conflict(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend) as gw:
        inv_id = await gw.invoke()
        await gw.until(inv_id, lambda i: i.state is State.pending)
        await backend.finish(inv_id, Finished.succeeded(_now()))
        await gw.until(inv_id, lambda i: i.state.terminal)
        answer = await gw.client.post(f"/v1/invocations/{inv_id}/cancel")
    assert answer.status_code == 409
    assert "already ended (succeeded)" in answer.json()["error"]["message"]


async def test_cancel_racing_the_end_answers_the_end_never_a_200(tmp_path: Path) -> None:
    """The job ends by itself while its cancel is under way (between the cancel's read of the
    row and its compare-and-set): the answer is the 409 that names the end, not a 200 whose
    body says `succeeded`."""
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend) as gw:

        async def ends_first(invocation: Invocation) -> None:
            await backend.finish(invocation.id, Finished.succeeded(_now()))
            await gw.until(invocation.id, lambda i: i.state.terminal)

        backend.on_cancel = ends_first
        inv_id = await gw.invoke()
        await gw.until(inv_id, lambda i: i.state is State.pending)
        answer = await gw.client.post(f"/v1/invocations/{inv_id}/cancel")
        assert (await gw.state_of(inv_id)).state is State.succeeded
    assert answer.status_code == 409, answer.text
    assert "already ended (succeeded)" in answer.json()["error"]["message"]


async def test_a_finished_event_after_a_cancel_changes_nothing(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend) as gw:
        inv_id = await gw.invoke()
        await gw.until(inv_id, lambda i: i.state is State.pending)
        cancelled = await gw.client.post(f"/v1/invocations/{inv_id}/cancel")
        assert cancelled.status_code == 200
        assert cancelled.json()["state"] == "cancelled"
        await backend.finish(inv_id, Finished.succeeded(_now(), result=b"late"))
        await asyncio.sleep(0.2)
        after = await gw.state_of(inv_id)
    assert (after.state, after.result) == (State.cancelled, None)


async def test_the_gpu_budget_is_the_one_cap_and_metrics_count_against_it(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend, EOPS_GPU_BUDGET="2") as gw:
        ids = [await gw.invoke() for _ in range(3)]
        await gw.until(ids[1], lambda i: i.state is State.pending)
        await asyncio.sleep(0.3)  # a few admission cycles: the third must stay queued
        assert (await gw.state_of(ids[2])).state is State.queued
        metrics = (await gw.client.get("/metrics")).text
        assert "eops_gpus_in_use 2.0" in metrics
        assert "eops_gpus_free 0.0" in metrics
        await backend.finish(ids[0], Finished.succeeded(_now()))
        await gw.until(ids[2], lambda i: i.state is State.pending)
        metrics = (await gw.client.get("/metrics")).text
    assert "eops_gpus_in_use 2.0" in metrics
    assert sorted(backend.launched) == sorted(ids)


def _fn(name: str, gpu_type: str, **extra: object) -> bytes:
    return json.dumps({"name": name, "command": ["true"], "gpu": {"type": gpu_type}, **extra}).encode()


async def test_queued_invocations_show_their_queue_position_and_reason(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend, EOPS_GPU_BUDGET="nvidia-tesla-t4=2") as gw:
        for name, body in [
            ("low", _fn("low", "nvidia-tesla-t4", priority="low")),
            ("urgent", _fn("urgent", "nvidia-tesla-t4", priority="high")),
            ("capped", _fn("capped", "nvidia-l4", max_concurrency=1)),
        ]:
            assert (await gw.client.put(f"/v1/functions/{name}", content=body)).status_code == 201

        async def invoke(name: str) -> str:
            response = await gw.client.post(f"/v1/functions/{name}/invocations", content=b"{}")
            assert response.status_code == 202, response.text
            return str(response.json()["id"])

        async def queue_of(invocation_id: str) -> tuple[int | None, str | None]:
            body = (await gw.client.get(f"/v1/invocations/{invocation_id}")).json()
            return body["queue_position"], body["queue_reason"]

        lows = [await invoke("low") for _ in range(4)]
        await gw.until(lows[1], lambda i: i.state is State.pending)
        full = "the GPU budget for nvidia-tesla-t4 is full (2 of 2 in use)"
        assert [await queue_of(i) for i in lows] == [(None, None), (None, None), (1, full), (2, full)]
        metrics = (await gw.client.get("/metrics")).text
        assert 'eops_gpus_in_use_by_type{gpu_type="nvidia-tesla-t4"} 2.0' in metrics
        assert 'eops_gpu_budget_free{gpu_type="nvidia-tesla-t4"} 0.0' in metrics
        assert "eops_gpus_free -1.0" in metrics, "a per-type budget caps no total"
        urgent = await invoke("urgent")
        assert await queue_of(urgent) == (1, full), "high priority, accepted last, goes first"
        assert [await queue_of(i) for i in lows[2:]] == [(2, full), (3, full)]
        # The full T4 budget does not hold back L4 work; its function's max_concurrency does.
        capped = [await invoke("capped") for _ in range(2)]
        await gw.until(capped[0], lambda i: i.state is State.pending)
        assert await queue_of(capped[1]) == (1, "function capped is at its max_concurrency (1)")
        listed = (await gw.client.get("/v1/invocations", params={"state": "queued"})).json()["items"]
        assert {i["queue_position"] for i in listed} == {None}, "lists do not count positions"

        await backend.finish(lows[0], Finished.succeeded(_now()))
        await gw.until(urgent, lambda i: i.state is State.pending)
        assert (await gw.state_of(lows[2])).state is State.queued
        assert [await queue_of(i) for i in lows[2:]] == [(1, full), (2, full)]


async def test_a_full_type_hides_neither_other_types_nor_priorities_behind_a_batch(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend, batch_size=2, EOPS_GPU_BUDGET="nvidia-tesla-t4=1") as gw:
        for name, body in [
            ("low", _fn("low", "nvidia-tesla-t4", priority="low")),
            ("urgent", _fn("urgent", "nvidia-tesla-t4", priority="high")),
            ("other", _fn("other", "nvidia-l4", priority="low")),
        ]:
            assert (await gw.client.put(f"/v1/functions/{name}", content=body)).status_code == 201

        async def invoke(name: str) -> str:
            response = await gw.client.post(f"/v1/functions/{name}/invocations", content=b"{}")
            assert response.status_code == 202, response.text
            return str(response.json()["id"])

        first = await invoke("low")
        await gw.until(first, lambda i: i.state is State.pending)
        lows = [await invoke("low") for _ in range(5)]  # three batches of T4 work that must wait
        l4 = await invoke("other")
        await gw.until(l4, lambda i: i.state is State.pending)
        urgent = await invoke("urgent")
        await backend.finish(first, Finished.succeeded(_now()))
        await gw.until(urgent, lambda i: i.state is State.pending)
        assert [(await gw.state_of(i)).state for i in lows] == [State.queued] * 5


async def test_a_preemption_the_backend_fails_to_stop_is_tried_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = ScriptedBackend()
    backend.preempt_raises = 1
    async with gateway(tmp_path, backend, EOPS_GPU_BUDGET="nvidia-tesla-t4=1") as gw:
        batch = _fn("batch", "nvidia-tesla-t4", priority="low", preemptible=True, retries=1)
        for name, body in [("batch", batch), ("urgent", _fn("urgent", "nvidia-tesla-t4", priority="high"))]:
            assert (await gw.client.put(f"/v1/functions/{name}", content=body)).status_code == 201

        async def invoke(name: str) -> str:
            response = await gw.client.post(f"/v1/functions/{name}/invocations", content=b"{}")
            assert response.status_code == 202, response.text
            return str(response.json()["id"])

        victim = await invoke("batch")
        await gw.until(victim, lambda i: i.state is State.pending)
        with caplog.at_level(logging.WARNING, logger="elasticityops.dispatch.preempting"):
            urgent = await invoke("urgent")
            await gw.until(urgent, lambda i: i.state is State.pending)
        assert any("could not stop" in r.getMessage() for r in caplog.records)
        assert backend.preempted == [victim], "stopped once, on the second try"
        body = (await gw.client.get(f"/v1/invocations/{victim}")).json()
        assert (body["state"], body["attempt"], body["preempting_by"]) == ("queued", 1, None)
        assert [n["kind"] for n in body["notes"]] == ["Preempting", "Preempted"]
        assert urgent in body["message"]
        assert body["timeline"]["preempted"] is not None
        # The budget is the high one's now; the victim waits with its queue position.
        assert body["queue_position"] == 1
        metrics = (await gw.client.get("/metrics")).text
        assert 'eops_preemptions_total{outcome="requeued"} 1.0' in metrics
        await backend.finish(urgent, Finished.succeeded(_now()))
        again = await gw.until(victim, lambda i: i.state is State.pending)
        assert again.attempt == 1
        assert backend.launched.count(victim) == 2


async def test_work_needing_two_gpus_stops_two_victims_and_no_more(tmp_path: Path) -> None:
    backend = ScriptedBackend()
    async with gateway(tmp_path, backend, EOPS_GPU_BUDGET="nvidia-tesla-t4=3") as gw:
        batch = _fn("batch", "nvidia-tesla-t4", priority="low", preemptible=True)
        big = json.dumps(
            {
                "name": "big",
                "command": ["true"],
                "priority": "high",
                "gpu": {"type": "nvidia-tesla-t4", "count": 2},
            }
        ).encode()
        for name, body in [("batch", batch), ("big", big)]:
            assert (await gw.client.put(f"/v1/functions/{name}", content=body)).status_code == 201
        lows = []
        for _ in range(3):
            response = await gw.client.post("/v1/functions/batch/invocations", content=b"{}")
            lows.append(str(response.json()["id"]))
            await gw.until(lows[-1], lambda i: i.state is State.pending)
        response = await gw.client.post("/v1/functions/big/invocations", content=b"{}")
        urgent = str(response.json()["id"])
        await gw.until(urgent, lambda i: i.state is State.pending)
        ends = [await gw.state_of(i) for i in lows]
        # The two newest made way (no retries: failed `preempted`); the oldest runs on.
        assert [e.state for e in ends] == [State.pending, State.failed, State.failed]
        assert {e.failure_reason for e in ends[1:]} == {FailureReason.preempted}
        assert sorted(backend.preempted) == sorted(lows[1:])


class TailingBackend(ScriptedBackend):
    """Logs as kwok's stand-in for a kubelet gives them: what was written, then, when followed,
    a stream that never ends, even once the job has."""

    def __init__(self) -> None:
        super().__init__()
        self.follows: list[bool] = []
        self.closed = 0

    async def logs(
        self, invocation: Invocation, follow: bool, attempt: int | None = None
    ) -> AsyncIterator[bytes]:
        self.follows.append(follow)
        try:
            yield b"line 1\n"
            if follow:
                await asyncio.Event().wait()
        finally:
            self.closed += 1


async def _running(gw: InProcess) -> str:
    """An invocation whose job the backend says has started."""
    inv_id = await gw.invoke()
    await gw.until(inv_id, lambda i: i.state is State.pending)
    assert gw.backend.sink is not None
    await gw.backend.sink(BackendEvent(inv_id, node="slot-0", started=_now()))
    await gw.until(inv_id, lambda i: i.state is State.running)
    return inv_id


async def test_a_follow_ends_with_its_invocation_though_the_backends_stream_does_not(tmp_path: Path) -> None:
    backend = TailingBackend()
    async with gateway(tmp_path, backend) as gw:
        inv_id = await _running(gw)
        logs = f"/v1/invocations/{inv_id}/logs"
        follow = asyncio.ensure_future(gw.client.get(logs, params={"follow": "true"}))
        await eventually(lambda: backend.follows == [True], 5)
        await asyncio.sleep(0.5)
        assert not follow.done()  # following while it runs
        await backend.finish(inv_id, Finished.succeeded(_now()))
        answer = await asyncio.wait_for(follow, 10)
        assert (answer.status_code, answer.content) == (200, b"line 1\n")
        assert backend.closed == 1  # the backend's stream closed, not left open
        # Once it has ended there is nothing to follow: the backend is asked for what was written.
        again = await asyncio.wait_for(gw.client.get(logs, params={"follow": "true"}), 10)
        assert (again.status_code, again.content, backend.follows) == (200, b"line 1\n", [True, False])


async def test_a_store_away_during_a_follow_does_not_end_it(tmp_path: Path) -> None:
    backend = TailingBackend()
    async with gateway(tmp_path, backend) as gw:
        inv_id = await _running(gw)
        store = gw.runtime.store
        real = store.get_invocation
        away = asyncio.Event()
        refused = [0]

        async def flaky(invocation_id: str) -> Invocation | None:
            if away.is_set():
                refused[0] += 1
                raise TemporaryError("database unavailable: injected", retry_after=0.0)
            return await real(invocation_id)

        store.get_invocation = flaky  # type: ignore[method-assign]  # the store away on demand
        follow = asyncio.ensure_future(
            gw.client.get(f"/v1/invocations/{inv_id}/logs", params={"follow": "true"})
        )
        await eventually(lambda: backend.follows == [True], 5)
        away.set()
        # A change (a note recorded) wakes the follow's wait for the end, whose read then fails.
        assert backend.sink is not None
        await backend.sink(note_event(inv_id, _now(), "SlotWarming", "still warming"))
        await asyncio.sleep(3)  # longer than the drain after an end: an error is no end
        away.clear()
        assert refused[0] >= 1  # the outage was met
        assert not follow.done()
        await backend.finish(inv_id, Finished.succeeded(_now()))
        answer = await asyncio.wait_for(follow, 10)
        assert (answer.status_code, answer.content) == (200, b"line 1\n")
