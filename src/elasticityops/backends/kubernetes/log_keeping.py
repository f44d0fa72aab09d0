"""On a MultiKueue manager, each pod of ours in a worker carries the finalizer
KEEP_LOG_FINALIZER (manifests.py): MultiKueue deletes the worker's copy of the Job as soon as
the work ends, and its pod with it, so the pod's log would be gone before anyone asked. Once
the pod has ended (or is being deleted), the gateway reads the last bytes of its log, keeps them
in the store (committed), and only then takes its finalizer off, letting the pod go. A pod
whose log cannot be read (it never started; its node is gone) is let go all the same: nothing
is held for a log that is not there. A pod seen again while this is under way is not read
twice; one the gateway did not let go (it stopped first) is seen again by the next leader's
first list, and kept then."""

from __future__ import annotations

import asyncio
import logging

from elasticityops.backends.kubernetes.labels import INVOCATION_LABEL, KEEP_LOG_FINALIZER
from elasticityops.backends.kubernetes.manifests import CONTAINER_NAME
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.observe import attempt_of
from elasticityops.backends.kubernetes.outlet import Outlet
from elasticityops.backends.kubernetes.workloads import Workloads
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import EopsError, NotFound, TemporaryError
from elasticityops.domain.kept_logs import KeptLog, LastBytes
from elasticityops.domain.ports import LogKeeper

log = logging.getLogger(__name__)

STRATEGIC_MERGE = "application/strategic-merge-patch+json"
# A pod's log is the kubelet's current file (10 MiB by default): read within this, or let go.
READ_TIMEOUT_S = 120.0
STORE_RETRY_S = 5.0  # a store away (PostgreSQL restarting): the pod waits, and this is tried again
# Logs read at once: a burst's pods end together, and each read is a stream through the worker's
# API server to its node; their bytes are held only until kept (2 x the limit each at most).
CONCURRENT_READS = 8


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
        self._reads = asyncio.Semaphore(CONCURRENT_READS)
        self._busy: set[tuple[str, str]] = set()  # (worker, pod uid) being kept now
        self.kept = 0
        self.let_go = 0

    def on_pod(self, worker: str, pod: KubeObject) -> None:
        """A pod of ours in `worker`, as its watch shows it: kept and let go once it has ended."""
        meta = pod.get("metadata") or {}
        if KEEP_LOG_FINALIZER not in (meta.get("finalizers") or ()):
            return
        phase = (pod.get("status") or {}).get("phase")
        if phase not in ("Succeeded", "Failed") and not meta.get("deletionTimestamp"):
            return
        key = (worker, str(meta.get("uid", "")))
        if key in self._busy:
            return
        self._busy.add(key)
        self._outlet.chore(self._keep(worker, pod, key))

    async def _keep(self, worker: str, pod: KubeObject, key: tuple[str, str]) -> None:
        try:
            name = str((pod.get("metadata") or {}).get("name", ""))
            if self._keeper is not None:
                async with self._reads:
                    data = await self._read(worker, name)
                if data is not None:
                    await self._store(pod, worker, data)
            await self._let_go(worker, name)
        finally:
            self._busy.discard(key)

    async def _read(self, worker: str, name: str) -> tuple[bytes, bool] | None:
        """The last bytes of the pod's log and whether its beginning was dropped; None when it
        cannot be read."""
        api = self._workloads.api_for(worker)
        tail = LastBytes(self._limit)
        path = f"{self._workloads.pods_path}/{name}/log"
        try:
            async with asyncio.timeout(READ_TIMEOUT_S):
                async for chunk in api.stream(path, {"container": CONTAINER_NAME}, False):
                    tail.add(chunk)
        except (EopsError, TimeoutError) as exc:
            log.info("the log of pod %s in %s is not kept: %s", name, worker, exc or "read too slowly")
            return None
        return tail.value(), tail.dropped

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
        while True:
            try:
                await keeper.keep_log(kept)
                self.kept += 1
                return
            except TemporaryError as exc:
                log.warning("the log of %s waits for the store: %s", kept.invocation_id, exc)
                await self._clock.sleep(STORE_RETRY_S)
            except EopsError as exc:
                # Refused for good: no pod is held for it.
                log.warning("the log of %s is not kept: %s", kept.invocation_id, exc)
                return

    async def _let_go(self, worker: str, name: str) -> None:
        body = {"metadata": {"$deleteFromPrimitiveList/finalizers": [KEEP_LOG_FINALIZER]}}
        try:
            await self._workloads.api_for(worker).request(
                "PATCH", f"{self._workloads.pods_path}/{name}", body=body, content_type=STRATEGIC_MERGE
            )
            self.let_go += 1
        except NotFound:
            pass
        except EopsError as exc:
            # Seen again at its next event (its deletion) or the next list, and tried then.
            log.warning("pod %s in %s not let go: %s", name, worker, exc)
