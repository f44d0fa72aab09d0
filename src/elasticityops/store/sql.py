"""The Store on SQLAlchemy: SQLite (default, a WAL-mode file) or PostgreSQL, chosen by URL.

One part per aggregate of the port (domain/ports/store.py), each in a module of its own, all on
one Database (database.py): writes go through its one group-commit writer thread (writer.py),
reads run on its small thread pool."""

from __future__ import annotations

import asyncio

from sqlalchemy.exc import SQLAlchemyError

from elasticityops.domain.ports import Store
from elasticityops.store import migrate
from elasticityops.store import node_seconds as ledger
from elasticityops.store.batches import SqlBatches
from elasticityops.store.cancels import SqlCancels
from elasticityops.store.cost_ledger import SqlCostLedger
from elasticityops.store.database import make_engine, translate
from elasticityops.store.functions import SqlFunctions
from elasticityops.store.housekeeping import SqlHousekeeping
from elasticityops.store.invocation_reads import SqlInvocationReads
from elasticityops.store.kept_logs import SqlKeptLogs
from elasticityops.store.new_invocations import SqlNewInvocations
from elasticityops.store.settings import StoreSettings
from elasticityops.store.tokens import SqlTokens
from elasticityops.store.transitions import SqlTransitions
from elasticityops.store.webhooks import SqlWebhooks


class SqlStore(
    SqlFunctions,
    SqlNewInvocations,
    SqlBatches,
    SqlInvocationReads,
    SqlTransitions,
    SqlCancels,
    SqlCostLedger,
    SqlKeptLogs,
    SqlTokens,
    SqlHousekeeping,
    SqlWebhooks,
    Store,
):
    """The Store of the port (domain/ports/store.py): its parts, on one Database. `Store` is
    named as a base so that mypy checks every part's methods against the port's."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        group_commit_max: int = StoreSettings.group_commit_max,
        read_threads: int = StoreSettings.read_threads,
        pricing: ledger.Pricing | None = None,
    ) -> SqlStore:
        """Connect and migrate the schema to this release's (see migrate.py)."""
        engine = make_engine(url, read_threads)
        try:
            await asyncio.to_thread(migrate.upgrade, engine)
        except BaseException as exc:
            engine.dispose()
            if isinstance(exc, SQLAlchemyError):
                raise translate(exc) from None
            raise
        return cls(engine, group_commit_max=group_commit_max, read_threads=read_threads, pricing=pricing)
