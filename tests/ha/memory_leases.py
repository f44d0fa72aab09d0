"""An in-memory Lease for the elector's tests, kept the way the API server keeps one: every write
a new resourceVersion, a write at an old one a Conflict, a create of one that exists a Conflict.
Each replica's view can fail or hang on its own (a partition, a request never answered)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace

from elasticityops.domain.errors import Conflict, EopsError, NotFound
from elasticityops.domain.lease import LeaseRecord


class Leases:
    """One Lease, kept the way the API server keeps it: every write a new resourceVersion."""

    def __init__(self) -> None:
        self.record: LeaseRecord | None = None
        self.version = 0
        self.writes: list[LeaseRecord] = []

    def stored(self, record: LeaseRecord) -> LeaseRecord:
        self.version += 1
        self.record = replace(record, resource_version=str(self.version))
        self.writes.append(self.record)
        return self.record


@dataclass
class Replica:
    """One replica's view of the Lease: its own failures (a partition, a hung request)."""

    leases: Leases
    fail: EopsError | None = None
    hang: bool = False
    hung: list[asyncio.Event] = field(default_factory=list)

    async def _gate(self) -> None:
        await asyncio.sleep(0)
        if self.hang:
            event = asyncio.Event()
            self.hung.append(event)
            await event.wait()
        if self.fail is not None:
            raise self.fail

    async def get(self) -> LeaseRecord | None:
        await self._gate()
        return self.leases.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        await self._gate()
        if self.leases.record is not None:
            raise Conflict("leases.coordination.k8s.io already exists")
        return self.leases.stored(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        await self._gate()
        if self.leases.record is None:
            raise NotFound("no lease")
        if record.resource_version != self.leases.record.resource_version:
            raise Conflict("the object has been modified")
        return self.leases.stored(record)
