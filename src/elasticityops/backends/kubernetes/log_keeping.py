"""On a MultiKueue manager, each pod of ours in a worker carries the finalizer
KEEP_LOG_FINALIZER (manifests.py): MultiKueue deletes the worker's copy of the Job as soon as
the work ends, and its pod with it, so the pod's log would be gone before anyone asked. Once
the pod has ended, the gateway reads the last bytes of its log, keeps them in the store
(committed), and only then takes its finalizer off, letting the pod go.

A pod being deleted before it ended (a cancel, a timeout) is read once its grace period is
over (its deletionTimestamp), when what it printed after SIGTERM is in the log too. A log that
cannot be read (the pod never started; its node is gone) lets the pod go without one, after a
few tries where the failure may pass (a busy API server); so does a store that refuses it for
minutes: nothing is held for ever for a log. A pod seen again while this is under way is not
read twice; one the gateway did not let go (it stopped first) is seen again by the next
leader's first list, and kept then."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import TypeVar

from elasticityops.backends.kubernetes.labels import INVOCATION_LABEL, KEEP_LOG_FINALIZER
from elasticityops.backends.kubernetes.manifests import CONTAINER_NAME
from elasticityops.backends.kubernetes.objects import KubeObject, parse_time
from elasticityops.backends.kubernetes.observe import attempt_of
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import EopsError, NotFound, TemporaryError
from elasticityops.domain.kept_logs import KeptLog, LastBytes
from elasticityops.domain.ports import LogKeeper

log = logging.getLogger(__name__)
T = TypeVar("T")

STRATEGIC_MERGE = "application/strategic-merge-patch+json"
# A pod's log is the kubelet's current file (10 MiB by default): read within this, or let go.
READ_TIMEOUT_S = 120.0
RETRY_S = 5.0  # between tries of a read, a keep or a let-go that failed in a way that may pass
READ_TRIES = 3
LET_GO_TRIES = 5
STORE_TRIES = 60  # five minutes of a store away (PostgreSQL restarting), then the pod goes
GRACE_MARGIN_S = 2.0  # after a deleted pod's grace period, for the kubelet to have stopped it
# Logs read at once: a burst's pods end together, and each read is a stream through the worker's
# API server to its node; their bytes are held only until kept (2 x the limit each at most).
CONCURRENT_READS = 8
# A read asks for at most this many of the log's last lines per byte kept (tailLines): the
# kubelet's whole file need not cross the API server for the last 16 KiB of it.
LINES_PER_BYTE = 1 / 8


class LogKeeping:
    def __init__(
        self, workloads: Workloads, keeper: LogKeeper | None, clock: Clock, outlet: Outlet, limit: int
    ) -> None:
        """`keeper`: where the logs are kept (the store); None, or a `limit` of 0 bytes, keeps
        none and lets each pod go (pods made while the gateway kept logs still carry the
        finalizer after it stops keeping them)."""
        self._workloads = workloads
        self._keeper = keeper if limit > 0 else None
        self._clock = clock
        self._outlet = outlet
        self._limit = limit
        self._tail_lines = max(1, int(limit * LINES_PER_BYTE))
        self._reads = asyncio.Semaphore(CONCURRENT_READS)
        self._busy: set[tuple[str, str]] = set()  # (worker, pod uid) being kept now
        self.kept = 0
        self.let_go = 0

    def clear(self) -> None:
        """Begin again (the backend starts): a keep a stop cancelled before it began is not
        under way any more, and the first lists show its pod again."""
        self._busy.clear()

    def on_pod(self, worker: str, pod: KubeObject) -> None:
        """A pod of ours in `worker`, as its watch shows it: kept and let go once it has ended."""
        meta = pod.get("metadata") or {}
        if KEEP_LOG_FINALIZER not in (meta.get("finalizers") or ()):
            return
        ended = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        deleting = parse_time(meta.get("deletionTimestamp"))
        if not ended and deleting is None:
            return
        key = (worker, str(meta.get("uid") or meta.get("name", "")))
        if key in self._busy:
            return
        self._busy.add(key)
        self._outlet.chore(self._keep(worker, pod, key, None if ended else deleting))

    async def _keep(self, worker: str, pod: KubeObject, key: tuple[str, str], until: datetime | None) -> None:
        """`until`: a pod deleted before it ended is read once its grace period is over."""
        try:
            if until is not None:
                await self._clock.sleep(
                    max(0.0, (until - self._clock.now()).total_seconds()) + GRACE_MARGIN_S
                )
            name = str((pod.get("metadata") or {}).get("name", ""))
            if self._keeper is not None:
                data = await self._tries(
                    READ_TRIES, f"reading the log of {name}", lambda: self._read(worker, name)
                )
                if data is not None:
                    await self._store(pod, worker, data)
            await self._tries(LET_GO_TRIES, f"letting pod {name} go", lambda: self._let_go(worker, name))
        finally:
            self._busy.discard(key)

    async def _tries(self, tries: int, what: str, act: Callable[[], Awaitable[T]]) -> T | None:
        """`act`, tried again after RETRY_S while it fails in a way that may pass; None when
        it failed for good, or `tries` times, or the object is gone."""
        for left in range(tries - 1, -1, -1):
            try:
                return await act()
            except NotFound:
                return None
            except (TemporaryError, TimeoutError) as exc:
                if not left:
                    log.warning("%s in a MultiKueue worker failed %d times: %s", what, tries, exc)
                    return None
            except EopsError as exc:
                log.info("%s in a MultiKueue worker failed: %s", what, exc)
                return None
            await self._clock.sleep(RETRY_S)
        return None

    async def _read(self, worker: str, name: str) -> tuple[bytes, bool]:
        """The last bytes of the pod's log, and whether its beginning was dropped."""
        api = self._workloads.api_for(worker)
        tail = LastBytes(self._limit)
        lines = 0
        params: dict[str, str | int] = {"container": CONTAINER_NAME, "tailLines": self._tail_lines}
        # Each try takes a turn (a retry waits outside, not holding one from the pods behind it).
        async with self._reads:
            async with asyncio.timeout(READ_TIMEOUT_S):  # the read's own time, not its wait for a turn
                async for chunk in api.stream(f"{self._workloads.pods_path}/{name}/log", params, False):
                    tail.add(chunk)
                    lines += chunk.count(b"\n")
        # As many lines as asked for: there may have been more before them.
        return tail.value(), tail.dropped or lines >= self._tail_lines

    async def _store(self, pod: KubeObject, worker: str, data: tuple[bytes, bool]) -> None:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        kept = KeptLog(
            invocation_id=str(labels.get(INVOCATION_LABEL, "")),
            attempt=attempt_of(pod),
            cluster=worker,
            data=data[0],
            dropped=data[1],
            kept_at=self._clock.now(),
        )
        keeper = self._keeper
        assert keeper is not None

        async def keep() -> bool:
            await keeper.keep_log(kept)
            return True

        if await self._tries(STORE_TRIES, f"keeping the log of {kept.invocation_id}", keep):
            self.kept += 1

    async def _let_go(self, worker: str, name: str) -> bool:
        body = {"metadata": {"$deleteFromPrimitiveList/finalizers": [KEEP_LOG_FINALIZER]}}
        await self._workloads.api_for(worker).request(
            "PATCH", f"{self._workloads.pods_path}/{name}", body=body, content_type=STRATEGIC_MERGE
        )
        self.let_go += 1
        return True
