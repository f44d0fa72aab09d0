"""The backends' port: where invocations run (backends/local: processes and GPU slots;
backends/kubernetes: Jobs). The dispatcher and the API only ever talk to this protocol."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from elasticityops.domain.events import BackendEvent
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.invocations import Invocation
from elasticityops.domain.queue import QueueStatus

EventSink = Callable[[BackendEvent], Awaitable[None]]


@dataclass(frozen=True)
class LaunchRequest:
    invocation: Invocation
    spec: FunctionSpec
    payload: bytes
    callback_url: str | None  # where the job POSTs its result, with `callback_token`
    callback_token: str


class Backend(Protocol):
    name: str

    async def start(self, sink: EventSink) -> None:
        """Begin watching; every observation is delivered to `sink`."""
        ...

    async def stop(self) -> None:
        """Stop watching. Running jobs keep running (a restart adopts them)."""
        ...

    def free_gpus(self) -> int | None:
        """GPUs that can start work now; None when the backend has no fixed limit."""
        ...

    def total_gpus(self) -> int | None:
        """The most GPUs it can ever offer at once; None when there is no fixed limit. The
        dispatcher fails an invocation needing more at once instead of queueing it forever."""
        ...

    def queue_status(self, invocation: Invocation) -> QueueStatus | None:
        """Where an invocation the backend holds waits, and why, where a queue of the cluster's
        own (Kueue) decides when it starts; None where it does not wait in one."""
        ...

    def max_payload_bytes(self) -> int | None:
        """The largest payload a launch can carry (bytes); None: no limit of its own. The API
        refuses larger ones at once (413) instead of accepting them to fail at launch."""
        ...

    async def launch(self, request: LaunchRequest) -> None:
        """Start the invocation. Idempotent: launching one that exists already is a no-op.
        Every failure to launch is reported through the sink as the invocation's end
        (reason launch_error), never raised: one route for every way a job can end."""
        ...

    async def cancel(self, invocation: Invocation) -> None: ...

    async def preempt(self, invocation: Invocation) -> None:
        """Stop the job of this attempt of the invocation (delete the Job, kill the process)
        for good, without reporting it as cancelled: the dispatcher records the preemption.
        Idempotent; a later attempt of the same invocation gets a job of its own."""
        ...

    async def adopt(self, active: Sequence[Invocation]) -> list[str]:
        """After a restart: re-attach to the work of these invocations. Returns the ids of
        which the backend has no trace (never launched, or gone)."""
        ...

    def logs(self, invocation: Invocation, follow: bool, attempt: int | None = None) -> AsyncIterator[bytes]:
        """The output of one attempt of the invocation (None: its current one); with `follow`,
        and the current attempt, then what it writes until it ends. Nothing for an attempt that
        has not run yet; NotFound for one whose output the backend no longer has."""
        ...


@dataclass(frozen=True)
class ClientCounters:
    """What a backend's client of its cluster has met since it started: for /metrics, so that
    throttling (429), server errors (5xx) and expired watches (410) can be seen and counted."""

    errors: Mapping[str, int]
    """Error answers by status code ("429", "500", "504", "410"), and "connection" for failed
    connections; retried ones included."""
    retries: int
    """Requests sent again after a 429, a 5xx or a failed connection."""
    watch_restarts: Mapping[str, int]
    """Watches started again, by why: "ended" (the server's timeout), "expired" (410 Gone: listed
    again), "dropped" (a failed connection or an error answer)."""
    credential_refreshes: int = 0
    """Credentials asked for again after a 401 (a rotated service-account token read again)."""


@runtime_checkable
class CountsClientFaults(Protocol):
    """A backend whose client of a cluster counts its faults (the kubernetes one)."""

    def client_counters(self) -> ClientCounters: ...
