"""Schema migrations at start-up: bring the database to this release's schema (Alembic `upgrade
head`), exactly once however many gateways start on it together.

The whole upgrade is one transaction under a lock that serialises the gateways: on PostgreSQL an
advisory lock on a fixed key, on SQLite the database's write lock (BEGIN IMMEDIATE). Whoever
waited finds the work done. A database made before migrations (tables, no `alembic_version`) is
checked against the baseline and stamped with it first; one whose revision this release does
not know (a newer release migrated it) is refused. Blocking: call it off the event loop."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, inspect, text
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from elasticityops.domain.errors import EopsError, FieldProblem, InvalidInput

log = logging.getLogger(__name__)

SCRIPT_LOCATION = Path(__file__).parent / "migrations"
BASELINE = "0001"
# Any fixed 64-bit key: every gateway of every release must take the same one ("eopsmigr").
ADVISORY_LOCK_KEY = 0x656F70736D696772
# Alembic's `context` and `op` are module-level proxies: two migrations in one process at once
# (two stores opened together, even on different databases) would run in each other's.
_IN_PROCESS = threading.Lock()


@dataclass(frozen=True)
class _Shape:
    columns: frozenset[str]
    indexes: frozenset[str] = frozenset()  # unique constraints included


# What the releases before migrations made with `metadata.create_all`, frozen: a database with
# these tables and no version is adopted at the baseline.
_BEFORE_MIGRATIONS = {
    "functions": _Shape(frozenset({"name", "spec", "version", "created_at", "updated_at"})),
    "invocations": _Shape(
        frozenset(
            {
                "id",
                "function",
                "spec_version",
                "priority",
                "state",
                "idempotency_key",
                "accepted_at",
                "dispatched_at",
                "capacity_ready_at",
                "started_at",
                "finished_at",
                "exit_code",
                "failure_reason",
                "message",
                "node",
                "notes",
                "result",
                "payload",
            }
        ),
        frozenset({"uq_invocation_idempotency", "ix_invocations_state_id", "ix_invocations_function_id"}),
    ),
    "api_tokens": _Shape(frozenset({"token_hash", "name", "created_at"})),
}


def upgrade(engine: Engine) -> None:
    """Migrate the database to head, or leave it as it was. Raises InvalidInput for a database
    this release must not touch and EopsError for a migration that failed; other SQLAlchemy
    errors (unreachable, locked too long) pass through for the caller to translate."""
    try:
        with _IN_PROCESS, engine.connect() as conn:
            if conn.dialect.name == "postgresql":
                _upgrade_postgresql(conn)
            else:
                _upgrade_sqlite(conn)
    except EopsError:
        raise
    except IntegrityError as exc:
        # Rows the migration cannot convert (a new constraint they break): neither the caller's
        # conflict nor worth retrying.
        raise EopsError(f"database schema migration failed: {exc.orig}") from exc
    except SQLAlchemyError:
        raise
    except Exception as exc:
        # Alembic's own errors (a broken chain of revisions) and bugs in a migration.
        raise EopsError(f"database schema migration failed: {exc!r}") from exc


def _upgrade_postgresql(conn: Connection) -> None:
    # READ COMMITTED whatever the server's default: each statement after the lock must see what
    # the gateway that held it before committed (a snapshot taken before the wait would not).
    conn = conn.execution_options(isolation_level="READ COMMITTED")
    with conn.begin():
        # The transaction-scoped form of pg_advisory_lock: released by the commit or rollback,
        # so a failed migration cannot leave it held on a pooled connection.
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK_KEY})
        _upgrade_locked(conn)


def _upgrade_sqlite(conn: Connection) -> None:
    # The driver leaves DDL outside transactions unless one is open: BEGIN IMMEDIATE opens one
    # and takes the write lock now, so a second gateway waits here (busy_timeout) instead of
    # reading a schema that is about to change.
    conn.exec_driver_sql("BEGIN IMMEDIATE")
    try:
        _upgrade_locked(conn)
    except BaseException:
        conn.rollback()
        raise
    conn.commit()


def _upgrade_locked(conn: Connection) -> None:
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.attributes["connection"] = conn  # env.py migrates on it, inside our transaction
    script = ScriptDirectory.from_config(config)
    current = MigrationContext.configure(conn).get_current_heads()
    known = {s.revision for s in script.walk_revisions()}
    unknown = [revision for revision in current if revision not in known]
    if unknown:
        raise InvalidInput(
            [
                FieldProblem(
                    "database_url",
                    f"the database is at schema revision {', '.join(unknown)}, which this gateway does "
                    f"not know (it knows up to {script.get_current_head()}): the gateway is older than "
                    "the database",
                    "run the release that migrated this database, or a newer one",
                )
            ]
        )
    if not current and _made_before_migrations(conn):
        log.info("adopting a database made before migrations at revision %s", BASELINE)
        command.stamp(config, BASELINE)
        current = (BASELINE,)
    head = script.get_current_head()
    if current != (head,):
        log.info("migrating the database schema from %s to %s", ", ".join(current) or "nothing", head)
        command.upgrade(config, "head")


def _made_before_migrations(conn: Connection) -> bool:
    """True for the previous releases' tables, False for none of them (a fresh database); any
    other mix is refused rather than guessed at."""
    inspector = inspect(conn)
    present = set(inspector.get_table_names()) & set(_BEFORE_MIGRATIONS)
    if not present:
        return False
    problems: list[str] = []
    for name, shape in _BEFORE_MIGRATIONS.items():
        if name not in present:
            problems.append(f"table {name} is missing")
            continue
        columns = {c["name"] for c in inspector.get_columns(name)}
        if columns != shape.columns:
            missing, extra = sorted(shape.columns - columns), sorted(columns - shape.columns)
            problems.append(f"table {name} has columns missing {missing} and unexpected {extra}")
        indexes = {i["name"] for i in inspector.get_indexes(name)}
        indexes |= {u["name"] for u in inspector.get_unique_constraints(name)}
        if shape.indexes - indexes:
            problems.append(f"table {name} lacks {sorted(shape.indexes - indexes)}")
    if problems:
        raise InvalidInput(
            [
                FieldProblem(
                    "database_url",
                    "the database has ElasticityOps tables but no schema version, and they are not "
                    f"what an earlier release made: {'; '.join(problems)}",
                    "point database_url at the database the gateway made, or at an empty one",
                )
            ]
        )
    return True
