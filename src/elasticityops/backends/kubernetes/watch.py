"""One long-lived watch per kind: list, then watch from the list's resourceVersion, resume
after every server timeout or dropped connection from the last resourceVersion seen (bookmarks
keep it fresh), and relist on 410 Gone. Never a poll per invocation, never a watch per Job.

A relist delivers every current object again and synthesises DELETED for objects that vanished
while the watch was down, so the consumer sees one consistent stream."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from elasticityops.backends.kubernetes.api import KubeApi, ResourceExpired
from elasticityops.backends.kubernetes.decode import Decoder, decode_full
from elasticityops.backends.kubernetes.objects import KubeObject
from elasticityops.backends.kubernetes.ratelimit import backoff_delay
from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import EopsError, TemporaryError

Handler = Callable[[str, KubeObject], Awaitable[None]]
log = logging.getLogger(__name__)


@dataclass
class WatchStats:
    relists: int = 0
    resumes: int = 0  # the server ended a watch (its timeout) and it was resumed
    expired: int = 0  # 410 Gone: the version it resumed from was compacted away; relisted
    dropped: int = 0  # the connection failed or the server answered an error; resumed
    events: int = 0
    bookmarks: int = 0
    errors: list[str] = field(default_factory=list)


class KindWatch:
    """Watches one collection path (e.g. the namespace's Jobs) with fixed selectors."""

    def __init__(
        self,
        api: KubeApi,
        path: str,
        params: Mapping[str, str],
        handler: Handler,
        clock: Clock,
        *,
        track_deletes: bool = True,
        list_everything: bool = True,
        decode: Decoder = decode_full,
        on_listed: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """`on_listed`: awaited after each full list has been handed over (the first, and each
        one after a 410 Gone)."""
        self._decode = decode
        self._on_listed = on_listed
        self._api = api
        self.path = path
        self._params = dict(params)
        self._handler = handler
        self._clock = clock
        self._track = track_deletes
        # Events: only their future matters, so the first list reads one item for its version.
        self._list_everything = list_everything
        self._known: set[str] = set()
        self.resource_version = ""
        self.stats = WatchStats()
        self.synced = False

    async def relist(self) -> None:
        self.stats.relists += 1
        if self._list_everything:
            items, rv = await self._api.list(self.path, self._params)
        else:
            doc = await self._api.request("GET", self.path, params={**self._params, "limit": 1})
            items, rv = [], str((doc.get("metadata") or {}).get("resourceVersion", ""))
        seen: set[str] = set()
        for obj in items:
            name = (obj.get("metadata") or {}).get("name", "")
            seen.add(name)
            await self._handler("ADDED" if name not in self._known else "MODIFIED", obj)
        if self._track:
            for name in self._known - seen:
                await self._handler("DELETED", {"metadata": {"name": name}, "gone": True})
            self._known = seen
        self.resource_version = rv
        self.synced = True
        if self._on_listed is not None:
            await self._on_listed()

    async def _watch_once(self) -> None:
        params = {**self._params, "resourceVersion": self.resource_version}
        async for kind, obj in self._api.watch(self.path, params, self._decode):
            meta = obj.get("metadata") or {}
            rv = meta.get("resourceVersion")
            if rv:
                self.resource_version = str(rv)
            if kind == "BOOKMARK":
                self.stats.bookmarks += 1
                continue
            self.stats.events += 1
            name = meta.get("name", "")
            if self._track:
                if kind == "DELETED":
                    self._known.discard(name)
                else:
                    self._known.add(name)
            await self._handler(kind, obj)

    async def run(self) -> None:
        """Forever (until cancelled): relist when needed, watch, resume."""
        failures = 0
        need_list = not self.synced
        while True:
            try:
                if need_list:
                    await self.relist()
                    need_list = False
                await self._watch_once()
                self.stats.resumes += 1
                failures = 0
            except ResourceExpired as exc:
                self.stats.expired += 1
                log.info("watch %s: %s; listing again", self.path, exc.message)
                need_list = True
            except TemporaryError as exc:
                self.stats.dropped += 1
                self.stats.errors.append(exc.message)
                del self.stats.errors[:-20]
                log.warning("watch %s: %s; resuming", self.path, exc.message)
                await self._clock.sleep(backoff_delay(failures, 0.5, 30.0))
                failures += 1
            except EopsError as exc:
                # Permanent (e.g. RBAC): keep trying slowly so a fixed Role heals the gateway.
                self.stats.errors.append(exc.message)
                del self.stats.errors[:-20]
                log.error("watch %s: %s", self.path, exc.message)
                await self._clock.sleep(30.0)
                need_list = True
