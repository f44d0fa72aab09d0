"""A Backend (src/elasticityops/domain/ports.py) that runs nothing, for tests that drive the
dispatcher or the whole gateway in process: it keeps the sink it was started with, has no GPU or
payload limit of its own, and answers every call at once. A test's subclass records or scripts
the calls it looks at."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from elasticityops.domain.invocations import Invocation
from elasticityops.domain.ports import EventSink, LaunchRequest
from elasticityops.domain.queue import QueueStatus


class FakeBackend:
    name = "fake"
    sink: EventSink | None = None  # once started

    async def start(self, sink: EventSink) -> None:
        self.sink = sink

    async def stop(self) -> None:
        pass

    def free_gpus(self) -> int | None:
        return None

    def queue_status(self, invocation: Invocation) -> QueueStatus | None:
        return None  # no queue but the gateway's

    def total_gpus(self) -> int | None:
        return None

    def max_payload_bytes(self) -> int | None:
        return None

    async def launch(self, request: LaunchRequest) -> None:
        pass

    async def cancel(self, invocation: Invocation) -> None:
        pass

    async def preempt(self, invocation: Invocation) -> None:
        pass

    async def adopt(self, active: Sequence[Invocation]) -> list[str]:
        return []

    async def logs(
        self, invocation: Invocation, follow: bool, attempt: int | None = None
    ) -> AsyncIterator[bytes]:
        if False:  # an async generator that yields nothing
            yield b""
