"""Schema migrations at start-up (store/migrate.py), on SQLite and PostgreSQL: a fresh database,
one made by the release before migrations, gateways starting together (threads and processes),
a database newer than the gateway, a failed migration, and the check that the migrations build
exactly what tables.py says."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Column,
    DateTime,
    Engine,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    insert,
    inspect,
    pool,
    select,
    text,
)

import elasticityops
from elasticityops.api.auth import TokenChecker
from elasticityops.domain.clock import ManualClock
from elasticityops.domain.errors import Conflict, EopsError, InvalidInput
from elasticityops.domain.events import BackendEvent
from elasticityops.domain.functions import FunctionSpec, Priority
from elasticityops.domain.invocations import FailureReason, Note, State, new_invocation_id
from elasticityops.domain.node_seconds import Phase, RunningTotal
from elasticityops.domain.ports import Change, NewInvocation, SpecChange
from elasticityops.domain.tokens import Scope
from elasticityops.pricing.table import Capacity
from elasticityops.store import migrate, tables
from elasticityops.store.database import make_engine
from elasticityops.store.sql import SqlStore

from .conftest import open_store

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HEAD = ScriptDirectory(str(migrate.SCRIPT_LOCATION)).get_current_head()
OUR_TABLES = {
    "functions",
    "function_versions",
    "invocations",
    "api_tokens",
    "gateway_secrets",
    "gateway_generations",
    "node_seconds",
    "node_seconds_totals",
    "gpu_node_history",
    "worker_node_history",
    "kept_logs",
    "batches",
    "webhook_secrets",
    "invocation_webhooks",
    "webhook_outbox",
}


def _frozen_schema() -> MetaData:
    """The DDL of the last release before migrations (its tables.py, `create_all`ed at start-up),
    copied here and never to be edited: it is what databases in the field look like."""
    frozen = MetaData()
    Table(
        "functions",
        frozen,
        Column("name", String(64), primary_key=True),
        Column("spec", Text, nullable=False),
        Column("version", Integer, nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
        Column("updated_at", DateTime(timezone=True), nullable=False),
    )
    Table(
        "invocations",
        frozen,
        Column("id", String(40), primary_key=True),
        Column("function", String(64), nullable=False),
        Column("spec_version", Integer, nullable=False),
        Column("priority", String(16), nullable=False),
        Column("state", String(16), nullable=False),
        Column("idempotency_key", String(256), nullable=True),
        Column("accepted_at", DateTime(timezone=True), nullable=False),
        Column("dispatched_at", DateTime(timezone=True), nullable=True),
        Column("capacity_ready_at", DateTime(timezone=True), nullable=True),
        Column("started_at", DateTime(timezone=True), nullable=True),
        Column("finished_at", DateTime(timezone=True), nullable=True),
        Column("exit_code", Integer, nullable=True),
        Column("failure_reason", String(32), nullable=True),
        Column("message", Text, nullable=False),
        Column("node", String(256), nullable=True),
        Column("notes", Text, nullable=False),
        Column("result", LargeBinary, nullable=True),
        Column("payload", LargeBinary, nullable=False),
        UniqueConstraint("function", "idempotency_key", name="uq_invocation_idempotency"),
        Index("ix_invocations_state_id", "state", "id"),
        Index("ix_invocations_function_id", "function", "id"),
    )
    Table(
        "api_tokens",
        frozen,
        Column("token_hash", String(64), primary_key=True),
        Column("name", String(128), nullable=False),
        Column("created_at", DateTime(timezone=True), nullable=False),
    )
    return frozen


# Rows as the previous release wrote them: its canonical spec JSON, its notes JSON.
OLD_SPEC = (
    '{"annotations": {}, "command": ["python", "-c", "pass"], "env": {}, "gpu": {"count": 1, '
    '"type": "nvidia-tesla-t4"}, "image": "python:3.11-slim", "machine_type": "n1-standard-4", '
    '"max_concurrency": 500, "name": "hello", "priority": "normal", "resources": {"cpu": null, '
    '"memory": null}, "timeout_seconds": 3600}'
)
QUEUED, PENDING, RUNNING, SUCCEEDED, FAILED, TIMED_OUT = (
    f"inv-01m8ryqdkdy6n1gbqhrbdcspr{i}" for i in range(6)
)


def _old_invocation(id_: str, state: str, **extra: Any) -> dict[str, Any]:
    row: dict[str, Any] = {
        "id": id_,
        "function": "hello",
        "spec_version": 1,
        "priority": "normal",
        "state": state,
        "idempotency_key": None,
        "accepted_at": T0,
        "dispatched_at": None,
        "capacity_ready_at": None,
        "started_at": None,
        "finished_at": None,
        "exit_code": None,
        "failure_reason": None,
        "message": "",
        "node": None,
        "notes": "[]",
        "result": None,
        "payload": b'{"n": "%s"}' % id_[-1:].encode(),
    }
    assert set(extra) <= set(row), "every row names every column: one executemany takes the first's"
    return {**row, **extra}


OLD_INVOCATIONS = [
    _old_invocation(QUEUED, "queued", idempotency_key="k1"),
    _old_invocation(PENDING, "pending", dispatched_at=T0 + timedelta(seconds=1)),
    _old_invocation(
        RUNNING,
        "running",
        dispatched_at=T0 + timedelta(seconds=1),
        capacity_ready_at=T0 + timedelta(seconds=20),
        started_at=T0 + timedelta(seconds=25),
        node="gpu-node-7",
        notes='[{"at": "2026-03-01T12:00:02+00:00", "kind": "TriggeredScaleUp", "message": "pool 1->2"}]',
    ),
    _old_invocation(
        SUCCEEDED,
        "succeeded",
        dispatched_at=T0,
        started_at=T0 + timedelta(seconds=2),
        finished_at=T0 + timedelta(seconds=9),
        exit_code=0,
        result=b'{"answer": 42}',
    ),
    _old_invocation(
        TIMED_OUT,
        "timed_out",
        dispatched_at=T0,
        finished_at=T0 + timedelta(seconds=60),
        failure_reason="deadline_exceeded",  # the Kubernetes backend's own word before 0002
        message="ran past its timeout of 60 s (waiting for a node included)",
    ),
    _old_invocation(
        FAILED,
        "failed",
        dispatched_at=T0,
        started_at=T0 + timedelta(seconds=2),
        finished_at=T0 + timedelta(seconds=5),
        exit_code=3,
        failure_reason="exit_code",
        message="boom",
    ),
]


def _previous_release_database(url: str) -> None:
    schema = _frozen_schema()
    with _engine(url) as engine, engine.begin() as conn:
        schema.create_all(conn)
        conn.execute(
            insert(schema.tables["functions"]).values(
                name="hello", spec=OLD_SPEC, version=1, created_at=T0, updated_at=T0
            )
        )
        # Deployed three times: only its current spec, version 3, was ever kept.
        conn.execute(
            insert(schema.tables["functions"]).values(
                name="redeployed",
                spec=OLD_SPEC.replace('"name": "hello"', '"name": "redeployed"'),
                version=3,
                created_at=T0,
                updated_at=T0 + timedelta(days=1),
            )
        )
        conn.execute(insert(schema.tables["invocations"]), OLD_INVOCATIONS)
        conn.execute(
            insert(schema.tables["api_tokens"]).values(token_hash="f" * 64, name="admin", created_at=T0)
        )


@contextlib.contextmanager
def _engine(url: str) -> Iterator[Engine]:
    """A throwaway engine for looking at the database from outside the store."""
    engine = create_engine(url, poolclass=pool.NullPool)
    try:
        yield engine
    finally:
        engine.dispose()


def _versions(url: str) -> list[str]:
    with _engine(url) as engine, engine.connect() as conn:
        return [row[0] for row in conn.execute(text("SELECT version_num FROM alembic_version"))]


def _table_names(url: str) -> set[str]:
    with _engine(url) as engine, engine.connect() as conn:
        return set(inspect(conn).get_table_names())


def _schema_differences(url: str, metadata: MetaData) -> list[Any]:
    with _engine(url) as engine, engine.connect() as conn:
        return list(compare_metadata(MigrationContext.configure(conn), metadata))


def new(key: str | None = None) -> NewInvocation:
    return NewInvocation(
        id=new_invocation_id(),
        function="hello",
        spec_version=1,
        priority_rank=Priority.normal.rank,
        accepted_at=T0,
        payload=b"{}",
        idempotency_key=key,
    )


@pytest.fixture
def migrations_logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.INFO, logger=migrate.__name__):
        yield caplog


def _migrations_run(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("migrating the database")]


def test_a_fresh_database_is_migrated_to_head_and_matches_tables_py(
    store_url: str, run: asyncio.Runner, migrations_logged: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        store = await open_store(store_url)
        try:
            inv, created = await store.create_invocation(new(key="k"))
            assert created
            again, created = await store.create_invocation(new(key="k"))
            assert not created, "an idempotency key finds its invocation"
            assert again.id == inv.id
        finally:
            await store.close()

    run.run(body())
    assert _versions(store_url) == [HEAD]
    assert _table_names(store_url) == {*OUR_TABLES, "alembic_version"}
    # The check that makes every schema change a migration: tables.py (which queries use) and
    # what the migrations built must not differ in any way autogenerate can see.
    assert _schema_differences(store_url, tables.metadata) == []
    assert _migrations_run(migrations_logged) == [f"migrating the database schema from nothing to {HEAD}"]


def test_the_schema_check_notices_a_change_made_without_a_migration(
    store_url: str, run: asyncio.Runner
) -> None:
    async def body() -> None:
        await (await open_store(store_url)).close()

    run.run(body())
    changed = MetaData()
    for table in tables.metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["functions"].append_column(Column("never_migrated", String(64), nullable=True))
    Index("ix_never_migrated", changed.tables["functions"].c.never_migrated)
    found = _schema_differences(store_url, changed)
    named = sorted((d[0], d[3].name if d[0] == "add_column" else d[1].name) for d in found)
    assert named == [("add_column", "never_migrated"), ("add_index", "ix_never_migrated")]


def test_a_database_of_the_release_before_migrations_is_adopted_with_its_rows(
    store_url: str, run: asyncio.Runner, migrations_logged: pytest.LogCaptureFixture
) -> None:
    _previous_release_database(store_url)
    assert "alembic_version" not in _table_names(store_url)

    async def body() -> None:
        store = await open_store(store_url)
        try:
            await _old_rows_are_readable(store)
            await _new_writes_work(store)
        finally:
            await store.close()

    run.run(body())
    assert _versions(store_url) == [HEAD]
    assert _schema_differences(store_url, tables.metadata) == []
    assert any(r.getMessage().startswith("adopting a database") for r in migrations_logged.records)
    if HEAD == migrate.BASELINE:
        assert _migrations_run(migrations_logged) == [], "stamped at the baseline, nothing to run"


async def _old_rows_are_readable(store: SqlStore) -> None:
    function = await store.get_function("hello")
    assert function is not None
    assert function.version == 1
    assert function.created_at == T0
    assert function.spec.command == ["python", "-c", "pass"]
    old_token = await store.check_api_token("f" * 64)
    assert old_token is not None, "a token of the previous release still works"
    assert old_token.scope is Scope.admin, "it could do everything before scopes: it stays admin"
    assert old_token.expires_at is None
    assert old_token.id == "tok-ffffffffffff"
    assert old_token.name == "admin"
    assert old_token.created_at == T0
    checker = TokenChecker(store, ManualClock(T0 + timedelta(days=400)))
    assert (await checker.check(b"any token whose hash is not stored")) is None
    assert [t.id for t in await store.list_api_tokens()] == ["tok-ffffffffffff"]
    # 0004: the current spec of each function is its first kept version, under its number.
    kept = await store.get_function_version("hello", 1)
    assert kept is not None
    assert kept.command == ["python", "-c", "pass"]
    redeployed = await store.get_function_version("redeployed", 3)
    assert redeployed is not None
    assert redeployed.name == "redeployed"
    assert await store.get_function_version("redeployed", 1) is None, "never kept, so not made up"
    queued = await store.get_invocation(QUEUED)
    assert queued is not None
    assert queued.spec_version == 1
    counts = await store.counts_by_state()
    assert {s: n for s, n in counts.items() if n} == {
        State.queued: 1,
        State.pending: 1,
        State.running: 1,
        State.succeeded: 1,
        State.failed: 1,
        State.timed_out: 1,
    }
    assert [i.id for i in await store.queued(10)] == [QUEUED]
    assert [i.id for i in await store.active()] == [PENDING, RUNNING]
    page = await store.list_invocations(function="hello", state=None, limit=10, cursor=None)
    assert [i.id for i in page.items] == [TIMED_OUT, FAILED, SUCCEEDED, RUNNING, PENDING, QUEUED]
    running = await store.get_invocation(RUNNING)
    assert running is not None
    assert running.state is State.running
    assert running.node == "gpu-node-7"
    assert running.timeline.started == T0 + timedelta(seconds=25)
    assert running.timeline.capacity_ready == T0 + timedelta(seconds=20)
    assert running.notes == (Note(T0 + timedelta(seconds=2), "TriggeredScaleUp", "pool 1->2"),)
    succeeded = await store.get_invocation(SUCCEEDED)
    assert succeeded is not None
    assert succeeded.exit_code == 0
    assert succeeded.result == b'{"answer": 42}'
    assert succeeded.timeline.finished == T0 + timedelta(seconds=9)
    failed = await store.get_invocation(FAILED)
    assert failed is not None
    assert failed.failure_reason is FailureReason.exit_code
    assert failed.message == "boom"
    assert await store.get_payload(PENDING) == b'{"n": "1"}'
    timed_out = await store.get_invocation(TIMED_OUT)
    assert timed_out is not None
    assert (timed_out.state, timed_out.failure_reason) == (State.timed_out, FailureReason.timeout)


async def _new_writes_work(store: SqlStore) -> None:
    again, created = await store.create_invocation(new(key="k1"))
    assert not created, "the old row's idempotency key still holds"
    assert again.id == QUEUED
    fresh, created = await store.create_invocation(new())
    assert created
    done = await store.apply(
        Change(
            RUNNING,
            State.succeeded,
            T0 + timedelta(minutes=1),
            exit_code=0,
            from_states=frozenset({State.running}),
        )
    )
    assert done is not None
    assert done.timeline.finished == T0 + timedelta(minutes=1)
    await store.record(BackendEvent(PENDING, node="gpu-node-8", capacity_ready=T0 + timedelta(seconds=30)))
    record, outcome = await store.put_function(
        FunctionSpec.model_validate(
            {"name": "hello", "command": ["python", "-c", "pass"], "timeout_seconds": 60}
        ),
        T0 + timedelta(hours=1),
    )
    assert outcome is SpecChange.changed
    assert record.version == 2
    replaced = await store.get_function_version("hello", 1)
    assert replaced is not None
    assert replaced.timeout_seconds == 3600, "version 1 is kept as it was"
    assert await store.delete_function("hello", T0 + timedelta(hours=2))
    record, outcome = await store.put_function(
        FunctionSpec.model_validate({"name": "hello", "command": ["python", "-c", "pass"]}),
        T0 + timedelta(hours=3),
    )
    assert (outcome, record.version) == (SpecChange.created, 3), "a tombstoned name goes on counting"
    with pytest.raises(Conflict):
        await store.create_api_token("again", "f" * 64, T0)
    await store.create_api_token("ci", "e" * 64, T0)
    assert await store.check_api_token("e" * 64)
    narrow = await store.create_api_token(
        "runner", "d" * 64, T0, scope=Scope.invoke, expires_at=T0 + timedelta(days=30)
    )
    found = await store.check_api_token("d" * 64)
    assert found == narrow
    assert (found.scope, found.expires_at) == (Scope.invoke, T0 + timedelta(days=30))
    assert await store.revoke_api_token(narrow.id)
    assert await store.check_api_token("d" * 64) is None
    assert [i.id for i in await store.queued(10)] == [QUEUED, fresh.id]
    pending = await store.get_invocation(PENDING)
    assert pending is not None
    assert pending.node == "gpu-node-8"


def test_gateways_starting_together_on_a_fresh_database_migrate_it_once(
    store_url: str, run: asyncio.Runner, migrations_logged: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        opened = await asyncio.gather(*(open_store(store_url) for _ in range(4)), return_exceptions=True)
        stores = [s for s in opened if isinstance(s, SqlStore)]
        try:
            assert [type(s).__name__ for s in opened] == ["SqlStore"] * 4, f"refused: {opened}"
            await stores[0].put_function(
                FunctionSpec.model_validate({"name": "hello", "command": ["true"]}), T0
            )
            for store in stores:
                assert await store.get_function("hello") is not None
        finally:
            for store in stores:
                await store.close()

    run.run(body())
    assert _versions(store_url) == [HEAD]
    assert _migrations_run(migrations_logged) == [f"migrating the database schema from nothing to {HEAD}"]


def test_stores_of_different_databases_opened_together_in_one_process_each_migrate(
    tmp_path: Path, run: asyncio.Runner
) -> None:
    """Alembic keeps its migration context in module globals: migrations running side by side
    in one process must not see each other's (the store takes turns)."""
    urls = [f"sqlite:///{tmp_path / f'eops-{n}.db'}" for n in range(8)]

    async def body() -> None:
        opened = await asyncio.gather(*(open_store(url) for url in urls), return_exceptions=True)
        for store in opened:
            if isinstance(store, SqlStore):
                await store.close()
        assert [type(s).__name__ for s in opened] == ["SqlStore"] * len(urls), f"refused: {opened}"

    run.run(body())
    assert [_versions(url) for url in urls] == [[HEAD]] * len(urls)


