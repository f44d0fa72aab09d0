"""What `eops serve` does before the app runs: the store opened (and migrated), spec files
deployed."""

from __future__ import annotations

import os
from pathlib import Path

from elasticityops.domain.clock import Clock
from elasticityops.domain.errors import FieldProblem, InvalidInput
from elasticityops.domain.ports import FunctionRecord
from elasticityops.domain.spec_files import load_spec_file
from elasticityops.pricing.table import capacity_of_backend
from elasticityops.server.data_dir import prepare_data_dir, private_database_file, sqlite_path
from elasticityops.settings import Settings
from elasticityops.store.node_seconds import Pricing
from elasticityops.store.sql import SqlStore


async def open_store(settings: Settings, *, create: bool = True) -> SqlStore:
    """The store of these settings. `create=False`: a SQLite database that is not there is
    refused (a mistyped --data-dir must not quietly start an empty one)."""
    database = sqlite_path(settings.database_url)
    if not create and database is not None and not database.is_file():
        raise InvalidInput(
            [
                FieldProblem(
                    "--data-dir / --database-url",
                    f"there is no database at {database}",
                    "check the path (a gateway's data dir holds eops.db), or pass --create to make one",
                )
            ]
        )
    prepare_data_dir(settings.data_dir)
    private_database_file(settings.database_url)
    return await SqlStore.open(
        settings.database_url,
        group_commit_max=settings.store.group_commit_max,
        read_threads=settings.store.read_threads,
        pricing=Pricing(capacity=capacity_of_backend(settings.backend)),
    )


async def deploy_files(store: SqlStore, files: list[Path], clock: Clock) -> list[FunctionRecord]:
    """Deploy each spec file as `eops fn deploy` does (domain/spec_files.py: its relative paths
    are from its directory), so either way the same file is the same spec and version."""
    records = []
    for file in files:
        spec = load_spec_file(file.read_text(encoding="utf-8"), file.resolve(), os.path.exists)
        record, _ = await store.put_function(spec, clock.now())
        records.append(record)
    return records
