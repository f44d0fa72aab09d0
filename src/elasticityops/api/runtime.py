"""What the routes work with: the parts of a running gateway, built by server.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from elasticityops.api.auth import TokenChecker
from elasticityops.api.metrics import Metrics
from elasticityops.dispatch.hub import ChangeHub
from elasticityops.domain.clock import Clock
from elasticityops.domain.ports import Backend, FunctionRecord, Store
from elasticityops.settings import Settings


class DispatcherControl(Protocol):
    """The part of the dispatcher the API uses."""

    @property
    def running(self) -> bool: ...

    async def cancel(self, invocation_id: str) -> object: ...


class FunctionCache:
    """Function records by name, so accepting an invocation costs no database read for it.
    This gateway is the only writer of functions, and it invalidates on every write."""

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

    def forget(self, name: str) -> None:
        self._generation += 1
        self._records.pop(name, None)


@dataclass
class Runtime:
    settings: Settings
    store: Store
    hub: ChangeHub
    backend: Backend
    dispatcher: DispatcherControl
    clock: Clock
    server_secret: bytes
    tokens: TokenChecker
    functions: FunctionCache
    metrics: Metrics = field(default_factory=Metrics)