# A gateway process: it gets ready (imports done), waits for the start signal so that all of
# them open the store at once, and logs whether it was the one that migrated.
_GATEWAY = """
import asyncio, logging, pathlib, sys, time
from elasticityops.store.sql import SqlStore
logging.basicConfig(level=logging.INFO, format="%(message)s")
url, flags, n = sys.argv[1], pathlib.Path(sys.argv[2]), sys.argv[3]
(flags / f"ready-{n}").touch()
while not (flags / "go").exists():
    time.sleep(0.002)
async def main() -> None:
    await (await SqlStore.open(url)).close()
asyncio.run(main())
"""


def test_gateway_processes_starting_together_migrate_once(store_url: str, tmp_path: Path) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    env = {**os.environ, "PYTHONPATH": str(Path(elasticityops.__file__).parents[1])}
    gateways = [
        subprocess.Popen(
            [sys.executable, "-c", _GATEWAY, store_url, str(flags), str(n)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for n in range(3)
    ]
    try:
        deadline = time.monotonic() + 120
        while len(list(flags.glob("ready-*"))) < len(gateways) and time.monotonic() < deadline:
            time.sleep(0.01)
        (flags / "go").touch()
        outputs = [g.communicate(timeout=120)[0] for g in gateways]
    finally:
        for g in gateways:
            g.kill()
    if [g.returncode for g in gateways] != [0, 0, 0]:
        # In full: pytest cuts a long assertion message, and with it the traceback's last line
        # (a fresh-clone rehearsal failed here once, its cause cut off).
        pytest.fail(f"exit codes {[g.returncode for g in gateways]}:\n" + "\n----\n".join(outputs))
    migrated = [out for out in outputs if "migrating the database schema" in out]
    assert len(migrated) == 1, outputs
    assert _versions(store_url) == [HEAD]
    assert _schema_differences(store_url, tables.metadata) == []


def test_a_gateway_waits_for_one_that_is_migrating_and_finds_the_work_done(
    store_url: str, run: asyncio.Runner, migrations_logged: pytest.LogCaptureFixture
) -> None:
    async def started() -> asyncio.Task[SqlStore]:
        opening = asyncio.create_task(open_store(store_url))
        await asyncio.sleep(1.0)
        return opening

    async def finished(opening: asyncio.Task[SqlStore]) -> None:
        store = await opening
        try:
            await store.create_api_token("admin", "a" * 64, T0)
        finally:
            await store.close()

    with _another_gateway_migrating(store_url):
        opening = run.run(started())
        assert not opening.done(), "the store did not wait for the migration lock"
    # Without the lock it would have read the schema before the other's commit and then tried
    # to build it a second time (a duplicate table, or SQLite's stale-snapshot busy error).
    run.run(finished(opening))
    assert _versions(store_url) == [HEAD]
    assert len(_migrations_run(migrations_logged)) == 1, "only the other gateway migrated"


@contextlib.contextmanager
def _another_gateway_migrating(url: str) -> Iterator[None]:
    """Another gateway in the middle of its migration: it holds the lock and has built the
    schema, but not yet committed it."""
    engine = make_engine(url, 1)
    try:
        with engine.connect() as conn:
            if conn.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": migrate.ADVISORY_LOCK_KEY})
            migrate._upgrade_locked(conn)
            yield
            conn.commit()
    finally:
        engine.dispose()


def test_a_database_newer_than_the_gateway_is_refused_and_left_alone(
    store_url: str, run: asyncio.Runner
) -> None:
    run.run(_open_and_close(store_url))
    with _engine(store_url) as engine, engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0999_from_the_future'"))
    with pytest.raises(InvalidInput) as caught:
        run.run(open_store(store_url))
    message = str(caught.value)
    assert "0999_from_the_future" in message
    assert "the gateway is older than the database" in message
    assert _versions(store_url) == ["0999_from_the_future"]
    assert _table_names(store_url) >= OUR_TABLES


async def _open_and_close(url: str) -> None:
    await (await open_store(url)).close()


_FAILING = """
import sqlalchemy as sa
from alembic import op

revision = "0999"
down_revision = "{head}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("half_done", sa.Column("id", sa.Integer, primary_key=True))
    raise RuntimeError("this migration is broken")


def downgrade() -> None:
    pass
"""


def test_a_failed_migration_leaves_the_database_as_it_was(
    store_url: str, run: asyncio.Runner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "migrations"
    shutil.copytree(migrate.SCRIPT_LOCATION, broken, ignore=shutil.ignore_patterns("__pycache__"))
    (broken / "versions" / "0999_broken.py").write_text(_FAILING.format(head=HEAD))
    monkeypatch.setattr(migrate, "SCRIPT_LOCATION", broken)
    with pytest.raises(EopsError) as caught:
        run.run(open_store(store_url))
    assert type(caught.value) is EopsError
    assert "database schema migration failed" in str(caught.value)
    assert "this migration is broken" in str(caught.value)
    assert _table_names(store_url) == set(), "the baseline and the broken one were rolled back together"
    monkeypatch.undo()
    run.run(_open_and_close(store_url))
    assert _versions(store_url) == [HEAD]


def test_opening_again_migrates_nothing_and_keeps_the_rows(
    store_url: str, run: asyncio.Runner, migrations_logged: pytest.LogCaptureFixture
) -> None:
    async def body() -> None:
        first = await open_store(store_url)
        await first.create_api_token("admin", "a" * 64, T0)
        await first.close()
        second = await open_store(store_url)
        try:
            assert await second.check_api_token("a" * 64)
        finally:
            await second.close()

    run.run(body())
    run.run(_open_and_close(store_url))
    assert _versions(store_url) == [HEAD]
    assert len(_migrations_run(migrations_logged)) == 1, "only the first open migrated"


@pytest.mark.parametrize(
    ("damage", "problem"),
    [
        ("DROP TABLE invocations", "table invocations is missing"),
        (
            "ALTER TABLE api_tokens DROP COLUMN created_at",
            "table api_tokens has columns missing ['created_at']",
        ),
        ("DROP INDEX ix_invocations_state_id", "table invocations lacks ['ix_invocations_state_id']"),
    ],
)
def test_tables_that_are_not_the_previous_releases_are_refused(
    store_url: str, run: asyncio.Runner, damage: str, problem: str
) -> None:
    _previous_release_database(store_url)
    with _engine(store_url) as engine, engine.begin() as conn:
        conn.execute(text(damage))
    before = _table_names(store_url)
    with pytest.raises(InvalidInput) as caught:
        run.run(open_store(store_url))
    assert problem in str(caught.value)
    assert "no schema version" in str(caught.value)
    assert _table_names(store_url) == before, "nothing was created or stamped"


def _migrate_to(url: str, revision: str, *, down: bool = False) -> None:
    """The database at `revision`, as the release that made it left it (a test of one migration's data)."""
    config = Config()
    config.set_main_option("script_location", str(migrate.SCRIPT_LOCATION))
    with _engine(url) as engine, engine.begin() as conn:
        config.attributes["connection"] = conn
        (command.downgrade if down else command.upgrade)(config, revision)


# 0013's running totals: per (function, phase), no capacity.
_TOTALS_0013 = sqlalchemy.table(
    "node_seconds_totals", *(sqlalchemy.column(name) for name in ("function", "phase", "seconds", "usd"))
)


def _ledger_row(
    source: str, phase: str, hour: int, capacity: str, seconds: float, usd: float | None
) -> dict[str, Any]:
    return {
        "source": source,
        "attempt": 0,
        "phase": phase,
        "hour": T0 + timedelta(hours=hour),
        "function": "" if source.startswith("node/") else "hello",
        "gpu_type": "nvidia-tesla-t4",
        "capacity": capacity,
        "seconds": seconds,
        "usd": usd,
    }


def _totals_at_head(store_url: str, run: asyncio.Runner) -> list[RunningTotal]:
    """The running totals, as a store opened on the database (migrated to head) reads them."""

    async def body() -> list[RunningTotal]:
        store = await open_store(store_url)
        try:
            return await store.node_seconds_totals()
        finally:
            await store.close()

    return run.run(body())


def test_the_running_totals_are_split_by_capacity_from_the_ledger(
    store_url: str, run: asyncio.Runner
) -> None:
    """0014: the totals of a database at 0013, per function and phase, are rebuilt per capacity
    from the ledger (each row at the capacity it was priced at: a local slot's `local`, a spot
    node's `spot`); a downgrade sums them back to what 0013 kept."""
    _migrate_to(store_url, "0013")
    ledger = [
        _ledger_row(QUEUED, "run", 0, "local", 60.0, 0.009),
        _ledger_row(QUEUED, "idle_before_start", 0, "local", 2.0, 0.0003),
        _ledger_row(PENDING, "run", 0, "spot", 1800.0, 0.12),
        _ledger_row(PENDING, "run", 1, "spot", 1800.0, 0.12),
        _ledger_row(RUNNING, "run", 1, "on-demand", 600.0, None),  # unpriced: counted, no cost
        _ledger_row("node/n1", "warm_unused", 2, "spot", 900.0, 0.06),
    ]
    old_totals = [
        {"function": "hello", "phase": "run", "seconds": 4260.0, "usd": 0.249},
        {"function": "hello", "phase": "idle_before_start", "seconds": 2.0, "usd": 0.0003},
        {"function": "", "phase": "warm_unused", "seconds": 900.0, "usd": 0.06},
    ]
    with _engine(store_url) as engine, engine.begin() as conn:
        conn.execute(insert(tables.node_seconds), ledger)
        conn.execute(insert(_TOTALS_0013), old_totals)

    totals = _totals_at_head(store_url, run)
    assert _versions(store_url) == [HEAD]
    assert _schema_differences(store_url, tables.metadata) == []
    assert [(t.function, t.phase, t.capacity, t.seconds, t.usd) for t in totals] == [
        ("", Phase.warm_unused, Capacity.spot, 900.0, pytest.approx(0.06)),
        ("hello", Phase.idle_before_start, Capacity.local, 2.0, pytest.approx(0.0003)),
        ("hello", Phase.run, Capacity.local, 60.0, pytest.approx(0.009)),
        ("hello", Phase.run, Capacity.on_demand, 600.0, 0.0),
        ("hello", Phase.run, Capacity.spot, 3600.0, pytest.approx(0.24)),
    ]

    _migrate_to(store_url, "0013", down=True)
    with _engine(store_url) as engine, engine.connect() as conn:
        back = conn.execute(select(_TOTALS_0013).order_by(text("function"), text("phase"))).mappings()
        assert [dict(row) for row in back] == [
            {**row, "usd": pytest.approx(row["usd"])}
            for row in sorted(old_totals, key=lambda r: (r["function"], r["phase"]))
        ]


def test_a_list_reads_each_results_head_written_at_0015(store_url: str, run: asyncio.Runner) -> None:
    """0015: a row from 0014 with a 1 MiB result gets its head; a list then reads the head and the
    result's length, never the result, and a row written without a head (by an earlier release,
    meanwhile) is still summarised. On SQLite the large values end every row (reaching a column
    after them walked their overflow pages: a list page of 60 such rows took 70 ms)."""
    _migrate_to(store_url, "0014")
    big = b'"' + b"\xc3\xa9" * 600_000 + b'"'  # 1.2 MB of JSON text, two bytes a character
    with _engine(store_url) as engine, engine.begin() as conn:
        # The columns the previous release had: those added since are nullable or defaulted.
        old_table = _frozen_schema().tables["invocations"]
        conn.execute(insert(old_table), [_old_invocation(SUCCEEDED, "succeeded", result=big)])
    run.run(_close(open_store(store_url)))
    assert _versions(store_url) == [HEAD]
    assert _schema_differences(store_url, tables.metadata) == []
    with _engine(store_url) as engine, engine.begin() as conn:
        head = conn.execute(select(tables.invocations.c.result_head)).scalar()
        assert head == big[:800]
        # As a gateway of the release before writes a result: no head.
        conn.execute(tables.invocations.update().values(result_head=None))
        if engine.dialect.name == "sqlite":
            order = [row[1] for row in conn.execute(text("PRAGMA table_info(invocations)"))]
            assert order[-3:] == ["result_head", "result", "payload"], "a column was added after them"

    async def listed() -> tuple[Any, Any]:
        store = await open_store(store_url)
        try:
            page = await store.list_invocations(function=None, state=None, limit=10, cursor=None)
            return page, await store.get_invocation(SUCCEEDED)
        finally:
            await store.close()

    page, whole = run.run(listed())
    [item] = page.items
    assert item.result is None, "a list carries no result"
    assert page.summaries[SUCCEEDED].bytes == len(big)
    assert page.summaries[SUCCEEDED].preview == big.decode()[:200]
    assert whole.result == big
    _migrate_to(store_url, "0014", down=True)
    assert "result_head" not in {c["name"] for c in _columns(store_url, "invocations")}


async def _close(opening: Any) -> None:
    await (await opening).close()


def _columns(url: str, table: str) -> list[Any]:
    with _engine(url) as engine:
        return list(inspect(engine).get_columns(table))


def test_rows_from_0017_run_in_no_named_cluster_after_0018(store_url: str, run: asyncio.Runner) -> None:
    """0018: invocations.cluster (MultiKueue's worker); a row written before names none, and on
    SQLite the new column goes before the large values (the table is rebuilt)."""
    _migrate_to(store_url, "0017")
    with _engine(store_url) as engine, engine.begin() as conn:
        old_table = _frozen_schema().tables["invocations"]
        conn.execute(insert(old_table), [_old_invocation(SUCCEEDED, "succeeded", result=b"{}")])
    run.run(_close(open_store(store_url)))
    assert _versions(store_url) == [HEAD]
    with _engine(store_url) as engine, engine.begin() as conn:
        assert conn.execute(select(tables.invocations.c.cluster)).scalar_one() is None
        assert conn.execute(select(tables.invocations.c.result)).scalar_one() == b"{}"
        if engine.dialect.name == "sqlite":
            order = [row[1] for row in conn.execute(text("PRAGMA table_info(invocations)"))]
            assert order[-4:] == ["cluster", "result_head", "result", "payload"]
    _migrate_to(store_url, "0017", down=True)
    assert "cluster" not in {c["name"] for c in _columns(store_url, "invocations")}


# 0014-0017's running totals: per (function, phase, capacity), no cluster.
_TOTALS_0017 = sqlalchemy.table(
    "node_seconds_totals",
    *(sqlalchemy.column(name) for name in ("function", "phase", "capacity", "seconds", "usd")),
)


def test_the_running_totals_are_keyed_by_cluster_from_the_ledger(store_url: str, run: asyncio.Runner) -> None:
    """0018: the totals are rebuilt from the ledger with its new cluster column ("" for the rows
    from before, which name none); a downgrade sums them back per capacity as 0017 kept them."""
    _migrate_to(store_url, "0017")
    ledger = [
        _ledger_row(QUEUED, "run", 0, "local", 60.0, 0.009),
        _ledger_row(PENDING, "run", 1, "spot", 1800.0, 0.12),
        _ledger_row("node/n1", "warm_unused", 2, "spot", 900.0, 0.06),
    ]
    old_totals = [
        {"function": "", "phase": "warm_unused", "capacity": "spot", "seconds": 900.0, "usd": 0.06},
        {"function": "hello", "phase": "run", "capacity": "local", "seconds": 60.0, "usd": 0.009},
        {"function": "hello", "phase": "run", "capacity": "spot", "seconds": 1800.0, "usd": 0.12},
    ]
    with _engine(store_url) as engine, engine.begin() as conn:
        conn.execute(insert(tables.node_seconds), ledger)
        conn.execute(insert(_TOTALS_0017), old_totals)

    totals = _totals_at_head(store_url, run)
    assert _schema_differences(store_url, tables.metadata) == []
    assert [(t.function, t.phase, t.capacity, t.cluster, t.seconds, round(t.usd, 6)) for t in totals] == [
        ("", Phase.warm_unused, Capacity.spot, "", 900.0, 0.06),
        ("hello", Phase.run, Capacity.local, "", 60.0, 0.009),
        ("hello", Phase.run, Capacity.spot, "", 1800.0, 0.12),
    ]
    _migrate_to(store_url, "0017", down=True)
    with _engine(store_url) as engine, engine.connect() as conn:
        back = conn.execute(select(_TOTALS_0017).order_by(text("function"), text("capacity"))).mappings()
        assert [dict(row) for row in back] == [
            {**row, "usd": pytest.approx(row["usd"])} for row in old_totals
        ]
    assert "cluster" not in {c["name"] for c in _columns(store_url, "node_seconds")}


def test_rows_from_0015_are_in_no_batch_after_0016(store_url: str, run: asyncio.Runner) -> None:
    """0016: the batches table and invocations.batch_id; a row written before is in no batch, and
    on SQLite the new column goes before the large values (the table is rebuilt)."""
    _migrate_to(store_url, "0015")
    with _engine(store_url) as engine, engine.begin() as conn:
        old_table = _frozen_schema().tables["invocations"]
        conn.execute(insert(old_table), [_old_invocation(SUCCEEDED, "succeeded", result=b"{}")])
    run.run(_close(open_store(store_url)))
    assert _versions(store_url) == [HEAD]
    assert "batches" in _table_names(store_url)
    with _engine(store_url) as engine, engine.begin() as conn:
        assert conn.execute(select(tables.invocations.c.batch_id)).scalar_one() is None
        if engine.dialect.name == "sqlite":
            order = [row[1] for row in conn.execute(text("PRAGMA table_info(invocations)"))]
            assert order[-3:] == ["result_head", "result", "payload"]
            assert "batch_id" in order[:-3]
    _migrate_to(store_url, "0015", down=True)
    assert "batch_id" not in {c["name"] for c in _columns(store_url, "invocations")}
    assert "batches" not in _table_names(store_url)


def test_node_records_from_0018_stay_the_gateways_own_after_0019_beside_the_workers(
    store_url: str, run: asyncio.Runner
) -> None:
    """0019: worker_node_history keeps MultiKueue's workers' node records, by worker and name; a
    record from before stays in gpu_node_history, the gateway's own cluster's (a release before
    0019 keeps writing there during a rolling update); a worker's node of the same name is a
    record of its own; down again, the workers' table goes and the own cluster's stay."""
    from elasticityops.domain.events import BackendEvent
    from elasticityops.domain.node_history import NodeHistory, NodeHistoryWrite
    from elasticityops.pricing.table import Capacity

    _migrate_to(store_url, "0018")
    made = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
    row = {
        "name": "gpu-1",
        "gpu_type": "nvidia-tesla-t4",
        "capacity": "spot",
        "created_at": made,
        "unused": 1,
    }
    with _engine(store_url) as engine, engine.begin() as conn:
        conn.execute(insert(tables.gpu_node_history), [row])
    own = NodeHistory("gpu-1", "nvidia-tesla-t4", Capacity.spot, made, unused=True)
    theirs = NodeHistory("gpu-1", "nvidia-l4", Capacity.on_demand, made, unused=False)
    write = NodeHistoryWrite("gpu-1", theirs, cluster="worker-1")

    async def body() -> None:
        store = await open_store(store_url)
        try:
            assert await store.gpu_node_history() == [own]
            assert await store.gpu_node_history("worker-1") == []
            await store.record(BackendEvent("", node_history=(write,)))
            assert await store.gpu_node_history("worker-1") == [theirs]
            assert await store.gpu_node_history("worker-2") == []
            assert await store.gpu_node_history() == [own], "the same name in another cluster"
            gone = NodeHistoryWrite("gpu-1", None, cluster="worker-1")
            await store.record(BackendEvent("", node_history=(gone,)))
            assert await store.gpu_node_history("worker-1") == []
            assert await store.gpu_node_history() == [own]
            await store.record(BackendEvent("", node_history=(write,)))
        finally:
            await store.close()

    run.run(body())
    assert _versions(store_url) == [HEAD]
    _migrate_to(store_url, "0018", down=True)
    with _engine(store_url) as engine, engine.begin() as conn:
        kept = conn.execute(select(tables.gpu_node_history.c.name, tables.gpu_node_history.c.gpu_type)).all()
        assert kept == [("gpu-1", "nvidia-tesla-t4")]
        assert "worker_node_history" not in inspect(engine).get_table_names()
