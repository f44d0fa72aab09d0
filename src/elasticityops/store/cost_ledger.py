"""The node-seconds ledger (node_seconds.py) and the GPU nodes' records (node_history.py) as the
store offers them: the charges no transition ends, the reads of the ledger, the records a
starting node watch goes on from. Those a transition or event ends are written in its own
transaction (compare_and_set.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Connection

from elasticityops.domain.node_history import NodeHistory
from elasticityops.domain.node_seconds import Charge, CostGroup, Phase, PhaseTotal, RunningTotal
from elasticityops.store import node_history
from elasticityops.store import node_seconds as ledger
from elasticityops.store.database import Database


class SqlCostLedger(Database):
    """The LedgerStore and the NodeHistorySource of the port (domain/ports/store.py)."""

    async def charge(self, charges: Sequence[Charge]) -> None:
        """Ledger rows for node time that no transition ends: a node's idle time after its last
        attempt, warm capacity no invocation used. A charge recorded again changes nothing."""

        def run(conn: Connection) -> None:
            ledger.write(conn, charges, self.pricing)

        await self._write(run)

    async def gpu_node_history(self, cluster: str = "") -> list[NodeHistory]:
        """Every GPU node's record of one cluster (domain/node_history.py; "": the gateway's own,
        else a MultiKueue worker's): the node watch's start reads them."""
        return await self._read(lambda conn: node_history.read(conn, cluster))

    async def node_seconds_of(self, invocation_id: str) -> dict[Phase, PhaseTotal]:
        return await self._read(lambda conn: ledger.of_invocation(conn, invocation_id))

    async def cost_report(self, since: datetime, until: datetime, by: Sequence[str]) -> list[CostGroup]:
        return await self._read(lambda conn: ledger.report(conn, since, until, by))

    async def node_seconds_totals(self) -> list[RunningTotal]:
        return await self._read(ledger.totals)
