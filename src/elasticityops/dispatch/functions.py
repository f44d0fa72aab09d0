"""Function specs as the gateway knows them: one source for the accept route and the dispatcher.

The accept route needs a spec per request and the dispatcher one per function per cycle; both
read it here, so neither costs a database read once a name is known, and both see the same spec.
This gateway is the only writer of functions, and it invalidates a name on every write."""

from __future__ import annotations

from collections.abc import Iterable

from elasticityops.domain.ports import FunctionRecord, Store


class FunctionCache:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._records: dict[str, FunctionRecord] = {}
        self._generation = 0

    async def get(self, name: str) -> FunctionRecord | None:
        record = self._records.get(name)
        if record is None:
            generation = self._generation
            record = await self._store.get_function(name)
            # A write that landed while we read makes what we read possibly stale: don't keep it.
            if record is not None and generation == self._generation:
                self._records[name] = record
        return record

    async def get_many(self, names: Iterable[str]) -> dict[str, FunctionRecord]:
        """The records of those names that exist (a missing name was deleted)."""
        found: dict[str, FunctionRecord] = {}
        for name in sorted(set(names)):
            record = await self.get(name)
            if record is not None:
                found[name] = record
        return found

    def forget(self, name: str) -> None:
        self._generation += 1
        self._records.pop(name, None)
