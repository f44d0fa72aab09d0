"""Function specs as the gateway knows them: one source for the accept route and the dispatcher.

`get` is a name's current version (what the accept route stamps on a new invocation); `version`
is one version by (name, number), which never changes once written, and is what an invocation
runs: the one it was accepted with, whatever was deployed since.

The accept route needs a spec per request and the dispatcher one per function per cycle; both
read it here, so neither costs a database read once a name is known, and both see the same spec.
This gateway invalidates a name on each of its own writes at once. Other replicas on the same
database write functions too: every write bumps a generation counter in its own transaction,
and a cache whose last look at the counter is older than `check_s` reads it once (one small
read shared by whoever asks meanwhile) and drops every current record when it moved. So a
deploy or delete elsewhere is seen here within `check_s`, at the cost of at most one read per
`check_s`, never one per request. Versions never change, so they are never dropped."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterable

from elasticityops.domain.clock import Clock, SystemClock
from elasticityops.domain.functions import FunctionSpec
from elasticityops.domain.ports import FunctionRecord, FunctionStore

# Versions are immutable, so a cached one is never stale; this only bounds the memory.
_MAX_VERSIONS = 4096


class FunctionCache:
    def __init__(self, store: FunctionStore, clock: Clock | None = None, check_s: float = 1.0) -> None:
        self._store = store
        self._clock = clock or SystemClock()
        self._check_s = check_s
        self._records: dict[str, FunctionRecord] = {}
        self._generation = 0
        self._versions: dict[tuple[str, int], FunctionSpec] = {}
        self._stored_generation: int | None = None  # the store's counter as last read
        self._checked_at = float("-inf")
        self._checking: asyncio.Task[None] | None = None
        # A name being read: a burst of accepts missing it together waits for one read (80 reads
        # in a row on the store's one read thread spread the burst's inserts over many commits).
        self._loading: dict[str, asyncio.Task[FunctionRecord | None]] = {}

    async def get(self, name: str) -> FunctionRecord | None:
        if self._clock.monotonic() - self._checked_at >= self._check_s:
            await self._check()
        record = self._records.get(name)
        if record is not None:
            return record
        loading = self._loading.get(name)
        if loading is None:
            loading = asyncio.create_task(self._load(name), name=f"function {name}")
            self._loading[name] = loading
            loading.add_done_callback(functools.partial(self._loaded, name))
        return await asyncio.shield(loading)

    async def _load(self, name: str) -> FunctionRecord | None:
        generation = self._generation
        record = await self._store.get_function(name)
        # A write that landed while we read makes what we read possibly stale: don't keep it.
        if record is not None and generation == self._generation:
            self._records[name] = record
        return record

    def _loaded(self, name: str, task: asyncio.Task[FunctionRecord | None]) -> None:
        if self._loading.get(name) is task:
            del self._loading[name]

    async def get_many(self, names: Iterable[str]) -> dict[str, FunctionRecord]:
        """The records of those names that exist (a missing name was deleted)."""
        found: dict[str, FunctionRecord] = {}
        for name in sorted(set(names)):
            record = await self.get(name)
            if record is not None:
                found[name] = record
        return found

    async def version(self, name: str, version: int) -> FunctionSpec | None:
        """That version of the name's spec (kept after a redeploy or a delete), None if it was
        never stored (an invocation accepted before the gateway kept every version)."""
        key = (name, version)
        spec = self._versions.get(key)
        if spec is None:
            spec = await self._store.get_function_version(name, version)
            if spec is not None:
                if len(self._versions) >= _MAX_VERSIONS:
                    self._versions.pop(next(iter(self._versions)))
                self._versions[key] = spec
        return spec

    async def versions(self, keys: Iterable[tuple[str, int]]) -> dict[tuple[str, int], FunctionSpec]:
        """The specs of those (name, version) that are stored."""
        found: dict[tuple[str, int], FunctionSpec] = {}
        for name, number in sorted(set(keys)):
            spec = await self.version(name, number)
            if spec is not None:
                found[(name, number)] = spec
        return found

    def forget(self, name: str) -> None:
        self._generation += 1
        self._records.pop(name, None)
        self._loading.pop(name, None)  # who asks from now on reads what was written

    async def _check(self) -> None:
        """Read the store's generation (one read for all who ask while it is under way)."""
        if self._checking is None:
            self._checking = asyncio.create_task(self._read_generation(), name="functions generation")
        task = self._checking
        try:
            await asyncio.shield(task)
        finally:
            if task.done() and self._checking is task:
                self._checking = None

    async def _read_generation(self) -> None:
        started = self._clock.monotonic()
        stored = await self._store.functions_generation()
        if stored != self._stored_generation:
            # Another replica (or this one) wrote a function: what is cached may be stale. Reads
            # under way are not kept either (the local generation moved).
            self._generation += 1
            self._records.clear()
            self._loading.clear()
            self._stored_generation = stored
        # From when the read began: a write that landed after it is caught by the next check.
        self._checked_at = started
