"""Where the Kubernetes backend's events go: the dispatcher's sink once the backend has started
(what comes before is held until then), each stamped with the attempt it is about; and the
chores some of them call for (a Job that would linger is deleted), run in the background."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from dataclasses import replace
from typing import Any

from elasticityops.backends.kubernetes.followed import Followed
from elasticityops.backends.kubernetes.manifests import job_name
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.errors import EopsError, NotFound
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.invocations import FailureReason
from elasticityops.domain.ports import EventSink

log = logging.getLogger(__name__)

_STOP_JOB_ON = frozenset({FailureReason.image_pull, FailureReason.no_capacity, FailureReason.launch_error})


class Outlet:
    def __init__(self, followed: Followed, workloads: Workloads) -> None:
        self._followed = followed
        self._workloads = workloads
        self._sink: EventSink | None = None
        self._held: list[BackendEvent] = []
        self.chores: set[asyncio.Task[None]] = set()

    async def open(self, sink: EventSink) -> None:
        self._sink = sink
        held, self._held = self._held, []
        for event in held:
            await self.emit(event)

    async def deliver(self, event: BackendEvent | None) -> None:
        """An event of the attempt followed now."""
        if event is None:
            return
        event = replace(event, attempt=self._followed.attempts.get(event.invocation_id, 0))
        if event.finished is not None and event.finished.reason in _STOP_JOB_ON:
            # The Job would linger (a pod stuck pulling or waiting for a node): stop it.
            self.stop_job(event.invocation_id)
        await self.emit(event)

    async def emit(self, event: BackendEvent) -> None:
        if self._sink is None:
            self._held.append(event)
            return
        try:
            await self._sink(event)
        except Exception:
            # A failing sink (the store, say) must not kill the watch; the next relist or
            # adoption replays what matters.
            log.exception("delivering an event of %s failed: %s", event.invocation_id, event)

    def chore(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(coro)
        self.chores.add(task)
        task.add_done_callback(self.chores.discard)
        return task

    def stop_job(self, invocation_id: str, attempt: int | None = None) -> None:
        """Delete the Job (or bare pod) of `attempt`, by default the one followed now, in the
        background (named now: by the time the delete is sent, the next attempt may be
        followed)."""
        if attempt is None:
            attempt = self._followed.attempts.get(invocation_id, 0)
        self.chore(self._delete_job(invocation_id, attempt))

    async def _delete_job(self, invocation_id: str, attempt: int) -> None:
        w = self._workloads
        try:
            await w.api.delete(f"{w.workload_path}/{job_name(invocation_id, attempt)}", "Background")
        except (NotFound, EopsError) as exc:
            log.warning("could not delete the %s of %s: %s", w.kind, invocation_id, exc)
